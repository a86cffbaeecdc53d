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

#[path = "../../../testing/slapd.rs"]
mod slapd;

use std::io::Write as _;
use std::process::{Command, Stdio};

use meridian_proto::*;
use slapd::{Attrs, SUFFIX, Slapd, to_ldif};
use support::*;

fn dataset() -> Vec<(String, Attrs)> {
    let s = |v: &str| v.to_owned();
    let mut out = vec![
        (
            SUFFIX.to_owned(),
            vec![
                ("objectClass", vec![s("dcObject"), s("organization")]),
                ("dc", vec![s("example")]),
                ("o", vec![s("Example")]),
            ],
        ),
        (
            format!("ou=People,{SUFFIX}"),
            vec![
                ("objectClass", vec![s("organizationalUnit")]),
                ("ou", vec![s("People")]),
            ],
        ),
        (
            format!("ou=Groups,{SUFFIX}"),
            vec![
                ("objectClass", vec![s("organizationalUnit")]),
                ("ou", vec![s("Groups")]),
            ],
        ),
        (
            format!("ou=Eng,ou=People,{SUFFIX}"),
            vec![
                ("objectClass", vec![s("organizationalUnit")]),
                ("ou", vec![s("Eng")]),
                ("description", vec![s("Engineering")]),
            ],
        ),
    ];
    let given = ["Babs", "John", "Ünal", "Anne-Marie", "Li", "O'Neil"];
    let sn = ["Jensen", "Doe", "Çelik", "Smith Jones", "Wang"];
    for i in 0..30usize {
        let uid = format!("u{i:02}");
        let parent = if i % 4 == 0 {
            format!("ou=Eng,ou=People,{SUFFIX}")
        } else {
            format!("ou=People,{SUFFIX}")
        };
        let mut attrs: Attrs = vec![
            (
                "objectClass",
                if i % 2 == 0 {
                    vec![s("inetOrgPerson"), s("posixAccount")]
                } else {
                    vec![s("inetOrgPerson")]
                },
            ),
            ("uid", vec![uid.clone()]),
            ("cn", vec![format!("{} {}", given[i % 6], sn[i % 5])]),
            ("sn", vec![s(sn[i % 5])]),
            ("mail", vec![format!("{uid}@Example.com")]),
            (
                "telephoneNumber",
                vec![format!("+1 555 {:04}", 100 + i * 7)],
            ),
        ];
        if i % 2 == 0 {
            attrs.push(("uidNumber", vec![(1000 + i).to_string()]));
            attrs.push(("gidNumber", vec![(100 + i % 3).to_string()]));
            attrs.push(("homeDirectory", vec![format!("/home/{uid}")]));
        }
        if i % 5 == 1 {
            attrs.push(("title", vec![s("Senior  Engineer")]));
        }
        out.push((format!("uid={uid},{parent}"), attrs));
    }
    out.push((
        format!("cn=Admins,ou=Groups,{SUFFIX}"),
        vec![
            ("objectClass", vec![s("groupOfNames")]),
            ("cn", vec![s("Admins")]),
            (
                "member",
                vec![
                    format!("uid=u00,ou=Eng,ou=People,{SUFFIX}"),
                    format!("uid=u03,ou=People,{SUFFIX}"),
                ],
            ),
        ],
    ));
    out
}

const FILTERS: &[&str] = &[
    "(objectClass=*)",
    "(objectClass=person)",
    "(objectClass=posixAccount)",
    "(uid=u1*)",
    "(uid=U07)",
    "(cn=babs*)",
    "(cn=*jones)",
    "(sn=çelik)",
    "(mail=*@example.COM)",
    "(telephoneNumber=+15550107)",
    "(uidNumber>=1020)",
    "(uidNumber<=1004)",
    "(gidNumber=101)",
    "(title=senior engineer)",
    "(&(objectClass=posixAccount)(|(uid=u02)(uid=u04)(uid=u05)))",
    "(!(objectClass=posixAccount))",
    "(member=uid=U03,ou=people,dc=example,dc=com)",
    "(ou=eng)",
    "(ou:dn:=eng)",
    "(nosuch=x)",
    "(|(nosuch=x)(uid=u09))",
];

const BASES: &[&str] = &[
    "dc=example,dc=com",
    "ou=People,dc=example,dc=com",
    "ou=Eng,ou=People,dc=example,dc=com",
    "uid=u01,ou=People,dc=example,dc=com",
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
        LdapMessage {
            message_id: 1,
            op: ProtocolOp::BindRequest(BindRequest {
                version: 3,
                name: dn.as_bytes(),
                auth: Authentication::Simple(password.as_bytes()),
            }),
            controls: Seq::empty(),
        }
        .encode(&mut bytes);
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
    let data = dataset();
    let ldif = to_ldif(&data);
    let reference = Slapd::start("differential", &ldif);
    let server = Server::start("");
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
        let run = |url: &str, dn: &str, pw: &str| {
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
                    "-b",
                    "ou=People,dc=example,dc=com",
                    "-s",
                    scope,
                    "(objectClass=person)",
                    "cn",
                    "mail",
                ])
                .env("LDAPNOINIT", "1")
                .output()
                .unwrap();
            let mut blocks: Vec<String> =
                text(&out.stdout).split("\n\n").map(str::to_owned).collect();
            blocks.sort();
            (out.status.code(), blocks)
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
