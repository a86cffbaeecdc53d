//! `meridian migrate`: Debian's default slapd.d and a hand-written
//! slapd.conf with access rules become Meridian configurations that load
//! and behave as the originals where they translate; what does not
//! translate is listed with where it is.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::path::Path;
use std::process::Command;

use support::*;

/// `meridian migrate --from PATH EXTRA...`, as it ended.
fn run_migrate(from: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["migrate", "--from"])
        .arg(from)
        .args(extra)
        .output()
        .unwrap()
}

/// [`run_migrate`], which must succeed: the configuration and the notes.
fn migrate_with(from: &Path, extra: &[&str]) -> (String, String) {
    let out = run_migrate(from, extra);
    assert!(out.status.success(), "{}", text(&out.stderr));
    (text(&out.stdout), text(&out.stderr))
}

fn migrate(from: &Path) -> (String, String) {
    migrate_with(from, &[])
}

#[test]
fn debians_default_slapd_d_translates_and_serves_as_it_did() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/debian-slapd.d");
    let (config, notes) = migrate(&fixture);
    for line in [
        "suffix = \"dc=nodomain\"",
        "admin_dn = \"cn=admin,dc=nodomain\"",
        "objectClass = [\"eq\"]",
        "uidNumber = [\"eq\"]",
        "memberUid = [\"eq\"]",
        "attrs = [\"userPassword\"]",
        "{ who = \"anonymous\", grant = \"auth\" }",
    ] {
        assert!(config.contains(line), "no {line:?} in:\n{config}");
    }
    // The built-in schemas are left out; the rootpw hash is carried
    // over; the peercred rule is explained, with where it is.
    assert!(!config.contains("schema_files"), "{config}");
    assert!(
        config.contains("admin_password_hash = \"{SSHA}"),
        "{config}"
    );
    assert!(notes.contains("frontend.ldif: olcAccess"), "{notes}");

    // Served: anyone reads entries (Debian's `to * by * read`), nobody
    // reads userPassword but its owner, who may change it.
    let server = Server::start(&config);
    let ldif = "dn: dc=nodomain\nobjectClass: dcObject\nobjectClass: organization\ndc: nodomain\no: x\n\n\
                dn: uid=u,dc=nodomain\nobjectClass: account\nobjectClass: simpleSecurityObject\nuid: u\nuserPassword: u-pw\n";
    let (rc, out) = tool(
        &server,
        "ldapadd",
        &["-D", "cn=admin,dc=nodomain", "-w", ADMIN_PASSWORD],
        &[],
        Some(ldif),
    );
    assert_eq!(rc, 0, "{out}");
    let (rc, out) = tool(
        &server,
        "ldapsearch",
        &[],
        &[
            "-LLL",
            "-b",
            "dc=nodomain",
            "(uid=u)",
            "uid",
            "userPassword",
        ],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    assert!(
        out.contains("uid: u") && !out.contains("userPassword"),
        "{out}"
    );
    let (rc, out) = tool(
        &server,
        "ldappasswd",
        &["-D", "uid=u,dc=nodomain", "-w", "u-pw"],
        &["-s", "new-pw"],
        None,
    );
    assert_eq!(rc, 0, "{out}");
}

#[test]
fn a_slapd_conf_with_access_rules_translates_what_it_can() {
    let dir = temp_dir("migrate");
    let conf = dir.join("slapd.conf");
    std::fs::write(
        &conf,
        r#"# A hand-written slapd.conf.
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
include /etc/ldap/schema/misc.schema
pidfile /var/run/slapd/slapd.pid
modulepath /usr/lib/ldap
moduleload back_mdb
sizelimit 200
timelimit 60
TLSCertificateFile /etc/ldap/tls/server.pem
TLSCertificateKeyFile /etc/ldap/tls/server.key
TLSVerifyClient never

database mdb
suffix "dc=example,dc=com"
rootdn "cn=Manager,dc=example,dc=com"
rootpw secret
directory /var/lib/ldap
index objectClass eq
index uid,cn eq,sub
index mail eq,approx
access to attrs=userPassword
    by self write
    by anonymous auth
    by * none
access to dn.subtree="ou=People,dc=example,dc=com" attrs=telephoneNumber
    by self write
    by group.exact="cn=HR,ou=Groups,dc=example,dc=com" write
    by users read
access to dn.one="ou=Groups,dc=example,dc=com" by * read
access to filter=(objectClass=secret) by * none
access to *
    by dn.exact="cn=Reader,dc=example,dc=com" read
    by users read
    by * none
overlay memberof
overlay refint
refint_attributes member manager
overlay unique
unique_uri ldap:///ou=People,dc=example,dc=com?uid,mail?sub
overlay dynlist
dynlist-attrset groupOfURLs memberURL member+memberOf@groupOfNames
overlay ppolicy

database mdb
suffix "o=other"
rootdn "cn=Manager,dc=example,dc=com"
directory /var/lib/ldap-other

database monitor
"#,
    )
    .unwrap();
    // Two rules do not translate: nothing is written unless told.
    let refused = run_migrate(&conf, &[]);
    let said = text(&refused.stderr);
    assert!(!refused.status.success(), "{said}");
    assert!(refused.stdout.is_empty());
    assert!(
        said.contains("2 access rule(s) could not be translated"),
        "{said}"
    );
    assert!(said.contains("--drop-untranslated-access"), "{said}");
    let (config, notes) = migrate_with(&conf, &["--drop-untranslated-access"]);
    assert!(notes.contains("DROPPED 2 access rule(s)"), "{notes}");
    for line in [
        "suffix = \"dc=example,dc=com\"",
        "additional_suffixes = [\"o=other\"]",
        "admin_dn = \"cn=Manager,dc=example,dc=com\"",
        "size_limit = 200",
        "time_limit_secs = 60",
        "schema_files = [\"/etc/ldap/schema/misc.schema\"]",
        "uid = [\"eq\", \"sub\"]",
        "cn = [\"eq\", \"sub\"]",
        "mail = [\"eq\"]",
        "tls_certificate_file = \"/etc/ldap/tls/server.pem\"",
        "client_certificates = \"none\"",
        "to = \"subtree:ou=People,dc=example,dc=com\"",
        "{ who = \"group:cn=HR,ou=Groups,dc=example,dc=com\", grant = \"write\" }",
        "{ who = \"dn:cn=Reader,dc=example,dc=com\", grant = \"read\" }",
    ] {
        assert!(config.contains(line), "no {line:?} in:\n{config}");
    }
    // Each directive left out is named with its line.
    let name = conf.display().to_string();
    for (line, says) in [
        (22, "approx"),
        (31, "dn.one"),
        (32, "filter"),
        (18, "rootpw"),
    ] {
        assert!(
            notes.contains(&format!("{name}:{line}:")) && notes.contains(says),
            "no note for line {line} ({says}):\n{notes}"
        );
    }
    assert!(notes.contains("overlay memberof"), "{notes}");
    for line in [
        "[groups]",
        "group_classes = [\"groupOfNames\"]",
        "member_attributes = [\"member\"]",
        "refint_attributes = [\"member\", \"manager\"]",
        "unique_attributes = [\"uid\", \"mail\"]",
        "unique_subtrees = [\"ou=People,dc=example,dc=com\"]",
        "dynamic_group_class = \"groupOfURLs\"",
        "dynamic_url_attribute = \"memberURL\"",
        "dynamic_member_attribute = \"member\"",
    ] {
        assert!(config.contains(line), "no {line:?} in:\n{config}");
    }
    assert!(
        notes.contains("overlay ppolicy") && notes.contains("[password_policy]"),
        "{notes}"
    );
    assert!(notes.contains("database monitor"), "{notes}");
    // The rules keep their order: userPassword first, the catch-all last.
    let first = config.find("attrs = [\"userPassword\"]").unwrap();
    let last = config.find("dn:cn=Reader").unwrap();
    assert!(first < last, "{config}");
    // Written to a file, it is refused over an existing one.
    let out = dir.join("meridian.toml");
    let run = |path: &Path| {
        let path = path.to_str().unwrap();
        run_migrate(&conf, &["--drop-untranslated-access", "-o", path])
    };
    assert!(run(&out).status.success());
    // (The same but for the clear-text rootpw's {ARGON2} hash, salted
    // afresh each time.)
    let without_hash = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| !l.starts_with("admin_password_hash"))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(
        without_hash(&std::fs::read_to_string(&out).unwrap()),
        without_hash(&config)
    );
    let again = run(&out);
    assert!(!again.status.success() && text(&again.stderr).contains("exists"));
    std::fs::remove_dir_all(dir).unwrap();
}

/// Issue 44, severe 6: everything after an `overlay` line of a database
/// was taken as the overlay's, so a later index and access rules vanished
/// without a word (and the migrated server let every user read
/// `ou=Secret`); TLS and serverID lines after `database` were dropped;
/// `security simple_bind=64` was not carried over.
#[test]
fn directives_after_an_overlay_line_stay_the_databases() {
    let dir = temp_dir("migrate-overlay");
    let conf = dir.join("slapd.conf");
    std::fs::write(
        &conf,
        r#"include /etc/ldap/schema/core.schema
database mdb
suffix "dc=example,dc=com"
rootdn "cn=Manager,dc=example,dc=com"
index objectClass eq
overlay ppolicy
ppolicy_default "cn=default,ou=Policies,dc=example,dc=com"
index mail eq
access to attrs=userPassword by anonymous auth by self write by * none
access to dn.subtree="ou=Secret,dc=example,dc=com" by dn.exact="cn=auditor,dc=example,dc=com" read by * none
access to * by users read
TLSCertificateFile /etc/ldap/tls/server.pem
TLSCertificateKeyFile /etc/ldap/tls/server.key
serverID 7
security simple_bind=64
"#,
    )
    .unwrap();
    let (config, notes) = migrate(&conf);
    for line in [
        "mail = [\"eq\"]",
        "to = \"subtree:ou=Secret,dc=example,dc=com\"",
        "{ who = \"dn:cn=auditor,dc=example,dc=com\", grant = \"read\" }",
        "tls_certificate_file = \"/etc/ldap/tls/server.pem\"",
        "tls_key_file = \"/etc/ldap/tls/server.key\"",
        "server_id = 7",
        "require_tls = true",
    ] {
        assert!(config.contains(line), "no {line:?} in:\n{config}\n{notes}");
    }
    assert!(!notes.contains("no Meridian counterpart"), "{notes}");
    assert!(notes.contains("overlay ppolicy"), "{notes}");
    // Served: a user reads the directory but not ou=Secret.
    let config = config
        .lines()
        .filter(|l| !l.starts_with("tls_") && !l.starts_with("require_tls"))
        .collect::<Vec<_>>()
        .join("\n");
    let server = Server::start(&config);
    let ldif = "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: x\n\n\
                dn: ou=Secret,dc=example,dc=com\nobjectClass: organizationalUnit\nou: Secret\n\n\
                dn: uid=u,dc=example,dc=com\nobjectClass: account\nobjectClass: simpleSecurityObject\nuid: u\nuserPassword: u-pw\n";
    let (rc, out) = tool(
        &server,
        "ldapadd",
        &["-D", "cn=Manager,dc=example,dc=com", "-w", ADMIN_PASSWORD],
        &[],
        Some(ldif),
    );
    assert_eq!(rc, 0, "{out}");
    let (rc, out) = tool(
        &server,
        "ldapsearch",
        &["-D", "uid=u,dc=example,dc=com", "-w", "u-pw"],
        &["-LLL", "-b", "dc=example,dc=com", "(objectClass=*)", "dn"],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("dn: uid=u,"), "{out}");
    assert!(!out.contains("ou=Secret"), "{out}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// slapd's rootpw, a hash, is carried over: the administrator binds with
/// the same password, with no MERIDIAN_ADMIN_PASSWORD and nothing generated.
#[test]
fn the_rootpw_hash_is_carried_over_and_binds() {
    let dir = temp_dir("rootpw");
    let conf = dir.join("slapd.conf");
    // {SSHA} of "secret" (salt "salt").
    std::fs::write(
        &conf,
        "database mdb\nsuffix \"dc=example,dc=com\"\nrootdn \"cn=Manager,dc=example,dc=com\"\n\
         rootpw {SSHA}gVK8WC9YyFT1gMsQHTGCgT3sSv5zYWx0\n",
    )
    .unwrap();
    let (config, notes) = migrate(&conf);
    assert!(!notes.contains("rootpw"), "{notes}");
    let server = Server::start_with(&config, None, None);
    let bind = ["-D", "cn=Manager,dc=example,dc=com", "-w", "secret"];
    let (rc, out) = tool(&server, "ldapwhoami", &bind, &[], None);
    assert_eq!(rc, 0, "{out}");
    let wrong = ["-D", "cn=Manager,dc=example,dc=com", "-w", "wrong"];
    assert_eq!(tool(&server, "ldapwhoami", &wrong, &[], None).0, 49);
    assert!(!server.data_dir.join("admin.secret").exists());
    // A clear-text rootpw is written as its {ARGON2} hash, never as it is.
    std::fs::write(
        &conf,
        "database mdb\nsuffix \"dc=example,dc=com\"\nrootpw clear-text-pw\n",
    )
    .unwrap();
    let (config, notes) = migrate(&conf);
    assert!(
        config.contains("admin_password_hash = \"{ARGON2}$argon2id$"),
        "{config}"
    );
    assert!(!config.contains("clear-text-pw"), "{config}");
    assert!(notes.contains("written as its {ARGON2} hash"), "{notes}");
    std::fs::remove_dir_all(dir).unwrap();
}
