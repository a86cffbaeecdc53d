//! The root DSE, binds and WhoAmI, through OpenLDAP's own tools.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use support::*;

#[test]
fn ldapsearch_reads_the_root_dse() {
    let server = Server::start("");
    let out = ldap_tool(
        "ldapsearch",
        &["-x", "-H", &server.url(), "-s", "base", "-b", "", "+", "*"],
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    for expected in [
        "namingContexts: dc=example,dc=com",
        "supportedLDAPVersion: 3",
        "supportedControl: 2.25.241941608197083682915838068312096323903.1.1",
        "supportedExtension: 1.3.6.1.4.1.4203.1.11.3",
        "supportedFeatures: 1.3.6.1.4.1.4203.1.5.1",
        "vendorName: Meridian",
        "vendorVersion: Meridian ",
        "objectClass: top",
        "result: 0 Success",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in\n{stdout}"
        );
    }

    // Without '+', only user attributes, as slapd does.
    let out = ldap_tool(
        "ldapsearch",
        &["-x", "-H", &server.url(), "-s", "base", "-b", ""],
    );
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("objectClass: top") && !stdout.contains("namingContexts"),
        "{stdout}"
    );

    // A filter that does not match returns no entry.
    let out = root_dse_search(&server, &["(objectClass=person)"]);
    assert!(
        !text(&out.stdout).contains("# numEntries"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn ldapwhoami_after_admin_bind_and_anonymous() {
    let server = Server::start("");
    let url = server.url();
    let out = ldap_tool(
        "ldapwhoami",
        &["-x", "-H", &url, "-D", ADMIN_DN, "-w", ADMIN_PASSWORD],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), format!("dn:{ADMIN_DN}"));

    // The DN matches without regard to case and spaces.
    let out = ldap_tool(
        "ldapwhoami",
        &[
            "-x",
            "-H",
            &url,
            "-D",
            "CN=Admin, DC=Example,DC=COM",
            "-w",
            ADMIN_PASSWORD,
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));

    let out = ldap_tool("ldapwhoami", &["-x", "-H", &url]);
    assert!(out.status.success());
    assert_eq!(text(&out.stdout).trim(), "anonymous");
}

#[test]
fn wrong_password_and_unknown_dn_both_get_invalid_credentials() {
    let server = Server::start("");
    for dn in [ADMIN_DN, "cn=nobody,dc=example,dc=com"] {
        let out = ldap_tool(
            "ldapwhoami",
            &["-x", "-H", &server.url(), "-D", dn, "-w", "wrong"],
        );
        assert_eq!(out.status.code(), Some(49), "{dn}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains("Invalid credentials"));
    }
}

#[test]
fn writes_need_the_administrator_and_critical_controls_are_answered() {
    let server = Server::start("");
    let url = server.url();
    // Anonymous: refused with a reason; the administrator: the missing
    // parent is reported (an empty database has no suffix entry yet).
    for (bind, code, message) in [
        (
            vec![],
            50,
            "the access rules do not give anonymous clients write access",
        ),
        (
            vec!["-D", ADMIN_DN, "-w", ADMIN_PASSWORD],
            32,
            "no such entry",
        ),
    ] {
        let mut args = vec!["-x", "-H", &url];
        args.extend(bind);
        let mut child = std::process::Command::new("ldapadd")
            .args(&args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write as _;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"dn: cn=x,dc=example,dc=com\nobjectClass: person\ncn: x\nsn: y\n")
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(code), "{}", text(&out.stderr));
        assert!(text(&out.stderr).contains(message), "{}", text(&out.stderr));
    }

    let out = ldap_tool(
        "ldapsearch",
        &["-x", "-H", &url, "-s", "base", "-b", "", "-e", "!1.2.3.4"],
    );
    assert_eq!(out.status.code(), Some(12), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("critical control 1.2.3.4 is not supported"));

    // The same control, not critical, is ignored.
    let out = ldap_tool(
        "ldapsearch",
        &["-x", "-H", &url, "-s", "base", "-b", "", "-e", "1.2.3.4"],
    );
    assert!(out.status.success(), "{}", text(&out.stdout));
}

#[test]
fn a_generated_password_is_printed_once_and_works() {
    let dir = temp_dir("generated");
    let server = Server::start_with("", None, Some(dir.clone()));
    let printed = server.stdout_lines.join("\n");
    let password = printed
        .split_once(&format!("Generated a password for {ADMIN_DN}: "))
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no generated password in {printed:?}"))
        .to_owned();
    let out = ldap_tool(
        "ldapwhoami",
        &["-x", "-H", &server.url(), "-D", ADMIN_DN, "-w", &password],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut server = server;
    assert!(server.terminate().success());
    let secret = std::fs::read_to_string(dir.join("admin.secret")).unwrap();
    assert!(secret.starts_with("{ARGON2}") && !secret.contains(&password));
    std::mem::forget(server); // keep the data directory for the restart

    let again = Server::start_with("", None, Some(dir));
    assert!(
        !again
            .stdout_lines
            .join("\n")
            .contains("Generated a password"),
        "{:?}",
        again.stdout_lines
    );
    let out = ldap_tool(
        "ldapwhoami",
        &["-x", "-H", &again.url(), "-D", ADMIN_DN, "-w", &password],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn an_invalid_config_is_refused_with_the_key_and_reason() {
    let dir = temp_dir("badconfig");
    let config = dir.join("bad.toml");
    for (toml, expected) in [
        ("[server]\nmax_connections = 0\n", "server.max_connections"),
        ("[server]\nlisten = \"nowhere\"\n", "server.listen"),
        ("[sever]\nlisten = \"127.0.0.1:1\"\n", "sever"),
        ("[directory]\nsuffix = \"not a dn\"\n", "directory.suffix"),
        ("[directory]\nsize_limit = 0\n", "directory.size_limit"),
        (
            "[directory]\ntime_limit_secs = 0\n",
            "directory.time_limit_secs",
        ),
        (
            "[directory]\nmax_modify_changes = 0\n",
            "directory.max_modify_changes",
        ),
        (
            "[[access]]\nto = \"*\"\nby = [{ who = \"everyone\", grant = \"read\" }]\n",
            "access[0].by[0].who",
        ),
        (
            "[[access]]\nto = \"subtree:ou=People\"\nattrs = [\"nosuch\"]\nby = []\n",
            "access[0].attrs",
        ),
        (
            "[directory]\nproxy_authorizers = [\"cn=app\"]\n",
            "directory.proxy_authorizers",
        ),
        (
            "[directory]\nproxy_authorizers = [\"dn:nosuchattr=x\"]\n",
            "directory.proxy_authorizers",
        ),
    ] {
        std::fs::write(&config, toml).unwrap();
        // Its own data directory and port: a check that comes after the
        // store is opened must not touch ./meridian-data in the source
        // tree (an earlier version left one there).
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_meridian"))
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&config)
            .arg("--data-dir")
            .arg(dir.join("data"))
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert!(
            text(&out.stderr).contains(expected),
            "{toml}: {}",
            text(&out.stderr)
        );
    }
    std::fs::remove_dir_all(dir).unwrap();
}
