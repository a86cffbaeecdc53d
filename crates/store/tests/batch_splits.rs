//! Determinism across batch splits (issue 26, "determinism first"): one
//! log of commands applied one command per transaction, all submitted
//! at once (the writer's group commit makes the batches), and in batches
//! of at most three gives the same result for every command and the
//! same database, byte for byte: records, DN keys, child links, index
//! keys and meta (entry IDs, attribute name numbers). A replica applies
//! the log in whatever batches its writer makes, so this is what keeps
//! replicas identical.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use meridian_config::{Backend, Durability, StorageConfig};
use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_model::modify::{ModOp, Modification};
use meridian_store::{Command, Store, StoreOptions};
use proptest::prelude::*;

mod common;
use common::{SUFFIX, entry, suffix_entry};

/// One command of the log, over a handful of DNs so that commands meet:
/// adds of existing entries, modifies and deletes of missing ones,
/// renames onto taken names, children under entries deleted since.
#[derive(Debug, Clone)]
enum Step {
    /// Adds `uid=u{0}` under the people branch, or under `uid=u{1}` if
    /// given (which may not exist), with a description.
    Add(u8, Option<u8>, u8),
    /// Replaces (or adds, or deletes) the description of `uid=u{0}`.
    Modify(u8, u8, u8),
    /// Adds a second value of a type new to the store (a new name
    /// number, in the batch's own numbering).
    NewType(u8, u8),
    /// Deletes `uid=u{0}`.
    Delete(u8),
    /// Renames `uid=u{0}` to `uid=u{1}`.
    Rename(u8, u8),
    /// Adds two entries in one bulk command.
    AddMany(u8, u8),
}

const NAMES: u8 = 6;

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0..NAMES, proptest::option::of(0..NAMES), 0u8..4).prop_map(|(a, b, v)| Step::Add(a, b, v)),
        3 => (0..NAMES, 0u8..3, 0u8..4).prop_map(|(a, op, v)| Step::Modify(a, op, v)),
        1 => (0..NAMES, 0u8..3).prop_map(|(a, t)| Step::NewType(a, t)),
        2 => (0..NAMES).prop_map(Step::Delete),
        1 => (0..NAMES, 0..NAMES).prop_map(|(a, b)| Step::Rename(a, b)),
        1 => (0..NAMES, 0..NAMES).prop_map(|(a, b)| Step::AddMany(a, b)),
    ]
}

/// The DN text of `uid=u{n}` (directly under the people branch).
fn person(n: u8) -> String {
    format!("uid=u{n},ou=People,{SUFFIX}")
}

fn command(schema: &Schema, step: &Step) -> Command {
    let dn = |text: &str| Dn::parse(text.as_bytes(), schema).unwrap();
    let account = |text: &str, uid: &str, description: &str| {
        entry(
            schema,
            text,
            &[
                ("objectClass", &["account"]),
                ("uid", &[uid]),
                ("description", &[description]),
            ],
        )
    };
    match *step {
        Step::Add(n, parent, v) => {
            let text = match parent {
                Some(p) => format!("uid=u{n},{}", person(p)),
                None => person(n),
            };
            Command::Add {
                entry: account(&text, &format!("u{n}"), &format!("v{v}")),
                prechecked: false,
            }
        }
        Step::Modify(n, op, v) => Command::Modify {
            dn: dn(&person(n)),
            changes: vec![Modification {
                op: [ModOp::Replace, ModOp::Add, ModOp::Delete][usize::from(op)],
                attr: "description".into(),
                values: vec![format!("v{v}").into_bytes()],
            }],
            operational: vec![(
                "modifyTimestamp".into(),
                vec![format!("2026112600000{v}Z").into_bytes()],
            )],
            permissive: false,
        },
        Step::NewType(n, t) => Command::Modify {
            dn: dn(&person(n)),
            changes: vec![Modification {
                op: ModOp::Add,
                attr: ["l", "seeAlso", "host"][usize::from(t)].into(),
                values: vec![match t {
                    1 => format!("cn=x{n},{SUFFIX}").into_bytes(),
                    _ => format!("x{n}").into_bytes(),
                }],
            }],
            operational: vec![],
            permissive: true,
        },
        Step::Delete(n) => Command::Delete { dn: dn(&person(n)) },
        Step::Rename(from, to) => Command::ModifyDn {
            dn: dn(&person(from)),
            new_rdn: format!("uid=u{to}"),
            delete_old_rdn: true,
            new_superior: None,
            operational: vec![],
        },
        Step::AddMany(a, b) => Command::AddMany {
            entries: Arc::new(vec![
                account(&person(a), &format!("u{a}"), "bulk"),
                account(&person(b), &format!("u{b}"), "bulk"),
            ]),
            prechecked: false,
        },
    }
}

/// How the log is cut into transactions.
#[derive(Debug, Clone, Copy)]
enum Split {
    /// One command per transaction: each waited for before the next.
    OneByOne,
    /// Everything submitted at once: the writer's group commit decides.
    AllAtOnce,
    /// Submitted at once, at most three commands per transaction.
    ThreeAtATime,
}

fn open(tag: &str, split: Split) -> (Arc<Schema>, PathBuf, Store) {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let schema = Arc::new(Schema::builtin().unwrap());
    let dir = std::env::temp_dir().join(format!(
        "meridian-splits-{}-{tag}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    // Submitted at once, durable commits keep the writer busy syncing
    // while the next commands queue: the batches are real.
    let (backend, durability) = match split {
        Split::OneByOne => (Backend::Memory, Durability::Relaxed),
        Split::AllAtOnce | Split::ThreeAtATime => (Backend::Mdb, Durability::Durable),
    };
    let mut storage = StorageConfig {
        backend,
        durability,
        ..StorageConfig::default()
    };
    if matches!(split, Split::ThreeAtATime) {
        storage.max_batch = 3;
    }
    storage.indexes.insert(
        "description".into(),
        vec![
            meridian_config::IndexKind::Eq,
            meridian_config::IndexKind::Sub,
        ],
    );
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
    for base in [
        suffix_entry(&schema),
        entry(
            &schema,
            &format!("ou=People,{SUFFIX}"),
            &[
                ("objectClass", &["organizationalUnit"]),
                ("ou", &["People"]),
            ],
        ),
    ] {
        store
            .execute_blocking(Command::Add {
                entry: base,
                prechecked: false,
            })
            .unwrap();
    }
    (schema, dir, store)
}

/// Applies `log` cut as `split`: each command's result (as text, so
/// refusals compare by code and message) and the database's dump.
fn apply(log: &[Step], split: Split) -> (Vec<String>, Vec<meridian_store::RawItem>) {
    let (schema, dir, store) = open("log", split);
    let commands: Vec<Command> = log.iter().map(|s| command(&schema, s)).collect();
    let results: Vec<String> = match split {
        Split::OneByOne => commands
            .into_iter()
            .map(|c| format!("{:?}", store.execute_blocking(c)))
            .collect(),
        Split::AllAtOnce | Split::ThreeAtATime => {
            let count = commands.len() as u64;
            let commits_before = store.commits();
            let submitted: Vec<_> = commands
                .into_iter()
                .map(|c| store.submit_blocking(c).unwrap())
                .collect();
            let results = submitted
                .into_iter()
                .map(|s| format!("{:?}", s.wait_blocking()))
                .collect();
            if matches!(split, Split::AllAtOnce) && count >= 10 {
                let commits = store.commits() - commits_before;
                assert!(
                    commits < count,
                    "{commits} commits for {count} commands: no batch was shared"
                );
            }
            results
        }
    };
    let snapshot = store.snapshot().unwrap();
    let problems = snapshot.check().unwrap();
    assert!(problems.is_empty(), "{split:?}: {problems:?}");
    let dump = snapshot.raw_dump().unwrap();
    drop(snapshot);
    store.close();
    let _ = std::fs::remove_dir_all(dir);
    (results, dump)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn every_batch_split_gives_the_same_results_and_bytes(
        log in proptest::collection::vec(step(), 1..40)
    ) {
        let (results, dump) = apply(&log, Split::OneByOne);
        for split in [Split::AllAtOnce, Split::ThreeAtATime] {
            let (other_results, other_dump) = apply(&log, split);
            for (i, (one, other)) in results.iter().zip(&other_results).enumerate() {
                prop_assert_eq!(one, other, "{:?}: command {} ({:?})", split, i, log[i]);
            }
            prop_assert!(dump == other_dump, "{:?}: the databases differ", split);
        }
    }
}
