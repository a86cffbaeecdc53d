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

use std::io::Write as _;
use std::process::{Command, Stdio};

use meridian_proto::*;
use support::*;

fn admin_tool(server: &Server, tool: &str, extra: &[&str], stdin: Option<&str>) -> (i32, String) {
    let url = server.url();
    let mut args = vec!["-x", "-H", &url, "-D", ADMIN_DN, "-w", ADMIN_PASSWORD];
    args.extend_from_slice(extra);
    let mut child = Command::new(tool)
        .args(&args)
        .env("LDAPNOINIT", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        let mut input = input;
        input.write_all(text.as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!("{}{}", text(&out.stdout), text(&out.stderr)),
    )
}

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

#[test]
fn pipelined_writes_on_one_connection_all_answer() {
    let server = Server::start("");
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
    client.send(&bytes);
    client.read_until(
        |m| matches!(m.op, ProtocolOp::BindResponse(ref b) if b.result.code == ResultCode::SUCCESS),
    );
    let oc_suffix: [&[u8]; 2] = [b"dcObject", b"organization"];
    let dc: [&[u8]; 1] = [b"example"];
    let o: [&[u8]; 1] = [b"x"];
    let suffix = [
        PartialAttribute {
            ty: b"objectClass",
            values: Seq::from_items(&oc_suffix),
        },
        PartialAttribute {
            ty: b"dc",
            values: Seq::from_items(&dc),
        },
        PartialAttribute {
            ty: b"o",
            values: Seq::from_items(&o),
        },
    ];
    bytes.clear();
    LdapMessage {
        message_id: 2,
        op: ProtocolOp::AddRequest(AddRequest {
            dn: b"dc=example,dc=com",
            attributes: Seq::from_items(&suffix),
        }),
        controls: Seq::empty(),
    }
    .encode(&mut bytes);
    client.send(&bytes);
    client.read_until(
        |m| matches!(m.op, ProtocolOp::AddResponse(ref r) if r.code == ResultCode::SUCCESS),
    );
    // 500 adds written back to back; the server answers each, through
    // group commit, in whatever order they finish.
    bytes.clear();
    let names: Vec<String> = (0..500).map(|i| format!("u{i}")).collect();
    let oc: [&[u8]; 1] = [b"account"];
    for (i, uid) in names.iter().enumerate() {
        let dn = format!("uid={uid},dc=example,dc=com");
        let uid_values = [uid.as_bytes()];
        let attrs = [
            PartialAttribute {
                ty: b"objectClass",
                values: Seq::from_items(&oc),
            },
            PartialAttribute {
                ty: b"uid",
                values: Seq::from_items(&uid_values),
            },
        ];
        LdapMessage {
            message_id: 10 + i as i32,
            op: ProtocolOp::AddRequest(AddRequest {
                dn: dn.as_bytes(),
                attributes: Seq::from_items(&attrs),
            }),
            controls: Seq::empty(),
        }
        .encode(&mut bytes);
    }
    client.send(&bytes);
    let mut answered = std::collections::HashSet::new();
    client.read_until(|m| {
        let ProtocolOp::AddResponse(r) = m.op else {
            panic!("{m:?}")
        };
        assert_eq!(
            r.code,
            ResultCode::SUCCESS,
            "{}",
            String::from_utf8_lossy(r.message)
        );
        assert!(answered.insert(m.message_id));
        answered.len() == 500
    });
    assert_eq!(answered, (10..510).collect());
}
