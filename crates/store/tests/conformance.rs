//! The conformance suite: every backend must pass every test here
//! (openraft's storage suite is the model: one suite, any storage).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use meridian_config::{Backend, Durability, StorageConfig};
use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_model::entry::Entry;
use meridian_model::filter::CompiledFilter;
use meridian_model::modify::{ModOp, Modification};
use meridian_proto::{Depth, Filter, ResultCode, Scope, filter_str};
use meridian_store::{Command, Effect, Store, StoreError, StoreOptions};

mod common;
use common::{SUFFIX, entry};

struct Fixture {
    store: Store,
    schema: Arc<Schema>,
    dir: PathBuf,
    keep: bool,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A backend and how it makes writes durable: what the suite runs on.
#[derive(Debug, Clone, Copy)]
struct Flavour(Backend, Durability);

fn open(flavour: Flavour, tag: &str, tweak: impl FnOnce(&mut StorageConfig)) -> Fixture {
    let Flavour(backend, durability) = flavour;
    let schema = Arc::new(Schema::builtin().unwrap());
    let dir = std::env::temp_dir().join(format!(
        "meridian-store-{}-{tag}-{backend:?}-{durability:?}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let mut storage = suite_storage(flavour);
    tweak(&mut storage);
    Fixture::at(dir, schema, storage)
}

impl Fixture {
    /// A store opened on the files in `dir` with `storage`.
    fn at(dir: PathBuf, schema: Arc<Schema>, storage: StorageConfig) -> Fixture {
        let store = Store::open(
            StoreOptions {
                path: dir.clone(),
                storage,
                suffixes: vec![Dn::parse(SUFFIX.as_bytes(), &schema).unwrap()],
                groups: meridian_config::GroupsConfig::default(),
            },
            Arc::clone(&schema),
        )
        .unwrap();
        Fixture {
            store,
            schema,
            dir,
            keep: false,
        }
    }
}

/// The suite's storage config: the defaults, `sn` with three kinds of
/// index and `uidNumber` with two.
fn suite_storage(Flavour(backend, durability): Flavour) -> StorageConfig {
    let mut storage = StorageConfig {
        backend,
        durability,
        ..StorageConfig::default()
    };
    storage.indexes.insert(
        "sn".into(),
        vec![
            meridian_config::IndexKind::Eq,
            meridian_config::IndexKind::Sub,
            meridian_config::IndexKind::Pres,
        ],
    );
    storage.indexes.insert(
        "uidNumber".into(),
        vec![
            meridian_config::IndexKind::Eq,
            meridian_config::IndexKind::Ord,
        ],
    );
    storage
}

/// Closes the store of `f` and opens its files again with `storage`.
fn reopen(f: Fixture, storage: StorageConfig) -> Fixture {
    let (dir, schema) = (f.dir.clone(), Arc::clone(&f.schema));
    let mut f = f;
    f.keep = true;
    drop(f);
    Fixture::at(dir, schema, storage)
}

fn add(f: &Fixture, dn: &str, attrs: &[(&str, &[&str])]) -> Result<Effect, StoreError> {
    f.store.execute_blocking(Command::Add {
        entry: entry(&f.schema, dn, attrs),
        prechecked: false,
    })
}

fn dn(f: &Fixture, text: &str) -> Dn {
    Dn::parse(text.as_bytes(), &f.schema).unwrap()
}

fn base_tree(f: &Fixture) {
    add(
        f,
        SUFFIX,
        &[
            ("objectClass", &["dcObject", "organization"]),
            ("dc", &["example"]),
            ("o", &["Example"]),
        ],
    )
    .unwrap();
    add(
        f,
        &format!("ou=People,{SUFFIX}"),
        &[
            ("objectClass", &["organizationalUnit"]),
            ("ou", &["People"]),
        ],
    )
    .unwrap();
    add(
        f,
        &format!("ou=Groups,{SUFFIX}"),
        &[
            ("objectClass", &["organizationalUnit"]),
            ("ou", &["Groups"]),
        ],
    )
    .unwrap();
}

fn person(f: &Fixture, uid: &str, sn: &str, number: u32) {
    let n = number.to_string();
    add(
        f,
        &format!("uid={uid},ou=People,{SUFFIX}"),
        &[
            ("objectClass", &["inetOrgPerson", "posixAccount"]),
            ("uid", &[uid]),
            ("cn", &[&format!("{uid} {sn}")]),
            ("sn", &[sn]),
            ("uidNumber", &[&n]),
            ("gidNumber", &["100"]),
            ("homeDirectory", &[&format!("/home/{uid}")]),
        ],
    )
    .unwrap();
}

fn search(f: &Fixture, base: &str, scope: Scope, filter: &str) -> (BTreeSet<String>, bool) {
    let ber = filter_str::parse(filter, 32).unwrap();
    let filter = Filter::from_ber(&ber, Depth::new(32)).unwrap();
    let snap = f.store.snapshot().unwrap();
    let mut found = BTreeSet::new();
    let base = if base.is_empty() {
        Dn::root()
    } else {
        dn(f, base)
    };
    let report = snap
        .search(&base, scope, &filter, |_, e| {
            found.insert(e.dn.normalized().to_owned());
            true
        })
        .unwrap();
    (found, report.indexed)
}

/// How many entries `text` matches in `scope` of `base` in `snap` (each
/// must be found once), and whether a scan column was read.
fn count_matches(
    snap: &meridian_store::Snapshot<'_>,
    base: &Dn,
    scope: Scope,
    text: &str,
) -> (usize, bool) {
    let ber = filter_str::parse(text, 32).unwrap();
    let filter = Filter::from_ber(&ber, Depth::new(32)).unwrap();
    let mut found = BTreeSet::new();
    let report = snap
        .search(base, scope, &filter, |id, _| {
            assert!(found.insert(id), "entry {id} found twice");
            true
        })
        .unwrap();
    (found.len(), report.columns)
}

/// The add of device `cn` under `parent` with one description.
fn add_device(f: &Fixture, parent: &str, cn: &str, description: &str) -> Command {
    Command::Add {
        entry: entry(
            &f.schema,
            &format!("cn={cn},{parent}"),
            &[
                ("objectClass", &["device"]),
                ("cn", &[cn]),
                ("description", &[description]),
            ],
        ),
        prechecked: false,
    }
}

/// Submits every command, then waits for each to commit.
fn submit_all(f: &Fixture, commands: impl IntoIterator<Item = Command>) {
    let pending: Vec<_> = commands
        .into_iter()
        .map(|c| f.store.submit_blocking(c).unwrap())
        .collect();
    for p in pending {
        p.wait_blocking().unwrap();
    }
}

/// LMDB synced per commit, LMDB with the journal, and the memory store.
fn backends() -> [Flavour; 3] {
    [
        Flavour(Backend::Mdb, Durability::Durable),
        Flavour(Backend::Mdb, Durability::Journal),
        Flavour(Backend::Memory, Durability::Relaxed),
    ]
}

#[test]
fn crud_and_result_codes() {
    for backend in backends() {
        let f = open(backend, "crud", |_| {});
        // A non-suffix entry without parent.
        let err = add(
            &f,
            "ou=People,dc=nowhere",
            &[
                ("objectClass", &["organizationalUnit"]),
                ("ou", &["People"]),
            ],
        )
        .unwrap_err();
        assert_eq!(err.code(), ResultCode::NO_SUCH_OBJECT);
        base_tree(&f);
        person(&f, "jdoe", "Doe", 1000);
        // Exists already.
        let err = add(
            &f,
            &format!("ou=people,{SUFFIX}"),
            &[
                ("objectClass", &["organizationalUnit"]),
                ("ou", &["people"]),
            ],
        )
        .unwrap_err();
        assert_eq!(err.code(), ResultCode::ENTRY_ALREADY_EXISTS);
        // Parent missing: matchedDN is the deepest existing ancestor.
        let err = add(
            &f,
            &format!("cn=x,ou=Nowhere,ou=People,{SUFFIX}"),
            &[("objectClass", &["person"]), ("cn", &["x"]), ("sn", &["y"])],
        )
        .unwrap_err();
        match &err {
            StoreError::NoSuchObject { matched, .. } => {
                assert_eq!(matched, &format!("ou=People,{SUFFIX}"))
            }
            other => panic!("{other:?}"),
        }
        // Schema violations come back with their codes.
        let err = add(
            &f,
            &format!("cn=y,{SUFFIX}"),
            &[("objectClass", &["person"]), ("cn", &["y"])],
        )
        .unwrap_err();
        assert_eq!(err.code(), ResultCode::OBJECT_CLASS_VIOLATION);
        // Delete: non-leaf, missing, then a leaf.
        let err = f
            .store
            .execute_blocking(Command::Delete {
                dn: dn(&f, &format!("ou=People,{SUFFIX}")),
            })
            .unwrap_err();
        assert_eq!(err.code(), ResultCode::NOT_ALLOWED_ON_NON_LEAF);
        let err = f
            .store
            .execute_blocking(Command::Delete {
                dn: dn(&f, &format!("uid=nobody,ou=People,{SUFFIX}")),
            })
            .unwrap_err();
        assert_eq!(err.code(), ResultCode::NO_SUCH_OBJECT);
        // Modify: change, operational set, schema enforced.
        let target = dn(&f, &format!("uid=jdoe,ou=People,{SUFFIX}"));
        f.store
            .execute_blocking(Command::Modify {
                dn: target.clone(),
                changes: vec![Modification {
                    op: ModOp::Replace,
                    attr: "sn".into(),
                    values: vec![b"Smith".to_vec()],
                }],
                operational: vec![("modifyTimestamp".into(), vec![b"20261122010203Z".to_vec()])],
                permissive: false,
            })
            .unwrap();
        let (_, e) = f.store.snapshot().unwrap().get(&target).unwrap().unwrap();
        let sn = f.schema.attribute_id("sn").unwrap();
        assert_eq!(e.get(sn).unwrap().values.as_slice(), [b"Smith".to_vec()]);
        assert!(
            e.get(f.schema.attribute_id("modifyTimestamp").unwrap())
                .is_some()
        );
        let err = f
            .store
            .execute_blocking(Command::Modify {
                dn: target.clone(),
                changes: vec![Modification {
                    op: ModOp::Delete,
                    attr: "sn".into(),
                    values: vec![],
                }],
                operational: vec![],
                permissive: false,
            })
            .unwrap_err();
        assert_eq!(err.code(), ResultCode::OBJECT_CLASS_VIOLATION);
        assert_eq!(search(&f, SUFFIX, Scope::Subtree, "(sn=smith)").0.len(), 1);
        assert_eq!(search(&f, SUFFIX, Scope::Subtree, "(sn=doe)").0.len(), 0);
        f.store
            .execute_blocking(Command::Delete { dn: target.clone() })
            .unwrap();
        assert!(f.store.snapshot().unwrap().get(&target).unwrap().is_none());
        assert!(f.store.snapshot().unwrap().check().unwrap().is_empty());
    }
}

/// A search reuses the parent of the last match's DN when it decodes the
/// next (siblings share it): every match still carries its DN as it was
/// written, parsed as a fresh parse would, whatever the spelling of its
/// parent in it and in the match before.
#[test]
fn matches_keep_their_dns_as_written() {
    for backend in backends() {
        let f = open(backend, "dn-spelling", |_| {});
        base_tree(&f);
        let written = [
            ("a", format!("uid=a,ou=People,{SUFFIX}")),
            ("b", format!("UID=b,ou=People,{SUFFIX}")),
            ("c", format!("uid=c,OU=people,{SUFFIX}")),
            ("d", format!("uid=d,ou=Groups,{SUFFIX}")),
            ("e", format!("uid=e,ou=People,{SUFFIX}")),
            ("f", format!("cn=f+uid=f,ou=People,{SUFFIX}")),
        ];
        for (uid, text) in &written {
            add(
                &f,
                text,
                &[
                    ("objectClass", &["inetOrgPerson"]),
                    ("uid", &[uid]),
                    ("cn", &[uid]),
                    ("sn", &["X"]),
                ],
            )
            .unwrap();
        }
        let ber = filter_str::parse("(sn=X)", 32).unwrap();
        let filter = Filter::from_ber(&ber, Depth::new(32)).unwrap();
        let mut seen = Vec::new();
        for base in [SUFFIX.to_owned(), written[1].1.clone()] {
            let scope = if base == SUFFIX {
                Scope::Subtree
            } else {
                Scope::Base
            };
            let snap = f.store.snapshot().unwrap();
            snap.search(&dn(&f, &base), scope, &filter, |_, e| {
                let fresh = dn(&f, e.dn.original());
                assert_eq!(e.dn.normalized(), fresh.normalized(), "{backend:?}");
                assert_eq!(e.dn, fresh, "{backend:?}: {}", e.dn.original());
                seen.push(e.dn.original().to_owned());
                true
            })
            .unwrap();
        }
        // Each as its add wrote it (its parent spelled as there), and the
        // base search's one match as well.
        let mut expected: Vec<String> = written.iter().map(|(_, text)| text.clone()).collect();
        expected.push(written[1].1.clone());
        seen.sort();
        expected.sort();
        assert_eq!(seen, expected, "{backend:?}");
    }
}

#[test]
fn scopes() {
    for backend in backends() {
        let f = open(backend, "scopes", |_| {});
        base_tree(&f);
        for (i, uid) in ["a", "b", "c"].iter().enumerate() {
            person(&f, uid, "X", 1000 + i as u32);
        }
        let people = format!("ou=People,{SUFFIX}");
        assert_eq!(
            search(&f, SUFFIX, Scope::Base, "(objectClass=*)").0.len(),
            1
        );
        assert_eq!(
            search(&f, SUFFIX, Scope::OneLevel, "(objectClass=*)")
                .0
                .len(),
            2
        );
        assert_eq!(
            search(&f, SUFFIX, Scope::Subtree, "(objectClass=*)")
                .0
                .len(),
            6
        );
        assert_eq!(
            search(&f, SUFFIX, Scope::Subordinate, "(objectClass=*)")
                .0
                .len(),
            5
        );
        assert_eq!(
            search(&f, &people, Scope::OneLevel, "(objectClass=*)")
                .0
                .len(),
            3
        );
        assert_eq!(search(&f, &people, Scope::Subtree, "(uid=b)").0.len(), 1);
        assert_eq!(
            search(
                &f,
                &format!("ou=Groups,{SUFFIX}"),
                Scope::Subtree,
                "(uid=b)"
            )
            .0
            .len(),
            0
        );
        assert_eq!(search(&f, "", Scope::Subtree, "(uid=b)").0.len(), 1);
        // A missing base is noSuchObject with its matchedDN.
        let snap = f.store.snapshot().unwrap();
        let ber = filter_str::parse("(objectClass=*)", 8).unwrap();
        let err = snap
            .search(
                &dn(&f, &format!("ou=x,{people}")),
                Scope::Subtree,
                &Filter::from_ber(&ber, Depth::new(8)).unwrap(),
                |_, _| true,
            )
            .unwrap_err();
        assert_eq!(err.code(), ResultCode::NO_SUCH_OBJECT);
    }
}

#[test]
fn every_index_type_is_used_and_agrees_with_a_scan() {
    for backend in backends() {
        let f = open(backend, "indexes", |_| {});
        base_tree(&f);
        for i in 0..60u32 {
            person(
                &f,
                &format!("user{i:02}"),
                ["Jensen", "Doe", "Smith Jones"][i as usize % 3],
                1000 + i,
            );
        }
        for (filter, indexed, count) in [
            ("(uid=user07)", true, 1),
            ("(sn=*ense*)", true, 20),
            ("(sn=smith jones)", true, 20),
            ("(sn=*)", true, 60),
            ("(objectClass=person)", true, 60),
            ("(objectClass=posixAccount)", true, 60),
            ("(&(sn=doe)(uid=user0*))", true, 3),
            ("(|(uid=user01)(uid=user02))", true, 2),
            ("(uidNumber=1010)", true, 1),
            ("(uidNumber>=1050)", true, 10),
            ("(uidNumber<=1009)", true, 10),
            ("(uidNumber>=999)", true, 60),
            ("(&(uidNumber>=1010)(uidNumber<=1019))", true, 10),
            // Not an INTEGER: Undefined for every entry.
            ("(uidNumber>=ten)", true, 0),
            // No ordering rule: Undefined too.
            ("(sn>=a)", true, 0),
            ("(gidNumber>=0)", false, 60),
            ("(!(sn=doe))", false, 43),
            ("(sn=*e*)", false, 60),
            ("(homeDirectory=/home/user05)", false, 1),
        ] {
            let (found, was_indexed) = search(&f, SUFFIX, Scope::Subtree, filter);
            assert_eq!(
                (found.len(), was_indexed),
                (count, indexed),
                "{filter} on {backend:?}"
            );
        }
    }
}

#[test]
fn ordering_ranges_over_values_too_long_for_a_key() {
    for backend in backends() {
        let f = open(backend, "long-ordering", |s| {
            s.indexes
                .insert("dnQualifier".into(), vec![meridian_config::IndexKind::Ord]);
        });
        base_tree(&f);
        // Three values whose keys are cut alike, and a short one.
        let long = "q".repeat(600);
        for (uid, value) in [
            ("a", format!("{long}a")),
            ("b", format!("{long}b")),
            ("c", format!("{long}c")),
            ("d", "r".to_owned()),
        ] {
            add(
                &f,
                &format!("uid={uid},ou=People,{SUFFIX}"),
                &[
                    ("objectClass", &["account", "extensibleObject"]),
                    ("uid", &[uid]),
                    ("dnQualifier", &[&value]),
                ],
            )
            .unwrap();
        }
        for (filter, count) in [
            (format!("(dnQualifier>={long}b)"), 3),
            (format!("(dnQualifier<={long}b)"), 2),
            (format!("(dnQualifier>={long}z)"), 1),
            ("(dnQualifier>=r)".to_owned(), 1),
            ("(dnQualifier<=q)".to_owned(), 0),
            ("(dnQualifier<=R)".to_owned(), 4),
        ] {
            let (found, indexed) = search(&f, SUFFIX, Scope::Subtree, &filter);
            assert_eq!(
                (found.len(), indexed),
                (count, true),
                "{} on {backend:?}",
                &filter[..filter.len().min(40)]
            );
        }
        assert!(f.store.snapshot().unwrap().check().unwrap().is_empty());
    }
}

#[test]
fn large_many_and_unicode_values() {
    for backend in backends() {
        let f = open(backend, "large", |s| s.map_size_bytes = 1 << 20);
        base_tree(&f);
        let photo = "x".repeat(2 << 20);
        let many: Vec<String> = (0..1000).map(|i| format!("value number {i}")).collect();
        let many_refs: Vec<&str> = many.iter().map(String::as_str).collect();
        add(
            &f,
            &format!("cn=Zoë Çelik,ou=People,{SUFFIX}"),
            &[
                ("objectClass", &["inetOrgPerson"]),
                ("cn", &["Zoë Çelik"]),
                ("sn", &["Çelik"]),
                ("description", &many_refs),
                ("jpegPhoto", &[&photo]),
            ],
        )
        .unwrap();
        // The 1 MiB map had to grow for the 2 MiB value.
        assert!(f.store.map_size() > 1 << 20);
        let (found, _) = search(&f, SUFFIX, Scope::Subtree, "(sn=çeLIK)");
        assert_eq!(found.len(), 1);
        let (found, _) = search(&f, SUFFIX, Scope::Subtree, "(description=VALUE NUMBER 999)");
        assert_eq!(found.len(), 1);
        let (_, e) = f
            .store
            .snapshot()
            .unwrap()
            .get(&dn(&f, &format!("cn=zoë çelik,ou=people,{SUFFIX}")))
            .unwrap()
            .unwrap();
        assert_eq!(
            e.get(f.schema.attribute_id("jpegPhoto").unwrap())
                .unwrap()
                .values[0]
                .len(),
            2 << 20
        );
        assert!(f.store.snapshot().unwrap().check().unwrap().is_empty());
    }
}

#[test]
fn values_and_dns_too_long_for_an_lmdb_key() {
    // LMDB keys hold 511 bytes. Indexed values longer than that are
    // stored and found (their equality keys are cut and digested); a DN
    // that long is refused with a reason, and looking it up finds nothing.
    for backend in backends() {
        let f = open(backend, "long-keys", |_| {});
        base_tree(&f);
        let common = "s".repeat(700);
        let (first, second) = (format!("{common}1"), format!("{common}2"));
        person(&f, "long", &first, 1);
        person(&f, "other", &second, 2);
        let people = format!("ou=People,{SUFFIX}");
        let uids = |filter: &str| -> BTreeSet<String> {
            let (found, indexed) = search(&f, &people, Scope::OneLevel, filter);
            assert!(indexed, "{filter} uses the sn index");
            found
        };
        let uid = |u: &str| BTreeSet::from([format!("uid={u},ou=people,{SUFFIX}")]);
        assert_eq!(uids(&format!("(sn={first})")), uid("long"));
        assert_eq!(uids(&format!("(sn={})", first.to_uppercase())), uid("long"));
        assert_eq!(uids(&format!("(sn={second})")), uid("other"));
        assert!(uids(&format!("(sn={common})")).is_empty());
        assert_eq!(uids(&format!("(sn=*{}2)", "s".repeat(40))), uid("other"));
        // A modify from one long value to another moves the entry's keys.
        f.store
            .execute_blocking(Command::Modify {
                dn: dn(&f, &format!("uid=long,{people}")),
                changes: vec![Modification {
                    op: ModOp::Replace,
                    attr: "sn".into(),
                    values: vec![format!("{common}3").into_bytes()],
                }],
                operational: vec![],
                permissive: false,
            })
            .unwrap();
        assert!(uids(&format!("(sn={first})")).is_empty());
        assert_eq!(uids(&format!("(sn={common}3)")), uid("long"));

        let long_dn = format!("cn={},{people}", "c".repeat(600));
        let refused = add(
            &f,
            &long_dn,
            &[
                ("objectClass", &["person"]),
                ("cn", &[&"c".repeat(600)]),
                ("sn", &["x"]),
            ],
        )
        .unwrap_err();
        assert_eq!(
            refused.code(),
            meridian_proto::ResultCode::UNWILLING_TO_PERFORM
        );
        assert!(refused.to_string().contains("DN is too long"), "{refused}");
        // A rename to such a DN, or a move that would put a descendant
        // there, is refused as a whole.
        let long_rdn = format!("uid={}", "u".repeat(600));
        let refused =
            modify_dn(&f, &format!("uid=long,{people}"), &long_rdn, false, None).unwrap_err();
        assert_eq!(
            refused.code(),
            meridian_proto::ResultCode::UNWILLING_TO_PERFORM
        );
        assert!(refused.to_string().contains("DN is too long"), "{refused}");
        let long_ou = format!("ou={}", "o".repeat(480));
        let refused = modify_dn(&f, &people, &long_ou, false, None).unwrap_err();
        assert!(refused.to_string().contains("DN is too long"), "{refused}");
        let snap = f.store.snapshot().unwrap();
        assert!(snap.get(&dn(&f, &long_dn)).unwrap().is_none());
        assert!(
            snap.get(&dn(&f, &format!("uid=long,{people}")))
                .unwrap()
                .is_some()
        );
        assert!(snap.check().unwrap().is_empty());
    }
}

#[test]
fn group_commit_batches_concurrent_writers() {
    for backend in backends() {
        let f = open(backend, "group", |_| {});
        base_tree(&f);
        let before = f.store.commits();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        runtime.block_on(async {
            let mut tasks = Vec::new();
            for i in 0..400u32 {
                let store = f.store.clone();
                let schema = Arc::clone(&f.schema);
                tasks.push(tokio::spawn(async move {
                    let uid = format!("g{i}");
                    let e = entry(
                        &schema,
                        &format!("uid={uid},ou=People,{SUFFIX}"),
                        &[("objectClass", &["account"]), ("uid", &[&uid])],
                    );
                    store
                        .execute(Command::Add {
                            entry: e,
                            prechecked: false,
                        })
                        .await
                }));
            }
            for t in tasks {
                t.await.unwrap().unwrap();
            }
        });
        let commits = f.store.commits() - before;
        assert!(commits < 400, "{commits} commits for 400 adds: no batching");
        assert_eq!(
            search(&f, SUFFIX, Scope::Subtree, "(objectClass=account)")
                .0
                .len(),
            400
        );
    }
}

/// Planner results equal a full scan with the model's evaluation, for
/// random filters over random entries.
mod planner_properties {
    use super::*;
    use proptest::prelude::*;

    const SNS: &[&str] = &["Jensen", "Doe", "Smith", "Çelik", "de la Cruz"];
    /// The same few instants, spelled with and without a zone offset and
    /// a fraction, and some between them.
    const TIMES: &[&str] = &[
        "20261122010203Z",
        "20261122020203+0100",
        "20261122010203.5Z",
        "202611220102Z",
        "20261121235959Z",
        "20261122010204-0030",
        "19700101000000Z",
    ];

    /// An entry's `uidNumber`: positive and negative, of several lengths.
    fn number(i: u32) -> i64 {
        let i = i64::from(i);
        match i % 4 {
            0 => 1000 + i,
            1 => -(1000 + i),
            2 => i - 6,
            _ => -i * 1_000_000_007,
        }
    }

    fn filter_text() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            (0usize..40).prop_map(|i| format!("(uid=u{i})")),
            (0usize..5).prop_map(|i| format!("(sn={})", SNS[i].to_lowercase())),
            prop_oneof![
                Just("(sn=*en*)"),
                Just("(sn=*ith)"),
                Just("(sn=de*)"),
                Just("(sn=*)"),
                Just("(cn=*u1*)"),
                Just("(mail=*)"),
                // A supertype matches its subtypes' values; an option
                // asked for must be on the attribute.
                Just("(name=doe)"),
                Just("(name=*u1*)"),
                Just("(cn;lang-de=*)"),
                Just("(description=*)"),
                Just("(description;lang-de=teil)")
            ]
            .prop_map(String::from),
            (1000u32..1040).prop_map(|n| format!("(uidNumber>={n})")),
            (1000u32..1040).prop_map(|n| format!("(uidNumber={n})")),
            // Ordering, over negative and positive numbers of several
            // lengths and times in several spellings (both indexed).
            (
                prop_oneof![
                    -1045i64..-995,
                    -12i64..12,
                    995i64..1045,
                    Just(99_999_999_999)
                ],
                any::<bool>()
            )
                .prop_map(|(n, up)| format!("(uidNumber{}{n})", if up { ">=" } else { "<=" })),
            (0usize..TIMES.len(), any::<bool>()).prop_map(|(i, up)| format!(
                "(createTimestamp{}{})",
                if up { ">=" } else { "<=" },
                TIMES[i]
            )),
            prop_oneof![
                Just("(objectClass=person)"),
                Just("(objectClass=posixAccount)"),
                Just("(objectClass=account)")
            ]
            .prop_map(String::from),
        ];
        leaf.prop_recursive(3, 12, 3, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 1..3)
                    .prop_map(|v| format!("(&{})", v.concat())),
                proptest::collection::vec(inner.clone(), 1..3)
                    .prop_map(|v| format!("(|{})", v.concat())),
                inner.prop_map(|v| format!("(!{v})")),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn planned_search_equals_full_scan(filters in proptest::collection::vec(filter_text(), 1..4)) {
            thread_local! {
                static FIXTURE: (Fixture, Vec<Entry>) = {
                    let f = open(Flavour(Backend::Memory, Durability::Relaxed), "planner", |s| {
                        s.indexes.insert("createTimestamp".into(), vec![meridian_config::IndexKind::Ord]);
                    });
                    base_tree(&f);
                    let mut all = Vec::new();
                    for i in 0..40u32 {
                        let uid = format!("u{i}");
                        let sn = SNS[i as usize % SNS.len()];
                        let n = number(i / 2).to_string();
                        let mut attrs: Vec<(&str, Vec<String>)> = vec![
                            ("uid", vec![uid.clone()]),
                            ("cn", vec![format!("{uid} {sn}")]),
                            ("sn", vec![sn.to_string()]),
                        ];
                        if i % 5 != 0 {
                            attrs.push(("createTimestamp", vec![TIMES[i as usize % TIMES.len()].into()]));
                        }
                        if i % 2 == 0 {
                            attrs.push(("objectClass", vec!["inetOrgPerson".into(), "posixAccount".into()]));
                            attrs.extend([("uidNumber", vec![n]), ("gidNumber", vec!["1".into()]), ("homeDirectory", vec!["/h".into()])]);
                        } else {
                            attrs.push(("objectClass", vec!["inetOrgPerson".into()]));
                        }
                        if i % 3 == 0 {
                            attrs.push(("mail", vec![format!("{uid}@x.org")]));
                        }
                        if i % 4 == 0 {
                            attrs.push(("cn;lang-de", vec![format!("{uid} de")]));
                            attrs.push(("description;lang-de", vec!["Teil".into()]));
                        }
                        let refs: Vec<(&str, Vec<&str>)> = attrs.iter().map(|(n, v)| (*n, v.iter().map(String::as_str).collect())).collect();
                        let refs2: Vec<(&str, &[&str])> = refs.iter().map(|(n, v)| (*n, v.as_slice())).collect();
                        let e = entry(&f.schema, &format!("uid={uid},ou=People,{SUFFIX}"), &refs2);
                        f.store.execute_blocking(Command::Add { entry: e.clone(), prechecked: false }).unwrap();
                        all.push(e);
                    }
                    (f, all)
                };
            }
            FIXTURE.with(|(f, all)| {
                for text in &filters {
                    let ber = filter_str::parse(text, 32).unwrap();
                    let filter = Filter::from_ber(&ber, Depth::new(32)).unwrap();
                    let compiled = CompiledFilter::compile(&filter, &f.schema);
                    let expected: BTreeSet<String> = all.iter().filter(|e| compiled.matches(e, &f.schema)).map(|e| e.dn.normalized().to_owned()).collect();
                    let (found, _) = search(f, &format!("ou=People,{SUFFIX}"), Scope::OneLevel, text);
                    assert_eq!(found, expected, "{text}");
                    // Resumed after some entry, as a paged or streamed
                    // search does: the index lists are read from there on.
                    let snap = f.store.snapshot().unwrap();
                    let mut ids = Vec::new();
                    snap.search(&Dn::root(), Scope::Subtree, &filter, |id, e| {
                        ids.push((id, e.dn.normalized().to_owned()));
                        true
                    })
                    .unwrap();
                    ids.sort();
                    let after = ids.get(ids.len() / 2).map_or(0, |(id, _)| *id);
                    let mut resumed = Vec::new();
                    snap.search_after(&Dn::root(), Scope::Subtree, &filter, Some(after), |id, e| {
                        resumed.push((id, e.dn.normalized().to_owned()));
                        true
                    })
                    .unwrap();
                    resumed.sort();
                    let rest: Vec<_> = ids.iter().filter(|(id, _)| *id > after).cloned().collect();
                    assert_eq!(resumed, rest, "{text} after {after}");
                }
            });
        }
    }
}

fn modify_dn(
    f: &Fixture,
    dn_text: &str,
    new_rdn: &str,
    delete_old: bool,
    superior: Option<&str>,
) -> Result<Effect, StoreError> {
    f.store.execute_blocking(Command::ModifyDn {
        dn: dn(f, dn_text),
        new_rdn: new_rdn.into(),
        delete_old_rdn: delete_old,
        new_superior: superior.map(|s| Box::new(dn(f, s))),
        operational: vec![("modifyTimestamp".into(), vec![b"20261122020202Z".to_vec()])],
    })
}

#[test]
fn rename_and_move_with_subtrees() {
    for backend in backends() {
        let f = open(backend, "moddn", |_| {});
        base_tree(&f);
        person(&f, "a", "Doe", 1);
        let people = format!("ou=People,{SUFFIX}");
        let groups = format!("ou=Groups,{SUFFIX}");
        // Rename a leaf, dropping the old RDN value.
        assert_eq!(
            modify_dn(&f, &format!("uid=a,{people}"), "uid=b", true, None).unwrap(),
            Effect::Renamed(0)
        );
        let snap = f.store.snapshot().unwrap();
        assert!(
            snap.get(&dn(&f, &format!("uid=a,{people}")))
                .unwrap()
                .is_none()
        );
        let (_, e) = snap
            .get(&dn(&f, &format!("uid=b,{people}")))
            .unwrap()
            .unwrap();
        let uid = f.schema.attribute_id("uid").unwrap();
        assert_eq!(e.get(uid).unwrap().values.as_slice(), [b"b".to_vec()]);
        assert_eq!(e.dn.original(), format!("uid=b,{people}"));
        drop(snap);
        assert_eq!(search(&f, SUFFIX, Scope::Subtree, "(uid=a)").0.len(), 0);
        assert_eq!(search(&f, SUFFIX, Scope::Subtree, "(uid=b)").0.len(), 1);
        // Keep the old value when asked.
        modify_dn(&f, &format!("uid=b,{people}"), "uid=c", false, None).unwrap();
        let (_, e) = f
            .store
            .snapshot()
            .unwrap()
            .get(&dn(&f, &format!("uid=c,{people}")))
            .unwrap()
            .unwrap();
        assert_eq!(e.get(uid).unwrap().values.len(), 2);
        // Move a whole subtree under ou=Groups, renaming its root.
        for i in 0..3 {
            person(&f, &format!("m{i}"), "Doe", 10 + i);
        }
        assert_eq!(
            modify_dn(&f, &people, "ou=Staff", true, Some(&groups)).unwrap(),
            Effect::Renamed(4)
        );
        let staff = format!("ou=Staff,{groups}");
        assert_eq!(
            search(&f, &staff, Scope::OneLevel, "(objectClass=*)")
                .0
                .len(),
            4
        );
        assert_eq!(
            search(&f, &staff, Scope::Subtree, "(uid=m1)").0,
            [format!("uid=m1,{staff}").to_lowercase()]
                .into_iter()
                .collect()
        );
        assert!(
            search(&f, SUFFIX, Scope::OneLevel, "(ou=people)")
                .0
                .is_empty()
        );
        let (_, e) = f
            .store
            .snapshot()
            .unwrap()
            .get(&dn(&f, &format!("uid=m2,{staff}")))
            .unwrap()
            .unwrap();
        assert_eq!(e.dn.original(), format!("uid=m2,{staff}"));
        assert!(
            f.store.snapshot().unwrap().check().unwrap().is_empty(),
            "{:?}",
            f.store.snapshot().unwrap().check()
        );
        // Errors.
        let code = |r: Result<Effect, StoreError>| r.unwrap_err().code();
        person_at(&f, &staff, "x");
        assert_eq!(
            code(modify_dn(
                &f,
                &format!("uid=x,{staff}"),
                "uid=m0",
                true,
                None
            )),
            ResultCode::ENTRY_ALREADY_EXISTS
        );
        assert_eq!(
            code(modify_dn(
                &f,
                &format!("uid=nobody,{staff}"),
                "uid=y",
                true,
                None
            )),
            ResultCode::NO_SUCH_OBJECT
        );
        assert_eq!(
            code(modify_dn(
                &f,
                &format!("uid=x,{staff}"),
                "uid=y",
                true,
                Some(&format!("ou=Nowhere,{SUFFIX}"))
            )),
            ResultCode::NO_SUCH_OBJECT
        );
        assert_eq!(
            code(modify_dn(&f, &groups, "ou=G2", true, Some(&staff))),
            ResultCode::UNWILLING_TO_PERFORM
        );
        assert_eq!(
            code(modify_dn(&f, SUFFIX, "dc=other", true, None)),
            ResultCode::UNWILLING_TO_PERFORM
        );
        assert_eq!(
            code(modify_dn(
                &f,
                &format!("uid=x,{staff}"),
                "uid=y+cn=z,ou=extra",
                true,
                None
            )),
            ResultCode::INVALID_DN_SYNTAX
        );
        // Case-only rename of itself is allowed.
        modify_dn(&f, &format!("uid=x,{staff}"), "uid=X", true, None).unwrap();
        assert!(f.store.snapshot().unwrap().check().unwrap().is_empty());
    }
}

fn person_at(f: &Fixture, parent: &str, uid: &str) {
    add(
        f,
        &format!("uid={uid},{parent}"),
        &[("objectClass", &["account"]), ("uid", &[uid])],
    )
    .unwrap();
}

#[test]
fn indexes_added_later_are_built_by_a_rebuild() {
    let dir;
    {
        let f = open(Flavour(Backend::Mdb, Durability::Durable), "reindex", |s| {
            s.indexes.remove("uid");
        });
        base_tree(&f);
        for i in 0..30u32 {
            person(&f, &format!("r{i}"), "Doe", 3000 + i);
        }
        assert!(!search(&f, SUFFIX, Scope::Subtree, "(uid=r7)").1);
        dir = f.dir.clone();
        let mut f = f;
        // Keep the files; dropping the store closes the environment.
        f.keep = true;
    }
    // Reopen the same files with the uid index configured.
    let schema = Arc::new(Schema::builtin().unwrap());
    let f = Fixture::at(dir, schema, StorageConfig::default());
    // Before the rebuild the index is empty, and the check says so; a
    // search does not use it, so it still finds the entry, by a scan.
    assert!(!f.store.snapshot().unwrap().check().unwrap().is_empty());
    let (found, indexed) = search(&f, SUFFIX, Scope::Subtree, "(uid=r7)");
    assert_eq!((found.len(), indexed), (1, false));
    // Writes keep the index not yet built.
    person(&f, "r30", "Doe", 3030);
    assert_eq!(
        f.store.execute_blocking(Command::RebuildIndexes).unwrap(),
        Effect::Reindexed(34)
    );
    assert!(f.store.snapshot().unwrap().check().unwrap().is_empty());
    let (found, indexed) = search(&f, SUFFIX, Scope::Subtree, "(uid=r7)");
    assert_eq!((found.len(), indexed), (1, true));
    // The database remembers it is built.
    let f = reopen(f, StorageConfig::default());
    let (found, indexed) = search(&f, SUFFIX, Scope::Subtree, "(uid=r7)");
    assert_eq!((found.len(), indexed), (1, true));
    // Dropped from the config, the index is no longer kept: an entry
    // added then has no key, so the index is not taken back as built.
    let mut without_uid = StorageConfig::default();
    without_uid.indexes.remove("uid");
    let f = reopen(f, without_uid);
    person(&f, "r31", "Doe", 3031);
    let f = reopen(f, StorageConfig::default());
    let (found, indexed) = search(&f, SUFFIX, Scope::Subtree, "(uid=r31)");
    assert_eq!((found.len(), indexed), (1, false));
    // Other indexes stayed built all along.
    assert!(search(&f, SUFFIX, Scope::Subtree, "(cn=r31 doe)").1);
}

#[test]
fn indexes_added_later_are_built_online_while_writes_go_on() {
    for flavour in [
        Flavour(Backend::Mdb, Durability::Durable),
        Flavour(Backend::Mdb, Durability::Journal),
    ] {
        let f = open(flavour, "online", |s| {
            s.indexes.remove("uid");
        });
        base_tree(&f);
        // More entries than a few build steps take.
        for i in 0..1300u32 {
            person(&f, &format!("o{i}"), "Doe", 6000 + i);
        }
        let f = reopen(f, suite_storage(flavour));
        assert!(!search(&f, SUFFIX, Scope::Subtree, "(uid=o7)").1);
        let build = f.store.build_indexes_online().expect("uid is not built");
        // Writes during the build: adds, a rename, a delete, a modify of
        // the indexed type.
        let people = format!("ou=People,{SUFFIX}");
        for i in 0..50u32 {
            person(&f, &format!("n{i}"), "Roe", 8000 + i);
        }
        modify_dn(&f, &format!("uid=o1000,{people}"), "uid=o1000b", true, None).unwrap();
        f.store
            .execute_blocking(Command::Delete {
                dn: dn(&f, &format!("uid=o1001,{people}")),
            })
            .unwrap();
        f.store
            .execute_blocking(Command::Modify {
                dn: dn(&f, &format!("uid=o1002,{people}")),
                changes: vec![Modification {
                    op: ModOp::Add,
                    attr: "uid".into(),
                    values: vec![b"o1002b".to_vec()],
                }],
                operational: Default::default(),
                permissive: false,
            })
            .unwrap();
        build.join().unwrap().unwrap();
        let snap = f.store.snapshot().unwrap();
        assert_eq!(snap.check().unwrap(), Vec::<String>::new());
        drop(snap);
        for (filter, count) in [
            ("(uid=o7)", 1),
            ("(uid=o1299)", 1),
            ("(uid=n49)", 1),
            ("(uid=o1000)", 0),
            ("(uid=o1000b)", 1),
            ("(uid=o1001)", 0),
            ("(uid=o1002b)", 1),
            ("(uid=o12*)", 111),
        ] {
            let (found, indexed) = search(&f, SUFFIX, Scope::Subtree, filter);
            assert_eq!(
                (found.len(), indexed),
                (count, true),
                "{filter} on {flavour:?}"
            );
        }
        // Built is remembered; nothing to build at the next open.
        let f = reopen(f, suite_storage(flavour));
        assert!(f.store.build_indexes_online().is_none());
        assert!(search(&f, SUFFIX, Scope::Subtree, "(uid=o7)").1);
    }
}

#[test]
fn the_same_commands_give_the_same_bytes() {
    let a = open(
        Flavour(Backend::Memory, Durability::Relaxed),
        "det-a",
        |_| {},
    );
    let b = open(Flavour(Backend::Mdb, Durability::Durable), "det-b", |_| {});
    for f in [&a, &b] {
        base_tree(f);
        for i in 0..20u32 {
            person(f, &format!("d{i}"), "Doe", 2000 + i);
        }
        f.store
            .execute_blocking(Command::Delete {
                dn: dn(f, &format!("uid=d3,ou=People,{SUFFIX}")),
            })
            .unwrap();
    }
    // Every record, DN key, child link, index key and meta value
    // (entry IDs, attribute name numbers) is the same, byte for byte.
    let dump = |f: &Fixture| {
        let snap = f.store.snapshot().unwrap();
        assert!(snap.check().unwrap().is_empty());
        snap.raw_dump().unwrap()
    };
    let dumped = dump(&a);
    assert!(
        dumped
            .iter()
            .any(|(db, k, _)| *db == "meta" && k.starts_with(b"name/"))
    );
    assert_eq!(dumped, dump(&b));
}

#[test]
fn bulk_adds_fail_one_by_one_and_export_order_is_parents_first() {
    for backend in backends() {
        let f = open(backend, "bulk", |_| {});
        let ou = |name: &str| {
            entry(
                &f.schema,
                &format!("ou={name},{SUFFIX}"),
                &[("objectClass", &["organizationalUnit"]), ("ou", &[name])],
            )
        };
        let account = |uid: &str, parent: &str| {
            entry(
                &f.schema,
                &format!("uid={uid},ou={parent},{SUFFIX}"),
                &[("objectClass", &["account"]), ("uid", &[uid])],
            )
        };
        let suffix = entry(
            &f.schema,
            SUFFIX,
            &[("objectClass", &["domain"]), ("dc", &["example"])],
        );
        // A child before its parent, a duplicate, and a schema violation:
        // each refused alone, the others added in the same command.
        let entries = vec![
            suffix,
            account("early", "B"),
            ou("B"),
            ou("A"),
            account("a1", "A"),
            ou("A"),
            entry(
                &f.schema,
                &format!("cn=x,{SUFFIX}"),
                &[("objectClass", &["person"])],
            ),
            account("late", "B"),
        ];
        let outcome = f
            .store
            .execute_blocking(Command::AddMany {
                entries: entries.into(),
                prechecked: false,
            })
            .unwrap();
        let Effect::AddedMany { added, failed } = outcome else {
            panic!("{outcome:?}")
        };
        assert_eq!(added, 5, "{backend:?}");
        let failed: Vec<(usize, ResultCode)> = failed.iter().map(|(i, e)| (*i, e.code())).collect();
        assert_eq!(
            failed,
            [
                (1, ResultCode::NO_SUCH_OBJECT),
                (5, ResultCode::ENTRY_ALREADY_EXISTS),
                (6, ResultCode::OBJECT_CLASS_VIOLATION)
            ],
            "{backend:?}"
        );
        // The child refused for want of its parent goes in now.
        f.store
            .execute_blocking(Command::AddMany {
                entries: vec![account("early", "B")].into(),
                prechecked: false,
            })
            .unwrap();

        let snapshot = f.store.snapshot().unwrap();
        let order: Vec<String> = snapshot
            .ids_in_dn_order()
            .unwrap()
            .into_iter()
            .map(|id| snapshot.entry(id).unwrap().dn.original().to_owned())
            .collect();
        assert_eq!(
            order,
            [
                SUFFIX.to_owned(),
                format!("ou=A,{SUFFIX}"),
                format!("uid=a1,ou=A,{SUFFIX}"),
                format!("ou=B,{SUFFIX}"),
                format!("uid=early,ou=B,{SUFFIX}"),
                format!("uid=late,ou=B,{SUFFIX}"),
            ],
            "{backend:?}"
        );
        assert!(snapshot.check().unwrap().is_empty());

        assert_eq!(snapshot.incomplete_load().unwrap(), None);
        drop(snapshot);
        f.store
            .execute_blocking(Command::SetLoadState(Some("import of x.ldif".into())))
            .unwrap();
        let state = f.store.snapshot().unwrap().incomplete_load().unwrap();
        assert_eq!(state.as_deref(), Some("import of x.ldif"));
        f.store
            .execute_blocking(Command::SetLoadState(None))
            .unwrap();
        assert_eq!(f.store.snapshot().unwrap().incomplete_load().unwrap(), None);
        f.store.sync().unwrap();
    }
}

#[test]
fn a_read_only_store_reads_and_refuses_writes() {
    // (Beside a running server, in another process: t80's export test.
    // heed allows one open of an environment per process.)
    let mut f = open(
        Flavour(Backend::Mdb, Durability::Durable),
        "readonly",
        |_| {},
    );
    base_tree(&f);
    let before = f.store.snapshot().unwrap().len().unwrap();
    let dir = f.dir.clone();
    let schema = Arc::clone(&f.schema);
    f.keep = true;
    drop(f);
    let reader = Store::open_read_only(
        StoreOptions {
            path: dir.clone(),
            storage: StorageConfig::default(),
            suffixes: vec![],
            groups: meridian_config::GroupsConfig::default(),
        },
        Arc::clone(&schema),
    )
    .unwrap();
    assert_eq!(reader.snapshot().unwrap().len().unwrap(), before);
    let refused = reader.execute_blocking(Command::SetLoadState(None));
    assert_eq!(refused, Err(StoreError::Closed));

    let missing = Store::open_read_only(
        StoreOptions {
            path: dir.join("nothing-here"),
            storage: StorageConfig::default(),
            suffixes: vec![],
            groups: meridian_config::GroupsConfig::default(),
        },
        schema,
    );
    assert!(missing.unwrap_err().to_string().contains("no database"));
    drop(reader);
    std::fs::remove_dir_all(dir).unwrap();
}

/// Replaces `description` of `text` with `value`.
fn describe(f: &Fixture, text: &str, value: &str) -> Result<Effect, StoreError> {
    f.store.execute_blocking(Command::Modify {
        dn: dn(f, text),
        changes: vec![Modification {
            op: ModOp::Replace,
            attr: "description".into(),
            values: vec![value.as_bytes().to_vec()],
        }],
        operational: vec![],
        permissive: false,
    })
}

/// The `description` values of `text`, or `None` without the entry.
fn description_of(f: &Fixture, text: &str) -> Option<Vec<String>> {
    let snap = f.store.snapshot().unwrap();
    let (_, entry) = snap.get(&dn(f, text)).unwrap()?;
    let description = f.schema.attribute_id("description").unwrap();
    Some(entry.get(description).map_or_else(Vec::new, |a| {
        a.values
            .iter()
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect()
    }))
}

/// The writer remembers the entry ID of each DN it modified; each
/// remembered ID must prove itself against the record it names, since
/// deletes, renames and failed batches change what an ID or a DN means.
#[test]
fn a_modify_after_the_name_moved_reaches_the_entry_that_has_it_now() {
    for flavour in backends() {
        let f = open(flavour, "dnids", |_| {});
        base_tree(&f);
        let x = format!("uid=x,ou=People,{SUFFIX}");
        let y = format!("uid=y,ou=People,{SUFFIX}");
        person(&f, "x", "First", 1);
        describe(&f, &x, "one").unwrap();
        // Deleted: the remembered ID names no record.
        f.store
            .execute_blocking(Command::Delete { dn: dn(&f, &x) })
            .unwrap();
        let err = describe(&f, &x, "two").unwrap_err();
        assert_eq!(err.code(), ResultCode::NO_SUCH_OBJECT, "{flavour:?}");
        // Added again (a new ID), remembered, then renamed away: the
        // remembered ID names a record with another DN, and the new
        // entry of that DN is the one modified.
        person(&f, "x", "Second", 2);
        describe(&f, &x, "three").unwrap();
        modify_dn(&f, &x, "uid=y", true, None).unwrap();
        person(&f, "x", "Third", 3);
        describe(&f, &x, "four").unwrap();
        // The values of x and of y.
        let holds = |at_x: &str, at_y: &str| {
            for (text, value) in [(&x, at_x), (&y, at_y)] {
                let values = description_of(&f, text);
                assert_eq!(values, Some(vec![value.to_owned()]), "{flavour:?}, {text}");
            }
        };
        holds("four", "three");
        // Spelled otherwise than it was added: found all the same.
        describe(&f, "UID=X,ou=people,dc=example,dc=com", "five").unwrap();
        describe(&f, &x, "six").unwrap();
        holds("six", "three");
        let problems = f.store.snapshot().unwrap().check().unwrap();
        assert!(problems.is_empty(), "{flavour:?}: {problems:?}");
    }
}

#[test]
fn an_entry_keeps_its_dn_as_written_whatever_spelling_finds_it() {
    for flavour in backends() {
        let f = open(flavour, "spelling", |_| {});
        base_tree(&f);
        person(&f, "Mixed", "Case", 4242);
        let written = format!("uid=Mixed,ou=People,{SUFFIX}");
        for asked in [
            written.clone(),
            "UID=mixed, OU=people, DC=EXAMPLE, DC=com".to_owned(),
        ] {
            f.store
                .execute_blocking(Command::Modify {
                    dn: dn(&f, &asked),
                    changes: vec![Modification {
                        op: ModOp::Replace,
                        attr: "description".into(),
                        values: vec![asked.clone().into_bytes()],
                    }],
                    operational: vec![],
                    permissive: false,
                })
                .unwrap();
            let snap = f.store.snapshot().unwrap();
            let (_, entry) = snap.get(&dn(&f, &asked)).unwrap().unwrap();
            assert_eq!(
                entry.dn.original(),
                written,
                "{flavour:?}, asked as {asked}"
            );
            let description = f.schema.attribute_id("description").unwrap();
            assert_eq!(
                entry.get(description).unwrap().values.as_slice(),
                [asked.as_bytes()]
            );
        }
    }
}

#[test]
fn a_modify_is_checked_against_the_schema() {
    for flavour in backends() {
        let f = open(flavour, "modify-schema", |_| {});
        base_tree(&f);
        person(&f, "checked", "Before", 4343);
        let target = format!("uid=checked,ou=People,{SUFFIX}");
        let modify = |changes: Vec<Modification>| {
            f.store.execute_blocking(Command::Modify {
                dn: dn(&f, &target),
                changes,
                operational: vec![],
                permissive: false,
            })
        };
        let change = |op, attr: &str, values: &[&str]| Modification {
            op,
            attr: attr.into(),
            values: values.iter().map(|v| v.as_bytes().to_vec()).collect(),
        };
        let refused = |changes, code: ResultCode| {
            let e = modify(changes).unwrap_err();
            assert_eq!(e.code(), code, "{flavour:?}: {e}");
        };
        // The changed values: syntax, duplicates, single-valued types.
        refused(
            vec![change(ModOp::Replace, "uidNumber", &["not a number"])],
            ResultCode::INVALID_ATTRIBUTE_SYNTAX,
        );
        refused(
            vec![change(ModOp::Replace, "cn", &["Same", "same"])],
            ResultCode::ATTRIBUTE_OR_VALUE_EXISTS,
        );
        refused(
            vec![change(ModOp::Add, "uidNumber", &["7"])],
            ResultCode::CONSTRAINT_VIOLATION,
        );
        // The whole entry: required types, allowed types, the RDN.
        refused(
            vec![change(ModOp::Delete, "sn", &[])],
            ResultCode::OBJECT_CLASS_VIOLATION,
        );
        refused(
            vec![change(ModOp::Add, "dc", &["nope"])],
            ResultCode::OBJECT_CLASS_VIOLATION,
        );
        refused(
            vec![change(ModOp::Replace, "uid", &["other"])],
            ResultCode::NOT_ALLOWED_ON_RDN,
        );
        // Nothing refused changed anything; a good change goes through.
        modify(vec![change(ModOp::Replace, "sn", &["After"])]).unwrap();
        let snap = f.store.snapshot().unwrap();
        let (_, entry) = snap.get(&dn(&f, &target)).unwrap().unwrap();
        let sn = f.schema.attribute_id("sn").unwrap();
        assert_eq!(entry.get(sn).unwrap().values.as_slice(), [b"After"]);
        assert!(snap.check().unwrap().is_empty());
    }
}

/// The writer applies a modify on the record it reads, with its own
/// shortcuts (descriptions remembered by position, values checked for
/// the changed types only, index keys rewritten only when an indexed
/// type changes): for random entries and random modifies, the store
/// answers and stores exactly what the model's changes and checks give
/// on the whole entry, and its index keys are the entry's.
mod modify_properties {
    use super::*;
    use meridian_model::entry::{KnownClasses, WrittenBy};
    use meridian_model::modify::{self, Change};
    use proptest::prelude::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Types a modify touches: multi-valued, with an option, indexed
    /// (`cn`, `sn`, `mail`, `uidNumber`), naming (`uid`), single-valued
    /// (`uidNumber`), the classes, one not allowed (`dc`).
    const TYPES: &[&str] = &[
        "description",
        "description;lang-de",
        "cn",
        "sn",
        "mail",
        "telephoneNumber",
        "uid",
        "objectClass",
        "uidNumber",
        "l",
        "dc",
    ];
    /// Values, with case variants (equal to some matching rules) and
    /// `RDN`, which stands for the entry's own uid.
    const VALUES: &[&str] = &[
        "a",
        "A",
        "b",
        "Teil",
        "x  y",
        "7",
        "1",
        "RDN",
        "posixAccount",
        "inetOrgPerson",
    ];

    fn modification() -> impl Strategy<Value = (u8, usize, Vec<usize>)> {
        (
            0u8..4,
            0..TYPES.len(),
            proptest::collection::vec(0..VALUES.len(), 0..3),
        )
    }

    fn start() -> impl Strategy<Value = (bool, Vec<usize>, Vec<usize>, bool, bool)> {
        (
            any::<bool>(),
            proptest::collection::vec(0..VALUES.len(), 0..3),
            proptest::collection::vec(0..VALUES.len(), 0..2),
            any::<bool>(),
            any::<bool>(),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn a_modify_stores_what_the_whole_entry_model_gives(
            (posix, descriptions, lang_de, phone, mail) in start(),
            modifies in proptest::collection::vec(
                (proptest::collection::vec(modification(), 1..4), any::<bool>()),
                1..8,
            ),
        ) {
            static CASE: AtomicUsize = AtomicUsize::new(0);
            thread_local! {
                static FIXTURE: Fixture = {
                    // An operational type indexed: its old keys must go.
                    let f = open(Flavour(Backend::Memory, Durability::Relaxed), "modify-model", |s| {
                        s.indexes.insert("modifyTimestamp".into(), vec![meridian_config::IndexKind::Eq]);
                    });
                    base_tree(&f);
                    f
                };
            }
            let uid = format!("m{}", CASE.fetch_add(1, Ordering::Relaxed));
            let value = |i: usize| match VALUES[i] {
                "RDN" => uid.clone(),
                v => v.to_owned(),
            };
            let text = format!("uid={uid},ou=People,{SUFFIX}");
            FIXTURE.with(|f| {
                // The entry at the start.
                let mut attrs: Vec<(&str, Vec<String>)> = vec![
                    ("objectClass", vec!["inetOrgPerson".into()]),
                    ("uid", vec![uid.clone()]),
                    ("cn", vec![format!("{uid} cn")]),
                    ("sn", vec!["S".into()]),
                ];
                if posix {
                    attrs[0].1.push("posixAccount".into());
                    attrs.extend([
                        ("uidNumber", vec!["5".into()]),
                        ("gidNumber", vec!["1".into()]),
                        ("homeDirectory", vec!["/h".into()]),
                    ]);
                }
                let distinct = |list: &[usize]| {
                    let mut out: Vec<String> = Vec::new();
                    for v in list.iter().map(|&i| value(i)) {
                        if !out.iter().any(|o| o.eq_ignore_ascii_case(&v) || o.split_whitespace().eq(v.split_whitespace())) {
                            out.push(v);
                        }
                    }
                    out
                };
                for (name, list) in [("description", distinct(&descriptions)), ("description;lang-de", distinct(&lang_de))] {
                    if !list.is_empty() {
                        attrs.push((name, list));
                    }
                }
                if phone {
                    attrs.push(("telephoneNumber", vec!["+1 555 0100".into()]));
                }
                if mail {
                    attrs.push(("mail", vec![format!("{uid}@x.org")]));
                }
                let refs: Vec<(&str, Vec<&str>)> = attrs.iter().map(|(n, v)| (*n, v.iter().map(String::as_str).collect())).collect();
                let refs: Vec<(&str, &[&str])> = refs.iter().map(|(n, v)| (*n, v.as_slice())).collect();
                let mut model = entry(&f.schema, &text, &refs);
                f.store.execute_blocking(Command::Add { entry: model.clone(), prechecked: false }).unwrap();

                for (changes, stamped) in &modifies {
                    let changes: Vec<Modification> = changes.iter().map(|(op, t, values)| Modification {
                        op: [ModOp::Add, ModOp::Delete, ModOp::Replace, ModOp::Increment][usize::from(*op)],
                        attr: TYPES[*t].into(),
                        values: values.iter().map(|&i| value(i).into_bytes()).collect(),
                    }).collect();
                    // The server's own replacements, read by nothing.
                    let operational: Vec<(std::borrow::Cow<'static, str>, Vec<Vec<u8>>)> = if *stamped {
                        vec![
                            ("modifiersName".into(), vec![b"cn=admin".to_vec()]),
                            ("modifyTimestamp".into(), vec![format!("2026112512{:02}00Z", changes.len()).into_bytes()]),
                        ]
                    } else {
                        vec![]
                    };
                    // The model: every change on the whole entry, then the
                    // checks of a modify, the client's types' values only.
                    let all = changes.iter().map(Modification::as_change).chain(
                        operational.iter().map(|(attr, values)| Change { op: ModOp::Replace, attr, values }),
                    );
                    let client: Vec<_> = changes.iter().map(|c| f.schema.attribute_id(c.attr.split(';').next().unwrap()).unwrap()).collect();
                    let expected = modify::apply_changes(model.clone(), all, &f.schema, false).and_then(|new| {
                        // No classes known: every check works its class rules out.
                        new.check_after_modify(&f.schema, WrittenBy::Server, |attr| client.contains(&attr), &mut KnownClasses::default())?;
                        Ok(new)
                    });
                    let got = f.store.execute_blocking(Command::Modify {
                        dn: dn(f, &text),
                        changes: changes.clone(),
                        operational,
                        permissive: false,
                    });
                    match (expected, got) {
                        (Ok(new), Ok(_)) => model = new,
                        (Err(want), Err(e)) => {
                            prop_assert_eq!(e.code(), want.code, "{:?}: {} against {}", changes, e, want.message);
                        }
                        (want, got) => prop_assert!(false, "{:?}: the model gives {:?}, the store {:?}", changes, want.map(|_| ()), got),
                    }
                    let snap = f.store.snapshot().unwrap();
                    let (_, stored) = snap.get(&dn(f, &text)).unwrap().unwrap();
                    prop_assert_eq!(&stored, &model, "after {:?}", changes);
                }
                // The index keys are those of the entry as it is now.
                let problems = f.store.snapshot().unwrap().check().unwrap();
                prop_assert!(problems.is_empty(), "{:?}", problems);
                Ok(())
            })?;
        }
    }
}

/// Scan columns (`columns.rs`) through writes: a store that keeps them
/// and one that keeps none are given the same random adds, modifies,
/// deletes and renames, with searches on unindexed types between them,
/// and must answer alike, in fresh snapshots and in one taken before
/// the writes (which must not use a column made after it).
mod scan_column_properties {
    use super::*;
    use proptest::prelude::*;

    const DESCRIPTIONS: &[&str] = &["alpha", "Beta", "alphabet", "gamma ray", "BETA"];

    #[derive(Debug, Clone)]
    enum Step {
        Add(u8, u8),
        Describe(u8, u8),
        Undescribe(u8),
        Delete(u8),
        Rename(u8, u8),
        Search(u8),
        /// Keep the snapshot of this moment for the searches after.
        Hold,
    }

    const FILTERS: &[&str] = &[
        "(description=alpha)",
        "(description=beta)",
        "(description=alpha*)",
        "(description=*a r*)",
        "(description=*)",
        "(homeDirectory=/home/3)",
        "(homeDirectory=*)",
        "(&(homeDirectory=/home/1)(description=*))",
        "(|(description=gamma ray)(sn=Doe))",
        "(|(description=beta)(homeDirectory=/home/2))",
        "(!(description=alpha))",
        "(description~=alfa)",
        // INTEGER: keys compared as numbers, negative ones included.
        "(gidNumber=100)",
        "(gidNumber=-7)",
        "(gidNumber>=1)",
    ];

    fn step() -> impl Strategy<Value = Step> {
        let n = || 0u8..12;
        let d = || 0u8..DESCRIPTIONS.len() as u8;
        prop_oneof![
            3 => (n(), d()).prop_map(|(i, k)| Step::Add(i, k)),
            3 => (n(), d()).prop_map(|(i, k)| Step::Describe(i, k)),
            1 => n().prop_map(Step::Undescribe),
            1 => n().prop_map(Step::Delete),
            1 => (n(), d()).prop_map(|(i, k)| Step::Rename(i, k)),
            6 => (0u8..FILTERS.len() as u8).prop_map(Step::Search),
            1 => Just(Step::Hold),
        ]
    }

    fn person_dn(i: u8) -> String {
        format!("uid=u{i},ou=People,{SUFFIX}")
    }

    /// Applies `step` to a store; results (an entry that exists already
    /// or not at all) do not matter, only that both stores get the same.
    fn write(f: &Fixture, step: &Step) -> Result<Effect, StoreError> {
        match *step {
            Step::Add(i, k) => {
                let uid = format!("u{i}");
                let home = format!("/home/{}", i % 4);
                add(
                    f,
                    &person_dn(i),
                    &[
                        ("objectClass", &["inetOrgPerson", "posixAccount"]),
                        ("uid", &[&uid]),
                        ("cn", &[&uid]),
                        ("sn", &[if i % 3 == 0 { "Doe" } else { "Roe" }]),
                        ("uidNumber", &["1"]),
                        ("gidNumber", &[["1", "-7", "100"][usize::from(i % 3)]]),
                        ("homeDirectory", &[&home]),
                        ("description", &[DESCRIPTIONS[k as usize]]),
                    ],
                )
            }
            Step::Describe(i, k) => describe(f, &person_dn(i), DESCRIPTIONS[k as usize]),
            Step::Undescribe(i) => f.store.execute_blocking(Command::Modify {
                dn: dn(f, &person_dn(i)),
                changes: vec![Modification {
                    op: ModOp::Delete,
                    attr: "description".into(),
                    values: vec![],
                }],
                operational: vec![],
                permissive: true,
            }),
            Step::Delete(i) => f.store.execute_blocking(Command::Delete {
                dn: dn(f, &person_dn(i)),
            }),
            // A new RDN of `description` adds its value (the old RDN
            // stays); the entry is then out of reach of the other steps.
            Step::Rename(i, k) => modify_dn(
                f,
                &person_dn(i),
                &format!("description={}", DESCRIPTIONS[k as usize]),
                false,
                None,
            ),
            Step::Search(_) | Step::Hold => Ok(Effect::Added(0)),
        }
    }

    fn found(
        snap: &meridian_store::Snapshot<'_>,
        f: &Fixture,
        text: &str,
    ) -> (BTreeSet<String>, bool) {
        let ber = filter_str::parse(text, 32).unwrap();
        let filter = Filter::from_ber(&ber, Depth::new(32)).unwrap();
        let mut found = BTreeSet::new();
        let report = snap
            .search(
                &dn(f, &format!("ou=People,{SUFFIX}")),
                Scope::Subtree,
                &filter,
                |_, e| {
                    found.insert(e.dn.normalized().to_owned());
                    true
                },
            )
            .unwrap();
        (found, report.columns)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn searches_with_columns_equal_searches_without(steps in proptest::collection::vec(step(), 1..80)) {
            let flavour = Flavour(Backend::Memory, Durability::Relaxed);
            let with = open(flavour, "columns-on", |_| {});
            let without = open(flavour, "columns-off", |s| s.scan_columns_bytes = 0);
            base_tree(&with);
            base_tree(&without);
            let mut used = false;
            // The held snapshots live as long as their stores' fixtures.
            let mut held: Option<(meridian_store::Snapshot<'_>, meridian_store::Snapshot<'_>)> = None;
            for step in &steps {
                match step {
                    Step::Search(k) => {
                        let text = FILTERS[*k as usize];
                        // Three times: the second search asks for the
                        // column, the third finds it made.
                        for _ in 0..3 {
                            let (a, columns) = found(&with.store.snapshot().unwrap(), &with, text);
                            let (b, _) = found(&without.store.snapshot().unwrap(), &without, text);
                            prop_assert_eq!(&a, &b, "{} after {:?}", text, steps);
                            used |= columns;
                            with.store.wait_for_scan_columns();
                        }
                        if let Some((old_with, old_without)) = &held {
                            let (a, _) = found(old_with, &with, text);
                            let (b, _) = found(old_without, &without, text);
                            prop_assert_eq!(a, b, "{} in a held snapshot after {:?}", text, steps);
                        }
                    }
                    Step::Hold => {
                        held = Some((with.store.snapshot().unwrap(), without.store.snapshot().unwrap()));
                    }
                    _ => {
                        let a = write(&with, step).map_err(|e| e.code());
                        let b = write(&without, step).map_err(|e| e.code());
                        prop_assert_eq!(format!("{a:?}"), format!("{b:?}"));
                    }
                }
            }
            drop(held);
            // A search of an unindexed type after another one uses a
            // column (else this test would prove nothing).
            let searches = steps.iter().any(|s| matches!(s, Step::Search(k) if *k < 7));
            prop_assert!(used || !searches, "no search used a column: {:?}", steps);
        }
    }
}

/// A scan column made after a snapshot was taken holds values that
/// snapshot must not see: a search in it scans instead.
#[test]
fn a_snapshot_older_than_a_scan_column_does_not_use_it() {
    for backend in backends() {
        let f = open(backend, "column-age", |_| {});
        base_tree(&f);
        for i in 0..5 {
            person(&f, &format!("u{i}"), "Doe", i);
            describe(&f, &format!("uid=u{i},ou=People,{SUFFIX}"), "alpha").unwrap();
        }
        let old = f.store.snapshot().unwrap();
        describe(&f, &format!("uid=u1,ou=People,{SUFFIX}"), "beta").unwrap();
        let people = dn(&f, &format!("ou=People,{SUFFIX}"));
        let count = |snap: &meridian_store::Snapshot<'_>, text: &str| {
            count_matches(snap, &people, Scope::Subtree, text)
        };
        // The second search asks for the column, made from a newer
        // snapshot; the third reads it.
        for _ in 0..2 {
            assert_eq!(
                count(&f.store.snapshot().unwrap(), "(description=alpha)"),
                (4, false)
            );
        }
        f.store.wait_for_scan_columns();
        assert_eq!(
            count(&f.store.snapshot().unwrap(), "(description=alpha)"),
            (4, true)
        );
        assert_eq!(
            count(&old, "(description=alpha)"),
            (5, false),
            "{backend:?}"
        );
        // Changes after the column are its candidates whatever its rows say.
        describe(&f, &format!("uid=u2,ou=People,{SUFFIX}"), "beta").unwrap();
        f.store
            .execute_blocking(Command::Delete {
                dn: dn(&f, &format!("uid=u3,ou=People,{SUFFIX}")),
            })
            .unwrap();
        person(&f, "u9", "Doe", 9);
        describe(&f, &format!("uid=u9,ou=People,{SUFFIX}"), "ALPHA").unwrap();
        assert_eq!(
            count(&f.store.snapshot().unwrap(), "(description=alpha)"),
            (3, true)
        );
        // One column per type, whatever the filter asks of it.
        assert_eq!(
            count(&f.store.snapshot().unwrap(), "(description=beta)"),
            (2, true)
        );
        assert_eq!(
            count(&f.store.snapshot().unwrap(), "(description=*et*)"),
            (2, true)
        );
        drop(old);
    }
}

/// A scan column whose item lets most entries through is left for the
/// records part way (`read.rs`, `UNSELECTIVE_AFTER`): every match is
/// still found once, touched entries included.
#[test]
fn an_unselective_column_read_goes_on_without_the_column() {
    let f = open(
        Flavour(Backend::Memory, Durability::Relaxed),
        "column-unselective",
        |_| {},
    );
    base_tree(&f);
    let groups = format!("ou=Groups,{SUFFIX}");
    submit_all(
        &f,
        (0..6000).map(|i| {
            add_device(
                &f,
                &groups,
                &format!("c{i}"),
                if i % 10 == 0 { "rare" } else { "common" },
            )
        }),
    );
    let count = |text: &str| {
        count_matches(
            &f.store.snapshot().unwrap(),
            &dn(&f, SUFFIX),
            Scope::Subtree,
            text,
        )
    };
    for _ in 0..2 {
        assert_eq!(count("(description=common)"), (5400, false));
    }
    f.store.wait_for_scan_columns();
    assert_eq!(count("(description=common)"), (5400, true));
    assert_eq!(count("(description=rare)"), (600, true));
    // Touched after the column, on both sides of where the read leaves it.
    for i in [3, 5991] {
        describe(&f, &format!("cn=c{i},ou=Groups,{SUFFIX}"), "rare").unwrap();
    }
    assert_eq!(count("(description=common)"), (5398, true));
    assert_eq!(count("(description=rare)"), (602, true));
}

/// A column's rows cover the whole store: a search of a small part of
/// it walks its scope instead, and a search of most of it reads the
/// column; both find the same entries as without one.
#[test]
fn a_small_scope_is_walked_rather_than_a_whole_column() {
    let f = open(
        Flavour(Backend::Memory, Durability::Relaxed),
        "column-scope",
        |_| {},
    );
    base_tree(&f);
    let add_device = |parent: &str, i: usize| {
        let description = if i.is_multiple_of(2) { "even" } else { "odd" };
        add_device(&f, parent, &format!("d{i}"), description)
    };
    let groups = format!("ou=Groups,{SUFFIX}");
    let people = format!("ou=People,{SUFFIX}");
    submit_all(
        &f,
        (0..2000)
            .map(|i| add_device(&groups, i))
            .chain((0..10).map(|i| add_device(&people, 5000 + i))),
    );
    let search = |base: &str, scope: Scope| {
        count_matches(
            &f.store.snapshot().unwrap(),
            &dn(&f, base),
            scope,
            "(description=even)",
        )
    };
    for _ in 0..2 {
        search(&groups, Scope::Subtree);
    }
    f.store.wait_for_scan_columns();
    assert_eq!(search(&groups, Scope::Subtree), (1000, true));
    assert_eq!(search(&groups, Scope::OneLevel), (1000, true));
    assert_eq!(search(SUFFIX, Scope::Subtree), (1005, true));
    assert_eq!(search(&people, Scope::Subtree), (5, false));
    assert_eq!(search(&people, Scope::OneLevel), (5, false));
}
