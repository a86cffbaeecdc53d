//! Differential test: the same LDIF is loaded into Debian's slapd (the
//! reference) and into Meridian; the same searches run against both with
//! OpenLDAP's ldapsearch; entries, values and result codes must agree.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use meridian_testing::slapd;

use std::io::Write as _;
use std::process::{Command, Stdio};

use meridian_proto::*;
use slapd::{Slapd, people, to_ldif};
use support::*;

const FILTERS: &[&str] = &[
    "(objectClass=*)",
    "(objectClass=person)",
    "(objectClass=posixAccount)",
    "(uid=user1*)",
    "(uid=USER07)",
    "(cn=babs*)",
    "(cn=*jones)",
    "(sn=çelik)",
    "(mail=*@example.COM)",
    "(telephoneNumber=+15121051185)",
    "(uidNumber>=1100)",
    "(uidNumber<=1063)",
    "(&(uidNumber>=1050)(uidNumber<=1060))",
    "(uidNumber>=-5)",
    "(uidNumber<=ten)",
    "(employeeNumber>=1300)",
    "(title=senior engineer)",
    "(&(objectClass=posixAccount)(|(uid=user03)(uid=user04)(uid=user06)))",
    "(!(objectClass=posixAccount))",
    "(member=UID=USER00,OU=PEOPLE,DC=EXAMPLE,DC=COM)",
    "(cn;lang-de=*)",
    "(cn;lang-=*)",
    "(cn;lang-de-=*)",
    "(cn;lang-d-=*)",
    "(name;lang-=herr*)",
    "(ou:dn:=people)",
    "(nosuch=x)",
    "(|(nosuch=x)(uid=user09))",
];

const BASES: &[&str] = &[
    "dc=example,dc=com",
    "ou=People,dc=example,dc=com",
    "ou=Groups,dc=example,dc=com",
    "uid=user01,ou=People,dc=example,dc=com",
    "ou=Missing,dc=example,dc=com",
];

/// One bound connection speaking our codec: hundreds of searches without
/// a process or a bind (an Argon2 check on Meridian) each.
struct Searcher {
    client: Client,
    next_id: i32,
}

impl Searcher {
    fn bind(addr: std::net::SocketAddr, dn: &str, password: &str) -> Searcher {
        let mut client = Client::connect(addr);
        let mut bytes = Vec::new();
        meridian_proto::message::encode_simple_bind(
            &mut bytes,
            1,
            dn.as_bytes(),
            password.as_bytes(),
        );
        client.send(&bytes);
        client.read_until(|m| {
            let ProtocolOp::BindResponse(b) = &m.op else {
                panic!("{m:?}")
            };
            assert_eq!(b.result.code, ResultCode::SUCCESS);
            true
        });
        Searcher { client, next_id: 2 }
    }

    /// The result code and the entries, each as sorted `name: value`
    /// lines, the list sorted (entry order is not specified).
    fn search(
        &mut self,
        base: &str,
        scope: Scope,
        filter: &str,
        attrs: &[&str],
    ) -> (u32, Vec<Vec<String>>) {
        let ber = filter_str::parse(filter, 32).unwrap();
        let attrs: Vec<&[u8]> = attrs.iter().map(|a| a.as_bytes()).collect();
        let mut bytes = Vec::new();
        let id = self.next_id;
        self.next_id += 1;
        LdapMessage {
            message_id: id,
            op: ProtocolOp::SearchRequest(SearchRequest {
                base: base.as_bytes(),
                scope,
                deref: DerefAliases::Never,
                size_limit: 0,
                time_limit: 0,
                types_only: false,
                filter: Filter::from_ber(&ber, Depth::new(32)).unwrap(),
                attributes: Seq::from_items(&attrs),
            }),
            controls: Seq::empty(),
        }
        .encode(&mut bytes);
        self.client.send(&bytes);
        let mut entries = Vec::new();
        let mut code = 0;
        self.client.read_until(|m| match &m.op {
            ProtocolOp::SearchResultEntry(e) => {
                let mut lines = vec![format!("dn: {}", String::from_utf8_lossy(e.dn))];
                for a in e.attributes.iter() {
                    for v in a.values.iter() {
                        lines.push(format!(
                            "{}: {}",
                            String::from_utf8_lossy(a.ty),
                            String::from_utf8_lossy(v)
                        ));
                    }
                }
                lines.sort();
                entries.push(lines);
                false
            }
            ProtocolOp::SearchResultDone(r) => {
                code = r.code.0;
                true
            }
            other => panic!("{other:?}"),
        });
        entries.sort();
        (code, entries)
    }
}

#[test]
fn searches_agree_with_slapd() {
    let data = people();
    let ldif = to_ldif(&data);
    let reference = Slapd::start("differential", &ldif);
    // The default indexes, and ordering ones: `>=` and `<=` above are
    // then answered from an index on our side.
    let server = Server::start(
        "[storage.indexes]\n\
         objectClass = [\"eq\"]\n\
         uid = [\"eq\", \"sub\"]\n\
         cn = [\"eq\", \"sub\"]\n\
         mail = [\"eq\"]\n\
         entryUUID = [\"eq\"]\n\
         uidNumber = [\"eq\", \"ord\"]\n",
    );
    let url = server.url();
    let mut add = Command::new("ldapadd")
        .args(["-x", "-H", &url, "-D", ADMIN_DN, "-w", ADMIN_PASSWORD])
        .env("LDAPNOINIT", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    add.stdin
        .take()
        .unwrap()
        .write_all(ldif.as_bytes())
        .unwrap();
    assert!(add.wait().unwrap().success());

    let reference_addr: std::net::SocketAddr =
        format!("127.0.0.1:{}", reference.port).parse().unwrap();
    let mut theirs_conn = Searcher::bind(reference_addr, "cn=admin,dc=example,dc=com", "secret");
    let mut ours_conn = Searcher::bind(server.addr, ADMIN_DN, ADMIN_PASSWORD);
    let mut compared = 0;
    let mut with_entries = 0;
    let mut failures = Vec::new();
    for base in BASES {
        for scope in [Scope::Base, Scope::OneLevel, Scope::Subtree] {
            for filter in FILTERS {
                for attrs in [
                    &["cn", "sn", "uid", "mail"][..],
                    &["1.1"][..],
                    &["objectClass", "member"][..],
                    &["cn;lang-", "sn"][..],
                    &[][..],
                ] {
                    let theirs = theirs_conn.search(base, scope, filter, attrs);
                    let ours = ours_conn.search(base, scope, filter, attrs);
                    compared += 1;
                    with_entries += usize::from(!theirs.1.is_empty());
                    if theirs != ours {
                        failures.push(format!("-b {base} -s {scope:?} {filter} {attrs:?}:\n  slapd    {theirs:?}\n  meridian {ours:?}"));
                    }
                }
            }
        }
    }
    // And through OpenLDAP's own ldapsearch, once per scope.
    for scope in ["base", "one", "sub"] {
        let args = [
            "-b",
            "ou=People,dc=example,dc=com",
            "-s",
            scope,
            "(objectClass=person)",
            "cn",
            "mail",
        ];
        let run = |url: &str, dn: &str, pw: &str| {
            let (code, blocks, _) = ldapsearch(url, dn, pw, &args);
            (code, blocks)
        };
        assert_eq!(
            run(
                &format!("ldap://127.0.0.1:{}", reference.port),
                "cn=admin,dc=example,dc=com",
                "secret"
            ),
            run(&server.url(), ADMIN_DN, ADMIN_PASSWORD),
            "ldapsearch -s {scope}"
        );
    }
    assert!(
        compared > 1000 && with_entries > 300,
        "{compared} searches, {with_entries} with entries"
    );
    assert!(
        failures.is_empty(),
        "{} of {compared} searches differ:\n{}",
        failures.len(),
        failures
            .iter()
            .take(8)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// DNs whose values hold `=`, which RFC 4514 lets stand unescaped: `cn=a=b`,
/// `cn=a\=b` and `cn=a\3Db` name one entry. The same adds, searches, a
/// modify and a delete through OpenLDAP's tools must give slapd's result
/// codes and entry counts (the DN text slapd returns is its own pretty
/// form, `cn=a\3Db`; ours is the DN as it was added).
#[test]
fn dns_holding_an_equals_sign_agree_with_slapd() {
    const BASE: &str = "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n";
    let reference = Slapd::start("equals-dn", BASE);
    let server = Server::start("");
    let (code, out) = admin_tool(&server, "ldapadd", &[], Some(BASE));
    assert_eq!(code, 0, "{out}");
    let person = |dn: &str| format!("dn: {dn}\nobjectClass: person\ncn: a=b\nsn: x\n");
    let replace_sn =
        "dn: cn=A=B,dc=example,dc=com\nchangetype: modify\nreplace: sn\nsn: y\n".to_owned();
    let steps: Vec<(&str, Vec<&str>, Option<String>)> = vec![
        ("ldapadd", vec![], Some(person("cn=a=b,dc=example,dc=com"))),
        (
            "ldapadd",
            vec![],
            Some(person(r"cn=a\=b,dc=example,dc=com")),
        ),
        (
            "ldapadd",
            vec![],
            Some(person(r"cn=a\3Db,dc=example,dc=com")),
        ),
        (
            "ldapsearch",
            vec!["-b", r"cn=a\3Db,dc=example,dc=com", "-s", "base", "1.1"],
            None,
        ),
        (
            "ldapsearch",
            vec!["-b", "cn=A=B,dc=example,dc=com", "-s", "base", "1.1"],
            None,
        ),
        (
            "ldapsearch",
            vec!["-b", "dc=example,dc=com", "(cn=a=b)", "1.1"],
            None,
        ),
        ("ldapmodify", vec![], Some(replace_sn)),
        (
            "ldapsearch",
            vec!["-b", "dc=example,dc=com", "(sn=y)", "1.1"],
            None,
        ),
        ("ldapdelete", vec![r"cn=a\=b,dc=example,dc=com"], None),
        (
            "ldapsearch",
            vec!["-b", "cn=a=b,dc=example,dc=com", "-s", "base", "1.1"],
            None,
        ),
    ];
    let run = |url: &str, bind: &[&str]| -> Vec<(i32, usize)> {
        steps
            .iter()
            .map(|(name, extra, stdin)| {
                let mut args = vec!["-LLL"];
                if *name != "ldapsearch" {
                    args.clear();
                }
                args.extend_from_slice(extra);
                let (code, out) = tool_at(url, name, bind, &args, stdin.as_deref());
                (code, out.lines().filter(|l| l.starts_with("dn:")).count())
            })
            .collect()
    };
    let theirs = run(
        &format!("ldap://127.0.0.1:{}", reference.port),
        &["-D", "cn=admin,dc=example,dc=com", "-w", "secret"],
    );
    // slapd: the first add succeeds, the other two spellings already
    // exist (68), every spelling finds the entry, and it is gone after
    // the delete (32).
    assert_eq!(
        theirs,
        [
            (0, 0),
            (68, 0),
            (68, 0),
            (0, 1),
            (0, 1),
            (0, 1),
            (0, 0),
            (0, 1),
            (0, 0),
            (32, 0)
        ]
    );
    let ours = run(&server.url(), &["-D", ADMIN_DN, "-w", ADMIN_PASSWORD]);
    assert_eq!(ours, theirs);
}

#[test]
fn an_add_request_without_attributes_is_a_protocol_error_as_in_slapd() {
    // Issue 27, defect 6: Meridian answered objectClassViolation (65).
    const BASE: &str = "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n";
    let reference = Slapd::start("empty-add", BASE);
    let server = Server::start("");
    let (code, out) = admin_tool(&server, "ldapadd", &[], Some(BASE));
    assert_eq!(code, 0, "{out}");
    let answer = |addr: std::net::SocketAddr, password: &str| {
        let mut client = Client::bound(addr, ADMIN_DN, password);
        client.send_message(&LdapMessage {
            message_id: 2,
            op: ProtocolOp::AddRequest(AddRequest {
                dn: b"cn=empty,dc=example,dc=com",
                attributes: Seq::empty(),
            }),
            controls: Seq::empty(),
        });
        let mut code = None;
        client.read_until(|m| match &m.op {
            ProtocolOp::AddResponse(r) => {
                code = Some(r.code.0);
                true
            }
            _ => false,
        });
        code.unwrap()
    };
    let theirs = answer(
        format!("127.0.0.1:{}", reference.port).parse().unwrap(),
        "secret",
    );
    assert_eq!(theirs, 2, "slapd answers protocolError");
    assert_eq!(answer(server.addr, ADMIN_PASSWORD), theirs);
}

#[test]
fn filters_over_attributes_a_user_may_not_search_agree_with_slapd() {
    // Issue 27, defect 1: under access rules that hide userPassword (the
    // default), a filter naming every attribute (an extensible match
    // without a type or with :dn:) dropped entries slapd returns. slapd
    // gets the same rules as Meridian's defaults.
    const DATA: &str = "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\n\
        dn: ou=People,dc=example,dc=com\nobjectClass: organizationalUnit\nou: People\n\n\
        dn: uid=bjensen,ou=People,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: bjensen\ncn: Barbara Jensen\nsn: Jensen\nuserPassword: hidden-1\n\n\
        dn: uid=ajensen,ou=People,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: ajensen\ncn: Anne Jensen\nsn: Jensen\nuserPassword: hidden-2\n\n\
        dn: uid=reader,ou=People,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: reader\ncn: Reader\nsn: Reader\nuserPassword: reader-pw\n";
    let reference = Slapd::start_with(
        "hidden-attributes",
        DATA,
        &slapd::Extra {
            database: "access to attrs=userPassword by self write by anonymous auth by * none\n\
                       access to * by users read by * none\n",
            ..slapd::Extra::default()
        },
    );
    let server = Server::start("");
    let (code, out) = admin_tool(&server, "ldapadd", &[], Some(DATA));
    assert_eq!(code, 0, "{out}");
    let reader = "uid=reader,ou=People,dc=example,dc=com";
    let reference_addr = format!("127.0.0.1:{}", reference.port).parse().unwrap();
    let mut theirs = Searcher::bind(reference_addr, reader, "reader-pw");
    let mut ours = Searcher::bind(server.addr, reader, "reader-pw");
    for filter in [
        "(sn=Jensen)",
        "(|(sn=Jensen)(ou:dn:=Nowhere))",
        "(:caseExactMatch:=Jensen)",
        "(cn:dn:=Reader)",
        "(|(sn=Jensen)(userPassword=hidden-1))",
        "(userPassword=hidden-1)",
        "(!(userPassword=hidden-1))",
        "(&(sn=Jensen)(!(userPassword=x)))",
    ] {
        let base = "dc=example,dc=com";
        let slapd = theirs.search(base, Scope::Subtree, filter, &["1.1"]);
        let meridian = ours.search(base, Scope::Subtree, filter, &["1.1"]);
        assert_eq!(meridian, slapd, "{filter}");
    }
    // The assertion control on a read: an attribute the reader may not
    // search is not matched (assertionFailed where the filter needs it),
    // never insufficientAccess.
    let assert_read = |url: &str, filter: &str| {
        let out = Command::new("ldapsearch")
            .args(["-x", "-LLL", "-H", url, "-D", reader, "-w", "reader-pw"])
            .args(["-e", &format!("assert={filter}")])
            .args([
                "-b",
                "uid=bjensen,ou=People,dc=example,dc=com",
                "-s",
                "base",
                "1.1",
            ])
            .env("LDAPNOINIT", "1")
            .output()
            .unwrap();
        (out.status.code(), text(&out.stdout))
    };
    let theirs_url = format!("ldap://127.0.0.1:{}", reference.port);
    for filter in [
        "(sn=Jensen)",
        "(userPassword=hidden-1)",
        "(|(sn=Jensen)(userPassword=hidden-1))",
        "(&(sn=Jensen)(userPassword=hidden-1))",
        "(!(userPassword=x))",
        "(:caseExactMatch:=Jensen)",
        "(|(sn=Nobody)(ou:dn:=People))",
    ] {
        assert_eq!(
            assert_read(&server.url(), filter),
            assert_read(&theirs_url, filter),
            "assertion {filter}"
        );
    }
}

/// The matched values control (RFC 3876) through `ldapsearch -E mv=`:
/// the same entries, attributes and values as slapd, and the same
/// refusals.
#[test]
fn matched_values_agree_with_slapd() {
    let ldif = to_ldif(&people());
    let reference = Slapd::start("matched-values", &ldif);
    let server = Server::start("");
    let (code, out) = admin_tool(&server, "ldapadd", &[], Some(&ldif));
    assert_eq!(code, 0, "{out}");
    let run = |url: &str, dn: &str, pw: &str, control: &str, filter: &str, attrs: &[&str]| {
        let mut args = vec!["-E", control, "-b", "ou=People,dc=example,dc=com", filter];
        args.extend_from_slice(attrs);
        let (code, blocks, said) = ldapsearch(url, dn, pw, &args);
        // The result code, as ldapsearch names it.
        let named = said
            .lines()
            .find(|l| l.starts_with("Additional information") || l.contains('('))
            .map(str::to_owned);
        (code, blocks, named)
    };
    let theirs_url = format!("ldap://127.0.0.1:{}", reference.port);
    let mut failures = Vec::new();
    for (control, filter, attrs) in [
        ("mv=(cn=John*)", "(uid=user0*)", &["cn", "sn"][..]),
        ("mv=(cn;lang-de=*)", "(objectClass=person)", &["cn"][..]),
        (
            "mv=(name=*Jensen*)",
            "(sn=Jensen)",
            &["cn", "sn", "mail"][..],
        ),
        (
            "mv=(mail=nobody@nowhere)",
            "(uid=user01)",
            &["mail", "uid"][..],
        ),
        (
            "mv=(objectClass=posixAccount)",
            "(uid=user0*)",
            &["objectClass"][..],
        ),
        (
            "mv=(uidNumber>=1100)",
            "(uidNumber=*)",
            &["uidNumber", "uid"][..],
        ),
        (
            "mv=(telephoneNumber=+1 512 101 1037)",
            "(uid=user01)",
            &[][..],
        ),
        ("mv=(nosuch=x)", "(uid=user01)", &["uid"][..]),
        ("!mv=(cn=John*)", "(uid=user01)", &["cn"][..]),
    ] {
        let theirs = run(
            &theirs_url,
            "cn=admin,dc=example,dc=com",
            "secret",
            control,
            filter,
            attrs,
        );
        let ours = run(
            &server.url(),
            ADMIN_DN,
            ADMIN_PASSWORD,
            control,
            filter,
            attrs,
        );
        if theirs != ours {
            failures.push(format!(
                "-E {control} {filter} {attrs:?}:\n  slapd    {theirs:?}\n  meridian {ours:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `ldapsearch -x -LLL -o ldif-wrap=no -H URL -D DN -w PW ARGS...`: the
/// exit code, the entries (each one's lines sorted, then the entries
/// sorted: servers may return either in any order), and the standard
/// error.
fn ldapsearch(url: &str, dn: &str, pw: &str, args: &[&str]) -> (Option<i32>, Vec<String>, String) {
    let out = Command::new("ldapsearch")
        .args([
            "-x",
            "-LLL",
            "-o",
            "ldif-wrap=no",
            "-H",
            url,
            "-D",
            dn,
            "-w",
            pw,
        ])
        .args(args)
        .env("LDAPNOINIT", "1")
        .output()
        .unwrap();
    let mut blocks: Vec<String> = text(&out.stdout)
        .split("\n\n")
        .map(|b| {
            let mut lines: Vec<&str> = b.lines().collect();
            lines.sort_unstable();
            lines.join("\n")
        })
        .collect();
    blocks.sort();
    (out.status.code(), blocks, text(&out.stderr))
}
