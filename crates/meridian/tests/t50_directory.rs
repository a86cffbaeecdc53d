//! Directory operations end to end, with OpenLDAP's tools against the
//! real binary: add, search (scopes, filters, operational attributes,
//! limits), modify, compare, modrdn (rename and subtree move), delete,
//! with their result codes and matchedDN; persistence across a restart;
//! many pipelined writes on one connection.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use meridian_testing::slapd;

use slapd::encode_add;

use meridian_proto::*;
use support::*;

const BASE_LDIF: &str = "dn: dc=example,dc=com
objectClass: dcObject
objectClass: organization
dc: example
o: Example

dn: ou=People,dc=example,dc=com
objectClass: organizationalUnit
ou: People

dn: uid=jdoe,ou=People,dc=example,dc=com
objectClass: inetOrgPerson
objectClass: posixAccount
uid: jdoe
cn: John Doe
sn: Doe
uidNumber: 1000
gidNumber: 100
homeDirectory: /home/jdoe
mail: jdoe@example.com

dn: uid=asmith,ou=People,dc=example,dc=com
objectClass: inetOrgPerson
uid: asmith
cn: Anne Smith
sn: Smith
";

#[test]
fn every_write_and_read_through_openldap_tools() {
    let dir = temp_dir("dirops");
    let mut server = Server::start_with("", Some(ADMIN_PASSWORD), Some(dir.clone()));
    let (rc, out) = admin_tool(&server, "ldapadd", &[], Some(BASE_LDIF));
    assert_eq!(rc, 0, "{out}");

    // Search: filter, scope, operational attributes on request.
    let (rc, out) = admin_tool(
        &server,
        "ldapsearch",
        &["-LLL", "-b", "dc=example,dc=com", "(uid=JDOE)", "*", "+"],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    for expected in [
        "dn: uid=jdoe,ou=People,dc=example,dc=com",
        "structuralObjectClass: inetOrgPerson",
        "entryUUID: ",
        "entryCSN: ",
        "creatorsName: cn=admin,dc=example,dc=com",
        "createTimestamp: 20",
        "hasSubordinates: FALSE",
        "entryDN: uid=jdoe,ou=People,dc=example,dc=com",
    ] {
        assert!(out.contains(expected), "missing {expected:?} in {out}");
    }
    let (_, out) = admin_tool(
        &server,
        "ldapsearch",
        &[
            "-LLL",
            "-b",
            "dc=example,dc=com",
            "-s",
            "one",
            "(objectClass=*)",
            "1.1",
        ],
        None,
    );
    assert_eq!(out.matches("dn: ").count(), 1, "{out}");
    let (_, out) = admin_tool(
        &server,
        "ldapsearch",
        &[
            "-LLL",
            "-b",
            "dc=example,dc=com",
            "(objectClass=person)",
            "1.1",
        ],
        None,
    );
    assert_eq!(out.matches("dn: ").count(), 2, "{out}");
    // A size limit from the client: entries found so far, then code 4.
    let (rc, out) = admin_tool(
        &server,
        "ldapsearch",
        &[
            "-LLL",
            "-z",
            "1",
            "-b",
            "dc=example,dc=com",
            "(objectClass=*)",
            "1.1",
        ],
        None,
    );
    assert_eq!(rc, 4, "{out}");
    assert_eq!(out.matches("dn: ").count(), 1, "{out}");
    // Paged results (RFC 2696): ldapsearch follows the cookies.
    let (rc, out) = admin_tool(
        &server,
        "ldapsearch",
        &[
            "-LLL",
            "-E",
            "pr=1/noprompt",
            "-b",
            "dc=example,dc=com",
            "(objectClass=*)",
            "1.1",
        ],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    assert_eq!(out.matches("dn: ").count(), 4, "{out}");
    assert_eq!(out.matches("# pagedresults: cookie=").count(), 4, "{out}");
    // A missing base: noSuchObject with the matched DN.
    let (rc, out) = admin_tool(
        &server,
        "ldapsearch",
        &[
            "-b",
            "ou=Nowhere,ou=People,dc=example,dc=com",
            "(objectClass=*)",
        ],
        None,
    );
    assert_eq!(rc, 32, "{out}");
    assert!(
        out.contains("matchedDN: ou=People,dc=example,dc=com"),
        "{out}"
    );

    // Modify, then compare.
    let (rc, out) = admin_tool(
        &server,
        "ldapmodify",
        &[],
        Some(
            "dn: uid=jdoe,ou=People,dc=example,dc=com\nchangetype: modify\nreplace: sn\nsn: Dough\n-\nadd: mail\nmail: john@example.com\n-\nincrement: uidNumber\nuidNumber: 5\n",
        ),
    );
    assert_eq!(rc, 0, "{out}");
    let (rc, _) = admin_tool(
        &server,
        "ldapcompare",
        &["uid=jdoe,ou=People,dc=example,dc=com", "uidNumber:1005"],
        None,
    );
    assert_eq!(rc, 6, "compareTrue");
    let (rc, _) = admin_tool(
        &server,
        "ldapcompare",
        &["uid=jdoe,ou=People,dc=example,dc=com", "sn:Doe"],
        None,
    );
    assert_eq!(rc, 5, "compareFalse");
    let (rc, _) = admin_tool(
        &server,
        "ldapcompare",
        &["uid=jdoe,ou=People,dc=example,dc=com", "title:x"],
        None,
    );
    assert_eq!(rc, 16, "noSuchAttribute");
    // Schema violations come back with their codes.
    let (rc, out) = admin_tool(
        &server,
        "ldapmodify",
        &[],
        Some("dn: uid=jdoe,ou=People,dc=example,dc=com\nchangetype: modify\ndelete: sn\n"),
    );
    assert_eq!(rc, 65, "{out}");
    let (rc, out) = admin_tool(
        &server,
        "ldapmodify",
        &[],
        Some(
            "dn: uid=jdoe,ou=People,dc=example,dc=com\nchangetype: modify\nreplace: entryUUID\nentryUUID: 597ae2f6-16a6-1027-98f4-d28b5365dc14\n",
        ),
    );
    assert_eq!(rc, 19, "{out}");
    let (rc, out) = admin_tool(
        &server,
        "ldapadd",
        &[],
        Some("dn: uid=jdoe,ou=People,dc=example,dc=com\nobjectClass: account\nuid: jdoe\n"),
    );
    assert_eq!(rc, 68, "{out}");

    // Rename, and move a subtree.
    let (rc, out) = admin_tool(
        &server,
        "ldapmodrdn",
        &["-r", "uid=asmith,ou=People,dc=example,dc=com", "uid=anne"],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    let (rc, out) = admin_tool(
        &server,
        "ldapadd",
        &[],
        Some("dn: ou=Staff,dc=example,dc=com\nobjectClass: organizationalUnit\nou: Staff\n"),
    );
    assert_eq!(rc, 0, "{out}");
    let (rc, out) = admin_tool(
        &server,
        "ldapmodrdn",
        &[
            "-s",
            "ou=Staff,dc=example,dc=com",
            "ou=People,dc=example,dc=com",
            "ou=Members",
        ],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    let (_, out) = admin_tool(
        &server,
        "ldapsearch",
        &[
            "-LLL",
            "-b",
            "ou=Members,ou=Staff,dc=example,dc=com",
            "(uid=*)",
            "1.1",
        ],
        None,
    );
    assert!(
        out.contains("dn: uid=anne,ou=Members,ou=Staff,dc=example,dc=com"),
        "{out}"
    );
    assert!(
        out.contains("dn: uid=jdoe,ou=Members,ou=Staff,dc=example,dc=com"),
        "{out}"
    );

    // The assertion control: the write happens only if the filter holds.
    let (rc, out) = admin_tool(
        &server,
        "ldapmodify",
        &["-e", "assert=(sn=Nope)"],
        Some(
            "dn: uid=jdoe,ou=Members,ou=Staff,dc=example,dc=com\nchangetype: modify\nreplace: title\ntitle: x\n",
        ),
    );
    assert_eq!(rc, 122, "{out}");
    let (rc, out) = admin_tool(
        &server,
        "ldapmodify",
        &["-e", "assert=(sn=dough)"],
        Some(
            "dn: uid=jdoe,ou=Members,ou=Staff,dc=example,dc=com\nchangetype: modify\nreplace: title\ntitle: x\n",
        ),
    );
    assert_eq!(rc, 0, "{out}");
    let (rc, out) = admin_tool(
        &server,
        "ldapsearch",
        &[
            "-e",
            "assert=(ou=nope)",
            "-b",
            "ou=Staff,dc=example,dc=com",
            "(objectClass=*)",
        ],
        None,
    );
    assert_eq!(rc, 122, "{out}");

    // Delete: non-leaf refused, leaf removed.
    let (rc, _) = admin_tool(&server, "ldapdelete", &["ou=Staff,dc=example,dc=com"], None);
    assert_eq!(rc, 66);
    let (rc, out) = admin_tool(
        &server,
        "ldapdelete",
        &["uid=anne,ou=Members,ou=Staff,dc=example,dc=com"],
        None,
    );
    assert_eq!(rc, 0, "{out}");

    // Subtree delete control: a whole branch in one operation.
    let (rc, out) = admin_tool(
        &server,
        "ldapadd",
        &[],
        Some(
            "dn: ou=Tmp,dc=example,dc=com\nobjectClass: organizationalUnit\nou: Tmp\n\ndn: ou=Deep,ou=Tmp,dc=example,dc=com\nobjectClass: organizationalUnit\nou: Deep\n\ndn: uid=t1,ou=Deep,ou=Tmp,dc=example,dc=com\nobjectClass: account\nuid: t1\n",
        ),
    );
    assert_eq!(rc, 0, "{out}");
    let (rc, out) = admin_tool(
        &server,
        "ldapdelete",
        &["-e", "!1.2.840.113556.1.4.805", "ou=Tmp,dc=example,dc=com"],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    let (_, out) = admin_tool(
        &server,
        "ldapsearch",
        &[
            "-LLL",
            "-b",
            "dc=example,dc=com",
            "(|(ou=Tmp)(ou=Deep)(uid=t1))",
            "1.1",
        ],
        None,
    );
    assert!(!out.contains("dn: "), "{out}");

    // Everything acknowledged survives a restart.
    assert!(server.terminate().success());
    std::mem::forget(server);
    let server = Server::start_with("", Some(ADMIN_PASSWORD), Some(dir));
    let (_, out) = admin_tool(
        &server,
        "ldapsearch",
        &["-LLL", "-b", "dc=example,dc=com", "(objectClass=*)", "1.1"],
        None,
    );
    assert_eq!(out.matches("dn: ").count(), 4, "{out}");
    let (rc, _) = admin_tool(
        &server,
        "ldapcompare",
        &["uid=jdoe,ou=Members,ou=Staff,dc=example,dc=com", "sn:dough"],
        None,
    );
    assert_eq!(rc, 6);
}

/// An administrator's connection, with the suffix entry added and `n`
/// more entries from `entry(i)` pipelined behind it, all answered.
fn loaded_connection(
    server: &Server,
    n: i32,
    entry: impl Fn(i32) -> (String, Vec<(&'static str, Vec<String>)>),
) -> Client {
    let mut client = Client::connect(server.addr);
    let mut bytes = Vec::new();
    LdapMessage {
        message_id: 1,
        op: ProtocolOp::BindRequest(BindRequest {
            version: 3,
            name: ADMIN_DN.as_bytes(),
            auth: Authentication::Simple(ADMIN_PASSWORD.as_bytes()),
        }),
        controls: Seq::empty(),
    }
    .encode(&mut bytes);
    encode_add(
        &mut bytes,
        2,
        "dc=example,dc=com",
        &[
            ("objectClass", &["dcObject", "organization"]),
            ("dc", &["example"]),
            ("o", &["x"]),
        ],
    );
    // The children follow their parent without waiting for it: a
    // connection's writes reach the store in the order they were sent.
    for i in 0..n {
        let (dn, attrs) = entry(i);
        let values: Vec<Vec<&str>> = attrs
            .iter()
            .map(|(_, vs)| vs.iter().map(String::as_str).collect())
            .collect();
        let attrs: Vec<(&str, &[&str])> = attrs
            .iter()
            .zip(&values)
            .map(|((name, _), vs)| (*name, vs.as_slice()))
            .collect();
        encode_add(&mut bytes, 10 + i, &dn, &attrs);
    }
    client.send(&bytes);
    let mut answered = std::collections::HashSet::new();
    client.read_until(|m| {
        match &m.op {
            ProtocolOp::BindResponse(b) => assert_eq!(b.result.code, ResultCode::SUCCESS),
            ProtocolOp::AddResponse(r) => {
                assert_eq!(
                    r.code,
                    ResultCode::SUCCESS,
                    "{}",
                    String::from_utf8_lossy(r.message)
                );
                assert!(answered.insert(m.message_id));
            }
            other => panic!("{other:?}"),
        }
        answered.len() == n as usize + 1
    });
    assert_eq!(answered, std::iter::once(2).chain(10..10 + n).collect());
    client
}

#[test]
fn pipelined_writes_on_one_connection_all_answer() {
    let server = Server::start("");
    // 500 adds written back to back; answered through group commit.
    loaded_connection(&server, 500, |i| {
        (
            format!("uid=u{i},dc=example,dc=com"),
            vec![
                ("objectClass", vec!["account".into()]),
                ("uid", vec![format!("u{i}")]),
            ],
        )
    });
}

#[test]
fn a_large_result_streams_while_the_connection_goes_on() {
    let server = Server::start("");
    // 2,000 entries of about 2 KiB: a 4 MiB result, sixteen search steps.
    let description = "d".repeat(2000);
    let mut client = loaded_connection(&server, 2000, |i| {
        (
            format!("uid=big{i},dc=example,dc=com"),
            vec![
                (
                    "objectClass",
                    vec!["account".into(), "extensibleObject".into()],
                ),
                ("uid", vec![format!("big{i}")]),
                ("description", vec![description.clone()]),
            ],
        )
    });
    // The big search, then a small request on the same connection.
    let mut bytes = Vec::new();
    LdapMessage {
        message_id: 5000,
        op: ProtocolOp::SearchRequest(SearchRequest {
            base: b"dc=example,dc=com",
            scope: Scope::Subtree,
            deref: DerefAliases::Never,
            size_limit: 0,
            time_limit: 0,
            types_only: false,
            filter: Filter::Present(b"objectClass"),
            attributes: Seq::empty(),
        }),
        controls: Seq::empty(),
    }
    .encode(&mut bytes);
    LdapMessage {
        message_id: 5001,
        op: ProtocolOp::ExtendedRequest(ExtendedRequest {
            name: extended::oid::WHO_AM_I,
            value: None,
        }),
        controls: Seq::empty(),
    }
    .encode(&mut bytes);
    client.send(&bytes);
    let (mut entries, mut search_done, mut whoami_seen) = (0, false, false);
    client.read_until(|m| {
        match &m.op {
            ProtocolOp::SearchResultEntry(_) => entries += 1,
            ProtocolOp::SearchResultDone(r) => {
                assert_eq!(r.code, ResultCode::SUCCESS);
                search_done = true;
            }
            ProtocolOp::ExtendedResponse(r) => {
                assert_eq!(r.result.code, ResultCode::SUCCESS);
                whoami_seen = true;
            }
            other => panic!("{other:?}"),
        }
        search_done && whoami_seen
    });
    assert_eq!(entries, 2001);
}

#[test]
fn values_and_dns_longer_than_an_index_key() {
    // cn is indexed (equality and substrings) by default, and LMDB keys
    // hold 511 bytes: a 700-byte cn is stored and found; a DN that long
    // is refused with unwillingToPerform and a reason (it was "Other",
    // MDB_BAD_VALSIZE, for both), and as a search base it does not exist.
    let server = Server::start_with("", Some(ADMIN_PASSWORD), None);
    let (rc, out) = admin_tool(&server, "ldapadd", &[], Some(BASE_LDIF));
    assert_eq!(rc, 0, "{out}");
    let long = "L".repeat(700);
    let ldif = format!(
        "dn: uid=long,ou=People,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: long\ncn: {long}\nsn: S\n"
    );
    let (rc, out) = admin_tool(&server, "ldapadd", &[], Some(&ldif));
    assert_eq!(rc, 0, "{out}");
    let (rc, out) = admin_tool(
        &server,
        "ldapsearch",
        &[
            "-b",
            "dc=example,dc=com",
            &format!("(cn={})", long.to_lowercase()),
            "1.1",
        ],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    assert!(
        out.contains("dn: uid=long,ou=People,dc=example,dc=com"),
        "{out}"
    );

    let long_dn = format!("cn={long},ou=People,dc=example,dc=com");
    let ldif = format!("dn: {long_dn}\nobjectClass: person\ncn: {long}\nsn: S\n");
    let (rc, out) = admin_tool(&server, "ldapadd", &[], Some(&ldif));
    assert_eq!(rc, 53, "{out}");
    assert!(out.contains("DN is too long"), "{out}");
    let (rc, out) = admin_tool(&server, "ldapsearch", &["-b", &long_dn, "-s", "base"], None);
    assert_eq!(rc, 32, "{out}");
}

#[test]
fn a_modify_of_more_changes_than_the_limit_is_refused_whole() {
    // directory.max_modify_changes bounds the changes of one request
    // (each is looked up among the entry's attributes as it is applied);
    // values within a change are not counted.
    let server = Server::start_with(
        "[directory]\nmax_modify_changes = 3\n",
        Some(ADMIN_PASSWORD),
        None,
    );
    let (rc, out) = admin_tool(&server, "ldapadd", &[], Some(BASE_LDIF));
    assert_eq!(rc, 0, "{out}");
    let modify = |changes: usize| {
        let mut ldif =
            String::from("dn: uid=asmith,ou=People,dc=example,dc=com\nchangetype: modify\n");
        for i in 0..changes {
            ldif.push_str(&format!(
                "add: description;lang-x{i}\ndescription;lang-x{i}: d{i}\n-\n"
            ));
        }
        admin_tool(&server, "ldapmodify", &[], Some(&ldif))
    };
    let (rc, out) = modify(4);
    assert_eq!(rc, 11, "{out}");
    assert!(
        out.contains("at most 3 changes (directory.max_modify_changes)"),
        "{out}"
    );
    let (rc, out) = admin_tool(
        &server,
        "ldapsearch",
        &[
            "-LLL",
            "-b",
            "uid=asmith,ou=People,dc=example,dc=com",
            "-s",
            "base",
            "description",
        ],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    assert!(
        !out.contains("description"),
        "nothing of the refused modify: {out}"
    );
    let (rc, out) = modify(3);
    assert_eq!(rc, 0, "{out}");
    // Three changes, one of them of many values.
    let members: String = (0..500)
        .map(|i| format!("description: many {i}\n"))
        .collect();
    let ldif = format!(
        "dn: uid=asmith,ou=People,dc=example,dc=com\nchangetype: modify\nadd: description\n{members}-\nreplace: sn\nsn: Smith\n-\ndelete: description;lang-x0\n-\n"
    );
    let (rc, out) = admin_tool(&server, "ldapmodify", &[], Some(&ldif));
    assert_eq!(rc, 0, "{out}");
}

/// Issue 44, small 14: the administrator's delete, modify or rename of
/// the root DSE ("") answered 80 with LMDB's "MDB_BAD_VALSIZE"; slapd
/// answers unwillingToPerform, with these words.
#[test]
fn writes_to_the_root_dse_are_unwilling_to_perform_as_in_slapd() {
    let server = Server::start("");
    let (rc, out) = admin_tool(&server, "ldapdelete", &[""], None);
    assert_eq!(rc, 53, "{out}");
    assert!(out.contains("cannot delete the root DSE"), "{out}");
    let change = "dn:\nchangetype: modify\nreplace: description\ndescription: x\n";
    let (rc, out) = admin_tool(&server, "ldapmodify", &[], Some(change));
    assert_eq!(rc, 53, "{out}");
    assert!(
        out.contains("modify upon the root DSE not supported"),
        "{out}"
    );
    let (rc, out) = admin_tool(&server, "ldapmodrdn", &["", "cn=x"], None);
    assert_eq!(rc, 53, "{out}");
    assert!(out.contains("cannot rename the root DSE"), "{out}");
}
