//! SIGHUP: the configuration file is read again; `log.level`, the access
//! rules and the limits take effect at once, and the other keys that
//! changed are named in the log as taking effect at the next start (the
//! TLS certificate's reload is tested in t33). And `log.file`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
// Deadlines of the waits for the server's log, not measurements.
#![allow(clippy::disallowed_methods)]

mod support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use support::*;

#[test]
fn sighup_reloads_rules_limits_and_the_log_level_and_names_what_needs_a_restart() {
    let dir = temp_dir("reload");
    let config = dir.join("test-config.toml");
    let log = dir.join("server.log");
    let mut server = Server::start_unfiltered(
        // The access log is silenced by naming it (`log.access` switches
        // it; a bare "warn" leaves it on).
        "[log]\nlevel = \"warn,meridian::access=warn\"\n",
        dir.clone(),
        std::fs::File::create(&log).unwrap().into(),
    );
    let url = server.url();
    let whoami = || {
        let (code, _) = tool_at(&url, "ldapwhoami", &[], &[], None);
        assert_eq!(code, 0);
    };
    // At warn, an operation writes no access line (info).
    whoami();
    // Under the built-in rules anonymous clients read nothing.
    let base = "dc=example,dc=com";
    let ldif = format!(
        "dn: {base}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: x\n"
    );
    let bind = ["-D", ADMIN_DN, "-w", ADMIN_PASSWORD];
    let (code, out) = tool_at(&url, "ldapadd", &bind, &[], Some(&ldif));
    assert_eq!(code, 0, "{out}");
    let anonymous_read = || {
        tool_at(
            &url,
            "ldapsearch",
            &[],
            &["-LLL", "-b", base, "-s", "base", "1.1"],
            None,
        )
    };
    assert_eq!(anonymous_read().0, 32);
    std::fs::write(
        &config,
        "[log]\nlevel = \"info\"\n[directory]\nsize_limit = 42\n[server]\nmax_connections = 500\n\
         [[access]]\nto = \"*\"\nby = [ { who = \"*\", grant = \"read\" } ]\n",
    )
    .unwrap();
    support::signal(server.pid(), "HUP");
    let read = || std::fs::read_to_string(&log).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !read().contains("SIGHUP: these keys changed") {
        assert!(
            Instant::now() < deadline,
            "no reload in the log:\n{}",
            read()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let text = read();
    assert!(text.contains("log.level reloaded"), "{text}");
    let changed = text
        .lines()
        .find(|l| l.contains("SIGHUP: these keys changed"))
        .unwrap();
    let keys = changed.split("keys=").nth(1).unwrap_or_default();
    assert!(keys.contains("server.max_connections"), "{changed}");
    assert!(
        !keys.contains("log.level") && !keys.contains("size_limit"),
        "{changed}"
    );
    let reloaded = text
        .lines()
        .find(|l| l.contains("SIGHUP: access rules and limits reloaded"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        reloaded.contains("directory.size_limit") && reloaded.contains("access"),
        "{reloaded}"
    );
    // The new rules apply to the next operation.
    let (code, out) = anonymous_read();
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&format!("dn: {base}")), "{out}");
    assert!(
        !text.contains("meridian::access"),
        "an access line at warn:\n{text}"
    );
    // At info now: the next operation is in the access log.
    whoami();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !read().contains("meridian::access") {
        assert!(
            Instant::now() < deadline,
            "no access line after the reload:\n{}",
            read()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Dropping the server removes its directory.
    server.terminate();
}

/// `log.file`: the log goes to the file (0600), rotated by size.
#[test]
fn the_log_goes_to_a_file_rotated_by_size() {
    let dir = temp_dir("logfile");
    let file = dir.join("meridian.log");
    let mut server = Server::start_unfiltered(
        &format!(
            "[log]\nfile = \"{}\"\nfile_max_bytes = 4096\nfile_keep = 2\n",
            file.display()
        ),
        dir.clone(),
        Stdio::null(),
    );
    let url = server.url();
    for _ in 0..40 {
        let (rc, out) = tool_at(&url, "ldapwhoami", &[], &[], None);
        assert_eq!(rc, 0, "{out}");
    }
    let rotated = dir.join("meridian.log.1");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !rotated.exists() {
        assert!(Instant::now() < deadline, "the log was not rotated");
        std::thread::sleep(Duration::from_millis(50));
    }
    let current = std::fs::read_to_string(&file).unwrap();
    let older = std::fs::read_to_string(&rotated).unwrap();
    assert!(older.len() <= 4096 && current.len() <= 4096);
    assert!(
        format!("{older}{current}").contains("meridian::access"),
        "{older}{current}"
    );
    assert!(!dir.join("meridian.log.3").exists());
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // Dropping the server removes its directory.
    server.terminate();
}

/// Issue 44, small 16: under systemd (`Type=notify`) the server says
/// READY=1 once it listens, RELOADING=1 and READY=1 around a SIGHUP and
/// STOPPING=1 when it stops; and it takes the administrator's password
/// from a `LoadCredential=` credential, which other local users cannot
/// read as they can a unit's `Environment=`.
#[test]
fn under_systemd_it_notifies_readiness_and_reads_its_password_credential() {
    use std::os::unix::net::UnixDatagram;
    let dir = temp_dir("notify");
    let socket_path = dir.join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let credentials = dir.join("credentials");
    std::fs::create_dir_all(&credentials).unwrap();
    std::fs::write(credentials.join("admin-password"), "from-a-credential\n").unwrap();
    let config = dir.join("config.toml");
    std::fs::write(&config, "").unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .env("NOTIFY_SOCKET", &socket_path)
        .env("CREDENTIALS_DIRECTORY", &credentials)
        .env_remove("MERIDIAN_ADMIN_PASSWORD")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let said = |expected: &str| {
        let mut buf = [0u8; 256];
        let n = socket.recv(&mut buf).expect("a notification");
        assert_eq!(std::str::from_utf8(&buf[..n]).unwrap(), expected);
    };
    said("READY=1");
    // Listening by now: its address is on standard output.
    let stdout = child.stdout.take().unwrap();
    let addr = std::io::BufRead::lines(std::io::BufReader::new(stdout))
        .map_while(Result::ok)
        .find_map(|line| {
            line.strip_prefix("meridian listening on ")
                .map(str::to_owned)
        })
        .unwrap();
    let (rc, out) = tool_at(
        &format!("ldap://{addr}"),
        "ldapwhoami",
        &["-D", ADMIN_DN, "-w", "from-a-credential"],
        &[],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    signal(child.id(), "HUP");
    said("RELOADING=1");
    said("READY=1");
    signal(child.id(), "TERM");
    said("STOPPING=1");
    assert!(child.wait().unwrap().success());
    std::fs::remove_dir_all(dir).unwrap();
}
