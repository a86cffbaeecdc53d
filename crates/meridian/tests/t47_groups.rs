//! Groups and integrity (`[groups]`): memberOf kept beside the groups,
//! references that follow their entry, unique values. Checked against
//! slapd 2.5 with its memberof and refint overlays, step by step, and in
//! a cluster through a leader's SIGKILL.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::disallowed_methods
)]

mod support;

use std::time::Duration;

use meridian_testing::slapd::{self, Slapd};
use support::cluster::{Cluster, Outcome, Writer1, admin_at, url};
use support::*;

const TOP: &str = "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n";

const BASE: &str = "dn: ou=People,dc=example,dc=com\nobjectClass: organizationalUnit\nou: People\n\n\
dn: ou=Groups,dc=example,dc=com\nobjectClass: organizationalUnit\nou: Groups\n\n\
dn: uid=alice,ou=People,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: alice\ncn: Alice\nsn: A\n\n\
dn: uid=bob,ou=People,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: bob\ncn: Bob\nsn: B\nmanager: uid=alice,ou=People,dc=example,dc=com\n\n\
dn: uid=carol,ou=People,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: carol\ncn: Carol\nsn: C\nseeAlso: uid=bob,ou=People,dc=example,dc=com\n";

/// The steps both servers take, each an LDIF for `ldapmodify -a` or a
/// `ldapmodrdn`/`ldapdelete` argument list, in order.
enum Step {
    Modify(&'static str),
    Rename(&'static [&'static str]),
    Delete(&'static str),
}

const STEPS: &[Step] = &[
    Step::Modify(
        "dn: cn=admins,ou=Groups,dc=example,dc=com\nchangetype: add\nobjectClass: groupOfNames\ncn: admins\n\
         member: uid=alice,ou=People,dc=example,dc=com\nmember: uid=bob,ou=People,dc=example,dc=com\n\n\
         dn: cn=staff,ou=Groups,dc=example,dc=com\nchangetype: add\nobjectClass: groupOfNames\ncn: staff\n\
         member: cn=admins,ou=Groups,dc=example,dc=com\nmember: uid=carol,ou=People,dc=example,dc=com\n\n\
         dn: cn=devs,ou=Groups,dc=example,dc=com\nchangetype: add\nobjectClass: groupOfUniqueNames\ncn: devs\n\
         uniqueMember: uid=carol,ou=People,dc=example,dc=com\nuniqueMember: uid=bob,ou=People,dc=example,dc=com\n",
    ),
    Step::Modify(
        "dn: cn=admins,ou=Groups,dc=example,dc=com\nchangetype: modify\ndelete: member\n\
         member: uid=alice,ou=People,dc=example,dc=com\n-\nadd: member\nmember: uid=carol,ou=People,dc=example,dc=com\n",
    ),
    Step::Modify(
        "dn: cn=staff,ou=Groups,dc=example,dc=com\nchangetype: modify\nreplace: member\n\
         member: uid=bob,ou=People,dc=example,dc=com\nmember: cn=admins,ou=Groups,dc=example,dc=com\n",
    ),
    Step::Rename(&["-r", "cn=admins,ou=Groups,dc=example,dc=com", "cn=wheel"]),
    Step::Rename(&["-r", "uid=bob,ou=People,dc=example,dc=com", "uid=robert"]),
    Step::Rename(&[
        "-r",
        "-s",
        "ou=Groups,dc=example,dc=com",
        "uid=carol,ou=People,dc=example,dc=com",
        "uid=carol",
    ]),
    Step::Delete("cn=wheel,ou=Groups,dc=example,dc=com"),
    Step::Delete("uid=alice,ou=People,dc=example,dc=com"),
    Step::Delete("uid=carol,ou=Groups,dc=example,dc=com"),
    // memberOf is the server's: a client may not write it.
    Step::Modify(
        "dn: uid=robert,ou=People,dc=example,dc=com\nchangetype: modify\nadd: memberOf\n\
         memberOf: cn=staff,ou=Groups,dc=example,dc=com\n",
    ),
];

/// Each entry's memberOf and references, one line per value, DNs in one
/// case and spacing: what both servers must agree on.
fn view(url: &str, bind: &[&str]) -> String {
    entries_view(
        url,
        bind,
        &["memberOf", "member", "uniqueMember", "manager", "seeAlso"],
    )
}

fn apply(url: &str, bind: &[&str], step: &Step) -> i32 {
    let (code, out) = match step {
        Step::Modify(ldif) => tool_at(url, "ldapmodify", bind, &[], Some(ldif)),
        Step::Rename(args) => tool_at(url, "ldapmodrdn", bind, args, None),
        Step::Delete(dn) => tool_at(url, "ldapdelete", bind, &[dn], None),
    };
    eprintln!("{url}: {code} {}", out.trim());
    code
}

#[test]
fn memberof_and_references_follow_every_change_as_slapd_keeps_them() {
    let reference = Slapd::start_with(
        "groups",
        TOP,
        &slapd::Extra {
            global: "moduleload memberof\nmoduleload refint\n",
            // One memberof instance per group class, as slapd needs for
            // what `groups.group_classes` lists.
            database: "overlay memberof\nmemberof-refint TRUE\n\
                       overlay memberof\nmemberof-group-oc groupOfUniqueNames\n\
                       memberof-member-ad uniqueMember\nmemberof-refint TRUE\n\
                       overlay refint\nrefint_attributes member uniqueMember manager secretary seeAlso\n",
            ..slapd::Extra::default()
        },
    );
    let pair = SideBySide::start(reference, "", TOP);
    let (server, theirs, ours) = (&pair.server, pair.theirs.clone(), pair.ours.clone());
    let (their_bind, our_bind) = (SLAPD_BIND, OUR_BIND);
    for (url, bind) in [(&theirs, &their_bind), (&ours, &our_bind)] {
        let (code, out) = tool_at(url, "ldapadd", bind, &[], Some(BASE));
        assert_eq!(code, 0, "{out}");
    }
    for (n, step) in STEPS.iter().enumerate() {
        let their_code = apply(&theirs, &their_bind, step);
        let our_code = apply(&ours, &our_bind, step);
        assert_eq!(our_code, their_code, "step {n}: the result codes");
        assert_eq!(
            view(&ours, &our_bind),
            view(&theirs, &their_bind),
            "step {n}: memberOf and references"
        );
    }
    // Where the two differ, on purpose: an entry added after a group that
    // names it gets its memberOf at once here; slapd's overlay leaves it
    // without until the group changes.
    let late = "dn: cn=late,ou=Groups,dc=example,dc=com\nchangetype: add\nobjectClass: groupOfNames\ncn: late\n\
                member: uid=dave,ou=People,dc=example,dc=com\n\n\
                dn: uid=dave,ou=People,dc=example,dc=com\nchangetype: add\nobjectClass: inetOrgPerson\nuid: dave\ncn: Dave\nsn: D\n";
    assert_eq!(apply(&theirs, &their_bind, &Step::Modify(late)), 0);
    assert_eq!(apply(&ours, &our_bind, &Step::Modify(late)), 0);
    let dave = |url: &str, bind: &[&str]| {
        tool_at(
            url,
            "ldapsearch",
            bind,
            &[
                "-LLL",
                "-b",
                "uid=dave,ou=People,dc=example,dc=com",
                "-s",
                "base",
                "memberOf",
            ],
            None,
        )
        .1
    };
    assert!(
        dave(&ours, &our_bind).contains("memberOf: cn=late,ou=Groups,dc=example,dc=com"),
        "{}",
        dave(&ours, &our_bind)
    );
    assert!(!dave(&theirs, &their_bind).contains("memberOf"));
    // And memberOf filters find the members, by the index.
    let (code, out) = admin_tool(
        server,
        "ldapsearch",
        &[
            "-LLL",
            "-b",
            "dc=example,dc=com",
            "(memberOf=cn=staff,ou=Groups,dc=example,dc=com)",
            "1.1",
        ],
        None,
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("dn: uid=robert,ou=People,dc=example,dc=com"),
        "{out}"
    );
}

#[test]
fn unique_values_are_refused_with_constraint_violation_naming_the_attribute() {
    let server = Server::start("[groups]\nunique_attributes = [\"mail\"]\n");
    let (code, out) = admin_tool(&server, "ldapadd", &[], Some(TOP));
    assert_eq!(code, 0, "{out}");
    let (code, out) = admin_tool(&server, "ldapadd", &[], Some(BASE));
    assert_eq!(code, 0, "{out}");
    let set_mail = |who: &str, mail: &str| {
        let change = format!(
            "dn: uid={who},ou=People,dc=example,dc=com\nchangetype: modify\nreplace: mail\nmail: {mail}\n"
        );
        admin_tool(&server, "ldapmodify", &[], Some(&change))
    };
    let (code, out) = set_mail("alice", "a@example.com");
    assert_eq!(code, 0, "{out}");
    // Its own value again is no clash.
    let (code, out) = set_mail("alice", "a@example.com");
    assert_eq!(code, 0, "{out}");
    let (code, out) = set_mail("bob", "A@Example.com");
    assert_eq!(code, 19, "{out}");
    assert!(out.contains("mail"), "{out}");
    let add = "dn: uid=eve,ou=People,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: eve\ncn: Eve\nsn: E\nmail: a@example.com\n";
    let (code, out) = admin_tool(&server, "ldapadd", &[], Some(add));
    assert_eq!(code, 19, "{out}");
    // Once alice lets it go, it is free.
    let (code, out) = set_mail("alice", "alice@example.com");
    assert_eq!(code, 0, "{out}");
    let (code, out) = admin_tool(&server, "ldapadd", &[], Some(add));
    assert_eq!(code, 0, "{out}");
}

/// Every entry's memberOf recomputed from the groups in a dump, beside
/// the memberOf each holds: equal when they agree.
fn memberof_agrees_with_groups(dump: &str) -> Result<(), String> {
    let mut stored = std::collections::BTreeMap::<String, Vec<String>>::new();
    let mut computed = std::collections::BTreeMap::<String, Vec<String>>::new();
    for entry in dump.split("\n\n") {
        let Some(dn) = entry
            .lines()
            .find_map(|l| l.strip_prefix("dn: "))
            .map(str::to_ascii_lowercase)
        else {
            continue;
        };
        for line in entry.lines() {
            if let Some(group) = line.strip_prefix("memberOf: ") {
                stored
                    .entry(dn.clone())
                    .or_default()
                    .push(group.to_ascii_lowercase());
            }
            if let Some(member) = line.strip_prefix("member: ") {
                computed
                    .entry(member.to_ascii_lowercase())
                    .or_default()
                    .push(dn.clone());
            }
        }
    }
    // Members that are not entries (dangling) hold nothing.
    computed.retain(|member, _| {
        dump.to_ascii_lowercase()
            .contains(&format!("dn: {member}\n"))
    });
    for groups in stored.values_mut().chain(computed.values_mut()) {
        groups.sort();
    }
    if stored == computed {
        Ok(())
    } else {
        Err(format!("stored {stored:?}\ncomputed {computed:?}"))
    }
}

#[test]
fn group_changes_at_every_node_through_a_leader_kill_keep_memberof_right_on_every_replica() {
    let mut cluster = Cluster::start(
        3,
        "write_timeout_ms = 4000\n[groups]\nunique_attributes = [\"mail\"]",
    );
    let leader = cluster.leader(Duration::from_secs(20));
    let (code, out) = admin_at(
        &url(&cluster, leader),
        "ldapadd",
        &[],
        Some(&format!("{TOP}\n{BASE}")),
    );
    assert_eq!(code, 0, "{out}");
    let groups = ["g0", "g1", "g2"];
    let mut setup = Writer1::new(cluster.node(leader).ldap);
    for group in groups {
        let dn = format!("cn={group},ou=Groups,dc=example,dc=com");
        assert_eq!(
            setup.add(
                &dn,
                &[
                    ("objectClass", &["groupOfNames"]),
                    ("cn", &[group]),
                    ("member", &["uid=alice,ou=People,dc=example,dc=com"]),
                ],
            ),
            Outcome::Ok
        );
    }
    // Every node adds its own users to the shared groups and takes some
    // out again, at once; the leader is killed half way through.
    let writers: Vec<_> = (1..=3)
        .map(|id| {
            let addr = cluster.node(id).ldap;
            std::thread::spawn(move || {
                let mut w = Writer1::new(addr);
                for n in 0..30 {
                    let user = format!("uid=u{id}-{n},ou=People,dc=example,dc=com");
                    let _ = w.add(
                        &user,
                        &[
                            ("objectClass", &["inetOrgPerson"]),
                            ("cn", &["u"]),
                            ("sn", &["u"]),
                        ],
                    );
                    let group = format!("cn=g{},ou=Groups,dc=example,dc=com", n % 3);
                    let _ = w.change_value(&group, 0, "member", &user);
                    if n % 4 == 0 {
                        let _ = w.change_value(&group, 1, "member", &user);
                    }
                    if n % 7 == 0 {
                        let _ = w.delete(&user);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(600));
    cluster.kill(leader);
    std::thread::sleep(Duration::from_millis(1500));
    cluster.start_node(leader);
    for writer in writers {
        writer.join().unwrap();
    }
    let dump = cluster.await_identical(Duration::from_secs(30));
    memberof_agrees_with_groups(&dump).unwrap();
    assert!(
        dump.contains("memberOf: cn=g"),
        "some memberships were kept"
    );

    // Two nodes add one mail at once: one wins, the other gets 19.
    let adds: Vec<_> = [1, 2]
        .into_iter()
        .map(|id| {
            let addr = cluster.node(id).ldap;
            std::thread::spawn(move || {
                let mut w = Writer1::new(addr);
                w.add(
                    &format!("uid=mail{id},ou=People,dc=example,dc=com"),
                    &[
                        ("objectClass", &["inetOrgPerson"]),
                        ("cn", &["m"]),
                        ("sn", &["m"]),
                        ("mail", &["shared@example.com"]),
                    ],
                )
            })
        })
        .collect();
    let outcomes: Vec<Outcome> = adds.into_iter().map(|a| a.join().unwrap()).collect();
    let won = outcomes.iter().filter(|o| **o == Outcome::Ok).count();
    let refused = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Refused(19, _)))
        .count();
    assert_eq!((won, refused), (1, 1), "{outcomes:?}");
    cluster.await_identical(Duration::from_secs(30));
}

#[test]
fn nested_group_matches_walk_the_chain_stop_at_cycles_and_at_the_limit() {
    const NESTED: &str = "dn: ou=People,dc=example,dc=com\nobjectClass: organizationalUnit\nou: People\n\n\
dn: ou=Groups,dc=example,dc=com\nobjectClass: organizationalUnit\nou: Groups\n\n\
dn: uid=ann,ou=People,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: ann\ncn: Ann\nsn: A\n\n\
dn: uid=ben,ou=People,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: ben\ncn: Ben\nsn: B\n\n\
dn: cn=ops,ou=Groups,dc=example,dc=com\nobjectClass: groupOfNames\ncn: ops\nmember: uid=ann,ou=People,dc=example,dc=com\n\n\
dn: cn=eng,ou=Groups,dc=example,dc=com\nobjectClass: groupOfNames\ncn: eng\nmember: cn=ops,ou=Groups,dc=example,dc=com\nmember: uid=ben,ou=People,dc=example,dc=com\n\n\
dn: cn=staff,ou=Groups,dc=example,dc=com\nobjectClass: groupOfNames\ncn: staff\nmember: cn=eng,ou=Groups,dc=example,dc=com\n";
    let matches = |server: &Server, filter: &str| -> (i32, Vec<String>) {
        let (code, out) = admin_tool(
            server,
            "ldapsearch",
            &[
                "-LLL",
                "-o",
                "ldif-wrap=no",
                "-b",
                "dc=example,dc=com",
                filter,
                "1.1",
            ],
            None,
        );
        let mut dns: Vec<String> = out
            .lines()
            .filter_map(|l| l.strip_prefix("dn: "))
            .map(str::to_owned)
            .collect();
        dns.sort();
        (code, dns)
    };
    let server = Server::start("");
    let (code, out) = admin_tool(&server, "ldapadd", &[], Some(&format!("{TOP}\n{NESTED}")));
    assert_eq!(code, 0, "{out}");
    let people = |filter: &str| {
        let (code, dns) = matches(&server, &format!("(&(objectClass=inetOrgPerson){filter})"));
        assert_eq!(code, 0);
        dns
    };
    let in_staff = "(memberOf:1.2.840.113556.1.4.1941:=cn=staff,ou=Groups,dc=example,dc=com)";
    assert_eq!(
        people(in_staff),
        [
            "uid=ann,ou=People,dc=example,dc=com",
            "uid=ben,ou=People,dc=example,dc=com"
        ]
    );
    // Only direct members without the rule.
    assert!(people("(memberOf=cn=staff,ou=Groups,dc=example,dc=com)").is_empty());
    // The groups ann is in, however deep.
    let (code, groups) = matches(
        &server,
        "(member:1.2.840.113556.1.4.1941:=uid=ann,ou=People,dc=example,dc=com)",
    );
    assert_eq!(code, 0);
    assert_eq!(
        groups,
        [
            "cn=eng,ou=Groups,dc=example,dc=com",
            "cn=ops,ou=Groups,dc=example,dc=com",
            "cn=staff,ou=Groups,dc=example,dc=com"
        ]
    );
    // A cycle (staff inside ops, which is inside staff) ends the walk.
    let cycle = "dn: cn=ops,ou=Groups,dc=example,dc=com\nchangetype: modify\nadd: member\nmember: cn=staff,ou=Groups,dc=example,dc=com\n";
    let (code, out) = admin_tool(&server, "ldapmodify", &[], Some(cycle));
    assert_eq!(code, 0, "{out}");
    assert_eq!(people(in_staff).len(), 2);
    drop(server);

    // Past groups.max_nested_groups: adminLimitExceeded, not a partial answer.
    let server = Server::start("[groups]\nmax_nested_groups = 1\n");
    let (code, out) = admin_tool(&server, "ldapadd", &[], Some(&format!("{TOP}\n{NESTED}")));
    assert_eq!(code, 0, "{out}");
    let (code, _) = matches(&server, in_staff);
    assert_eq!(code, 11);
}

#[test]
fn dynamic_groups_list_their_members_and_memberof_as_slapd_s_dynlist_does() {
    let dyngroup = slapd::schema_dir().join("dyngroup.schema");
    let global = format!("include {}\nmoduleload dynlist\n", dyngroup.display());
    let reference = Slapd::start_with(
        "dynlist",
        TOP,
        &slapd::Extra {
            global: &global,
            database: "overlay dynlist\n\
                       dynlist-attrset groupOfURLs memberURL member+memberOf@groupOfNames\n",
            ..slapd::Extra::default()
        },
    );
    let config = format!(
        "[directory]\nschema_files = [{:?}]\n",
        dyngroup.display().to_string()
    );
    let pair = SideBySide::start(reference, &config, TOP);
    let (theirs, ours) = (pair.theirs.clone(), pair.ours.clone());
    let (their_bind, our_bind) = (SLAPD_BIND, OUR_BIND);
    let entries = format!(
        "{BASE}\n\
         dn: cn=dept7,ou=Groups,dc=example,dc=com\nobjectClass: groupOfURLs\ncn: dept7\n\
         memberURL: ldap:///ou=People,dc=example,dc=com??sub?(|(uid=alice)(uid=carol))\n\n\
         dn: cn=admins,ou=Groups,dc=example,dc=com\nobjectClass: groupOfNames\ncn: admins\n\
         member: uid=alice,ou=People,dc=example,dc=com\n"
    );
    for (url, bind) in [(&theirs, &their_bind), (&ours, &our_bind)] {
        let (code, out) = tool_at(url, "ldapadd", bind, &[], Some(&entries));
        assert_eq!(code, 0, "{out}");
    }
    // The dynamic group's members, and each person's memberOf: static and
    // dynamic side by side.
    assert_eq!(view(&ours, &our_bind), view(&theirs, &their_bind));
    let ours_now = view(&ours, &our_bind);
    assert!(
        ours_now.contains("dn: uid=carol,ou=people,dc=example,dc=com\nmemberof: cn=dept7,ou=groups,dc=example,dc=com"),
        "{ours_now}"
    );
    // A change of the URL changes the members at the next read.
    let change = "dn: cn=dept7,ou=Groups,dc=example,dc=com\nchangetype: modify\nreplace: memberURL\n\
                  memberURL: ldap:///ou=People,dc=example,dc=com??one?(uid=bob)\n";
    assert_eq!(apply(&theirs, &their_bind, &Step::Modify(change)), 0);
    assert_eq!(apply(&ours, &our_bind, &Step::Modify(change)), 0);
    assert_eq!(view(&ours, &our_bind), view(&theirs, &their_bind));
    assert!(view(&ours, &our_bind).contains("member: uid=bob,ou=people,dc=example,dc=com"));
}

#[test]
fn reindex_makes_memberof_what_the_groups_say() {
    // Groups written with memberOf off: their members have none.
    let off = "[groups]\nmemberof = false\n";
    let mut first = Server::start(off);
    let (code, out) = admin_tool(&first, "ldapadd", &[], Some(TOP));
    assert_eq!(code, 0, "{out}");
    let groups = "dn: cn=admins,ou=Groups,dc=example,dc=com\nobjectClass: groupOfNames\ncn: admins\n\
                  member: uid=alice,ou=People,dc=example,dc=com\nmember: uid=bob,ou=People,dc=example,dc=com\n\n\
                  dn: cn=devs,ou=Groups,dc=example,dc=com\nobjectClass: groupOfUniqueNames\ncn: devs\n\
                  uniqueMember: uid=bob,ou=People,dc=example,dc=com\n";
    let (code, out) = admin_tool(&first, "ldapadd", &[], Some(&format!("{BASE}\n{groups}")));
    assert_eq!(code, 0, "{out}");
    assert!(first.terminate().success());
    let data = first.data_dir.clone();
    // The configuration with memberOf on, as a default server has it.
    let config = data.join("on.toml");
    std::fs::write(&config, "").unwrap();
    let reindex = std::process::Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["reindex", "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(&data)
        .output()
        .unwrap();
    assert!(reindex.status.success(), "{}", text(&reindex.stderr));
    let second = Server::start_with("", Some(ADMIN_PASSWORD), Some(data));
    let ours = second.url();
    let bind = ["-D", ADMIN_DN, "-w", ADMIN_PASSWORD];
    let seen = view(&ours, &bind);
    for line in [
        "dn: uid=alice,ou=people,dc=example,dc=com\nmemberof: cn=admins,ou=groups,dc=example,dc=com",
        "dn: uid=bob,ou=people,dc=example,dc=com\nmanager: uid=alice,ou=people,dc=example,dc=com\nmemberof: cn=admins,ou=groups,dc=example,dc=com\nmemberof: cn=devs,ou=groups,dc=example,dc=com",
    ] {
        assert!(seen.contains(line), "no {line:?} in:\n{seen}");
    }
    assert!(
        !seen.contains("dn: uid=carol,ou=people,dc=example,dc=com\nmemberof"),
        "{seen}"
    );
    // And the index was built with them: a memberOf filter finds bob.
    let (code, out) = admin_tool(
        &second,
        "ldapsearch",
        &[
            "-LLL",
            "-b",
            "dc=example,dc=com",
            "(memberOf=cn=devs,ou=Groups,dc=example,dc=com)",
            "1.1",
        ],
        None,
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out.trim(),
        "dn: uid=bob,ou=People,dc=example,dc=com",
        "{out}"
    );
    drop(second);
    drop(first);
}
