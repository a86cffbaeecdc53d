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
    add_pat(&server);
    server
}

/// The base entry and the user `pat`, whose password is `Initial-Pass1`.
fn add_pat(server: &Server) {
    let ldif = format!(
        "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\n\
         dn: {USER}\nobjectClass: account\nobjectClass: simpleSecurityObject\nuid: pat\nuserPassword: Initial-Pass1\n"
    );
    let (rc, out) = admin_tool(server, "ldapadd", &[], Some(&ldif));
    assert_eq!(rc, 0, "{out}");
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

/// The policy state attributes `names` of `pat`, as the administrator
/// reads them.
fn state_of(server: &Server, names: &[&str]) -> String {
    let mut args = vec!["-b", USER, "-s", "base"];
    args.extend_from_slice(names);
    let (rc, out) = admin_tool(server, "ldapsearch", &args, None);
    assert_eq!(rc, 0, "{out}");
    out
}

/// `ldapwhoami` as `pat` with `password`, asking for the password policy
/// control: the exit code and what it printed.
fn whoami_with_policy(server: &Server, password: &str) -> (i32, String) {
    tool(
        server,
        "ldapwhoami",
        &["-D", USER, "-w", password],
        &["-e", "ppolicy"],
        None,
    )
}

#[test]
fn failed_binds_lock_the_entry_until_the_administrator_unlocks_it() {
    let mut server = server_with("lockout_failures = 3");
    for _ in 0..3 {
        let (rc, out) = whoami_with_policy(&server, "wrong");
        assert_eq!(rc, 49, "{out}");
    }
    // Locked: the right password is refused too, and the control says why.
    let (rc, out) = whoami_with_policy(&server, "Initial-Pass1");
    assert_eq!(rc, 49, "{out}");
    assert!(out.contains("Account locked"), "{out}");
    // The state is in the entry, for the administrator to see.
    let out = state_of(&server, &["pwdAccountLockedTime", "pwdFailureTime"]);
    assert!(out.contains("pwdAccountLockedTime: "), "{out}");
    assert_eq!(out.matches("pwdFailureTime: ").count(), 3, "{out}");
    // Issue 44, medium 8: whole seconds, as slapd writes it (scripts
    // parse it with %Y%m%d%H%M%SZ).
    let locked = out
        .lines()
        .find_map(|l| l.strip_prefix("pwdAccountLockedTime: "))
        .unwrap();
    assert!(
        locked.len() == 15
            && locked.ends_with('Z')
            && locked[..14].bytes().all(|b| b.is_ascii_digit()),
        "{locked}"
    );

    // It survives a restart (a store write, not process memory).
    let data_dir = server.data_dir.clone();
    assert!(server.terminate().success());
    // Not dropped: that would remove the data directory.
    std::mem::forget(server);
    let server = Server::start_with(
        "[password_policy]\nlockout_failures = 3\n",
        Some(support::ADMIN_PASSWORD),
        Some(data_dir),
    );
    let (rc, out) = whoami_with_policy(&server, "Initial-Pass1");
    assert!(rc == 49 && out.contains("Account locked"), "{out}");

    // The administrator unlocks it.
    let unlock = format!("dn: {USER}\nchangetype: modify\ndelete: pwdAccountLockedTime\n");
    let (rc, out) = admin_tool(&server, "ldapmodify", &[], Some(&unlock));
    assert_eq!(rc, 0, "{out}");
    let (rc, out) = whoami_with_policy(&server, "Initial-Pass1");
    assert_eq!(rc, 0, "{out}");
    // The success cleared the failures.
    let out = state_of(&server, &["pwdFailureTime"]);
    assert!(!out.contains("pwdFailureTime: "), "{out}");
}

#[test]
fn a_lock_with_a_duration_ends_by_itself() {
    // Long enough that a loaded machine binds before the lock ends.
    let server = server_with("lockout_failures = 2\nlockout_secs = 6");
    for _ in 0..2 {
        assert_eq!(whoami_with_policy(&server, "wrong").0, 49);
    }
    assert_eq!(whoami_with_policy(&server, "Initial-Pass1").0, 49);
    std::thread::sleep(std::time::Duration::from_millis(6200));
    let (rc, out) = whoami_with_policy(&server, "Initial-Pass1");
    assert_eq!(rc, 0, "{out}");
}

#[test]
fn passwords_expire_with_a_warning_first_and_a_reset_renews_them() {
    // Long enough that a loaded machine binds before the expiry.
    let server = server_with("max_age_secs = 8\nexpire_warning_secs = 60");
    let (rc, out) = whoami_with_policy(&server, "Initial-Pass1");
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("expire"), "a warning of the expiry: {out}");
    let changed = state_of(&server, &["pwdChangedTime"]);
    std::thread::sleep(std::time::Duration::from_millis(8200));
    let (rc, out) = whoami_with_policy(&server, "Initial-Pass1");
    assert_eq!(rc, 49, "{out}");
    assert!(out.contains("Password expired"), "{out}");
    // The administrator's reset sets pwdChangedTime again, and the new
    // password binds.
    let (rc, out) = admin_tool(&server, "ldappasswd", &["-s", "Renewed-Pass2", USER], None);
    assert_eq!(rc, 0, "{out}");
    let renewed = state_of(&server, &["pwdChangedTime"]);
    assert!(renewed.contains("pwdChangedTime: "), "{renewed}");
    assert_ne!(renewed, changed);
    let (rc, out) = whoami_with_policy(&server, "Renewed-Pass2");
    assert_eq!(rc, 0, "{out}");
}

#[test]
fn a_user_may_not_reuse_a_remembered_password() {
    let server = server_with("history = 2");
    // The current one, then each of the last two.
    let (rc, out) = change_own(&server, "Initial-Pass1", "Initial-Pass1");
    assert!(rc != 0 && out.contains("(19)"), "the current one: {out}");
    assert!(out.contains("password_policy.history"), "{out}");
    assert_eq!(change_own(&server, "Initial-Pass1", "Second-Pass2").0, 0);
    assert_eq!(change_own(&server, "Second-Pass2", "Third-Pass3").0, 0);
    let (rc, out) = change_own(&server, "Third-Pass3", "Initial-Pass1");
    assert!(rc != 0 && out.contains("(19)"), "two changes ago: {out}");
    // ldapmodify is held to it too.
    let ldif = format!(
        "dn: {USER}\nchangetype: modify\nreplace: userPassword\nuserPassword: Second-Pass2\n"
    );
    let (rc, out) = tool(
        &server,
        "ldapmodify",
        &["-D", USER, "-w", "Third-Pass3"],
        &[],
        Some(&ldif),
    );
    assert_eq!(rc, 19, "{out}");
    // Three changes ago is forgotten (two remembered, and the current).
    assert_eq!(change_own(&server, "Third-Pass3", "Fourth-Pass4").0, 0);
    let (rc, out) = change_own(&server, "Fourth-Pass4", "Initial-Pass1");
    assert_eq!(rc, 0, "{out}");
    // The administrator's reset may reuse one.
    let (rc, out) = admin_tool(&server, "ldappasswd", &["-s", "Fourth-Pass4", USER], None);
    assert_eq!(rc, 0, "{out}");
}

#[test]
fn one_rule_for_changing_ones_own_password_both_ways() {
    // Without safe_modify (the default, as OpenLDAP's pwdSafeModify):
    // a bound user changes its own password without the old one, by
    // Password Modify as by a modify.
    let server = server_with("");
    let (rc, out) = tool(
        &server,
        "ldappasswd",
        &["-D", USER, "-w", "Initial-Pass1"],
        &["-s", "Second-Pass2"],
        None,
    );
    assert_eq!(rc, 0, "without the old one: {out}");
    drop(server);

    // With it, both need the old one.
    let server = server_with("safe_modify = true");
    let (rc, out) = tool(
        &server,
        "ldappasswd",
        &["-D", USER, "-w", "Initial-Pass1"],
        &["-s", "Second-Pass2"],
        None,
    );
    assert!(rc != 0 && out.contains("(50)"), "{out}");
    let modify = |ldif: &str, password: &str| {
        tool(
            &server,
            "ldapmodify",
            &["-D", USER, "-w", password],
            &[],
            Some(ldif),
        )
    };
    let replace = format!(
        "dn: {USER}\nchangetype: modify\nreplace: userPassword\nuserPassword: Second-Pass2\n"
    );
    let (rc, out) = modify(&replace, "Initial-Pass1");
    assert_eq!(rc, 50, "a replace without the old one: {out}");
    let swap = |old: &str, new: &str| {
        format!(
            "dn: {USER}\nchangetype: modify\ndelete: userPassword\nuserPassword: {old}\n-\nadd: userPassword\nuserPassword: {new}\n"
        )
    };
    let (rc, out) = modify(&swap("Wrong-Pass0", "Second-Pass2"), "Initial-Pass1");
    assert_eq!(
        rc, 16,
        "a wrong old one is a value the entry does not hold: {out}"
    );
    let (rc, out) = modify(&swap("Initial-Pass1", "Second-Pass2"), "Initial-Pass1");
    assert_eq!(rc, 0, "{out}");
    assert_eq!(change_own(&server, "Second-Pass2", "Third-Pass3").0, 0);
}

/// Issue 44, medium 8: Password Modify answers as slapd does: a wrong
/// old password is unwillingToPerform (53, not 49, which some clients
/// read as a failed bind), an anonymous request strongerAuthRequired
/// (8); pwdChangedTime is in whole seconds.
#[test]
fn password_modify_refusals_carry_slapds_codes() {
    let server = server_with("");
    let (rc, out) = change_own(&server, "Initial-Pass1", "Next-Pass2");
    assert_eq!(rc, 0, "{out}");
    let (rc, out) = tool(
        &server,
        "ldappasswd",
        &["-D", USER, "-w", "Next-Pass2"],
        &["-a", "not-the-old-one", "-s", "Third-Pass3"],
        None,
    );
    // ldappasswd exits 1 on any refusal and prints the code.
    assert_ne!(rc, 0, "{out}");
    assert!(out.contains("unwilling to perform (53)"), "{out}");
    let (rc, out) = tool(
        &server,
        "ldappasswd",
        &[],
        &["-a", "Next-Pass2", "-s", "x", USER],
        None,
    );
    assert_ne!(rc, 0, "{out}");
    assert!(out.contains("required (8)"), "{out}");
    assert!(
        out.contains("only authenticated users may change passwords"),
        "{out}"
    );
    let out = state_of(&server, &["pwdChangedTime"]);
    let changed = out
        .lines()
        .find_map(|l| l.strip_prefix("pwdChangedTime: "))
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(changed.len(), 15, "whole seconds: {changed}");
}

/// `ldappasswd` as `pat` (bound with `bound`), asking for the password
/// policy control, with `args` (`-a OLD`, `-s NEW`).
fn passwd_with_policy(server: &Server, bound: &str, args: &[&str]) -> (i32, String) {
    let mut extra = vec!["-e", "ppolicy"];
    extra.extend_from_slice(args);
    tool(
        server,
        "ldappasswd",
        &["-D", USER, "-w", bound],
        &extra,
        None,
    )
}

/// Issue 44, medium 8: a change the policy refuses answers with the
/// policy control's error when the request asked for it, with the codes
/// slapd 2.5's ppolicy answers (checked side by side by hand:
/// passwordTooShort 6 and passwordInHistory 8 with constraintViolation,
/// mustSupplyOldPassword 4 with insufficientAccessRights).
#[test]
fn refused_changes_carry_the_policy_controls_error() {
    let server = server_with("min_length = 8\nhistory = 2\nsafe_modify = true");
    let (rc, out) = passwd_with_policy(
        &server,
        "Initial-Pass1",
        &["-a", "Initial-Pass1", "-s", "Ab1-"],
    );
    assert!(rc != 0 && out.contains("(19)"), "{out}");
    assert!(out.contains("error=6"), "passwordTooShort: {out}");
    let (rc, out) = passwd_with_policy(
        &server,
        "Initial-Pass1",
        &["-a", "Initial-Pass1", "-s", "Initial-Pass1"],
    );
    assert!(rc != 0 && out.contains("(19)"), "{out}");
    assert!(out.contains("error=8"), "passwordInHistory: {out}");
    let (rc, out) = passwd_with_policy(&server, "Initial-Pass1", &["-s", "Second-Pass2"]);
    assert!(rc != 0 && out.contains("(50)"), "{out}");
    assert!(out.contains("error=4"), "mustSupplyOldPassword: {out}");
    // Without the control asked for, no control comes back.
    let (rc, out) = change_own(&server, "Initial-Pass1", "Ab1-");
    assert!(rc != 0 && !out.contains("ppolicy"), "{out}");
    // A modify is answered the same way (ldapmodify prints the control).
    let ldif = format!(
        "dn: {USER}\nchangetype: modify\ndelete: userPassword\nuserPassword: Initial-Pass1\n-\nadd: userPassword\nuserPassword: Ab1-\n"
    );
    let (rc, out) = tool(
        &server,
        "ldapmodify",
        &["-D", USER, "-w", "Initial-Pass1"],
        &["-e", "ppolicy"],
        Some(&ldif),
    );
    assert_eq!(rc, 19, "{out}");
    assert!(out.contains("error=6"), "{out}");
}

/// Issue 44, medium 8: `min_age_secs` (pwdMinAge) holds a user's next
/// change back; `allow_user_change = false` (pwdAllowUserChange) leaves
/// passwords to the administrator.
#[test]
fn users_change_passwords_only_when_the_policy_allows() {
    let server = server_with("min_age_secs = 3600");
    let (rc, out) = passwd_with_policy(
        &server,
        "Initial-Pass1",
        &["-a", "Initial-Pass1", "-s", "Second-Pass2"],
    );
    assert!(rc != 0 && out.contains("(19)"), "{out}");
    assert!(
        out.contains("error=7") && out.contains("too young"),
        "passwordTooYoung: {out}"
    );
    let (rc, out) = admin_tool(&server, "ldappasswd", &["-s", "Second-Pass2", USER], None);
    assert_eq!(rc, 0, "the administrator is not held back: {out}");
    drop(server);

    let server = server_with("allow_user_change = false");
    let (rc, out) = passwd_with_policy(
        &server,
        "Initial-Pass1",
        &["-a", "Initial-Pass1", "-s", "Second-Pass2"],
    );
    assert!(rc != 0 && out.contains("(50)"), "{out}");
    assert!(out.contains("error=3"), "passwordModNotAllowed: {out}");
    let (rc, out) = admin_tool(&server, "ldappasswd", &["-s", "Second-Pass2", USER], None);
    assert_eq!(rc, 0, "{out}");
    assert_eq!(whoami_with_policy(&server, "Second-Pass2").0, 0);
}

/// Issue 44, medium 8: under `must_change` (pwdMustChange) the
/// administrator's reset marks the entry `pwdReset: TRUE`; a bind with
/// it succeeds with changeAfterReset, and that session may do nothing
/// but change the password until it is changed, as in slapd.
#[test]
fn a_reset_password_must_be_changed_before_anything_else() {
    let server = Server::start(&format!(
        "[directory]\nproxy_authorizers = [\"dn:{USER}\"]\n[password_policy]\nmust_change = true\nmin_age_secs = 3600\n"
    ));
    add_pat(&server);
    let (rc, out) = admin_tool(&server, "ldappasswd", &["-s", "Reset-Pass1", USER], None);
    assert_eq!(rc, 0, "{out}");
    assert!(state_of(&server, &["pwdReset"]).contains("pwdReset: TRUE"));
    let (rc, out) = whoami_with_policy(&server, "Reset-Pass1");
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("Password must be changed"), "{out}");
    let (rc, out) = tool(
        &server,
        "ldapsearch",
        &["-D", USER, "-w", "Reset-Pass1"],
        &["-e", "ppolicy", "-b", USER, "-s", "base"],
        None,
    );
    assert_eq!(rc, 50, "{out}");
    assert!(
        out.contains("restricted to bind/unbind/abandon/StartTLS/modify password"),
        "{out}"
    );
    // Nor as another identity: the restriction is the bound user's.
    let (rc, out) = tool(
        &server,
        "ldapsearch",
        &["-D", USER, "-w", "Reset-Pass1"],
        &[
            "-e",
            "!authzid=dn:dc=example,dc=com",
            "-b",
            USER,
            "-s",
            "base",
        ],
        None,
    );
    assert_eq!(rc, 50, "{out}");
    assert!(out.contains("restricted"), "{out}");
    // The user's own change is allowed (the minimum age does not hold a
    // reset back) and lifts the mark.
    let (rc, out) = change_own(&server, "Reset-Pass1", "Mine-Pass2");
    assert_eq!(rc, 0, "{out}");
    assert!(!state_of(&server, &["pwdReset"]).contains("pwdReset: "));
    let (rc, out) = tool(
        &server,
        "ldapsearch",
        &["-D", USER, "-w", "Mine-Pass2"],
        &["-b", USER, "-s", "base", "uid"],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    // In one session: the restricted bind, a modify of the password alone,
    // then anything (ldapmodify sends its changes on one connection).
    admin_tool(&server, "ldappasswd", &["-s", "Reset-Pass3", USER], None);
    let ldif = format!(
        "dn: {USER}\nchangetype: modify\nreplace: userPassword\nuserPassword: Mine-Pass4\n\n\
         dn: {USER}\nchangetype: modify\nreplace: description\ndescription: changed\n"
    );
    let (rc, out) = tool(
        &server,
        "ldapmodify",
        &["-D", USER, "-w", "Reset-Pass3"],
        &[],
        Some(&ldif),
    );
    // The second modify is refused by the default access rules (a user
    // writes only its password), not by the reset: 50 either way, so
    // the message tells them apart.
    assert_eq!(rc, 50, "{out}");
    assert!(
        !out.contains("restricted"),
        "the change lifted the restriction: {out}"
    );
}

/// Issue 44, medium 8: an expired password still binds `grace_logins`
/// times (pwdGraceAuthNLimit), each warned with the logins left and
/// recorded in `pwdGraceUseTime`; then it is refused.
#[test]
fn an_expired_password_allows_its_grace_logins() {
    let server = server_with("max_age_secs = 3\ngrace_logins = 2");
    std::thread::sleep(std::time::Duration::from_millis(3200));
    let (rc, out) = whoami_with_policy(&server, "Initial-Pass1");
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("1 grace logins remain"), "{out}");
    let (rc, out) = whoami_with_policy(&server, "Initial-Pass1");
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("0 grace logins remain"), "{out}");
    let (rc, out) = whoami_with_policy(&server, "Initial-Pass1");
    assert_eq!(rc, 49, "{out}");
    assert!(out.contains("Password expired"), "{out}");
    let used = state_of(&server, &["pwdGraceUseTime"]);
    assert_eq!(used.matches("pwdGraceUseTime: ").count(), 2, "{used}");
    // The administrator's reset renews the password and forgets them.
    let (rc, out) = admin_tool(&server, "ldappasswd", &["-s", "Renewed-Pass2", USER], None);
    assert_eq!(rc, 0, "{out}");
    assert!(!state_of(&server, &["pwdGraceUseTime"]).contains("pwdGraceUseTime: "));
}

/// Issue 44, medium 8: an entry's `pwdPolicySubentry` names the policy
/// in force for it, a `pwdPolicy` entry read as slapd reads it; the
/// configured policy is the default for the others.
#[test]
fn an_entrys_policy_subentry_is_the_policy_in_force() {
    let server = server_with("");
    let policy = "dn: cn=strict,dc=example,dc=com\nobjectClass: device\nobjectClass: pwdPolicy\ncn: strict\n\
                  pwdAttribute: userPassword\npwdCheckQuality: 2\npwdMinLength: 12\npwdLockout: TRUE\npwdMaxFailure: 2\n";
    let (rc, out) = admin_tool(&server, "ldapadd", &[], Some(policy));
    assert_eq!(rc, 0, "{out}");
    let (rc, out) = change_own(&server, "Initial-Pass1", "Short-Pass2");
    assert_eq!(rc, 0, "no rules by default: {out}");
    let name = format!(
        "dn: {USER}\nchangetype: modify\nadd: pwdPolicySubentry\npwdPolicySubentry: cn=strict,dc=example,dc=com\n"
    );
    let (rc, out) = admin_tool(&server, "ldapmodify", &[], Some(&name));
    assert_eq!(rc, 0, "{out}");
    let (rc, out) = passwd_with_policy(
        &server,
        "Short-Pass2",
        &["-a", "Short-Pass2", "-s", "Short-Pass3"],
    );
    assert!(
        rc != 0 && out.contains("(19)") && out.contains("error=6"),
        "{out}"
    );
    assert!(out.contains("pwdMinLength"), "{out}");
    // Its lockout applies: two failures lock the entry.
    for _ in 0..2 {
        assert_eq!(whoami_with_policy(&server, "wrong").0, 49);
    }
    let (rc, out) = whoami_with_policy(&server, "Short-Pass2");
    assert!(rc == 49 && out.contains("Account locked"), "{out}");
}
