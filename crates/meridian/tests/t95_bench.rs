//! The toolkit end to end: `meridian gen` makes the seed data sets,
//! `meridian import` and Debian's `slapadd` load them, and every scenario
//! in `bench/scenarios/` runs briefly (about a second) against both the
//! real Meridian binary and slapd. Reports are checked for what they must
//! hold; the HTML report is parsed as XML. No figure is judged: timings
//! on a shared machine prove nothing.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use meridian_testing::slapd;
mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::{Server, temp_dir, text, tool};

/// The password both servers' administrators get, as the scenario files
/// say.
const PASSWORD: &str = "secret";
const ADMIN: &str = "cn=admin,dc=example,dc=com";

fn meridian(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(args)
        .output()
        .unwrap()
}

fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/scenarios")
}

/// `meridian gen --model MODEL -n N` as LDIF text.
fn generate(model: &str, n: u64) -> String {
    let out = meridian(&["gen", "--model", model, "-n", &n.to_string()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

/// A Meridian server with `ldif` imported.
fn meridian_with(ldif: &str) -> Server {
    let work = temp_dir("bench");
    let data = work.join("data");
    let file = work.join("seed.ldif");
    std::fs::write(&file, ldif).unwrap();
    support::import(&file, &data);
    Server::start_with("", Some(PASSWORD), Some(data))
}

/// Runs `meridian bench ARGS`; returns (exit status ok, stdout, stderr).
fn bench(args: &[&str]) -> (bool, String, String) {
    let mut all = vec!["bench"];
    all.extend_from_slice(args);
    let out = meridian(&all);
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Runs one scenario briefly against `url`; returns the run's JSON.
fn run_briefly(scenario: &Path, url: &str, keys: u64, extra: &[&str]) -> serde_json::Value {
    let report = temp_dir("report").join("run.json");
    let file_text = std::fs::read_to_string(scenario).unwrap();
    let keys = keys.to_string();
    let mut args = vec![
        "run",
        scenario.to_str().unwrap(),
        "--url",
        url,
        "-w",
        PASSWORD,
        "--keys",
        &keys,
        "--warmup",
        "0",
        "--json",
        report.to_str().unwrap(),
        "-q",
    ];
    // Count-based scenarios (a fixed number of requests) run 10; the
    // others a second. At most 4 sessions: every session binds as the
    // administrator, and a debug build's Argon2 takes a quarter of a
    // second per bind.
    if file_text.contains("\ncount = ") {
        args.extend(["--count", "10"]);
    } else {
        args.extend(["--duration", "1"]);
    }
    if file_text.contains("users_per_session") {
        args.extend(["--users", "400"]);
    } else if !extra.contains(&"--sessions") {
        args.extend(["--sessions", "4"]);
    }
    args.extend_from_slice(extra);
    let (ok, stdout, stderr) = bench(&args);
    assert!(ok, "{}: {stderr}\n{stdout}", scenario.display());
    json(&report)
}

/// Which data set a scenario runs on.
fn data_set(name: &str) -> &'static str {
    match &name[..7] {
        "seed000" | "seed001" => "people-000",
        "seed003" => "dynamic-003",
        _ if name.contains("add-base") => "empty-002",
        _ => "posix-002",
    }
}

const ENTRIES: u64 = 2000;

#[test]
fn every_seed_scenario_runs_against_meridian_and_slapd() {
    let sets: Vec<(&str, String)> = vec![
        ("people-000", generate("seed000", ENTRIES)),
        ("posix-002", generate("seed002", ENTRIES)),
        ("empty-002", generate("seed002", 0)),
        ("dynamic-003", generate("seed003", ENTRIES)),
    ];
    let meridians: HashMap<&str, Server> = sets
        .iter()
        .map(|(name, ldif)| (*name, meridian_with(ldif)))
        .collect();
    // Dynamic objects (seed 003) need slapd's dds overlay.
    let dds = slapd::Extra {
        global: "moduleload dds\n",
        database: "overlay dds\ndds-max-ttl 1d\ndds-default-ttl 1h\n",
        ..slapd::Extra::default()
    };
    let slapds: HashMap<&str, slapd::Slapd> = sets
        .iter()
        .map(|(name, ldif)| {
            let extra = if *name == "dynamic-003" {
                dds
            } else {
                slapd::Extra::default()
            };
            (
                *name,
                slapd::Slapd::start_with(&format!("bench-{name}"), ldif, &extra),
            )
        })
        .collect();

    let mut files: Vec<PathBuf> = std::fs::read_dir(scenarios_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 16, "{files:?}");
    for file in &files {
        let name = file.file_stem().unwrap().to_str().unwrap();
        let set = data_set(name);
        let mut targets = vec![("meridian", meridians[set].url())];
        if let Some(slapd) = slapds.get(set) {
            targets.push(("slapd", format!("ldap://127.0.0.1:{}", slapd.port)));
        }
        for (server, url) in targets {
            let report = run_briefly(file, &url, ENTRIES - 1, &[]);
            let run = &report["runs"][0];
            let context = format!("{name} against {server}: {run}");
            assert!(run["total"]["count"].as_u64().unwrap() > 0, "{context}");
            assert_eq!(run["sessions_failed"], 0, "{context}");
            for op in run["operations"].as_array().unwrap() {
                for (code, n) in op["codes"].as_object().unwrap() {
                    // Seed 001 deletes loaded entries; a later search or
                    // modify of one finds it gone. Nothing else may fail.
                    let expected =
                        matches!(code.as_str(), "success" | "compareTrue" | "compareFalse")
                            || (name.starts_with("seed001") && code == "noSuchObject");
                    assert!(
                        expected,
                        "{context}: {} answered {code} {n} times",
                        op["name"]
                    );
                }
            }
            if run["mode"] == "closed" {
                for op in run["operations"].as_array().unwrap() {
                    assert!(
                        op["count"].as_u64().unwrap() > 0,
                        "{context}: {} never ran",
                        op["name"]
                    );
                }
            }
            if name.starts_with("seed004") {
                // Result sizes grow as the names say.
                let entries = |op: &str| {
                    let ops = run["operations"].as_array().unwrap();
                    let o = ops.iter().find(|o| o["name"] == op).unwrap();
                    o["entries"].as_f64().unwrap() / o["count"].as_f64().unwrap().max(1.0)
                };
                assert_eq!(entries("0-entries"), 0.0, "{context}");
                if run["operations"][5]["count"].as_u64().unwrap() > 0 {
                    assert_eq!(entries("full-dump"), (ENTRIES + 2) as f64, "{context}");
                }
            }
        }
    }
}

#[test]
fn modifies_write_values_unique_to_client_and_request() {
    let ldif = generate("seed000", 500);
    let server = meridian_with(&ldif);
    let report = run_briefly(
        &scenarios_dir().join("seed000-modify.toml"),
        &server.url(),
        499,
        &["--sessions", "3", "--depth", "20"],
    );
    let modifies = report["runs"][0]["operations"][0]["count"]
        .as_u64()
        .unwrap();
    assert!(modifies > 100, "{report}");
    let (rc, out) = tool(
        &server,
        "ldapsearch",
        &["-D", ADMIN, "-w", PASSWORD],
        &[
            "-LLL",
            "-b",
            "ou=People,dc=example,dc=com",
            "(uid=*)",
            "carLicense",
        ],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    let before: Vec<&str> = ldif
        .lines()
        .filter_map(|l| l.strip_prefix("carLicense: "))
        .collect();
    let after: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("carLicense: "))
        .collect();
    assert_eq!(after.len(), 500);
    let changed: Vec<&&str> = after.iter().filter(|v| !before.contains(v)).collect();
    assert!(changed.len() > 50, "only {} of 500 changed", changed.len());
    assert!(changed.iter().all(|v| v.len() == 8), "{changed:?}");
    let mut distinct = changed.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        changed.len(),
        "a unique value was written twice"
    );
}

#[test]
fn compare_and_sweep_write_reports_with_charts() {
    let ldif = generate("seed000", 1000);
    let server = meridian_with(&ldif);
    let reference = slapd::Slapd::start("bench-compare", &ldif);
    let dir = temp_dir("reports");
    let (html, report) = (dir.join("compare.html"), dir.join("compare.json"));
    let scenario = scenarios_dir().join("seed000-mixed-80-20.toml");
    let (ok, stdout, stderr) = bench(&[
        "compare",
        scenario.to_str().unwrap(),
        "--server",
        &format!("meridian={}", server.url()),
        "--server",
        &format!("slapd=ldap://127.0.0.1:{}", reference.port),
        "-w",
        PASSWORD,
        "--keys",
        "999",
        "--duration",
        "1",
        "--warmup",
        "0",
        "--sessions",
        "2",
        "--depth",
        "10",
        "--html",
        html.to_str().unwrap(),
        "--json",
        report.to_str().unwrap(),
        "-q",
    ]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("slapd / meridian: "), "{stdout}");
    let runs = json(&report)["runs"].as_array().unwrap().clone();
    assert_eq!(runs.len(), 2);
    assert_eq!(
        (runs[0]["label"].as_str(), runs[1]["label"].as_str()),
        (Some("meridian"), Some("slapd"))
    );
    let counts = charts(&html);
    // Throughput by run (bars), throughput over time (a line per run), and
    // a latency chart per run.
    assert_eq!(counts["svg"], 4, "{counts:?}");
    assert_eq!(counts["polyline"], 2, "{counts:?}");
    assert!(counts["rect"] >= 2 + 2 * 2 * 4, "{counts:?}");

    // The same run swept over one setting; `reports` are the report flags.
    let url = server.url();
    let scenario_path = scenario.to_str().unwrap();
    let swept = |sweep: &str, depth: &str, reports: &[&str]| {
        let mut args = vec![
            "run",
            scenario_path,
            "--url",
            &url,
            "-w",
            PASSWORD,
            "--keys",
            "999",
            "--duration",
            "1",
            "--depth",
            depth,
            "--sweep",
            sweep,
            "-q",
        ];
        args.extend_from_slice(reports);
        bench(&args)
    };
    let sweep = dir.join("sweep.html");
    let (ok, _, stderr) = swept("sessions=1,4", "1", &["--html", sweep.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    let html_text = std::fs::read_to_string(&sweep).unwrap();
    assert!(html_text.contains("Throughput by session count"));
    assert!(html_text.contains("4 sessions x depth 1"));

    // Offered-rate sweeps: open loop at each rate, latency against load.
    let rates = dir.join("rates.json");
    let rates_html = dir.join("rates.html");
    let (ok, _, stderr) = swept(
        "rate=50,200",
        "10",
        &[
            "--json",
            rates.to_str().unwrap(),
            "--html",
            rates_html.to_str().unwrap(),
        ],
    );
    assert!(ok, "{stderr}");
    let runs = json(&rates)["runs"].as_array().unwrap().clone();
    let offered: Vec<f64> = runs
        .iter()
        .map(|r| r["offered_rate"].as_f64().unwrap())
        .collect();
    assert_eq!(offered, [50.0, 200.0]);
    assert!(runs.iter().all(|r| r["mode"] == "rate"));
    let done = runs[1]["total"]["count"].as_u64().unwrap();
    assert!(
        (100..=200).contains(&done),
        "{done} operations at 200/s for 1 s"
    );
    assert_eq!(
        charts(&rates_html)["polyline"],
        2 + 2,
        "timeline per run and p50/p99 curves"
    );
}

/// Parses an HTML report as XML (it is XHTML) and counts its SVG elements.
fn charts(path: &Path) -> HashMap<String, u64> {
    let script = "import sys, json, xml.etree.ElementTree as E\n\
                  t = E.parse(sys.argv[1])\n\
                  svg = '{http://www.w3.org/2000/svg}'\n\
                  print(json.dumps({k: len(t.findall('.//' + svg + k)) for k in ['svg', 'polyline', 'rect']}))";
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the report is not well-formed: {}",
        text(&out.stderr)
    );
    serde_json::from_str(&text(&out.stdout)).unwrap()
}

#[test]
fn bad_input_gets_a_one_line_error_and_a_failure_exit() {
    let server = meridian_with(&generate("seed000", 10));
    let scenario = scenarios_dir().join("seed000-mixed-50-50.toml");
    let scenario = scenario.to_str().unwrap();
    let dir = temp_dir("bad");
    let unknown = dir.join("unknown.toml");
    std::fs::write(
        &unknown,
        "[load]\nsesions = 2\n[[operation]]\nkind = \"search\"\n",
    )
    .unwrap();
    let zero = dir.join("zero.toml");
    std::fs::write(&zero, "[[operation]]\nkind = \"search\"\nweight = 0\n[[operation]]\nkind = \"modify\"\nweight = 0\n").unwrap();
    let url = server.url();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["run", scenario, "--url", "ldap://127.0.0.1:1"],
            "cannot connect to 127.0.0.1:1",
        ),
        (
            vec!["run", scenario, "--url", &url, "-w", "wrong"],
            "refused: invalidCredentials (49)",
        ),
        (
            vec!["run", unknown.to_str().unwrap()],
            "unknown field `sesions`",
        ),
        (
            vec!["run", zero.to_str().unwrap()],
            "every operation has weight 0",
        ),
        (
            vec!["run", "/nonexistent.toml"],
            "cannot read /nonexistent.toml",
        ),
    ];
    for (args, needle) in cases {
        let (ok, _, stderr) = bench(&args);
        assert!(!ok, "{args:?} succeeded");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    }
}

#[test]
fn gen_streams_ber_through_fifos_into_a_parallel_import() {
    let dir = temp_dir("fifo");
    let fifos = [dir.join("a.fifo"), dir.join("b.fifo")];
    for fifo in &fifos {
        assert!(Command::new("mkfifo").arg(fifo).status().unwrap().success());
    }
    let mut generator = Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args([
            "gen", "--model", "seed002", "-n", "3000", "--format", "ber", "-o",
        ])
        .arg(&fifos[0])
        .arg("-o")
        .arg(&fifos[1])
        .spawn()
        .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["import", "-i"])
        .arg(&fifos[0])
        .arg("-i")
        .arg(&fifos[1])
        .arg("--data-dir")
        .arg(dir.join("data"))
        .output()
        .unwrap();
    assert!(generator.wait().unwrap().success());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("imported 3002 entries"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn the_capacity_model_fits_costs_and_counts_users() {
    let server = meridian_with(&generate("seed003", 500));
    let dir = temp_dir("capacity");
    let profile = std::fs::read_to_string(scenarios_dir().join("seed003-user-profile.toml"))
        .unwrap()
        .replace(
            "rates = [100, 200, 400, 800]\nstep_secs = 5",
            "rates = [40, 80]\nstep_secs = 1",
        )
        .replace("warmup_secs = 5", "warmup_secs = 0");
    assert!(profile.contains("rates = [40, 80]"));
    let file = dir.join("profile.toml");
    std::fs::write(&file, profile).unwrap();
    let report = dir.join("capacity.json");
    let pid = server.pid().to_string();
    let (ok, stdout, stderr) = bench(&[
        "capacity",
        file.to_str().unwrap(),
        "--url",
        &server.url(),
        "-w",
        PASSWORD,
        "--keys",
        "499",
        "--server-pid",
        &pid,
        "--json",
        report.to_str().unwrap(),
        "-q",
    ]);
    assert!(ok, "{stderr}");
    let model = &json(&report)["capacity"];
    let ops = model["operations"].as_array().unwrap();
    assert_eq!(ops.len(), 5, "{model}");
    for op in ops {
        assert_eq!(op["points"].as_array().unwrap().len(), 2, "{op}");
    }
    // Steps this short measure CPU in a few clock ticks: on a busy
    // machine the fitted costs can sum to zero or less (noise, not a
    // fault; CI failed once on -0.5 ms for one search). The arithmetic
    // from costs to users is unit-tested in the bench crate.
    if model["cost_per_user_ms"].as_f64().unwrap() > 0.0 {
        assert!(stdout.contains("concurrent users"), "{stdout}");
        assert!(model["users"].as_f64().unwrap() > 0.0, "{model}");
    } else {
        assert!(stdout.contains("not a positive cost"), "{stdout}");
        assert!(model["users"].is_null(), "{model}");
    }
}

#[test]
fn queue_length_bundles_and_the_client_ceiling() {
    let server = meridian_with(&generate("seed000", 200));
    let dir = temp_dir("queue");
    let file = dir.join("bundles.toml");
    let scenario = std::fs::read_to_string(scenarios_dir().join("seed000-mixed-50-50.toml"))
        .unwrap()
        .replace("depth = 1000\n", "depth = 100\n");
    assert!(scenario.contains("depth = 100\n") && scenario.contains("queue_length = true\n"));
    std::fs::write(&file, scenario).unwrap();
    let report = run_briefly(&file, &server.url(), 199, &["--sessions", "2"]);
    assert!(report["runs"][0]["total"]["count"].as_u64().unwrap() > 0);
    assert_eq!(report["runs"][0]["total"]["errors"], 0);

    let (ok, stdout, stderr) = bench(&[
        "ceiling",
        "--seconds",
        "1",
        "--sessions",
        "2",
        "--depth",
        "100",
    ]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("operations per client CPU second"),
        "{stdout}"
    );
}

#[test]
fn ldaps_with_a_verified_certificate_and_refusals_without_one() {
    // A CA and a certificate for "localhost" signed by it.
    let dir = temp_dir("tls");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate().unwrap())
        .unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let (ca_file, cert_file, key_file) = (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    std::fs::write(&ca_file, ca.pem()).unwrap();
    std::fs::write(&cert_file, cert.pem()).unwrap();
    std::fs::write(&key_file, key.serialize_pem()).unwrap();
    let global = format!(
        "TLSCACertificateFile {}\nTLSCertificateFile {}\nTLSCertificateKeyFile {}\n",
        ca_file.display(),
        cert_file.display(),
        key_file.display()
    );
    let server = slapd::Slapd::start_with(
        "bench-tls",
        &generate("seed000", 100),
        &slapd::Extra {
            global: &global,
            ldaps: true,
            ..slapd::Extra::default()
        },
    );
    let url = format!("ldaps://localhost:{}", server.port);
    let scenario = scenarios_dir().join("seed000-mixed-50-50.toml");

    let report = run_briefly(
        &scenario,
        &url,
        99,
        &["--tls-ca-file", ca_file.to_str().unwrap(), "--depth", "20"],
    );
    let run = &report["runs"][0];
    assert!(run["total"]["count"].as_u64().unwrap() > 0, "{run}");
    assert_eq!(run["total"]["errors"], 0, "{run}");

    // Without a CA the run is refused before connecting; with the wrong
    // CA the handshake fails; --tls-insecure accepts the certificate.
    let refused = |extra: &[&str]| {
        let mut args = vec![
            "run",
            scenario.to_str().unwrap(),
            "--url",
            &url,
            "-w",
            PASSWORD,
        ];
        args.extend_from_slice(extra);
        let (ok, _, stderr) = bench(&args);
        assert!(!ok, "{args:?} succeeded");
        stderr
    };
    let stderr = refused(&[]);
    assert!(stderr.contains("tls_ca_file"), "{stderr}");
    let stderr = refused(&["--tls-ca-file", cert_file.to_str().unwrap()]);
    assert!(stderr.contains("TLS handshake"), "{stderr}");
    let report = run_briefly(&scenario, &url, 99, &["--tls-insecure", "--depth", "20"]);
    assert!(report["runs"][0]["total"]["count"].as_u64().unwrap() > 0);

    // `meridian import --online` over the same TLS client: 50 entries
    // into slapd, the certificate checked against the CA.
    let ldif: String = (0..50)
        .map(|n| format!("dn: uid=tls{n},dc=example,dc=com\nobjectClass: account\nuid: tls{n}\n\n"))
        .collect();
    let input = dir.join("tls.ldif");
    std::fs::write(&input, ldif).unwrap();
    let import = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_meridian"))
            .args([
                "import",
                "--online",
                &url,
                "-D",
                "cn=admin,dc=example,dc=com",
                "-w",
                PASSWORD,
            ])
            .args(extra)
            .arg("-i")
            .arg(&input)
            .output()
            .unwrap();
        (out.status.success(), text(&out.stdout), text(&out.stderr))
    };
    let (ok, stdout, stderr) = import(&["--tls-ca-file", ca_file.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("imported 50 "), "{stdout}");
    let (ok, _, stderr) = import(&[]);
    assert!(!ok && stderr.contains("--tls-ca-file"), "{stderr}");
    let (ok, _, stderr) = import(&["--tls-ca-file", cert_file.to_str().unwrap()]);
    assert!(!ok && stderr.contains("TLS handshake"), "{stderr}");
}
