//! Users: passwords hashed on write ({ARGON2}), binds with them and with
//! hashes made by OpenLDAP's slappasswd ({SSHA}), what a bound user may
//! read and write.

// Tests time out their waits: they read the clock directly.
#![allow(clippy::disallowed_methods)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::process::Command;

use support::*;

/// The userPassword value stored for `dn`, as the administrator reads it.
fn stored_password(server: &Server, dn: &str) -> Vec<u8> {
    let admin = ["-D", ADMIN_DN, "-w", ADMIN_PASSWORD];
    let (rc, out) = tool(
        server,
        "ldapsearch",
        &admin,
        &["-LLL", "-b", dn, "-s", "base", "userPassword"],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    let encoded = out
        .lines()
        .find_map(|l| l.strip_prefix("userPassword:: "))
        .unwrap_or_default();
    meridian_ldif::base64::decode(encoded.as_bytes()).unwrap()
}

#[test]
fn users_bind_with_hashed_passwords_and_read_but_not_write() {
    let server = Server::start("");
    let admin = ["-D", ADMIN_DN, "-w", ADMIN_PASSWORD];
    let ssha = Command::new("slappasswd")
        .args(["-s", "imported", "-h", "{SSHA}"])
        .output()
        .unwrap();
    assert!(ssha.status.success(), "slappasswd missing (install slapd)");
    let ssha = text(&ssha.stdout).trim().to_owned();
    let ldif = format!(
        "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: x\n\n\
         dn: uid=alice,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: alice\ncn: Alice\nsn: A\nuserPassword: wonderland\n\n\
         dn: uid=bob,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: bob\ncn: Bob\nsn: B\nuserPassword: {ssha}\n"
    );
    let (rc, out) = tool(&server, "ldapadd", &admin, &[], Some(&ldif));
    assert_eq!(rc, 0, "{out}");

    // Stored hashed; the administrator sees the hash, never the clear text.
    let decoded = stored_password(&server, "uid=alice,dc=example,dc=com");
    assert!(
        decoded.starts_with(b"{ARGON2}$argon2id$"),
        "{}",
        text(&decoded)
    );

    // Binds: our hash, slappasswd's hash, wrong password, unknown DN.
    let alice = ["-D", "uid=alice,dc=example,dc=com", "-w", "wonderland"];
    let (rc, out) = tool(&server, "ldapwhoami", &alice, &[], None);
    assert_eq!((rc, out.trim()), (0, "dn:uid=alice,dc=example,dc=com"));
    let (rc, out) = tool(
        &server,
        "ldapwhoami",
        &["-D", "UID=Bob,DC=Example,DC=com", "-w", "imported"],
        &[],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    for (dn, pw) in [
        ("uid=alice,dc=example,dc=com", "wrong"),
        ("uid=nobody,dc=example,dc=com", "x"),
        ("uid=bob,dc=example,dc=com", ssha.as_str()),
    ] {
        let (rc, out) = tool(&server, "ldapwhoami", &["-D", dn, "-w", pw], &[], None);
        assert_eq!(rc, 49, "{dn}: {out}");
    }

    // A user reads the tree, without anyone's userPassword, and may not write.
    let (rc, out) = tool(
        &server,
        "ldapsearch",
        &alice,
        &["-LLL", "-b", "dc=example,dc=com", "(uid=*)", "*"],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    assert!(
        out.contains("dn: uid=bob,dc=example,dc=com") && !out.contains("userPassword"),
        "{out}"
    );
    let (rc, out) = tool(
        &server,
        "ldapmodify",
        &alice,
        &[],
        Some("dn: uid=bob,dc=example,dc=com\nchangetype: modify\nreplace: sn\nsn: X\n"),
    );
    assert_eq!(rc, 50, "{out}");

    // Changing a password through modify hashes the new one too.
    let (rc, out) = tool(
        &server,
        "ldapmodify",
        &admin,
        &[],
        Some(
            "dn: uid=alice,dc=example,dc=com\nchangetype: modify\nreplace: userPassword\nuserPassword: looking-glass\n",
        ),
    );
    assert_eq!(rc, 0, "{out}");
    let (rc, _) = tool(
        &server,
        "ldapwhoami",
        &["-D", "uid=alice,dc=example,dc=com", "-w", "looking-glass"],
        &[],
        None,
    );
    assert_eq!(rc, 0);
    let (rc, _) = tool(&server, "ldapwhoami", &alice, &[], None);
    assert_eq!(rc, 49);

    // Password Modify (ldappasswd): the administrator for anyone, with a
    // generated password when none is given; a user for itself (an old
    // password given is checked; whether one is needed is
    // password_policy.safe_modify, t34).
    let (rc, out) = tool(
        &server,
        "ldappasswd",
        &admin,
        &["-s", "builder", "uid=bob,dc=example,dc=com"],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    let (rc, _) = tool(
        &server,
        "ldapwhoami",
        &["-D", "uid=bob,dc=example,dc=com", "-w", "builder"],
        &[],
        None,
    );
    assert_eq!(rc, 0);
    let (rc, out) = tool(
        &server,
        "ldappasswd",
        &admin,
        &["uid=bob,dc=example,dc=com"],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    let generated = out
        .lines()
        .find_map(|l| l.strip_prefix("New password: "))
        .unwrap_or_else(|| panic!("{out}"))
        .trim()
        .to_owned();
    let (rc, _) = tool(
        &server,
        "ldapwhoami",
        &["-D", "uid=bob,dc=example,dc=com", "-w", &generated],
        &[],
        None,
    );
    assert_eq!(rc, 0);
    let alice = ["-D", "uid=alice,dc=example,dc=com", "-w", "looking-glass"];
    // ldappasswd exits 1 on any failure and prints the result code.
    for (extra, code) in [
        // A wrong old password: unwillingToPerform, as slapd answers.
        (vec!["-a", "wrong", "-s", "x"], "(53)"),
        (
            vec![
                "-a",
                "looking-glass",
                "-s",
                "x",
                "uid=bob,dc=example,dc=com",
            ],
            "(50)",
        ),
    ] {
        let (rc, out) = tool(&server, "ldappasswd", &alice, &extra, None);
        assert!(rc != 0 && out.contains(code), "{extra:?}: {out}");
    }
    let (rc, out) = tool(
        &server,
        "ldappasswd",
        &alice,
        &["-a", "looking-glass", "-s", "rabbit-hole"],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    let (rc, _) = tool(
        &server,
        "ldapwhoami",
        &["-D", "uid=alice,dc=example,dc=com", "-w", "rabbit-hole"],
        &[],
        None,
    );
    assert_eq!(rc, 0);
}

/// Rules in the config decide: first matching rule, first matching
/// clause; group membership comes from the directory itself.
#[test]
fn configured_access_rules_decide_reads_compares_and_writes() {
    let people = "ou=People,dc=example,dc=com";
    let server = Server::start(&format!(
        r#"
[[access]]
to = "subtree:ou=Staff,{people}"
by = [ {{ who = "users", grant = "read" }},
       {{ who = "*", grant = "search" }} ]

[[access]]
to = "subtree:{people}"
attrs = ["telephoneNumber"]
by = [ {{ who = "self", grant = "write" }},
       {{ who = "group:cn=HR,dc=example,dc=com", grant = "write" }},
       {{ who = "users", grant = "compare" }} ]

[[access]]
to = "subtree:{people}"
by = [ {{ who = "group:cn=HR,dc=example,dc=com", grant = "write" }},
       {{ who = "*", grant = "read" }} ]

[[access]]
to = "*"
by = [ {{ who = "users", grant = "read" }} ]
"#
    ));
    let admin = ["-D", ADMIN_DN, "-w", ADMIN_PASSWORD];
    let ldif = format!(
        "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: x\n\n\
         dn: {people}\nobjectClass: organizationalUnit\nou: People\n\n\
         dn: uid=alice,{people}\nobjectClass: inetOrgPerson\nuid: alice\ncn: Alice\nsn: A\ntelephoneNumber: 111\nuserPassword: wonderland\n\n\
         dn: uid=bob,{people}\nobjectClass: inetOrgPerson\nuid: bob\ncn: Bob\nsn: B\ntelephoneNumber: 222\nuserPassword: builder\n\n\
         dn: cn=HR,dc=example,dc=com\nobjectClass: groupOfNames\ncn: HR\nmember: UID=Bob,{people}\n\n\
         dn: uid=dave,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: dave\ncn: Dave\nsn: D\nuserPassword: elsewhere\n\n\
         dn: ou=Staff,{people}\nobjectClass: organizationalUnit\nou: Staff\n\n\
         dn: uid=carol,ou=Staff,{people}\nobjectClass: inetOrgPerson\nuid: carol\ncn: Carol\nsn: C\n"
    );
    let (rc, out) = tool(&server, "ldapadd", &admin, &[], Some(&ldif));
    assert_eq!(rc, 0, "{out}");
    let alice = [
        "-D",
        "uid=alice,ou=People,dc=example,dc=com",
        "-w",
        "wonderland",
    ];
    let bob = ["-D", "uid=bob,ou=People,dc=example,dc=com", "-w", "builder"];
    let search = |bind: &[&str], base: &str, filter: &str| {
        let (rc, out) = tool(
            &server,
            "ldapsearch",
            bind,
            &["-LLL", "-b", base, filter],
            None,
        );
        assert_eq!(rc, 0, "{filter}: {out}");
        out
    };

    // Binding needs anonymous `auth` on userPassword: People grant it
    // (read), the catch-all rule does not, so dave cannot bind.
    let dave = ["-D", "uid=dave,dc=example,dc=com", "-w", "elsewhere"];
    let (rc, out) = tool(&server, "ldapwhoami", &dave, &[], None);
    assert_eq!(rc, 49, "{out}");

    // Anonymous reads People without telephone numbers, cannot find
    // entries by them, and sees nothing outside People.
    let out = search(&[], people, "(objectClass=*)");
    assert!(
        out.contains("dn: uid=alice,") && out.contains("sn: B"),
        "{out}"
    );
    assert!(!out.contains("telephoneNumber"), "{out}");
    // Entries in scope that anonymous may search but not read are left
    // out, whatever the filter; users read them.
    for filter in ["(objectClass=*)", "(uid=carol)", "(sn=C)"] {
        let out = search(&[], people, filter);
        assert!(!out.contains("carol") && !out.contains("Staff"), "{out}");
        assert!(search(&alice, people, filter).contains("dn: uid=carol,"));
    }
    // Entries anonymous may not search do not exist for it: as a search
    // base, or to compare, it gets noSuchObject (as slapd answers), not
    // a refusal that would give them away.
    for (tool_name, extra) in [
        (
            "ldapsearch",
            vec!["-b", "dc=example,dc=com", "(objectClass=*)"],
        ),
        ("ldapcompare", vec!["cn=HR,dc=example,dc=com", "cn:HR"]),
    ] {
        let (rc, out) = tool(&server, tool_name, &[], &extra, None);
        assert_eq!(rc, 32, "{tool_name}: {out}");
        assert!(!out.contains("dn: "), "{out}");
    }
    // matchedDN names only ancestors the caller may see: anonymous sees
    // People but neither cn=HR nor the suffix entry.
    let matched = |dn: &str| {
        let (rc, out) = tool(&server, "ldapcompare", &[], &[dn, "cn:x"], None);
        assert_eq!(rc, 32, "{out}");
        out.lines()
            .find_map(|l| l.strip_prefix("Matched DN: "))
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(matched("uid=nobody,ou=People,dc=example,dc=com"), people);
    assert_eq!(matched("cn=nobody,cn=HR,dc=example,dc=com"), "");
    // ... exactly what a missing entry gets, matchedDN included.
    let compare = |dn: &str| tool(&server, "ldapcompare", &[], &[dn, "cn:HR"], None).1;
    assert_eq!(
        compare("cn=HR,dc=example,dc=com").replace("cn=HR", "cn=X"),
        compare("cn=X,dc=example,dc=com")
    );
    assert!(!search(&[], people, "(telephoneNumber=111)").contains("dn:"));
    // Alice: her own number, not Bob's; compare but not search on his.
    let out = search(&alice, people, "(uid=*)");
    assert!(
        out.contains("telephoneNumber: 111") && !out.contains("telephoneNumber: 222"),
        "{out}"
    );
    assert!(!search(&alice, people, "(telephoneNumber=222)").contains("dn:"));
    let (rc, out) = tool(
        &server,
        "ldapcompare",
        &alice,
        &["uid=bob,ou=People,dc=example,dc=com", "telephoneNumber:222"],
        None,
    );
    assert_eq!(rc, 6, "{out}");
    let (rc, out) = tool(
        &server,
        "ldapcompare",
        &[],
        &["uid=bob,ou=People,dc=example,dc=com", "telephoneNumber:222"],
        None,
    );
    assert_eq!(rc, 50, "{out}");
    // Group members (uid=bob is in HR) see everything in People.
    assert!(search(&bob, people, "(telephoneNumber=111)").contains("dn: uid=alice,"));

    let modify = |bind: &[&str], dn: &str, attr: &str, value: &str| {
        let change = format!("dn: {dn}\nchangetype: modify\nreplace: {attr}\n{attr}: {value}\n");
        let (rc, out) = tool(&server, "ldapmodify", bind, &[], Some(&change));
        (rc, out)
    };
    let alice_dn = "uid=alice,ou=People,dc=example,dc=com";
    let bob_dn = "uid=bob,ou=People,dc=example,dc=com";
    assert_eq!(modify(&alice, alice_dn, "telephoneNumber", "112").0, 0);
    let (rc, out) = modify(&alice, bob_dn, "telephoneNumber", "1");
    assert_eq!(rc, 50, "{out}");
    assert!(
        out.contains("write access to attribute telephoneNumber"),
        "{out}"
    );
    assert_eq!(modify(&alice, alice_dn, "sn", "Z").0, 50);
    assert_eq!(modify(&bob, alice_dn, "sn", "Liddell").0, 0);
    assert_eq!(modify(&bob, alice_dn, "telephoneNumber", "113").0, 0);
    // Outside People, no one but the administrator writes.
    assert_eq!(
        modify(&bob, "cn=HR,dc=example,dc=com", "description", "x").0,
        50
    );
    let out = search(&admin, people, "(uid=alice)");
    assert!(
        out.contains("sn: Liddell") && out.contains("telephoneNumber: 113"),
        "{out}"
    );

    // Password resets follow write access to userPassword.
    let (rc, out) = tool(&server, "ldappasswd", &alice, &["-s", "x", bob_dn], None);
    assert!(rc != 0 && out.contains("(50)"), "{out}");
    let (rc, out) = tool(
        &server,
        "ldappasswd",
        &bob,
        &["-s", "reset", alice_dn],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    let (rc, out) = tool(
        &server,
        "ldapwhoami",
        &["-D", alice_dn, "-w", "reset"],
        &[],
        None,
    );
    assert_eq!(rc, 0, "{out}");
}

/// `directory.size_limit` bounds what a user gets from one search, all
/// pages of a paged search together (as slapd does); the administrator
/// is exempt.
#[test]
fn the_size_limit_bounds_a_whole_paged_search() {
    let server = Server::start("[directory]\nsize_limit = 5\n");
    let admin = ["-D", ADMIN_DN, "-w", ADMIN_PASSWORD];
    let mut ldif = String::from(
        "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: x\n\n\
         dn: uid=reader,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: reader\ncn: R\nsn: R\nuserPassword: pw\n",
    );
    for i in 0..12 {
        ldif.push_str(&format!(
            "\ndn: cn=p{i},dc=example,dc=com\nobjectClass: person\ncn: p{i}\nsn: S\n"
        ));
    }
    let (rc, out) = tool(&server, "ldapadd", &admin, &[], Some(&ldif));
    assert_eq!(rc, 0, "{out}");
    let reader = ["-D", "uid=reader,dc=example,dc=com", "-w", "pw"];
    let people = |bind: &[&str], extra: &[&str]| {
        let mut args = vec!["-LLL", "-b", "dc=example,dc=com"];
        args.extend_from_slice(extra);
        args.extend(["(objectClass=person)", "1.1"]);
        let (rc, out) = tool(&server, "ldapsearch", bind, &args, None);
        (rc, out.matches("dn: ").count())
    };
    // 13 people (the reader is one); ldapsearch exits with the result
    // code: 4 is sizeLimitExceeded.
    assert_eq!(people(&reader, &[]), (4, 5));
    assert_eq!(people(&reader, &["-E", "pr=2/noprompt"]), (4, 5));
    assert_eq!(people(&reader, &["-z", "3"]), (4, 3));
    assert_eq!(people(&admin, &["-E", "pr=2/noprompt"]), (0, 13));
    assert_eq!(people(&admin, &[]), (0, 13));
}

/// The LDIF blocks ldapmodify prints for pre-read and post-read response
/// controls (`# ==> preread` ... `# <== preread`), joined.
fn read_back(out: &str, which: &str) -> String {
    let start = format!("# ==> {which}\n");
    let end = format!("# <== {which}");
    out.split(&start)
        .skip(1)
        .filter_map(|rest| rest.split(&end).next())
        .collect()
}

#[test]
fn pre_and_post_read_controls_show_the_entry_around_the_update() {
    let server = Server::start("");
    let admin = ["-D", ADMIN_DN, "-w", ADMIN_PASSWORD];
    let ldif = "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: x\n\n\
         dn: uid=carol,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: carol\ncn: Carol\nsn: C\n\
         description: before\nuserPassword: secret\n";
    let (rc, out) = tool(&server, "ldapadd", &admin, &[], Some(ldif));
    assert_eq!(rc, 0, "{out}");

    // Add with post-read: the stored entry, operational attributes too.
    let (rc, out) = tool(
        &server,
        "ldapadd",
        &admin,
        &["-e", "postread=cn,entryUUID"],
        Some("dn: uid=dave,dc=example,dc=com\nobjectClass: account\nuid: dave\n"),
    );
    assert_eq!(rc, 0, "{out}");
    let post = read_back(&out, "postread");
    assert!(
        post.contains("dn: uid=dave,dc=example,dc=com\n") && post.contains("entryUUID: "),
        "{out}"
    );

    // Modify with both: the value before and after, read atomically.
    let change = "dn: uid=carol,dc=example,dc=com\nchangetype: modify\nreplace: description\ndescription: after\n";
    let (rc, out) = tool(
        &server,
        "ldapmodify",
        &admin,
        &["-e", "preread=description", "-e", "postread=description"],
        Some(change),
    );
    assert_eq!(rc, 0, "{out}");
    assert_eq!(
        read_back(&out, "preread"),
        "dn: uid=carol,dc=example,dc=com\ndescription: before\n"
    );
    assert_eq!(
        read_back(&out, "postread"),
        "dn: uid=carol,dc=example,dc=com\ndescription: after\n"
    );

    // Rename with post-read: the entry under its new name.
    let rename =
        "dn: uid=dave,dc=example,dc=com\nchangetype: modrdn\nnewrdn: uid=david\ndeleteoldrdn: 1\n";
    let (rc, out) = tool(
        &server,
        "ldapmodify",
        &admin,
        &["-e", "postread=uid"],
        Some(rename),
    );
    assert_eq!(rc, 0, "{out}");
    assert_eq!(
        read_back(&out, "postread"),
        "dn: uid=david,dc=example,dc=com\nuid: david\n"
    );

    // A user reading back its own password change sees no userPassword:
    // it is returned to the administrator only.
    let carol = ["-D", "uid=carol,dc=example,dc=com", "-w", "secret"];
    let change = "dn: uid=carol,dc=example,dc=com\nchangetype: modify\nreplace: userPassword\nuserPassword: newsecret\n";
    let (rc, out) = tool(
        &server,
        "ldapmodify",
        &carol,
        &["-e", "postread=*"],
        Some(change),
    );
    assert_eq!(rc, 0, "{out}");
    let post = read_back(&out, "postread");
    assert!(
        post.contains("uid: carol") && !post.to_lowercase().contains("userpassword"),
        "{out}"
    );

    // Not applicable: refused when critical, ignored when not.
    let delete = "dn: uid=david,dc=example,dc=com\nchangetype: delete\n";
    let (rc, out) = tool(
        &server,
        "ldapmodify",
        &admin,
        &["-e", "!postread"],
        Some(delete),
    );
    assert_eq!(rc, 12, "{out}");
    assert!(out.contains("does not apply to delete"), "{out}");
    let (rc, out) = tool(
        &server,
        "ldapmodify",
        &admin,
        &["-e", "preread=uid", "-e", "postread"],
        Some(delete),
    );
    assert_eq!(rc, 0, "{out}");
    assert_eq!(
        read_back(&out, "preread"),
        "dn: uid=david,dc=example,dc=com\nuid: david\n"
    );
    assert_eq!(read_back(&out, "postread"), "");
    // A failed update returns no control.
    let (rc, out) = tool(
        &server,
        "ldapmodify",
        &admin,
        &["-e", "preread=uid"],
        Some(delete),
    );
    assert_eq!(rc, 32, "{out}");
    assert_eq!(read_back(&out, "preread"), "");

    // Listed in the root DSE.
    let (_, out) = tool(
        &server,
        "ldapsearch",
        &[],
        &["-LLL", "-s", "base", "-b", "", "supportedControl"],
        None,
    );
    assert!(
        out.contains("1.3.6.1.1.13.1") && out.contains("1.3.6.1.1.13.2"),
        "{out}"
    );
}

#[test]
fn proxied_authorization_runs_an_operation_as_another_user() {
    let server = Server::start(
        r#"
[directory]
proxy_authorizers = ["dn:uid=app,dc=example,dc=com"]

[[access]]
to = "*"
attrs = ["userPassword"]
by = [ { who = "self", grant = "write" }, { who = "anonymous", grant = "auth" } ]

[[access]]
to = "subtree:ou=Secret,dc=example,dc=com"
by = [ { who = "dn:uid=alice,dc=example,dc=com", grant = "write" } ]

[[access]]
to = "*"
by = [ { who = "users", grant = "read" } ]
"#,
    );
    let admin = ["-D", ADMIN_DN, "-w", ADMIN_PASSWORD];
    let ldif = "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: x\n\n\
         dn: ou=Secret,dc=example,dc=com\nobjectClass: organizationalUnit\nou: Secret\ndescription: hidden\n\n\
         dn: uid=alice,dc=example,dc=com\nobjectClass: account\nobjectClass: simpleSecurityObject\nuid: alice\nuserPassword: a\n\n\
         dn: uid=app,dc=example,dc=com\nobjectClass: account\nobjectClass: simpleSecurityObject\nuid: app\nuserPassword: app\n\n\
         dn: uid=eve,dc=example,dc=com\nobjectClass: account\nobjectClass: simpleSecurityObject\nuid: eve\nuserPassword: eve\n";
    let (rc, out) = tool(&server, "ldapadd", &admin, &[], Some(ldif));
    assert_eq!(rc, 0, "{out}");
    let app = ["-D", "uid=app,dc=example,dc=com", "-w", "app"];
    let as_alice = "!authzid=dn:uid=alice,dc=example,dc=com";
    let secret = [
        "-LLL",
        "-b",
        "ou=Secret,dc=example,dc=com",
        "-s",
        "base",
        "description",
    ];

    // On its own, app may not see ou=Secret; acting as alice, it may.
    let (rc, out) = tool(&server, "ldapsearch", &app, &secret, None);
    assert_eq!(rc, 32, "{out}");
    let mut proxied = vec!["-e", as_alice];
    proxied.extend_from_slice(&secret);
    let (rc, out) = tool(&server, "ldapsearch", &app, &proxied, None);
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("description: hidden"), "{out}");
    // numSubordinates counts only the children the caller could find:
    // app does not learn that ou=Secret exists.
    let count = [
        "-LLL",
        "-b",
        "dc=example,dc=com",
        "-s",
        "base",
        "numSubordinates",
        "hasSubordinates",
    ];
    let (_, out) = tool(&server, "ldapsearch", &app, &count, None);
    assert!(
        out.contains("numSubordinates: 3\n") && out.contains("hasSubordinates: TRUE"),
        "{out}"
    );
    let (_, out) = tool(&server, "ldapsearch", &admin, &count, None);
    assert!(out.contains("numSubordinates: 4\n"), "{out}");
    let (_, out) = tool(
        &server,
        "ldapsearch",
        &app,
        &[
            "-LLL",
            "-b",
            "uid=eve,dc=example,dc=com",
            "-s",
            "base",
            "hasSubordinates",
        ],
        None,
    );
    assert!(out.contains("hasSubordinates: FALSE"), "{out}");
    // Writes too, with alice's rights; WhoAmI answers alice.
    let change = "dn: ou=Secret,dc=example,dc=com\nchangetype: modify\nreplace: description\ndescription: by alice\n";
    // (app may not even see it: noSuchObject, not insufficientAccessRights)
    let (rc, out) = tool(&server, "ldapmodify", &app, &[], Some(change));
    assert_eq!(rc, 32, "{out}");
    let (rc, out) = tool(&server, "ldapmodify", &app, &["-e", as_alice], Some(change));
    assert_eq!(rc, 0, "{out}");
    let (rc, out) = tool(&server, "ldapwhoami", &app, &["-e", as_alice], None);
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("dn:uid=alice,dc=example,dc=com"), "{out}");
    // The proxy lasts one operation: the next is app's again.
    let (rc, out) = tool(&server, "ldapwhoami", &app, &[], None);
    assert!(
        rc == 0 && out.contains("dn:uid=app,dc=example,dc=com"),
        "{out}"
    );

    // Refusals: someone not listed, the administrator as target, a
    // missing entry, a u: authzId, a non-critical control.
    let eve = ["-D", "uid=eve,dc=example,dc=com", "-w", "eve"];
    for (bind, control, code, says) in [
        (&eve, as_alice, 123, "may not use proxied authorization"),
        (
            &app,
            "!authzid=dn:cn=admin,dc=example,dc=com",
            123,
            "administrator",
        ),
        (
            &app,
            "!authzid=dn:uid=nobody,dc=example,dc=com",
            123,
            "no entry",
        ),
        (&app, "!authzid=u:alice", 123, "only dn:"),
    ] {
        let mut args = vec!["-e", control];
        args.extend_from_slice(&secret);
        let (rc, out) = tool(&server, "ldapsearch", bind, &args, None);
        assert_eq!(rc, code, "{control}: {out}");
        assert!(out.contains(says), "{control}: {out}");
    }
    // Not critical (ldapsearch will not send that; our client will).
    let mut client = Client::connect(server.addr);
    let controls = [meridian_proto::controls::Control {
        oid: meridian_proto::controls::oid::PROXIED_AUTHZ_V2,
        critical: false,
        value: Some(b"dn:uid=alice,dc=example,dc=com"),
    }];
    client.send_message(&meridian_proto::LdapMessage {
        message_id: 7,
        op: meridian_proto::ProtocolOp::DelRequest(b"ou=Secret,dc=example,dc=com"),
        controls: meridian_proto::Seq::from_items(&controls),
    });
    client.read_until(|m| match &m.op {
        meridian_proto::ProtocolOp::DelResponse(r) => {
            assert_eq!(r.code, meridian_proto::ResultCode::PROTOCOL_ERROR);
            assert!(String::from_utf8_lossy(r.message).contains("must be critical"));
            true
        }
        other => panic!("{other:?}"),
    });
    // The administrator may act as anyone (but the administrator).
    let mut args = vec!["-e", "!authzid=dn:uid=eve,dc=example,dc=com"];
    args.extend_from_slice(&secret);
    let (rc, out) = tool(&server, "ldapsearch", &admin, &args, None);
    assert_eq!(rc, 32, "eve may not see ou=Secret: {out}");
}

#[test]
fn crypt_passwords_made_by_openssl_log_in() {
    let server = Server::start("");
    let admin = ["-D", ADMIN_DN, "-w", ADMIN_PASSWORD];
    let mut ldif = String::from(
        "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: x\n\n",
    );
    // SHA-512, SHA-256 and MD5 crypt, as /etc/shadow and slapd know them.
    for (uid, method) in [("sha512", "-6"), ("sha256", "-5"), ("md5", "-1")] {
        let hash = Command::new("openssl")
            .args(["passwd", method, "crypted secret"])
            .output()
            .expect("openssl (scripts/test.sh installs it)");
        let hash = text(&hash.stdout).trim().to_owned();
        ldif.push_str(&format!(
            "dn: uid={uid},dc=example,dc=com\nobjectClass: account\nobjectClass: simpleSecurityObject\n\
             uid: {uid}\nuserPassword: {{CRYPT}}{hash}\n\n"
        ));
    }
    let (rc, out) = tool(&server, "ldapadd", &admin, &[], Some(&ldif));
    assert_eq!(rc, 0, "{out}");
    for uid in ["sha512", "sha256", "md5"] {
        let dn = format!("uid={uid},dc=example,dc=com");
        let (rc, out) = whoami(&server, &dn, "crypted secret");
        assert_eq!(rc, 0, "{uid}: {out}");
        let (rc, out) = whoami(&server, &dn, "crypted Secret");
        assert_eq!(rc, 49, "{uid}: {out}");
    }
}

#[test]
fn dynamic_entries_are_refreshed_with_ldapexop_and_swept_when_they_expire() {
    let server = Server::start(
        "[directory]\ndynamic_default_ttl_secs = 600\ndynamic_min_ttl_secs = 1\ndynamic_max_ttl_secs = 3600\ndynamic_sweep_secs = 1\n",
    );
    let admin = ["-D", ADMIN_DN, "-w", ADMIN_PASSWORD];
    let ldif = "dn: dc=example,dc=com\nobjectClass: domain\ndc: example\n\n\
                dn: uid=temp,dc=example,dc=com\nobjectClass: account\nobjectClass: dynamicObject\nuid: temp\n";
    let (rc, out) = tool(&server, "ldapadd", &admin, &[], Some(ldif));
    assert_eq!(rc, 0, "{out}");
    let read = [
        "-LLL",
        "-b",
        "uid=temp,dc=example,dc=com",
        "-s",
        "base",
        "entryTtl",
    ];
    let (_, out) = tool(&server, "ldapsearch", &admin, &read, None);
    assert!(out.contains("entryTtl: 600"), "{out}");

    // Refresh within and beyond the bounds (ldapexop prints the TTL granted).
    let refresh = |ttl: &str| {
        tool(
            &server,
            "ldapexop",
            &admin,
            &["refresh", "uid=temp,dc=example,dc=com", ttl],
            None,
        )
    };
    let (rc, out) = refresh("99999");
    assert_eq!(rc, 0, "{out}");
    assert!(out.to_lowercase().contains("newttl=3600"), "{out}");
    let (rc, out) = tool(
        &server,
        "ldapexop",
        &admin,
        &["refresh", "dc=example,dc=com", "60"],
        None,
    );
    assert_ne!(rc, 0, "{out}");
    assert!(out.contains("not a dynamic entry"), "{out}");

    // Listed in the root DSE.
    let (_, out) = tool(
        &server,
        "ldapsearch",
        &[],
        &[
            "-LLL",
            "-s",
            "base",
            "-b",
            "",
            "supportedExtension",
            "dynamicSubtrees",
        ],
        None,
    );
    assert!(
        out.contains("1.3.6.1.4.1.1466.101.119.1")
            && out.contains("dynamicSubtrees: dc=example,dc=com"),
        "{out}"
    );

    // One second left: the sweeper (every second) deletes it.
    let (rc, out) = refresh("1");
    assert_eq!(rc, 0, "{out}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (rc, _) = tool(&server, "ldapsearch", &admin, &read, None);
        if rc == 32 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the expired entry was never deleted"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// A Password Modify is a write like the others: pipelined with a modify
/// of the same password on one connection, the two apply in the order
/// sent, whichever order that is (its slow hashing used to run beside
/// the connection's write sequence, so the later request could land
/// first).
#[test]
fn password_modify_keeps_its_place_among_pipelined_writes() {
    use meridian_proto::extended::{PasswordModifyRequest, oid as ext_oid};
    use meridian_proto::{
        Change, ExtendedRequest, LdapMessage, ModifyOperation, ModifyRequest, PartialAttribute,
        ProtocolOp, Seq,
    };

    let server = Server::start("");
    let admin = ["-D", ADMIN_DN, "-w", ADMIN_PASSWORD];
    let ldif = "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: x\n\n\
                dn: uid=carol,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: carol\ncn: Carol\nsn: C\nuserPassword: first\n";
    let (rc, out) = tool(&server, "ldapadd", &admin, &[], Some(ldif));
    assert_eq!(rc, 0, "{out}");
    let carol = b"uid=carol,dc=example,dc=com";

    let encode_passwd = |id: i32, new: &[u8], out: &mut Vec<u8>| {
        let mut value = Vec::new();
        PasswordModifyRequest {
            user: Some(carol),
            old_password: None,
            new_password: Some(new),
        }
        .encode(&mut value);
        LdapMessage {
            message_id: id,
            op: ProtocolOp::ExtendedRequest(ExtendedRequest {
                name: ext_oid::PASSWORD_MODIFY,
                value: Some(&value),
            }),
            controls: Seq::empty(),
        }
        .encode(out);
    };
    let encode_modify = |id: i32, new: &[u8], out: &mut Vec<u8>| {
        let values = [new];
        let changes = [Change {
            operation: ModifyOperation::Replace,
            modification: PartialAttribute {
                ty: b"userPassword",
                values: Seq::from_items(&values),
            },
        }];
        LdapMessage {
            message_id: id,
            op: ProtocolOp::ModifyRequest(ModifyRequest {
                dn: carol,
                changes: Seq::from_items(&changes),
            }),
            controls: Seq::empty(),
        }
        .encode(out);
    };

    // Reads the two answers (a modify's and a Password Modify's): both
    // must be success.
    let both_succeed = |client: &mut Client| {
        let mut answered = 0;
        client.read_until(|m| {
            match m.op {
                ProtocolOp::ExtendedResponse(r) => assert_eq!(r.result.code.0, 0, "{m:?}"),
                ProtocolOp::ModifyResponse(r) => assert_eq!(r.code.0, 0, "{m:?}"),
                _ => return false,
            }
            answered += 1;
            answered == 2
        });
    };

    // A user changing its own password twice in one pipeline: the
    // Password Modify's old password is the one the modify before it
    // set, so it must be checked after that modify has committed.
    let dn = "uid=carol,dc=example,dc=com";
    let mut client = Client::bound(server.addr, dn, "first");
    let mut bytes = Vec::new();
    encode_modify(2, b"second", &mut bytes);
    let mut value = Vec::new();
    PasswordModifyRequest {
        user: None,
        old_password: Some(b"second"),
        new_password: Some(b"third"),
    }
    .encode(&mut value);
    LdapMessage {
        message_id: 3,
        op: ProtocolOp::ExtendedRequest(ExtendedRequest {
            name: ext_oid::PASSWORD_MODIFY,
            value: Some(&value),
        }),
        controls: Seq::empty(),
    }
    .encode(&mut bytes);
    client.send(&bytes);
    both_succeed(&mut client);
    assert_eq!(whoami(&server, dn, "third").0, 0);
    let (rc, out) = tool(
        &server,
        "ldapmodify",
        &admin,
        &[],
        Some(&format!(
            "dn: {dn}\nchangetype: modify\nreplace: userPassword\nuserPassword: first\n"
        )),
    );
    assert_eq!(rc, 0, "{out}");

    for passwd_first in [true, false] {
        let mut client = Client::admin(server.addr);
        // Both in one write: the server reads them in one pass.
        let mut bytes = Vec::new();
        if passwd_first {
            encode_passwd(2, b"by-passwd", &mut bytes);
            encode_modify(3, b"by-modify", &mut bytes);
        } else {
            encode_modify(2, b"by-modify", &mut bytes);
            encode_passwd(3, b"by-passwd", &mut bytes);
        }
        client.send(&bytes);
        both_succeed(&mut client);
        let (last, overtaken) = if passwd_first {
            ("by-modify", "by-passwd")
        } else {
            ("by-passwd", "by-modify")
        };
        let dn = "uid=carol,dc=example,dc=com";
        assert_eq!(whoami(&server, dn, last).0, 0, "the later write must win");
        assert_ne!(whoami(&server, dn, overtaken).0, 0);
    }
}

/// `directory.password_hash_*` set the cost of new `{ARGON2}` hashes, the
/// administrator's included; binds verify at the cost stored in the hash.
#[test]
fn the_password_hash_cost_is_configurable() {
    let server =
        Server::start("[directory]\npassword_hash_memory_kib = 64\npassword_hash_iterations = 1\n");
    let admin = ["-D", ADMIN_DN, "-w", ADMIN_PASSWORD];
    let ldif = "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: x\n\n\
                dn: uid=dave,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: dave\ncn: Dave\nsn: D\nuserPassword: cheap\n";
    let (rc, out) = tool(&server, "ldapadd", &admin, &[], Some(ldif));
    assert_eq!(rc, 0, "{out}");
    let stored = stored_password(&server, "uid=dave,dc=example,dc=com");
    assert!(
        stored.starts_with(b"{ARGON2}$argon2id$v=19$m=64,t=1,p=1$"),
        "{}",
        text(&stored)
    );
    assert_eq!(whoami(&server, "uid=dave,dc=example,dc=com", "cheap").0, 0);
    assert_ne!(whoami(&server, "uid=dave,dc=example,dc=com", "dear").0, 0);
    assert_eq!(whoami(&server, ADMIN_DN, ADMIN_PASSWORD).0, 0);
}

/// The bind cache (`directory.bind_cache_entries`) answers a repeated
/// bind without the slow hash, but only for the password stored now: a
/// changed password ends the old one's cached success at once, a wrong
/// password is never cached, and with the cache off binds still work.
#[test]
fn a_cached_bind_ends_when_the_password_changes() {
    for config in ["", "[directory]\nbind_cache_entries = 0\n"] {
        let server = Server::start(config);
        let admin = ["-D", ADMIN_DN, "-w", ADMIN_PASSWORD];
        let ldif = "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: x\n\n\
                    dn: uid=erin,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: erin\ncn: Erin\nsn: E\nuserPassword: old-secret\n";
        let (rc, out) = tool(&server, "ldapadd", &admin, &[], Some(ldif));
        assert_eq!(rc, 0, "{out}");
        let dn = "uid=erin,dc=example,dc=com";
        for _ in 0..3 {
            assert_eq!(whoami(&server, dn, "old-secret").0, 0, "{config}");
            assert_eq!(whoami(&server, dn, "wrong").0, 49, "{config}");
            assert_eq!(whoami(&server, ADMIN_DN, ADMIN_PASSWORD).0, 0, "{config}");
        }
        let change = format!(
            "dn: {dn}\nchangetype: modify\nreplace: userPassword\nuserPassword: new-secret\n"
        );
        let (rc, out) = tool(&server, "ldapmodify", &admin, &[], Some(&change));
        assert_eq!(rc, 0, "{out}");
        assert_eq!(whoami(&server, dn, "old-secret").0, 49, "{config}");
        assert_eq!(whoami(&server, dn, "new-secret").0, 0, "{config}");
    }
}

/// Issue 44, severe 2: a user could store a thousand userPassword
/// values, and every bind to its DN (a wrong one from anyone included)
/// then computed a thousand hashes, holding the password pool.
#[test]
fn the_userpassword_values_of_an_entry_are_bounded() {
    let server = Server::start("");
    let admin = ["-D", ADMIN_DN, "-w", ADMIN_PASSWORD];
    let (rc, out) = tool(
        &server,
        "ldapadd",
        &admin,
        &[],
        Some(&with_accounts(&[("erin", "p0")])),
    );
    assert_eq!(rc, 0, "{out}");
    let dn = "uid=erin,dc=example,dc=com";
    let user = ["-D", dn, "-w", "p0"];
    let add = |values: &[String]| {
        let mut change = format!("dn: {dn}\nchangetype: modify\nadd: userPassword\n");
        for v in values {
            change.push_str(&format!("userPassword: {v}\n"));
        }
        tool(&server, "ldapmodify", &user, &[], Some(&change))
    };
    // Eight more, nine in all: refused before any is hashed.
    let clear: Vec<String> = (1..=8).map(|n| format!("clear-{n}")).collect();
    let (rc, out) = add(&clear);
    assert_eq!(rc, 19, "{out}");
    assert!(
        out.contains("at most 8 userPassword values (security.max_password_values)"),
        "{out}"
    );
    // Seven more, eight in all, given hashed: taken, and each binds.
    let hashed: Vec<String> = (1..=7)
        .map(|n| slappasswd(&format!("h{n}"), "{SSHA}"))
        .collect();
    let (rc, out) = add(&hashed);
    assert_eq!(rc, 0, "{out}");
    assert_eq!(whoami(&server, dn, "h7").0, 0);
    assert_eq!(whoami(&server, dn, "p0").0, 0);
    // One at a time does not get past the bound either.
    let (rc, out) = add(&[slappasswd("h8", "{SSHA}")]);
    assert_eq!(rc, 19, "{out}");
    // Deleting in clear text is bounded alike (each is checked against
    // every value held).
    let mut delete = format!("dn: {dn}\nchangetype: modify\ndelete: userPassword\n");
    for n in 0..9 {
        delete.push_str(&format!("userPassword: wrong-{n}\n"));
    }
    let (rc, out) = tool(&server, "ldapmodify", &admin, &[], Some(&delete));
    assert_eq!(rc, 19, "{out}");
    drop(server);

    // The key lowers it, for adds too.
    let server = Server::start("[security]\nmax_password_values = 2\n");
    let mut ldif = with_accounts(&[("erin", "p0")]);
    ldif.push_str(&format!(
        "userPassword: {}\nuserPassword: {}\n",
        hashed[0], hashed[1]
    ));
    let (rc, out) = tool(&server, "ldapadd", &admin, &[], Some(&ldif));
    assert_eq!(rc, 19, "{out}");
    assert!(out.contains("at most 2 userPassword values"), "{out}");
}

#[test]
fn users_migrated_with_md5_hashes_bind() {
    // slappasswd's {MD5} and {SMD5}, as an OpenLDAP directory holds them
    // (issue 27, defect 3: they answered 49).
    let server = Server::start("");
    let admin = ["-D", ADMIN_DN, "-w", ADMIN_PASSWORD];
    let hash = |scheme: &str| slappasswd("migrated", scheme);
    let (md5, smd5) = (hash("{MD5}"), hash("{SMD5}"));
    let ldif = with_accounts(&[("m1", &md5), ("m2", &smd5)]);
    let (rc, out) = tool(&server, "ldapadd", &admin, &[], Some(&ldif));
    assert_eq!(rc, 0, "{out}");
    for uid in ["m1", "m2"] {
        let dn = format!("uid={uid},dc=example,dc=com");
        let (rc, out) = tool(
            &server,
            "ldapwhoami",
            &["-D", &dn, "-w", "migrated"],
            &[],
            None,
        );
        assert_eq!(rc, 0, "{uid}: {out}");
        let (rc, out) = tool(
            &server,
            "ldapwhoami",
            &["-D", &dn, "-w", "wrong"],
            &[],
            None,
        );
        assert_eq!(rc, 49, "{uid}: {out}");
    }
}

#[test]
fn with_rehash_on_bind_a_migrated_hash_becomes_argon2_at_the_next_bind() {
    let hash = |scheme: &str| slappasswd("migrated", scheme);
    let stored = |server: &Server, uid: &str| -> String {
        let (rc, out) = tool(
            server,
            "ldapsearch",
            &["-D", ADMIN_DN, "-w", ADMIN_PASSWORD],
            &[
                "-LLL",
                "-o",
                "ldif-wrap=no",
                "-b",
                &format!("uid={uid},dc=example,dc=com"),
                "-s",
                "base",
                "userPassword",
            ],
            None,
        );
        assert_eq!(rc, 0, "{out}");
        let encoded = out
            .lines()
            .find_map(|l| l.strip_prefix("userPassword:: "))
            .unwrap_or_else(|| panic!("no userPassword in {out}"));
        String::from_utf8(meridian_ldif::base64::decode(encoded.as_bytes()).unwrap()).unwrap()
    };
    for rehash in [true, false] {
        let server = Server::start(&format!("[directory]\nrehash_on_bind = {rehash}\n"));
        let admin = ["-D", ADMIN_DN, "-w", ADMIN_PASSWORD];
        let (md5, ssha) = (hash("{MD5}"), hash("{SSHA}"));
        let ldif = with_accounts(&[("m1", &md5), ("s1", &ssha)]);
        let (rc, out) = tool(&server, "ldapadd", &admin, &[], Some(&ldif));
        assert_eq!(rc, 0, "{out}");
        for (uid, before) in [("m1", &md5), ("s1", &ssha)] {
            let dn = format!("uid={uid},dc=example,dc=com");
            let bind = |password: &str| {
                tool(
                    &server,
                    "ldapwhoami",
                    &["-D", &dn, "-w", password],
                    &[],
                    None,
                )
                .0
            };
            // A wrong password changes nothing.
            assert_eq!(bind("wrong"), 49);
            assert_eq!(&stored(&server, uid), before);
            assert_eq!(bind("migrated"), 0, "{uid}");
            if rehash {
                // Rehashed after the answer: wait for it.
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
                while !stored(&server, uid).starts_with("{ARGON2}") {
                    assert!(std::time::Instant::now() < deadline, "{uid} never rehashed");
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
            } else {
                // Nothing to wait for: whether to rehash is decided before
                // the bind is answered (`ServerContext::rehash`), and with
                // the key off no rehash is started.
                assert_eq!(&stored(&server, uid), before, "rehashed with it off");
            }
            // The same password binds, a wrong one does not.
            assert_eq!(bind("migrated"), 0, "{uid} after rehash");
            assert_eq!(bind("wrong"), 49);
        }
    }
}

#[test]
fn user_password_is_read_only_where_an_operator_rule_naming_it_grants_it() {
    let rules = r#"
[[access]]
to = "*"
attrs = ["userPassword"]
by = [ { who = "dn:uid=sync,dc=example,dc=com", grant = "read" },
       { who = "anonymous", grant = "auth" } ]

[[access]]
to = "*"
by = [ { who = "users", grant = "read" } ]
"#;
    let ldif = &with_accounts(&[("sync", "sync"), ("alice", "alice")]);
    let read_alice = |server: &Server, dn: &str, password: &str| {
        let (rc, out) = tool(
            server,
            "ldapsearch",
            &["-D", dn, "-w", password],
            &[
                "-LLL",
                "-b",
                "uid=alice,dc=example,dc=com",
                "-s",
                "base",
                "*",
            ],
            None,
        );
        assert_eq!(rc, 0, "{out}");
        out
    };
    // An operator's rule naming userPassword: the sync agent reads it,
    // others (alice herself included, granted nothing on it) do not.
    let server = Server::start(rules);
    let admin = ["-D", ADMIN_DN, "-w", ADMIN_PASSWORD];
    let (rc, out) = tool(&server, "ldapadd", &admin, &[], Some(ldif));
    assert_eq!(rc, 0, "{out}");
    let out = read_alice(&server, "uid=sync,dc=example,dc=com", "sync");
    assert!(out.contains("userPassword:"), "the sync agent: {out}");
    let out = read_alice(&server, "uid=alice,dc=example,dc=com", "alice");
    assert!(
        out.contains("uid: alice") && !out.contains("userPassword"),
        "alice: {out}"
    );
    drop(server);

    // The built-in rules give a user write on its own userPassword, and
    // a rule for every attribute gives read: neither discloses it.
    let server = Server::start(
        "[[access]]\nto = \"*\"\nby = [ { who = \"users\", grant = \"write\" }, { who = \"anonymous\", grant = \"auth\" } ]\n",
    );
    let (rc, out) = tool(&server, "ldapadd", &admin, &[], Some(ldif));
    assert_eq!(rc, 0, "{out}");
    let out = read_alice(&server, "uid=sync,dc=example,dc=com", "sync");
    assert!(
        out.contains("uid: alice") && !out.contains("userPassword"),
        "{out}"
    );
    drop(server);
    let server = Server::start("");
    let (rc, out) = tool(&server, "ldapadd", &admin, &[], Some(ldif));
    assert_eq!(rc, 0, "{out}");
    let out = read_alice(&server, "uid=sync,dc=example,dc=com", "sync");
    assert!(
        out.contains("uid: alice") && !out.contains("userPassword"),
        "{out}"
    );
}

/// `password` hashed in `scheme` by OpenLDAP's slappasswd, as an
/// OpenLDAP directory holds it.
fn slappasswd(password: &str, scheme: &str) -> String {
    let out = Command::new("slappasswd")
        .args(["-s", password, "-h", scheme])
        .output()
        .unwrap();
    assert!(out.status.success(), "slappasswd missing (install slapd)");
    text(&out.stdout).trim().to_owned()
}

/// The suffix entry and, below it, one `account` per `(uid, userPassword)`.
fn with_accounts(accounts: &[(&str, &str)]) -> String {
    let mut ldif = String::from(
        "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: x\n",
    );
    for (uid, password) in accounts {
        ldif.push_str(&format!(
            "\ndn: uid={uid},dc=example,dc=com\nobjectClass: account\nobjectClass: simpleSecurityObject\nuid: {uid}\nuserPassword: {password}\n"
        ));
    }
    ldif
}
