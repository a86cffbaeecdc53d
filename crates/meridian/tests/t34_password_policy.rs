//! The password policy (`[password_policy]`) through OpenLDAP's tools:
//! the quality of passwords users set, by ldappasswd (Password Modify)
//! and ldapmodify; the administrator may set any.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use support::{Server, admin_tool, tool};

const USER: &str = "uid=pat,dc=example,dc=com";

/// A server with `policy` (the `[password_policy]` table's lines) and the
/// user `pat` whose password is `Initial-Pass1`.
fn server_with(policy: &str) -> Server {
    let server = Server::start(&format!("[password_policy]\n{policy}\n"));
    let ldif = format!(
        "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\n\
         dn: {USER}\nobjectClass: account\nobjectClass: simpleSecurityObject\nuid: pat\nuserPassword: Initial-Pass1\n"
    );
    let (rc, out) = admin_tool(&server, "ldapadd", &[], Some(&ldif));
    assert_eq!(rc, 0, "{out}");
    server
}

/// `pat` changes its own password from `old` to `new` (Password Modify).
fn change_own(server: &Server, old: &str, new: &str) -> (i32, String) {
    tool(
        server,
        "ldappasswd",
        &["-D", USER, "-w", old],
        &["-a", old, "-s", new],
        None,
    )
}

#[test]
fn users_set_passwords_of_the_configured_length_and_classes() {
    let server = server_with("min_length = 8\nmin_classes = 3");
    // ldappasswd exits 1 on any failure and prints the result code.
    let (rc, out) = change_own(&server, "Initial-Pass1", "Ab1-");
    assert!(rc != 0 && out.contains("(19)"), "too short: {out}");
    assert!(out.contains("min_length"), "{out}");
    let (rc, out) = change_own(&server, "Initial-Pass1", "longbutsimple");
    assert!(rc != 0 && out.contains("(19)"), "one class: {out}");
    assert!(out.contains("min_classes"), "{out}");
    let (rc, out) = change_own(&server, "Initial-Pass1", "Better-Pass2");
    assert_eq!(rc, 0, "{out}");

    // A modify of userPassword is held to the same rules, and a hash,
    // whose quality cannot be seen, is refused from a user.
    let modify = |value: &str| {
        let ldif = format!(
            "dn: {USER}\nchangetype: modify\nreplace: userPassword\nuserPassword: {value}\n"
        );
        tool(
            &server,
            "ldapmodify",
            &["-D", USER, "-w", "Better-Pass2"],
            &[],
            Some(&ldif),
        )
    };
    let (rc, out) = modify("weak");
    assert_eq!(rc, 19, "{out}");
    let (rc, out) = modify("{SSHA}c2VjcmV0c2FsdHNhbHRzYWx0c2FsdA==");
    assert_eq!(rc, 19, "{out}");
    assert!(out.contains("hashed password"), "{out}");

    // The administrator resets to anything.
    let (rc, out) = admin_tool(&server, "ldappasswd", &["-s", "x", USER], None);
    assert_eq!(rc, 0, "{out}");
}
