//! Referral objects (RFC 3296) and aliases (RFC 4511 section 4.5.1.3):
//! the same data in Debian's slapd and in Meridian, the same OpenLDAP
//! tool runs against both, the same answers (result codes, matched DNs,
//! referral URLs, entries and continuation references).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use meridian_testing::slapd;

use slapd::{Extra, Slapd};
use support::*;

const DATA: &str = "\
dn: dc=example,dc=com
objectClass: domain
dc: example

dn: ou=People,dc=example,dc=com
objectClass: organizationalUnit
ou: People

dn: uid=alice,ou=People,dc=example,dc=com
objectClass: inetOrgPerson
uid: alice
cn: Alice
sn: A

dn: ou=Remote,dc=example,dc=com
objectClass: referral
objectClass: extensibleObject
ou: Remote
ref: ldap://other.example.net/ou=Far,dc=example,dc=net

dn: ou=NoDn,dc=example,dc=com
objectClass: referral
objectClass: extensibleObject
ou: NoDn
ref: ldap://nodn.example.net/

dn: ou=Labeled,dc=example,dc=com
objectClass: referral
objectClass: extensibleObject
ou: Labeled
ref: ldap://hostA/o=abc,c=us HostA

dn: cn=alias-alice,ou=People,dc=example,dc=com
objectClass: alias
objectClass: extensibleObject
cn: alias-alice
aliasedObjectName: uid=alice,ou=People,dc=example,dc=com

dn: ou=Links,dc=example,dc=com
objectClass: organizationalUnit
ou: Links

dn: cn=to-people,ou=Links,dc=example,dc=com
objectClass: alias
objectClass: extensibleObject
cn: to-people
aliasedObjectName: ou=People,dc=example,dc=com

dn: cn=loop1,ou=Links,dc=example,dc=com
objectClass: alias
objectClass: extensibleObject
cn: loop1
aliasedObjectName: cn=loop2,ou=Links,dc=example,dc=com

dn: cn=loop2,ou=Links,dc=example,dc=com
objectClass: alias
objectClass: extensibleObject
cn: loop2
aliasedObjectName: cn=loop1,ou=Links,dc=example,dc=com

dn: cn=dangling,ou=Links,dc=example,dc=com
objectClass: alias
objectClass: extensibleObject
cn: dangling
aliasedObjectName: cn=nothing,dc=example,dc=com
";

const MODIFY_REMOTE: &str =
    "dn: ou=Remote,dc=example,dc=com\nchangetype: modify\nreplace: description\ndescription: x\n";

/// (tool, arguments after the bind, standard input). Run in order on
/// both servers: the updates refused with a referral change nothing, the
/// ManageDsaIT ones change both the same way.
const CASES: &[(&str, &[&str], Option<&str>)] = &[
    ("ldapsearch", &["-b", "dc=example,dc=com", "dn"], None),
    (
        "ldapsearch",
        &["-b", "dc=example,dc=com", "-s", "one", "dn"],
        None,
    ),
    (
        "ldapsearch",
        &["-b", "dc=example,dc=com", "(ou=*)", "dn"],
        None,
    ),
    (
        "ldapsearch",
        &["-b", "dc=example,dc=com", "(uid=alice)", "dn"],
        None,
    ),
    (
        "ldapsearch",
        &["-b", "ou=Remote,dc=example,dc=com", "-s", "base", "dn"],
        None,
    ),
    (
        "ldapsearch",
        &["-b", "ou=NoDn,dc=example,dc=com", "dn"],
        None,
    ),
    // A labeledURI's label is not part of the URL (issue 27, defect 4).
    (
        "ldapsearch",
        &["-b", "uid=xxx,ou=Labeled,dc=example,dc=com", "dn"],
        None,
    ),
    (
        "ldapsearch",
        &["-b", "uid=zed,ou=NoDn,dc=example,dc=com", "dn"],
        None,
    ),
    (
        "ldapsearch",
        &[
            "-b",
            "cn=x,uid=zed,ou=Remote,dc=example,dc=com",
            "-s",
            "one",
            "dn",
        ],
        None,
    ),
    ("ldapsearch", &["-M", "-b", "dc=example,dc=com", "dn"], None),
    (
        "ldapsearch",
        &[
            "-M",
            "-b",
            "ou=Remote,dc=example,dc=com",
            "-s",
            "base",
            "ref",
        ],
        None,
    ),
    ("ldapmodify", &[], Some(MODIFY_REMOTE)),
    (
        "ldapadd",
        &[],
        Some("dn: uid=new,ou=Remote,dc=example,dc=com\nobjectClass: account\nuid: new\n"),
    ),
    (
        "ldapadd",
        &[],
        Some("dn: uid=new,ou=x,ou=Remote,dc=example,dc=com\nobjectClass: account\nuid: new\n"),
    ),
    ("ldapdelete", &["ou=NoDn,dc=example,dc=com"], None),
    ("ldapdelete", &["uid=zed,ou=NoDn,dc=example,dc=com"], None),
    (
        "ldapcompare",
        &["ou=Remote,dc=example,dc=com", "ou:Remote"],
        None,
    ),
    (
        "ldapcompare",
        &["-M", "ou=Remote,dc=example,dc=com", "ou:Remote"],
        None,
    ),
    (
        "ldapmodrdn",
        &["ou=Remote,dc=example,dc=com", "ou=Elsewhere"],
        None,
    ),
    ("ldapmodify", &["-M"], Some(MODIFY_REMOTE)),
    (
        "ldapsearch",
        &[
            "-M",
            "-b",
            "ou=Remote,dc=example,dc=com",
            "-s",
            "base",
            "description",
        ],
        None,
    ),
    // Aliases.
    (
        "ldapsearch",
        &[
            "-b",
            "cn=alias-alice,ou=People,dc=example,dc=com",
            "-s",
            "base",
            "dn",
        ],
        None,
    ),
    (
        "ldapsearch",
        &[
            "-a",
            "find",
            "-b",
            "cn=alias-alice,ou=People,dc=example,dc=com",
            "-s",
            "base",
            "dn",
        ],
        None,
    ),
    (
        "ldapsearch",
        &[
            "-a",
            "search",
            "-b",
            "cn=alias-alice,ou=People,dc=example,dc=com",
            "-s",
            "base",
            "dn",
        ],
        None,
    ),
    (
        "ldapsearch",
        &["-a", "always", "-b", "ou=Links,dc=example,dc=com", "dn"],
        None,
    ),
    (
        "ldapsearch",
        &["-a", "search", "-b", "ou=Links,dc=example,dc=com", "dn"],
        None,
    ),
    (
        "ldapsearch",
        &["-a", "find", "-b", "ou=Links,dc=example,dc=com", "dn"],
        None,
    ),
    (
        "ldapsearch",
        &[
            "-a",
            "always",
            "-b",
            "ou=Links,dc=example,dc=com",
            "-s",
            "one",
            "dn",
        ],
        None,
    ),
    (
        "ldapsearch",
        &["-a", "always", "-b", "dc=example,dc=com", "dn"],
        None,
    ),
    (
        "ldapsearch",
        &[
            "-a",
            "always",
            "-b",
            "dc=example,dc=com",
            "(uid=alice)",
            "dn",
        ],
        None,
    ),
    (
        "ldapsearch",
        &[
            "-a",
            "find",
            "-b",
            "cn=loop1,ou=Links,dc=example,dc=com",
            "-s",
            "base",
            "dn",
        ],
        None,
    ),
    (
        "ldapsearch",
        &[
            "-a",
            "find",
            "-b",
            "cn=dangling,ou=Links,dc=example,dc=com",
            "-s",
            "base",
            "dn",
        ],
        None,
    ),
    (
        "ldapsearch",
        &[
            "-a",
            "find",
            "-b",
            "uid=alice,cn=to-people,ou=Links,dc=example,dc=com",
            "-s",
            "base",
            "dn",
        ],
        None,
    ),
    (
        "ldapsearch",
        &[
            "-b",
            "uid=alice,cn=to-people,ou=Links,dc=example,dc=com",
            "-s",
            "base",
            "dn",
        ],
        None,
    ),
];

/// What must agree: the exit code (the result code), and the entries,
/// references, matched DNs and referral URLs printed, in any order (the
/// servers number their entries differently). Diagnostic messages may
/// differ.
fn essence(code: i32, output: &str) -> (i32, Vec<String>) {
    let mut lines: Vec<String> = output
        .lines()
        .map(str::trim)
        .filter(|l| {
            [
                "dn: ",
                "# ref",
                "Referral: ",
                "Matched DN: ",
                "matched DN: ",
                "ldap://",
                "description: ",
                "ref: ",
            ]
            .iter()
            .any(|p| l.starts_with(p))
                || l.starts_with("Compare Result")
                || *l == "TRUE"
                || *l == "FALSE"
        })
        .map(str::to_owned)
        .collect();
    lines.sort();
    (code, lines)
}

/// A server on `ldif`, loaded with `meridian import` (as slapd's is with
/// slapadd).
fn serve_imported(tag: &str, ldif: &str) -> Server {
    let dir = temp_dir(tag);
    let file = dir.join("data.ldif");
    std::fs::write(&file, ldif).unwrap();
    let data = dir.join("db");
    import(&file, &data);
    Server::start_with("", Some(ADMIN_PASSWORD), Some(data))
}

#[test]
fn referrals_and_aliases_answer_as_slapd_does() {
    let reference = Slapd::start_with(
        "referrals",
        DATA,
        &Extra {
            database: "index objectClass eq\n",
            ..Extra::default()
        },
    );
    let server = serve_imported("referrals", DATA);
    let slapd_url = format!("ldap://127.0.0.1:{}", reference.port);
    let slapd_bind = ["-D", ADMIN_DN, "-w", "secret"];
    let our_bind = ["-D", ADMIN_DN, "-w", ADMIN_PASSWORD];
    for (tool, args, stdin) in CASES {
        let mut args = args.to_vec();
        if *tool == "ldapsearch" {
            args.insert(0, "-LLL");
        }
        let (theirs_code, theirs) = tool_at(&slapd_url, tool, &slapd_bind, &args, *stdin);
        let (ours_code, ours) = tool_at(&server.url(), tool, &our_bind, &args, *stdin);
        assert_eq!(
            essence(ours_code, &ours),
            essence(theirs_code, &theirs),
            "{tool} {args:?}\n--- Meridian:\n{ours}\n--- slapd:\n{theirs}"
        );
        assert!(
            !essence(ours_code, &ours).1.is_empty() || ours_code == 0,
            "{tool} {args:?}: {ours}"
        );
    }
}

#[test]
fn referral_answers_carry_their_urls_and_a_readable_message() {
    let server = serve_imported("referral-urls", DATA);
    let (code, out) = admin_tool(
        &server,
        "ldapsearch",
        &[
            "-LLL",
            "-b",
            "uid=zed,ou=Remote,dc=example,dc=com",
            "-s",
            "one",
        ],
        None,
    );
    assert_eq!(code, 10, "{out}");
    assert!(
        out.contains("Referral: ldap://other.example.net/uid=zed,ou=Far,dc=example,dc=net??one"),
        "{out}"
    );
    assert!(out.contains("is a referral object"), "{out}");
    // Moving an entry under a referral object would hand it to another
    // server: affectsMultipleDSAs (RFC 4511 section 4.9; slapd says
    // "other").
    let (code, out) = admin_tool(
        &server,
        "ldapmodrdn",
        &[
            "-s",
            "ou=Remote,dc=example,dc=com",
            "uid=alice,ou=People,dc=example,dc=com",
            "uid=alice",
        ],
        None,
    );
    assert_eq!(code, 71, "{out}");
    // With ManageDsaIT the referral object is a plain entry: it can be
    // renamed and deleted, and then nothing refers any more.
    let (code, out) = admin_tool(
        &server,
        "ldapdelete",
        &["-M", "ou=NoDn,dc=example,dc=com"],
        None,
    );
    assert_eq!(code, 0, "{out}");
    let (code, out) = admin_tool(
        &server,
        "ldapsearch",
        &["-LLL", "-b", "uid=zed,ou=NoDn,dc=example,dc=com"],
        None,
    );
    assert_eq!(code, 32, "{out}");
    // An ordinary user sees the references of the referral objects it may
    // read, like entries; the root DSE lists the control.
    let (code, out) = admin_tool(
        &server,
        "ldapsearch",
        &["-LLL", "-b", "", "-s", "base", "supportedControl"],
        None,
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("supportedControl: 2.16.840.1.113730.3.4.2"),
        "{out}"
    );
}

/// A search that follows aliases into large subtrees merges their
/// scopes in rounds; paged, it must still return every entry exactly
/// once, aliases themselves never, and stop at alias cycles.
#[test]
fn a_paged_search_through_aliases_returns_each_entry_once() {
    let mut ldif = String::from(
        "dn: dc=example,dc=com\nobjectClass: domain\ndc: example\n\n\
         dn: ou=Big,dc=example,dc=com\nobjectClass: organizationalUnit\nou: Big\n\n\
         dn: ou=Links,dc=example,dc=com\nobjectClass: organizationalUnit\nou: Links\n\n\
         dn: cn=to-big,ou=Links,dc=example,dc=com\nobjectClass: alias\nobjectClass: extensibleObject\n\
         cn: to-big\naliasedObjectName: ou=Big,dc=example,dc=com\n\n",
    );
    // Interleave the two subtrees' IDs, and close a cycle back to Links.
    for n in 0..2500 {
        let ou = if n % 2 == 0 { "Big" } else { "Links" };
        ldif.push_str(&format!(
            "dn: uid=u{n},ou={ou},dc=example,dc=com\nobjectClass: account\nuid: u{n}\n\n"
        ));
    }
    ldif.push_str(
        "dn: cn=back,ou=Big,dc=example,dc=com\nobjectClass: alias\nobjectClass: extensibleObject\n\
         cn: back\naliasedObjectName: ou=Links,dc=example,dc=com\n\n",
    );
    let server = serve_imported("alias-paging", &ldif);
    for extra in [&["-E", "pr=300/noprompt"][..], &[][..]] {
        let mut args = vec![
            "-LLL",
            "-a",
            "always",
            "-b",
            "ou=Links,dc=example,dc=com",
            "-z",
            "0",
        ];
        args.extend_from_slice(extra);
        args.push("dn");
        let (code, out) = admin_tool(&server, "ldapsearch", &args, None);
        assert_eq!(code, 0, "{out}");
        let mut dns: Vec<&str> = out.lines().filter_map(|l| l.strip_prefix("dn: ")).collect();
        let total = dns.len();
        dns.sort_unstable();
        dns.dedup();
        assert_eq!(dns.len(), total, "an entry came twice");
        // Links, Big, every user; neither alias.
        assert_eq!(total, 2 + 2500, "{extra:?}");
        assert!(
            !dns.iter().any(|d| d.starts_with("cn=")),
            "an alias was returned"
        );
    }
}
