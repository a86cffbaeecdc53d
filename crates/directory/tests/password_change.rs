//! Password Modify (RFC 3062) for a user changing its own password: the
//! old password is checked against what is stored when the change is
//! built, and the change applies only if that value is still stored.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::sync::Arc;

use meridian_directory::clock::SystemClock;
use meridian_directory::{Limits, password};
use meridian_model::dn::Dn;
use meridian_model::modify::{ModOp, Modification};
use meridian_proto::ResultCode;
use meridian_store::Command;
use support::{ADMIN_DN, add};

#[tokio::test]
async fn a_password_changed_meanwhile_fails_the_checked_change() {
    let (d, schema) = support::directory(Arc::new(SystemClock), Limits::default());
    let admin = d.identity_for(Dn::parse(ADMIN_DN.as_bytes(), &schema).unwrap());
    let suffix: &[(&str, &[&str])] = &[("objectClass", &["domain"]), ("dc", &["example"])];
    assert_eq!(
        add(&d, &admin, "dc=example,dc=com", suffix).await,
        ResultCode::SUCCESS
    );
    let dave = "uid=dave,dc=example,dc=com";
    let entry: &[(&str, &[&str])] = &[
        ("objectClass", &["account", "simpleSecurityObject"]),
        ("uid", &["dave"]),
        ("userPassword", &["one"]),
    ];
    assert_eq!(add(&d, &admin, dave, entry).await, ResultCode::SUCCESS);
    let dave_dn = Dn::parse(dave.as_bytes(), &schema).unwrap();
    let user = d.identity_for(dave_dn.clone());
    let replace = |value: &str| Command::Modify {
        dn: dave_dn.clone(),
        changes: vec![Modification {
            op: ModOp::Replace,
            attr: "userPassword".into(),
            values: vec![value.as_bytes().to_vec()],
        }],
        operational: vec![],
        permissive: false,
    };

    // Dave proves "one", then the administrator replaces it before
    // Dave's change applies: Dave's change must not apply.
    let change = d
        .prepare_password_modify(&user, None, Some(b"one"), Some(b"two"))
        .unwrap();
    let command = change.into_command(&d, true).unwrap();
    assert_eq!(d.execute(replace("other")).await.code, ResultCode::SUCCESS);
    assert_eq!(d.execute(command).await.code, ResultCode::ASSERTION_FAILED);
    let stored = d.user_passwords(&dave_dn).unwrap().unwrap();
    assert_eq!(stored, vec![b"other".to_vec()]);

    // A wrong old password is refused before any write.
    let change = d
        .prepare_password_modify(&user, None, Some(b"one"), Some(b"two"))
        .unwrap();
    // (unwillingToPerform, as slapd answers it.)
    assert_eq!(
        change.into_command(&d, true).unwrap_err().code,
        ResultCode::UNWILLING_TO_PERFORM
    );

    // Checked against the value stored now, the change applies.
    let change = d
        .prepare_password_modify(&user, None, Some(b"other"), Some(b"two"))
        .unwrap();
    let command = change.into_command(&d, true).unwrap();
    assert_eq!(d.execute(command).await.code, ResultCode::SUCCESS);
    let stored = d.user_passwords(&dave_dn).unwrap().unwrap();
    assert!(
        password::verify(&stored[0], b"two", false, &password::HashBounds::default()).matched(),
        "{stored:?}"
    );
}
