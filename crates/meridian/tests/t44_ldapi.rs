//! `ldapi://`: LDAP on a Unix domain socket, with SASL EXTERNAL bound to
//! the user and group the kernel reports for the client, named as slapd
//! names them. OpenLDAP's own tools as root (the administrator, as
//! Debian's admins are used to) and as `nobody` (what an access rule
//! naming that identity gives it, and nothing more); the socket's mode
//! keeping other users out; StartTLS not offered there.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::disallowed_methods
)]

mod support;

use std::process::Command;

use support::*;

const NOBODY: &str = "gidNumber=65534+uidNumber=65534,cn=peercred,cn=external,cn=auth";
const ROOT: &str = "gidNumber=0+uidNumber=0,cn=peercred,cn=external,cn=auth";

/// The `ldapi://` URL of the socket at `path`.
fn ldapi_url(path: &std::path::Path) -> String {
    let text = path.to_str().unwrap();
    format!("ldapi://{}", text.replace('/', "%2F"))
}

/// An OpenLDAP tool run as `user` (root: as this process) with SASL
/// EXTERNAL at `url`: its exit code and output.
fn external(
    user: &str,
    tool: &str,
    url: &str,
    args: &[&str],
    stdin: Option<&str>,
) -> (i32, String) {
    let mut words: Vec<String> = vec![
        tool.into(),
        "-Q".into(),
        "-Y".into(),
        "EXTERNAL".into(),
        "-H".into(),
        url.into(),
    ];
    words.extend(args.iter().map(|a| (*a).to_owned()));
    let mut command = if user == "root" {
        let mut c = Command::new(&words[0]);
        c.args(&words[1..]);
        c
    } else {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid",
            user,
            "--regid",
            "nogroup",
            "--clear-groups",
            "--",
        ]);
        c.args(&words);
        c
    };
    command.env("LDAPNOINIT", "1");
    let output = match stdin {
        Some(text) => {
            use std::io::Write;
            let mut child = command
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            child
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
            child.wait_with_output().unwrap()
        }
        None => command.output().unwrap(),
    };
    (
        output.status.code().unwrap_or(-1),
        format!("{}{}", text(&output.stdout), text(&output.stderr)),
    )
}

fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    #[allow(unsafe_code)]
    unsafe {
        libc::geteuid() == 0
    }
}

#[test]
fn root_and_another_user_bind_as_themselves_over_ldapi() {
    assert!(
        running_as_root(),
        "the ldapi:// test runs tools as another user: it needs root (CI runs as root)"
    );
    let dir = temp_dir("ldapi");
    let socket = dir.join("ldapi");
    let config = format!(
        "[server]\nlisten_ldapi = {socket:?}\n\n\
         [[access]]\nto = \"subtree:ou=Drop,dc=example,dc=com\"\nby = [{{ who = \"dn:{NOBODY}\", grant = \"write\" }}]\n\n\
         [[access]]\nto = \"*\"\nby = [{{ who = \"users\", grant = \"read\" }}]\n"
    );
    let server = Server::start_with(&config, Some(ADMIN_PASSWORD), Some(dir.clone()));
    let url = ldapi_url(&socket);

    let (code, out) = external("root", "ldapwhoami", &url, &[], None);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&format!("dn:{ROOT}")), "{out}");
    // Root is the administrator: it loads the tree.
    let top = "dn: dc=example,dc=com\nobjectClass: domain\ndc: example\n\n\
               dn: ou=Drop,dc=example,dc=com\nobjectClass: organizationalUnit\nou: Drop\n\n\
               dn: ou=Kept,dc=example,dc=com\nobjectClass: organizationalUnit\nou: Kept\n";
    let (code, out) = external("root", "ldapadd", &url, &[], Some(top));
    assert_eq!(code, 0, "{out}");

    let (code, out) = external("nobody", "ldapwhoami", &url, &[], None);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&format!("dn:{NOBODY}")), "{out}");
    // What the rule naming nobody's identity gives it, and no more.
    let drop = "dn: cn=note,ou=Drop,dc=example,dc=com\nobjectClass: organizationalRole\ncn: note\n";
    let (code, out) = external("nobody", "ldapadd", &url, &[], Some(drop));
    assert_eq!(code, 0, "{out}");
    let kept = "dn: cn=note,ou=Kept,dc=example,dc=com\nobjectClass: organizationalRole\ncn: note\n";
    let (code, out) = external("nobody", "ldapadd", &url, &[], Some(kept));
    assert_eq!(code, 50, "insufficientAccessRights: {out}");
    // Asking for another identity than the peer's is refused.
    let (code, out) = external(
        "nobody",
        "ldapwhoami",
        &url,
        &["-X", &format!("dn:{ROOT}")],
        None,
    );
    assert_eq!(code, 49, "invalidCredentials: {out}");
    // StartTLS is not offered on the local socket.
    let out = ldap_tool("ldapwhoami", &["-x", "-ZZ", "-H", &url]);
    assert!(!out.status.success(), "{out:?}");
    // The same entries over TCP.
    let (code, out) = admin_tool(
        &server,
        "ldapsearch",
        &["-LLL", "-b", "ou=Drop,dc=example,dc=com", "dn"],
        None,
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("cn=note,ou=Drop"), "{out}");
}

#[test]
fn the_sockets_mode_keeps_other_users_out_and_a_stale_socket_is_replaced() {
    let dir = temp_dir("ldapi-mode");
    let socket = dir.join("ldapi");
    // A socket file left by a server that died: replaced at the start.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    let config = format!("[server]\nlisten_ldapi = {socket:?}\nldapi_mode = 0o600\n");
    let _server = Server::start_with(&config, Some(ADMIN_PASSWORD), Some(dir.clone()));
    let url = ldapi_url(&socket);
    let (code, out) = external("root", "ldapwhoami", &url, &[], None);
    assert_eq!(code, 0, "{out}");
    if running_as_root() {
        let (code, out) = external("nobody", "ldapwhoami", &url, &[], None);
        assert_eq!(code, 255, "nobody may not connect to a 0600 socket: {out}");
    }
    // A second server on the same socket is refused while the first runs.
    let other = temp_dir("ldapi-second");
    let config_file = other.join("c.toml");
    std::fs::write(&config_file, &config).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config_file)
        .arg("--data-dir")
        .arg(&other)
        .env("MERIDIAN_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("a server is listening there already"),
        "{}",
        text(&out.stderr)
    );
}
