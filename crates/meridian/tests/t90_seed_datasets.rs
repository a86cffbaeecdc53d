//! The seed data sets at their full size, loaded with `meridian import`
//! and served: 100,000 inetOrgPerson entries with an 8-byte carLicense
//! under one container (seed 000), and posixAccount users under
//! ou=People (seed 002) looked up the way a Linux host's NSS does, by uid
//! and by uidNumber.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::fmt::Write as _;

use support::{ADMIN_DN, ADMIN_PASSWORD, Server, temp_dir, tool};

const ENTRIES: usize = 100_000;

fn import(data: &std::path::Path, ldif: &str) {
    let work = data.parent().unwrap();
    let file = work.join("seed.ldif");
    std::fs::write(&file, ldif).unwrap();
    let summary = support::import(&file, data);
    assert!(
        summary.contains(&format!("imported {} entries", ENTRIES + 2)),
        "{summary}"
    );
}

fn search(server: &Server, base: &str, filter: &str, attrs: &[&str]) -> String {
    let mut extra = vec!["-LLL", "-z", "0", "-b", base, filter];
    extra.extend_from_slice(attrs);
    let (rc, out) = tool(
        server,
        "ldapsearch",
        &["-D", ADMIN_DN, "-w", ADMIN_PASSWORD],
        &extra,
        None,
    );
    assert_eq!(rc, 0, "{out}");
    out
}

const BASE: &str = "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\n\
dc: example\no: Example\n\n";

#[test]
fn seed_000_one_hundred_thousand_people_with_car_licenses() {
    let work = temp_dir("seed000");
    let data = work.join("data");
    let mut ldif = format!(
        "{BASE}dn: ou=People,dc=example,dc=com\nobjectClass: organizationalUnit\nou: People\n\n"
    );
    for i in 0..ENTRIES {
        writeln!(
            ldif,
            "dn: uid=user{i},ou=People,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: user{i}\n\
             cn: User {i}\nsn: S{i}\ncarLicense: {:08}\n",
            i * 7 % 100_000_000
        )
        .unwrap();
    }
    import(&data, &ldif);
    let server = Server::start_with("", Some(ADMIN_PASSWORD), Some(data));
    // Indexed (uid) and unindexed (carLicense) lookups, and the count.
    let out = search(
        &server,
        "ou=People,dc=example,dc=com",
        "(uid=user77777)",
        &["carLicense"],
    );
    assert_eq!(
        out,
        "dn: uid=user77777,ou=People,dc=example,dc=com\ncarLicense: 00544439\n\n"
    );
    let out = search(
        &server,
        "dc=example,dc=com",
        "(carLicense=00544439)",
        &["1.1"],
    );
    assert_eq!(
        out.lines().filter(|l| l.starts_with("dn:")).count(),
        1,
        "{out}"
    );
    let out = search(
        &server,
        "dc=example,dc=com",
        "(objectClass=inetOrgPerson)",
        &["1.1"],
    );
    assert_eq!(
        out.lines().filter(|l| l.starts_with("dn:")).count(),
        ENTRIES
    );
    drop(server);
    std::fs::remove_dir_all(work).unwrap();
}

#[test]
fn seed_002_posix_accounts_resolve_by_uid_and_uid_number() {
    let work = temp_dir("seed002");
    let data = work.join("data");
    let mut ldif = format!(
        "{BASE}dn: ou=People,dc=example,dc=com\nobjectClass: organizationalUnit\nou: People\n\n"
    );
    for i in 0..ENTRIES {
        writeln!(
            ldif,
            "dn: uid=u{i},ou=People,dc=example,dc=com\nobjectClass: account\nobjectClass: posixAccount\n\
             uid: u{i}\ncn: u{i}\nuidNumber: {}\ngidNumber: 100\nhomeDirectory: /home/u{i}\nloginShell: /bin/sh\n",
            10_000 + i
        )
        .unwrap();
    }
    import(&data, &ldif);
    let server = Server::start_with("", Some(ADMIN_PASSWORD), Some(data));
    // getpwnam and getpwuid, as nss-ldap / sssd ask them.
    let passwd = [
        "uid",
        "uidNumber",
        "gidNumber",
        "homeDirectory",
        "loginShell",
    ];
    let by_name = search(
        &server,
        "ou=People,dc=example,dc=com",
        "(&(objectClass=posixAccount)(uid=u4242))",
        &passwd,
    );
    let by_number = search(
        &server,
        "ou=People,dc=example,dc=com",
        "(&(objectClass=posixAccount)(uidNumber=14242))",
        &passwd,
    );
    assert_eq!(by_name, by_number);
    assert_eq!(
        by_name,
        "dn: uid=u4242,ou=People,dc=example,dc=com\nuid: u4242\nuidNumber: 14242\ngidNumber: 100\n\
         homeDirectory: /home/u4242\nloginShell: /bin/sh\n\n"
    );
    // An ordering match over the numbers: the last 10 accounts.
    let out = search(
        &server,
        "dc=example,dc=com",
        "(uidNumber>=109990)",
        &["1.1"],
    );
    assert_eq!(
        out.lines().filter(|l| l.starts_with("dn:")).count(),
        10,
        "{out}"
    );
    drop(server);
    std::fs::remove_dir_all(work).unwrap();
}
