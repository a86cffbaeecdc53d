//! `meridian import` and `meridian export` on the real binary: slapcat
//! output loads and its users log in; export → import → export is byte
//! for byte the same (also beside a running server); two FIFOs, one LDIF
//! and one BER, load in parallel with children before their parents; bad
//! records stop a load or are skipped; a stopped or killed load leaves a
//! database the server refuses until `--replace` or `meridian repair`;
//! `--online` loads a running Meridian and a running slapd over LDAP.

// Tests time out their waits: they read the clock directly.
#![allow(clippy::disallowed_methods)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use meridian_testing::slapd;
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{
    ADMIN_DN, ADMIN_PASSWORD, Server, admin_tool, temp_dir, text, tool, tool_at, whoami,
};

/// Runs `meridian <args> --data-dir <dir>`: success, stdout, stderr.
fn meridian(args: &[&str], dir: &Path) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .output()
        .unwrap();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

fn write(dir: &Path, name: &str, content: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    path
}

fn import(dir: &Path, inputs: &[&Path], extra: &[&str]) -> (bool, String, String) {
    let mut args = vec!["import"];
    for input in inputs {
        args.extend(["-i", input.to_str().unwrap()]);
    }
    args.extend_from_slice(extra);
    meridian(&args, dir)
}

fn export(dir: &Path, extra: &[&str]) -> String {
    let mut args = vec!["export"];
    args.extend_from_slice(extra);
    let (ok, out, err) = meridian(&args, dir);
    assert!(ok, "export failed: {err}");
    out
}

fn serve(dir: &Path) -> Server {
    Server::start_with("", Some(ADMIN_PASSWORD), Some(dir.to_path_buf()))
}

/// `meridian serve` on `dir` must refuse to start; its message.
fn serve_refused(dir: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .env("MERIDIAN_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success(), "serve started on {}", dir.display());
    text(&out.stderr)
}

const BASE: &str = "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\n\
dc: example\no: Example\n\ndn: ou=People,dc=example,dc=com\nobjectClass: organizationalUnit\nou: People\n\n";

fn person(uid: &str) -> String {
    format!(
        "dn: uid={uid},ou=People,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: {uid}\ncn: User {uid}\nsn: S{uid}\n\n"
    )
}

fn count(server: &Server, filter: &str) -> usize {
    let (rc, out) = tool(
        server,
        "ldapsearch",
        &["-D", ADMIN_DN, "-w", ADMIN_PASSWORD],
        &["-LLL", "-z", "0", "-b", "dc=example,dc=com", filter, "1.1"],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    out.lines().filter(|l| l.starts_with("dn:")).count()
}

#[test]
fn slapcat_output_loads_and_its_users_log_in_with_their_ssha_passwords() {
    let hash = Command::new("/usr/sbin/slappasswd")
        .args(["-h", "{SSHA}", "-s", "imported secret"])
        .output()
        .expect("slappasswd (Debian's slapd package)");
    let hash = text(&hash.stdout).trim().to_owned();
    assert!(hash.starts_with("{SSHA}"), "{hash}");
    let mut entries = slapd::people();
    entries.push((
        "uid=migrated,ou=People,dc=example,dc=com".to_owned(),
        vec![
            ("objectClass", vec!["inetOrgPerson".to_owned()]),
            ("uid", vec!["migrated".to_owned()]),
            ("cn", vec!["Migrated User".to_owned()]),
            ("sn", vec!["User".to_owned()]),
            ("userPassword", vec![hash]),
        ],
    ));
    let reference = slapd::Slapd::start("t80-slapcat", &slapd::to_ldif(&entries));
    let slapcat = reference.slapcat();
    assert!(slapcat.contains("entryUUID: "), "{slapcat}");

    let work = temp_dir("slapcat");
    let file = write(&work, "slapcat.ldif", &slapcat);
    // A second input, read in parallel: a clear-text password, which is
    // hashed as an LDAP add would hash it.
    let extra = write(
        &work,
        "extra.ldif",
        "dn: uid=plain,ou=People,dc=example,dc=com\nobjectClass: account\nobjectClass: simpleSecurityObject\n\
         uid: plain\nuserPassword: plain secret\n\n",
    );
    let data = work.join("data");
    let (ok, out, err) = import(&data, &[&file, &extra], &[]);
    assert!(ok, "{out}{err}");
    assert!(
        out.contains(&format!("imported {} entries", entries.len() + 1)),
        "{out}"
    );
    let exported = export(&data, &[]);
    assert!(exported.contains("userPassword: {ARGON2}"), "{exported}");
    assert!(!exported.contains("plain secret"));

    let server = serve(&data);
    let (rc, out) = whoami(
        &server,
        "uid=migrated,ou=People,dc=example,dc=com",
        "imported secret",
    );
    assert_eq!(rc, 0, "{out}");
    assert!(
        out.contains("dn:uid=migrated,ou=People,dc=example,dc=com"),
        "{out}"
    );
    let (rc, out) = whoami(&server, "uid=migrated,ou=People,dc=example,dc=com", "wrong");
    assert_eq!(rc, 49, "{out}");
    let (rc, out) = whoami(
        &server,
        "uid=plain,ou=People,dc=example,dc=com",
        "plain secret",
    );
    assert_eq!(rc, 0, "{out}");
    // slapd's entryUUIDs and timestamps were kept, not replaced.
    let uuid = slapcat
        .split("\n\n")
        .find(|r| r.contains("uid=migrated"))
        .and_then(|r| r.lines().find_map(|l| l.strip_prefix("entryUUID: ")))
        .unwrap()
        .to_owned();
    assert_eq!(count(&server, &format!("(entryUUID={uuid})")), 1);
    assert_eq!(count(&server, "(objectClass=*)"), entries.len() + 1);
    drop(server);
    std::fs::remove_dir_all(work).unwrap();
}

/// Issue 44, medium 7: slapcat output of a site running the ppolicy
/// overlay stopped `meridian import` at its policy entry (pwdPolicy,
/// pwdAttribute... unknown). Its schema is now built in, state
/// attributes included (pwdFailureTime, pwdPolicySubentry, pwdReset).
#[test]
fn slapcat_output_of_a_site_with_the_ppolicy_overlay_loads() {
    let ldif = "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: x\n\n\
                dn: ou=Policies,dc=example,dc=com\nobjectClass: organizationalUnit\nou: Policies\n\n\
                dn: cn=default,ou=Policies,dc=example,dc=com\nobjectClass: device\nobjectClass: pwdPolicy\n\
                objectClass: pwdPolicyChecker\ncn: default\npwdAttribute: userPassword\npwdMaxFailure: 3\n\
                pwdLockout: TRUE\npwdInHistory: 5\npwdMustChange: TRUE\npwdMinLength: 8\npwdCheckQuality: 1\n\
                pwdMaxAge: 7776000\npwdExpireWarning: 86400\npwdGraceAuthNLimit: 2\npwdAllowUserChange: TRUE\n\
                pwdSafeModify: FALSE\npwdFailureCountInterval: 0\npwdLockoutDuration: 300\n\n\
                dn: uid=pat,dc=example,dc=com\nobjectClass: account\nobjectClass: simpleSecurityObject\nuid: pat\n\
                userPassword: pat-secret-1\npwdPolicySubentry: cn=default,ou=Policies,dc=example,dc=com\npwdReset: TRUE\n";
    let reference = slapd::Slapd::start_with(
        "t80-ppolicy",
        ldif,
        &slapd::Extra {
            global: "moduleload ppolicy\n",
            database: "overlay ppolicy\nppolicy_default \"cn=default,ou=Policies,dc=example,dc=com\"\n",
            ..slapd::Extra::default()
        },
    );
    // A wrong password: slapd records the failure in the entry.
    let (rc, _) = tool_at(
        &format!("ldap://127.0.0.1:{}", reference.port),
        "ldapwhoami",
        &["-D", "uid=pat,dc=example,dc=com", "-w", "wrong"],
        &[],
        None,
    );
    assert_eq!(rc, 49);
    let slapcat = reference.slapcat();
    for state in ["pwdFailureTime: ", "pwdPolicySubentry: ", "pwdReset: TRUE"] {
        assert!(slapcat.contains(state), "no {state} in {slapcat}");
    }
    let work = temp_dir("ppolicy");
    let file = write(&work, "slapcat.ldif", &slapcat);
    let data = work.join("data");
    let (ok, out, err) = import(&data, &[&file], &[]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("imported 4 entries"), "{out}");
    let server = serve(&data);
    let (rc, out) = admin_tool(
        &server,
        "ldapsearch",
        &[
            "-LLL",
            "-b",
            "cn=default,ou=Policies,dc=example,dc=com",
            "-s",
            "base",
            "pwdMaxFailure",
            "pwdLockout",
        ],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    assert!(
        out.contains("pwdMaxFailure: 3") && out.contains("pwdLockout: TRUE"),
        "{out}"
    );
    let (rc, out) = admin_tool(
        &server,
        "ldapsearch",
        &[
            "-LLL",
            "-b",
            "uid=pat,dc=example,dc=com",
            "-s",
            "base",
            "pwdPolicySubentry",
            "pwdFailureTime",
        ],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    assert!(
        out.contains("pwdPolicySubentry: cn=default,ou=Policies,dc=example,dc=com"),
        "{out}"
    );
    assert!(out.contains("pwdFailureTime: "), "{out}");
    drop(server);
    std::fs::remove_dir_all(work).unwrap();
}

#[test]
fn export_import_export_is_byte_identical_and_runs_beside_a_server() {
    let server = Server::start("");
    let ldif = format!(
        "{BASE}dn: uid=babs,ou=People,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: babs\n\
         cn: Barbara Jensen\ncn: Babs Jensen\nsn: Jensen\ndescription:: IGxlYWRpbmcgc3BhY2U=\n\
         description: {long}\n\ndn:: Y249SsO8cmdlbixvdT1QZW9wbGUsZGM9ZXhhbXBsZSxkYz1jb20=\n\
         objectClass: person\ncn:: SsO8cmdlbg==\nsn: J\n\n",
        long = "x".repeat(200)
    );
    let (rc, out) = tool(
        &server,
        "ldapadd",
        &["-D", ADMIN_DN, "-w", ADMIN_PASSWORD],
        &[],
        Some(&ldif),
    );
    assert_eq!(rc, 0, "{out}");

    // Beside the running server, which keeps serving.
    let first = export(&server.data_dir, &[]);
    assert!(
        first.starts_with("version: 1\n\ndn: dc=example,dc=com\n"),
        "{first}"
    );
    assert!(first.contains("entryUUID: "));
    assert!(
        first.contains("description:: IGxlYWRpbmcgc3BhY2U=\n"),
        "{first}"
    );
    assert!(first.lines().all(|l| l.len() <= 76));
    assert_eq!(
        export(&server.data_dir, &[]),
        first,
        "a second export differs"
    );
    let plain = export(&server.data_dir, &["--no-operational"]);
    assert!(
        !plain.contains("entryUUID") && !plain.contains("createTimestamp"),
        "{plain}"
    );
    let people = export(&server.data_dir, &["--base", "ou=People,dc=example,dc=com"]);
    assert!(
        !people.contains("dn: dc=example,dc=com\n") && people.contains("uid=babs"),
        "{people}"
    );
    let (ok, _, err) = meridian(
        &["export", "--base", "ou=Nowhere,dc=example,dc=com"],
        &server.data_dir,
    );
    assert!(!ok && err.contains("no entry ou=Nowhere"), "{err}");
    assert_eq!(count(&server, "(objectClass=*)"), 4);

    let work = temp_dir("roundtrip");
    let file = write(&work, "first.ldif", &first);
    let copy = work.join("copy");
    let (ok, out, err) = import(&copy, &[&file], &[]);
    assert!(ok, "{out}{err}");
    assert_eq!(
        export(&copy, &[]),
        first,
        "export → import → export changed the LDIF"
    );
    // Without operational attributes the round trip holds too (import
    // makes new ones, the export leaves them out).
    let file = write(&work, "plain.ldif", &plain);
    let (ok, _, err) = import(&work.join("plain"), &[&file], &[]);
    assert!(ok, "{err}");
    assert_eq!(export(&work.join("plain"), &["--no-operational"]), plain);
    std::fs::remove_dir_all(work).unwrap();
}

/// Creates a FIFO (mkfifo(1): the standard library has no call for it).
fn fifo(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let status = Command::new("mkfifo").arg(&path).status().unwrap();
    assert!(status.success());
    path
}

#[test]
fn two_fifos_load_in_parallel_ldif_and_ber_with_children_before_parents() {
    let work = temp_dir("fifos");
    let (ldif_fifo, ber_fifo) = (fifo(&work, "people.ldif"), fifo(&work, "more.ber"));
    let data = work.join("data");
    let child = Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["import", "--batch", "100", "-i"])
        .arg(&ber_fifo)
        .arg("-i")
        .arg(&ldif_fifo)
        .arg("--data-dir")
        .arg(&data)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The BER stream holds people under ou=Staff, whose entry comes last
    // in the LDIF stream: most of them arrive before their parent.
    let ber_writer = {
        let path = ber_fifo.clone();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            for i in 0..1500 {
                let uid = format!("staff{i}");
                slapd::encode_add(
                    &mut bytes,
                    i + 1,
                    &format!("uid={uid},ou=Staff,dc=example,dc=com"),
                    &[("objectClass", &["account"]), ("uid", &[uid.as_str()])],
                );
            }
            std::fs::write(path, bytes).unwrap();
        })
    };
    let ldif_writer = {
        let path = ldif_fifo.clone();
        std::thread::spawn(move || {
            let mut ldif = String::from(BASE);
            for i in 0..1500 {
                ldif.push_str(&person(&format!("p{i}")));
            }
            ldif.push_str(
                "dn: ou=Staff,dc=example,dc=com\nobjectClass: organizationalUnit\nou: Staff\n\n",
            );
            std::fs::write(path, ldif).unwrap();
        })
    };
    ber_writer.join().unwrap();
    ldif_writer.join().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("imported 3003 entries"),
        "{}",
        text(&out.stdout)
    );
    let (ok, out, _) = meridian(&["check"], &data);
    assert!(ok, "{out}");

    let server = serve(&data);
    assert_eq!(count(&server, "(objectClass=account)"), 1500);
    assert_eq!(count(&server, "(uid=p1499)"), 1);
    drop(server);
    std::fs::remove_dir_all(work).unwrap();
}

#[test]
fn bad_records_stop_the_load_or_are_skipped_and_the_database_says_so() {
    let work = temp_dir("bad");
    let data = work.join("data");
    let good = person("good");
    // Line numbers: BASE is 10 lines, person() 6.
    let ldif = format!(
        "{BASE}{good}dn: uid=nosn,ou=People,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: nosn\ncn: No Sn\n\n\
         {}dn: uid=orphan,ou=Nowhere,dc=example,dc=com\nobjectClass: account\nuid: orphan\n\n\
         dn: uid=x,dc=elsewhere\nobjectClass: account\nuid: x\n\nnot ldif at all\n\n{}",
        person("after"),
        person("last")
    );
    let file = write(&work, "bad.ldif", &ldif);

    // Default: the first bad record stops the load, named by file and line.
    let (ok, out, err) = import(&data, &[&file], &[]);
    assert!(!ok, "{out}");
    let name = file.display().to_string();
    assert!(
        err.contains(&format!("{name}:17: uid=nosn,ou=People,dc=example,dc=com")),
        "{err}"
    );
    assert!(
        err.contains("objectClassViolation") || err.contains("sn"),
        "{err}"
    );
    assert!(err.contains("marked incomplete"), "{err}");
    assert_eq!(
        err.matches("refused: ").count(),
        1,
        "more than the first: {err}"
    );
    assert!(serve_refused(&data).contains("incomplete load"));
    let (ok, out, _) = meridian(&["check"], &data);
    assert!(!ok && out.contains("incomplete load"), "{out}");
    // A new load must say what to do with what is there.
    let (ok, _, err) = import(&data, &[&file], &["--continue-on-error"]);
    assert!(!ok && err.contains("--replace"), "{err}");

    // --replace starts over; --continue-on-error loads every good record,
    // lists the others, and fails (a script must not take it for a
    // clean load) while the database it leaves is served.
    let (ok, out, err) = import(&data, &[&file], &["--replace", "--continue-on-error"]);
    assert!(!ok, "{out}{err}");
    assert!(
        out.contains("imported 5 entries") && out.contains("4 refused"),
        "{out}"
    );
    assert!(err.contains("4 record(s) refused"), "{err}");
    for expected in [
        format!("{name}:17: uid=nosn"),
        format!(
            "{name}:28: uid=orphan,ou=Nowhere,dc=example,dc=com: its parent ou=Nowhere,dc=example,dc=com is neither"
        ),
        format!("{name}:32: uid=x,dc=elsewhere is outside the naming context"),
        format!("{name}:36: expected `description: value`"),
    ] {
        assert!(err.contains(&expected), "missing {expected:?} in {err}");
    }
    // A populated database is not loaded over by accident.
    let (ok, _, err) = import(&data, &[&file], &[]);
    assert!(!ok && err.contains("already holds 5 entries"), "{err}");

    // --append of a file holding a DN that exists: refused, named, the
    // load fails, and the database that was whole stays served.
    let more = write(
        &work,
        "more.ldif",
        &format!("{}{}", person("good"), person("new")),
    );
    let (ok, out, err) = import(&data, &[&more], &["--append"]);
    assert!(!ok, "{out}{err}");
    assert!(
        err.contains("uid=good,ou=People,dc=example,dc=com"),
        "{err}"
    );
    assert!(err.contains("1 record(s) refused"), "{err}");
    let (ok, out, _) = meridian(&["check"], &data);
    assert!(ok, "{out}");

    // (Dropping the server removes its data directory.)
    let server = serve(&data);
    // uid=new was in the refused record's batch (one transaction).
    assert_eq!(count(&server, "(objectClass=inetOrgPerson)"), 4);
    assert_eq!(count(&server, "(uid=good)"), 1);
    drop(server);
    std::fs::remove_dir_all(work).unwrap();
}

#[test]
fn a_killed_load_is_refused_until_repaired() {
    let work = temp_dir("killed");
    let data = work.join("data");
    let input = fifo(&work, "slow.ldif");
    let mut child = Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["import", "--batch", "50", "-i"])
        .arg(&input)
        .arg("--data-dir")
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut writer = std::fs::OpenOptions::new()
        .write(true)
        .open(&input)
        .unwrap();
    let mut ldif = String::from(BASE);
    for i in 0..2000 {
        ldif.push_str(&person(&format!("k{i}")));
    }
    std::io::Write::write_all(&mut writer, ldif.as_bytes()).unwrap();
    // The input stays open: the load waits for more. Wait until the
    // writer has reached the last entry (its uid is in the file: a load
    // writes its pages in the map itself, whose file has its full size
    // from the start), give it a moment to commit, then kill it.
    let deadline = Instant::now() + Duration::from_secs(60);
    let last = b"k1999";
    loop {
        let file = std::fs::read(data.join("db/data.mdb")).unwrap_or_default();
        if file.windows(last.len()).any(|w| w == last) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the load never wrote its entries"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    support::signal(child.id(), "KILL");
    child.wait().unwrap();
    drop(writer);

    assert!(serve_refused(&data).contains("incomplete load"));
    let (ok, out, _) = meridian(&["repair"], &data);
    assert!(ok, "{out}");
    let kept: usize = out
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(kept >= 2, "{out}");
    let (ok, out, _) = meridian(&["check"], &data);
    assert!(ok, "{out}");
    let server = serve(&data);
    assert_eq!(count(&server, "(objectClass=*)"), kept);
    drop(server);
    std::fs::remove_dir_all(work).unwrap();
}

fn online(url: &str, bind: &[&str], inputs: &[&Path]) -> (bool, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_meridian"));
    cmd.args(["import", "--online", url, "--window", "64"])
        .args(bind);
    for input in inputs {
        cmd.arg("-i").arg(input);
    }
    let out = cmd.output().unwrap();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn online_import_loads_running_servers_meridian_and_slapd() {
    let work = temp_dir("online");
    // Children first: the adds refused with noSuchObject go again later.
    let mut people = String::new();
    for i in 0..1200 {
        people.push_str(&person(&format!("o{i}")));
    }
    let people = write(&work, "people.ldif", &people);
    let base = write(&work, "base.ldif", BASE);

    let server = Server::start("");
    let admin = ["-D", ADMIN_DN, "-w", ADMIN_PASSWORD];
    let (ok, out, err) = online(&server.url(), &admin, &[&people, &base]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("imported 1202 entries"), "{out}");
    assert_eq!(count(&server, "(objectClass=inetOrgPerson)"), 1200);
    // Loaded again: every add is refused by the server, and said so.
    let (ok, _, err) = online(&server.url(), &admin, &[&base]);
    assert!(!ok, "{err}");
    assert!(
        err.contains("base.ldif:1: dc=example,dc=com: ") && err.contains("entryAlreadyExists"),
        "{err}"
    );
    let (ok, _, err) = online(&server.url(), &["-D", ADMIN_DN, "-w", "wrong"], &[&base]);
    assert!(!ok && err.contains("invalidCredentials"), "{err}");
    drop(server);

    let reference = slapd::Slapd::start("t80-online", BASE);
    let url = format!("ldap://127.0.0.1:{}", reference.port);
    let (ok, out, err) = online(
        &url,
        &["-D", "cn=admin,dc=example,dc=com", "-w", "secret"],
        &[&people],
    );
    assert!(ok, "{out}{err}");
    assert!(out.contains("imported 1200 entries"), "{out}");
    let out = Command::new("ldapsearch")
        .args([
            "-x",
            "-LLL",
            "-H",
            &url,
            "-D",
            "cn=admin,dc=example,dc=com",
            "-w",
            "secret",
        ])
        .args([
            "-b",
            "ou=People,dc=example,dc=com",
            "-z",
            "0",
            "(objectClass=inetOrgPerson)",
            "1.1",
        ])
        .output()
        .unwrap();
    assert_eq!(
        text(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("dn:"))
            .count(),
        1200
    );
    std::fs::remove_dir_all(work).unwrap();
}

#[test]
fn a_stream_of_bare_add_requests_loads_too() {
    // AddRequests without their LDAPMessage envelope, as a generator may
    // write them: tag 0x68 first.
    let mut bare = Vec::new();
    let suffix: &[(&str, &[&str])] = &[("objectClass", &["domain"]), ("dc", &["example"])];
    let account: &[(&str, &[&str])] = &[("objectClass", &["account"]), ("uid", &["bare"])];
    let entries = [
        ("dc=example,dc=com", suffix),
        ("uid=bare,dc=example,dc=com", account),
    ];
    for (id, (dn, attrs)) in (1..).zip(entries) {
        let mut message = Vec::new();
        slapd::encode_add(&mut message, id, dn, attrs);
        let (_, header, _) = meridian_ber::frame::parse_header(&message).unwrap();
        // Skip the envelope's header and its messageID (02 01 id).
        bare.extend_from_slice(&message[header + 3..]);
    }
    assert_eq!(bare[0], 0x68);
    let work = temp_dir("bare");
    let file = work.join("adds.ber");
    std::fs::write(&file, &bare).unwrap();
    let (ok, out, err) = import(&work.join("data"), &[&file], &[]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("imported 2 entries"), "{out}");
    assert!(
        export(&work.join("data"), &["--no-operational"])
            .contains("dn: uid=bare,dc=example,dc=com\nobjectClass: account\nuid: bare\n")
    );
    std::fs::remove_dir_all(work).unwrap();
}

#[test]
fn entries_waiting_for_parents_are_bounded() {
    let work = temp_dir("waiting");
    let mut ldif = String::new();
    for i in 0..20 {
        ldif.push_str(&person(&format!("w{i}")));
    }
    ldif.push_str(BASE);
    let file = write(&work, "late-parents.ldif", &ldif);
    let (ok, _, err) = import(
        &work.join("data"),
        &[&file],
        &["--max-waiting", "5", "--batch", "4"],
    );
    assert!(!ok, "{err}");
    assert!(
        err.contains("--max-waiting") && err.contains("marked incomplete"),
        "{err}"
    );
    // With room to wait, the same file loads.
    let (ok, out, err) = import(&work.join("data"), &[&file], &["--replace", "--batch", "4"]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("imported 22 entries"), "{out}");
    std::fs::remove_dir_all(work).unwrap();
}

#[test]
fn a_stopped_load_ends_even_while_a_fifo_stays_open() {
    let work = temp_dir("open-fifo");
    let input = fifo(&work, "never-closed.ldif");
    let mut child = Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["import", "-i"])
        .arg(&input)
        .arg("--data-dir")
        .arg(work.join("data"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut writer = std::fs::OpenOptions::new()
        .write(true)
        .open(&input)
        .unwrap();
    std::io::Write::write_all(
        &mut writer,
        b"dn: cn=x,dc=elsewhere\nobjectClass: person\ncn: x\nsn: x\n\n",
    )
    .unwrap();
    // The writer stays open; the first (bad) record must still end the load.
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the stopped load never ended");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success());
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(err.contains("outside the naming context"), "{err}");
    drop(writer);
    std::fs::remove_dir_all(work).unwrap();
}

/// `meridian backup` beside a running server (durable and journal modes):
/// the copy holds what was written before it and not what came after, and
/// a server started on it (the copy as `db/data.mdb`) serves it and
/// `meridian check` passes.
#[test]
fn a_backup_of_a_running_server_restores_to_what_it_held() {
    for durability in ["durable", "journal"] {
        let config = format!("[storage]\ndurability = \"{durability}\"\n");
        let dir = temp_dir("backup");
        let mut server = Server::start_with(&config, Some(ADMIN_PASSWORD), Some(dir.to_path_buf()));
        let mut ldif = BASE.to_owned();
        for i in 0..200 {
            ldif.push_str(&person(&format!("before{i}")));
        }
        let (rc, out) = support::admin_tool(&server, "ldapadd", &[], Some(&ldif));
        assert_eq!(rc, 0, "{out}");
        let copy = dir.join("backup.mdb");
        let config_path = dir.join("test-config.toml");
        let config_arg = config_path.to_str().unwrap();
        let (ok, out, err) = meridian(
            &[
                "backup",
                "--config",
                config_arg,
                "-o",
                copy.to_str().unwrap(),
            ],
            &dir,
        );
        assert!(ok, "{durability}: {err}");
        assert!(out.contains("202 entries"), "{out}");
        // A second backup to the same file is refused, not overwritten.
        let (ok, _, err) = meridian(
            &[
                "backup",
                "--config",
                config_arg,
                "-o",
                copy.to_str().unwrap(),
            ],
            &dir,
        );
        assert!(!ok && err.contains("exists"), "{err}");
        let (rc, out) = support::admin_tool(&server, "ldapadd", &[], Some(&person("after")));
        assert_eq!(rc, 0, "{out}");
        assert!(server.terminate().success());

        let restored = temp_dir("restored");
        std::fs::create_dir_all(restored.join("db")).unwrap();
        std::fs::copy(&copy, restored.join("db/data.mdb")).unwrap();
        std::fs::write(restored.join("test-config.toml"), &config).unwrap();
        let restored_config = restored.join("test-config.toml");
        let (ok, _, err) = meridian(
            &["check", "--config", restored_config.to_str().unwrap()],
            &restored,
        );
        assert!(ok, "{durability}: check of the copy: {err}");
        let server =
            Server::start_with(&config, Some(ADMIN_PASSWORD), Some(restored.to_path_buf()));
        assert_eq!(count(&server, "(uid=before*)"), 200, "{durability}");
        assert_eq!(count(&server, "(uid=after)"), 0, "{durability}");
        // (Each server removes its data directory when dropped.)
    }
}
