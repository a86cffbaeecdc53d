//! Journal mode: a database rebuilt from its base copy and its journal
//! is the database that wrote them, byte for byte, for every kind of
//! command; leaving journal mode replays the journal and removes it.
//! (Crashes: `crash.rs`.)

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use meridian_config::{Durability, StorageConfig};
use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_model::modify::{ModOp, Modification};
use meridian_proto::filter_str;
use meridian_store::{Command, RawItem, Store, StoreError, StoreOptions};

mod common;
use common::{SUFFIX, copy_files, entry, suffix_entry};

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("meridian-journal-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn open(dir: &Path, schema: &Arc<Schema>, durability: Durability) -> Store {
    Store::open(
        StoreOptions {
            path: dir.to_path_buf(),
            storage: StorageConfig {
                durability,
                // Several checkpoints during the workload, one of them
                // possibly still copying when the store closes.
                journal_checkpoint_bytes: 4096,
                ..StorageConfig::default()
            },
            suffixes: vec![Dn::parse(SUFFIX.as_bytes(), schema).unwrap()],
            groups: meridian_config::GroupsConfig::default(),
        },
        Arc::clone(schema),
    )
    .unwrap()
}

/// Every kind of command, some of them failing (a failed command is not
/// journaled and must not disturb the replay of the others).
fn workload(store: &Store, schema: &Schema) {
    let dn = |s: &str| Dn::parse(s.as_bytes(), schema).unwrap();
    let run = |c: Command| store.execute_blocking(c);
    let person = |uid: &str, parent: &str| {
        entry(
            schema,
            &format!("uid={uid},{parent}"),
            &[
                ("objectClass", &["inetOrgPerson"]),
                ("uid", &[uid]),
                ("cn", &[uid]),
                ("sn", &["S"]),
            ],
        )
    };
    let ou = |name: &str| {
        entry(
            schema,
            &format!("ou={name},{SUFFIX}"),
            &[("objectClass", &["organizationalUnit"]), ("ou", &[name])],
        )
    };
    run(Command::Add {
        entry: suffix_entry(schema),
        prechecked: false,
    })
    .unwrap();
    run(Command::SetLoadState(Some("a test load".into()))).unwrap();
    run(Command::AddMany {
        entries: Arc::new(vec![ou("People"), ou("Gone"), ou("Moved")]),
        prechecked: false,
    })
    .unwrap();
    run(Command::SetLoadState(None)).unwrap();
    for i in 0..60 {
        let parent = if i % 3 == 0 {
            format!("ou=Gone,{SUFFIX}")
        } else {
            format!("ou=People,{SUFFIX}")
        };
        run(Command::Add {
            entry: person(&format!("u{i}"), &parent),
            // Both forms of the record.
            prechecked: i % 2 == 1,
        })
        .unwrap();
    }
    // Refused: the entry exists, the parent does not.
    assert!(
        run(Command::Add {
            entry: person("u1", &format!("ou=People,{SUFFIX}")),
            prechecked: false,
        })
        .is_err()
    );
    assert!(
        run(Command::Add {
            entry: person("x", &format!("ou=Nowhere,{SUFFIX}")),
            prechecked: false,
        })
        .is_err()
    );
    for i in (1..60).filter(|i| i % 3 != 0) {
        run(Command::Modify {
            dn: dn(&format!("uid=u{i},ou=People,{SUFFIX}")),
            changes: vec![
                Modification {
                    op: ModOp::Replace,
                    attr: "description;lang-de".into(),
                    values: vec![format!("Nummer {i}").into_bytes()],
                },
                Modification {
                    op: ModOp::Add,
                    attr: "mail".into(),
                    values: vec![format!("u{i}@example.com").into_bytes()],
                },
            ],
            operational: vec![("modifyTimestamp".into(), vec![b"20261124180000Z".to_vec()])],
            permissive: false,
        })
        .unwrap();
    }
    let assertion = filter_str::parse("(mail=u1@example.com)", 8).unwrap();
    run(Command::Guarded {
        assertion: assertion.clone(),
        command: Box::new(Command::ReadBack {
            pre: true,
            post: true,
            command: Box::new(Command::Modify {
                dn: dn(&format!("uid=u1,ou=People,{SUFFIX}")),
                changes: vec![Modification {
                    op: ModOp::Delete,
                    attr: "mail".into(),
                    values: vec![],
                }],
                operational: vec![],
                permissive: false,
            }),
        }),
    })
    .unwrap();
    // The assertion no longer holds: refused.
    assert!(
        run(Command::Guarded {
            assertion,
            command: Box::new(Command::Delete {
                dn: dn(&format!("uid=u1,ou=People,{SUFFIX}")),
            }),
        })
        .is_err()
    );
    // First-wins: a write prepared against an entryCSN applies while the
    // entry still has it; a second prepared against the same one comes
    // after the first and is refused, naming the conflict.
    let csn = |n: u32| format!("20261128120000.00000{n}Z#000000#001#000000").into_bytes();
    let u4 = || dn(&format!("uid=u4,ou=People,{SUFFIX}"));
    let describe = |text: &str, n: u32| Command::Modify {
        dn: u4(),
        changes: vec![Modification {
            op: ModOp::Replace,
            attr: "description".into(),
            values: vec![text.as_bytes().to_vec()],
        }],
        operational: vec![("entryCSN".into(), vec![csn(n)])],
        permissive: false,
    };
    run(describe("before", 1)).unwrap();
    run(Command::Unchanged {
        seen: csn(1),
        command: Box::new(describe("first", 2)),
    })
    .unwrap();
    let refused = run(Command::Unchanged {
        seen: csn(1),
        command: Box::new(describe("second", 3)),
    })
    .unwrap_err();
    assert!(refused.to_string().contains("conflict"), "{refused}");
    run(Command::ModifyDn {
        dn: dn(&format!("uid=u2,ou=People,{SUFFIX}")),
        new_rdn: "uid=renamed".into(),
        delete_old_rdn: true,
        new_superior: Some(Box::new(dn(&format!("ou=Moved,{SUFFIX}")))),
        operational: vec![],
    })
    .unwrap();
    run(Command::ModifyDn {
        dn: dn(&format!("ou=People,{SUFFIX}")),
        new_rdn: "ou=Staff".into(),
        delete_old_rdn: false,
        new_superior: None,
        operational: vec![],
    })
    .unwrap();
    run(Command::Delete {
        dn: dn(&format!("uid=u4,ou=Staff,{SUFFIX}")),
    })
    .unwrap();
    run(Command::DeleteSubtree {
        dn: dn(&format!("ou=Gone,{SUFFIX}")),
    })
    .unwrap();
    run(Command::RebuildIndexes).unwrap();
}

fn dump(store: &Store) -> Vec<RawItem> {
    let snap = store.snapshot().unwrap();
    let problems = snap.check().unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
    snap.raw_dump().unwrap()
}

#[test]
fn base_and_journal_rebuild_the_database_byte_for_byte() {
    let schema = Arc::new(Schema::builtin().unwrap());
    let original = temp("original");
    let store = open(&original, &schema, Durability::Journal);
    workload(&store, &schema);
    store.close();
    // The journal alone, as a machine crash would leave it: no data.mdb,
    // and a marker from another boot.
    let (rebuilt, left) = (temp("rebuilt"), temp("left"));
    for dir in [&rebuilt, &left] {
        copy_files(&original.join("journal"), &dir.join("journal"));
        std::fs::write(dir.join("journal/running"), "another boot").unwrap();
    }
    let journal_files = std::fs::read_dir(rebuilt.join("journal")).unwrap().count();
    assert!(journal_files >= 3, "a base, a segment and the marker");

    let bases = |dir: &Path| -> Vec<std::ffi::OsString> {
        let mut names: Vec<_> = std::fs::read_dir(dir.join("journal"))
            .unwrap()
            .map(|item| item.unwrap().file_name())
            .filter(|name| name.to_string_lossy().starts_with("base-"))
            .collect();
        names.sort();
        names
    };
    let before = bases(&original);
    let expected = dump(&open(&original, &schema, Durability::Journal));
    // After a clean close the base and the journal still cover
    // everything: a restart copies nothing.
    assert_eq!(bases(&original), before);
    let replayed = open(&rebuilt, &schema, Durability::Journal);
    assert_eq!(dump(&replayed), expected);
    // And the rebuilt store goes on journaling from where it was.
    workload_tail(&replayed, &schema);
    replayed.close();
    assert!(!rebuilt.join("journal/running").exists());

    // Leaving journal mode: a durable open replays what is pending and
    // removes the journal.
    let durable = open(&left, &schema, Durability::Durable);
    assert_eq!(dump(&durable), expected);
    assert!(!left.join("journal").exists());
    durable.close();
    for dir in [original, rebuilt, left] {
        std::fs::remove_dir_all(dir).unwrap();
    }
}

/// A write after recovery lands, and survives the next recovery.
fn workload_tail(store: &Store, schema: &Schema) {
    store
        .execute_blocking(Command::Delete {
            dn: Dn::parse(format!("uid=u5,ou=Staff,{SUFFIX}").as_bytes(), schema).unwrap(),
        })
        .unwrap();
}

#[test]
fn a_torn_record_at_the_end_is_cut_off_and_the_rest_replayed() {
    let schema = Arc::new(Schema::builtin().unwrap());
    let dir = temp("torn");
    let store = open(&dir, &schema, Durability::Journal);
    workload(&store, &schema);
    store.close();
    let copy = temp("torn-copy");
    copy_files(&dir, &copy);
    copy_files(&dir.join("journal"), &copy.join("journal"));
    let expected = dump(&open(&copy, &schema, Durability::Journal));
    std::fs::remove_dir_all(&copy).unwrap();
    // The newest segment gets half a record more, as an append cut short
    // by the crash would leave it.
    let mut segments: Vec<PathBuf> = std::fs::read_dir(dir.join("journal"))
        .unwrap()
        .map(|item| item.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("log-"))
        .collect();
    segments.sort();
    let newest = segments.last().unwrap();
    let mut bytes = std::fs::read(newest).unwrap();
    assert!(
        !bytes.is_empty(),
        "the newest segment holds records to replay"
    );
    bytes.extend_from_slice(&[200, 0, 0, 0, 1, 2, 3, 4, 1, 0, 0]);
    std::fs::write(newest, &bytes).unwrap();
    assert_machine_crash_rebuilds(&dir, &schema, &expected);
}

/// Plays a machine crash on the closed store in `dir` (a marker of
/// another boot, no data.mdb): the base and the journal must rebuild
/// `expected`. Removes `dir`.
fn assert_machine_crash_rebuilds(dir: &Path, schema: &Arc<Schema>, expected: &[RawItem]) {
    std::fs::write(dir.join("journal/running"), "another boot").unwrap();
    std::fs::remove_file(dir.join("data.mdb")).unwrap();
    let store = open(dir, schema, Durability::Journal);
    assert_eq!(dump(&store), expected);
    store.close();
    std::fs::remove_dir_all(dir).unwrap();
}

/// Every durability: see also `lock.rs` and t31's two-writer test.
#[test]
fn a_journaled_database_has_one_writer() {
    let schema = Arc::new(Schema::builtin().unwrap());
    let dir = temp("one-writer");
    let store = open(&dir, &schema, Durability::Journal);
    // A second writer, in any durability, would append to (or replay and
    // remove) the journal the first one is writing.
    for durability in [
        Durability::Journal,
        Durability::Durable,
        Durability::Relaxed,
    ] {
        let refused = Store::open(
            StoreOptions {
                path: dir.clone(),
                storage: StorageConfig {
                    durability,
                    ..StorageConfig::default()
                },
                suffixes: vec![],
                groups: meridian_config::GroupsConfig::default(),
            },
            Arc::clone(&schema),
        )
        .unwrap_err();
        assert!(
            matches!(refused, StoreError::Locked { holder: Some(pid), .. } if pid == std::process::id()),
            "{refused}"
        );
    }
    store.close();
    // Once it is closed, the next one may.
    open(&dir, &schema, Durability::Durable).close();
    assert!(!dir.join("journal").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Bytes in the log segments of the journal of `dir`.
fn log_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir.join("journal"))
        .unwrap()
        .map(|item| item.unwrap())
        .filter(|item| item.file_name().to_string_lossy().starts_with("log-"))
        .map(|item| item.metadata().unwrap().len())
        .sum()
}

/// Replaces the description of `dn` with `text`.
fn describe(store: &Store, dn: &Dn, text: &str) {
    store
        .execute_blocking(Command::Modify {
            dn: dn.clone(),
            changes: vec![Modification {
                op: ModOp::Replace,
                attr: "description".into(),
                values: vec![text.as_bytes().to_vec()],
            }],
            operational: vec![],
            permissive: false,
        })
        .unwrap();
}

#[test]
fn restarts_do_not_keep_the_journal_from_its_checkpoints() {
    // Each run journals less than `journal_checkpoint_bytes` (4096 in
    // `open`), as a server restarted often does: the journal written
    // before a restart still counts toward the next checkpoint, so the
    // files stay near the limit instead of growing with every run.
    let schema = Arc::new(Schema::builtin().unwrap());
    let dir = temp("restarts");
    let store = open(&dir, &schema, Durability::Journal);
    store
        .execute_blocking(Command::Add {
            entry: suffix_entry(&schema),
            prechecked: false,
        })
        .unwrap();
    store.close();
    let suffix = Dn::parse(SUFFIX.as_bytes(), &schema).unwrap();
    let mut per_run = 0;
    for run in 0..12 {
        let store = open(&dir, &schema, Durability::Journal);
        let at_open = log_bytes(&dir);
        for step in 0..30 {
            describe(&store, &suffix, &format!("run {run} step {step}"));
        }
        if run == 0 {
            // Checkpoints in later runs remove files: measure the first.
            per_run = log_bytes(&dir) - at_open;
        }
        store.close();
    }
    assert!(per_run < 4096, "a run journals under the limit ({per_run})");
    let journaled = 12 * per_run;
    assert!(
        journaled > 4 * 4096,
        "the runs together journal {journaled}"
    );
    let kept = log_bytes(&dir);
    assert!(
        kept < 2 * 4096,
        "{kept} bytes of journal kept after {journaled} written"
    );

    // What is kept still rebuilds the database after a machine crash.
    let expected = dump(&open(&dir, &schema, Durability::Journal));
    assert_machine_crash_rebuilds(&dir, &schema, &expected);
}

/// An index dropped from the config at an open is no longer kept, and
/// the database's record of built indexes says so. That record is not
/// in any journal record, so the open copies a new base: after a
/// machine crash the rebuilt database must still say it, or the index,
/// configured again, would be used while it lacks the keys of the
/// entries added meanwhile.
#[test]
fn a_dropped_index_stays_unbuilt_after_a_machine_crash() {
    let schema = Arc::new(Schema::builtin().unwrap());
    let dir = temp("dropped-index");
    let open_with = |uid_indexed: bool| {
        let mut storage = StorageConfig {
            durability: Durability::Journal,
            ..StorageConfig::default()
        };
        if !uid_indexed {
            storage.indexes.remove("uid");
        }
        Store::open(
            StoreOptions {
                path: dir.clone(),
                storage,
                suffixes: vec![Dn::parse(SUFFIX.as_bytes(), &schema).unwrap()],
                groups: meridian_config::GroupsConfig::default(),
            },
            Arc::clone(&schema),
        )
        .unwrap()
    };
    let add_account = |store: &Store, uid: &str| {
        let dn = format!("uid={uid},{SUFFIX}");
        let e = entry(
            &schema,
            &dn,
            &[("objectClass", &["account"]), ("uid", &[uid])],
        );
        store
            .execute_blocking(Command::Add {
                entry: e,
                prechecked: false,
            })
            .unwrap();
    };
    let find = |store: &Store, uid: &str| {
        let ber = filter_str::parse(&format!("(uid={uid})"), 8).unwrap();
        let filter = meridian_proto::Filter::from_ber(&ber, meridian_proto::Depth::new(8)).unwrap();
        let mut found = 0;
        let report = store
            .snapshot()
            .unwrap()
            .search(
                &Dn::root(),
                meridian_proto::Scope::Subtree,
                &filter,
                |_, _| {
                    found += 1;
                    true
                },
            )
            .unwrap();
        (found, report.indexed)
    };

    let store = open_with(true);
    store
        .execute_blocking(Command::Add {
            entry: suffix_entry(&schema),
            prechecked: false,
        })
        .unwrap();
    add_account(&store, "early");
    assert_eq!(find(&store, "early"), (1, true));
    store.close();

    let store = open_with(false);
    add_account(&store, "late");
    store.close();

    std::fs::write(dir.join("journal/running"), "another boot").unwrap();
    std::fs::remove_file(dir.join("data.mdb")).unwrap();
    let store = open_with(true);
    assert_eq!(find(&store, "late"), (1, false));
    assert_eq!(find(&store, "early"), (1, false));
    assert_eq!(
        store.execute_blocking(Command::RebuildIndexes).unwrap(),
        meridian_store::Effect::Reindexed(3)
    );
    assert_eq!(find(&store, "late"), (1, true));
    assert!(store.snapshot().unwrap().check().unwrap().is_empty());
    store.close();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_checkpoint_makes_room_in_the_map_before_it_copies() {
    // A checkpoint's copy is a read transaction: the commits made while
    // it lasts cannot reuse the pages they free, and a writer that ran
    // out of map would wait for the copy to end before growing it. So
    // the room is made first (`copy.rs`), as for a snapshot.
    let schema = Arc::new(Schema::builtin().unwrap());
    let dir = temp("room");
    let store = open(&dir, &schema, Durability::Journal);
    let room = |store: &Store| store.map_size() as u64 - store.map_used_bytes();
    assert!(room(&store) < 16 << 20, "the map starts at one step");
    let bases = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir.join("journal"))
            .unwrap()
            .map(|item| item.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("base-") && name.ends_with(".mdb"))
            .collect()
    };
    let made_at_open = bases(&dir);
    assert_eq!(made_at_open, ["base-00000000000000000000.mdb"]);
    store
        .execute_blocking(Command::Add {
            entry: suffix_entry(&schema),
            prechecked: false,
        })
        .unwrap();
    let suffix = Dn::parse(SUFFIX.as_bytes(), &schema).unwrap();
    // Past `journal_checkpoint_bytes` (4096), then a checkpoint starts
    // at the next append; wait for its base (the older one then goes).
    let mut step = 0;
    loop {
        let now = bases(&dir);
        if !now.is_empty() && now != made_at_open {
            break;
        }
        assert!(step < 20_000, "no checkpoint after {step} modifies");
        describe(&store, &suffix, &format!("step {step}"));
        step += 1;
    }
    assert!(
        room(&store) >= 16 << 20,
        "room before a checkpoint: {}",
        room(&store)
    );
    store.close();
}
