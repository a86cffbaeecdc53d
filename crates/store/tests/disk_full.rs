//! A full disk: writes are refused with unwillingToPerform and a message,
//! reads go on, nothing is corrupted, and writes resume once space is
//! freed. Runs on a 6 MiB tmpfs the test mounts (root only; CI runs as
//! root).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::Arc;

use meridian_config::{Durability, StorageConfig};
use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_proto::ResultCode;
use meridian_store::{Command, Store, StoreError, StoreOptions};

use meridian_testing::root::{Tmpfs, can_run_as_root};

mod common;
use common::{SUFFIX, copy_files, entry, suffix_entry};

#[test]
fn a_full_disk_refuses_writes_and_keeps_reads() {
    fills_the_disk("diskfull", Durability::Durable);
}

/// Journal mode maps the database writable: a page written into a hole
/// of the file on a full disk would be a SIGBUS, not a refused write.
/// The map grows only into space allocated first (`map_file.rs`). The
/// journal has a file system of its own here, so that the database's is
/// the one that fills.
#[test]
fn a_full_disk_refuses_writes_and_keeps_reads_with_a_writable_map() {
    fills_the_disk("diskfull-writemap", Durability::Journal);
}

fn fills_the_disk(tag: &str, durability: Durability) {
    if !can_run_as_root("mounting a tmpfs needs root") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("meridian-{tag}-{}", std::process::id()));
    let mount = Tmpfs::mount(&dir, "6m");
    let journal_mount =
        (durability == Durability::Journal).then(|| Tmpfs::mount(&dir.join("db/journal"), "64m"));
    // A filler file, removed later to free space.
    std::fs::write(dir.join("filler"), vec![0u8; 1 << 20]).unwrap();

    let schema = Arc::new(Schema::builtin().unwrap());
    let store = Store::open(
        StoreOptions {
            path: dir.join("db"),
            storage: StorageConfig {
                map_size_bytes: 64 << 20,
                durability,
                ..StorageConfig::default()
            },
            suffixes: vec![Dn::parse(SUFFIX.as_bytes(), &schema).unwrap()],
            groups: meridian_config::GroupsConfig::default(),
        },
        Arc::clone(&schema),
    )
    .unwrap();
    store
        .execute_blocking(Command::Add {
            entry: suffix_entry(&schema),
            prechecked: false,
        })
        .unwrap();
    let big = "v".repeat(200_000);
    let mut added = 0;
    let refusal = loop {
        let uid = format!("u{added}");
        let result = store.execute_blocking(Command::Add {
            entry: entry(
                &schema,
                &format!("uid={uid},{SUFFIX}"),
                &[
                    ("objectClass", &["account"]),
                    ("uid", &[&uid]),
                    ("description", &[&big]),
                ],
            ),
            prechecked: false,
        });
        match result {
            Ok(_) => added += 1,
            Err(e) => break e,
        }
        assert!(added < 1000, "the disk never filled");
    };
    assert!(added > 3, "only {added} adds before the disk filled");
    assert!(
        matches!(refusal, StoreError::WritesRefused(_)),
        "{refusal:?}"
    );
    assert_eq!(refusal.code(), ResultCode::UNWILLING_TO_PERFORM);
    assert!(refusal.to_string().contains("disk is full"), "{refusal}");

    // Reads go on and everything acknowledged is intact.
    {
        let snap = store.snapshot().unwrap();
        assert_eq!(snap.len().unwrap(), added as u64 + 1);
        assert!(snap.check().unwrap().is_empty());
    }
    // Free space: writes resume.
    std::fs::remove_file(dir.join("filler")).unwrap();
    store
        .execute_blocking(Command::Add {
            entry: entry(
                &schema,
                &format!("uid=after,{SUFFIX}"),
                &[("objectClass", &["account"]), ("uid", &["after"])],
            ),
            prechecked: false,
        })
        .unwrap();
    assert_eq!(store.snapshot().unwrap().len().unwrap(), added as u64 + 2);
    store.close();
    drop(journal_mount);
    drop(mount);
}

/// Journal mode with the journal on its own small file system. LMDB
/// commits a batch before its record is appended, so the record's room
/// is allocated first (`journal/space.rs`): when there is none, the batch
/// is not committed. A refused write never appears (not to readers, not
/// after a restart or a machine crash), and writes resume as soon as
/// space is freed, without a restart.
#[test]
fn a_full_journal_refuses_writes_that_then_never_appear() {
    if !can_run_as_root("mounting a tmpfs needs root") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("meridian-journalfull-{}", std::process::id()));
    let journal = dir.join("db/journal");
    let mount = Tmpfs::mount(&journal, "4m");
    // Removed later: room again.
    std::fs::write(journal.join("filler"), vec![0u8; 5 << 19]).unwrap();

    let schema = Arc::new(Schema::builtin().unwrap());
    let open = |db: &std::path::Path| {
        Store::open(
            StoreOptions {
                path: db.to_path_buf(),
                storage: StorageConfig {
                    durability: meridian_config::Durability::Journal,
                    ..StorageConfig::default()
                },
                suffixes: vec![Dn::parse(SUFFIX.as_bytes(), &schema).unwrap()],
                groups: meridian_config::GroupsConfig::default(),
            },
            Arc::clone(&schema),
        )
        .unwrap()
    };
    let store = open(&dir.join("db"));
    store
        .execute_blocking(Command::Add {
            entry: suffix_entry(&schema),
            prechecked: false,
        })
        .unwrap();
    let big = "v".repeat(60_000);
    let add_to = |store: &Store, uid: &str| add_described(store, &schema, uid, &big);
    let mut acknowledged = 0;
    let refusal = loop {
        match add_to(&store, &format!("u{acknowledged}")) {
            Ok(_) => acknowledged += 1,
            Err(e) => break e,
        }
        assert!(acknowledged < 100, "the journal never filled");
    };
    assert!(
        acknowledged > 3,
        "only {acknowledged} adds before the journal filled"
    );
    assert_eq!(refusal.code(), ResultCode::UNWILLING_TO_PERFORM);
    assert!(refusal.to_string().contains("disk is full"), "{refusal}");
    assert!(refusal.to_string().contains("journal"), "{refusal}");
    let refused = format!("uid=u{acknowledged},{SUFFIX}");
    let count = |store: &Store| {
        let snap = store.snapshot().unwrap();
        assert!(snap.check().unwrap().is_empty());
        let dn = Dn::parse(refused.as_bytes(), &schema).unwrap();
        assert!(snap.get(&dn).unwrap().is_none(), "the refused add is there");
        snap.len().unwrap()
    };
    // Readers never see the refused write.
    assert_eq!(count(&store), acknowledged as u64 + 1);
    // Still full: still refused, and not latched...
    let later = add_to(&store, "later").unwrap_err();
    assert_eq!(later.code(), ResultCode::UNWILLING_TO_PERFORM);
    // ...so freeing space lets writes resume, without a restart.
    std::fs::remove_file(journal.join("filler")).unwrap();
    add_to(&store, "after").unwrap();
    assert_eq!(count(&store), acknowledged as u64 + 2);
    store.close();

    // If the machine went down now (on a copy): rebuilt from the base
    // and the journal, exactly the acknowledged adds.
    let copy = dir.join("machine-crash");
    copy_files(&dir.join("db"), &copy);
    copy_files(&journal, &copy.join("journal"));
    std::fs::write(copy.join("journal/running"), "another boot").unwrap();
    std::fs::write(copy.join("data.mdb"), b"lost").unwrap();
    let store = open(&copy);
    assert_eq!(count(&store), acknowledged as u64 + 2);
    store.close();

    // The process restarts instead: the same.
    let store = open(&dir.join("db"));
    assert_eq!(count(&store), acknowledged as u64 + 2);
    store.close();
    drop(mount);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 44, severe 1: with checkpoints while the journal's disk fills,
/// a checkpoint's move to a new segment recorded room it had not
/// allocated; later claims skipped `fallocate`, LMDB committed, the
/// append failed, and the refused add was visible and stayed refused
/// until a restart, which a full disk then prevented. Here: the refused
/// write never appears, writes resume once room is freed, and a store
/// opened on the full disk starts, refuses writes, and takes them again
/// once there is room.
#[test]
fn checkpoints_while_the_journal_fills_lose_nothing_and_a_full_disk_still_starts() {
    if !can_run_as_root("mounting a tmpfs needs root") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("meridian-journalcheck-{}", std::process::id()));
    let db = dir.join("db");
    // Database and journal on one small file system, as a data
    // directory on its own disk is.
    let mount = Tmpfs::mount(&dir, "24m");
    std::fs::write(dir.join("filler"), vec![0u8; 4 << 20]).unwrap();
    let schema = Arc::new(Schema::builtin().unwrap());
    let open = || {
        Store::open(
            StoreOptions {
                path: db.clone(),
                storage: StorageConfig {
                    durability: Durability::Journal,
                    journal_checkpoint_bytes: 256 << 10,
                    map_size_bytes: 64 << 20,
                    ..StorageConfig::default()
                },
                suffixes: vec![Dn::parse(SUFFIX.as_bytes(), &schema).unwrap()],
                groups: meridian_config::GroupsConfig::default(),
            },
            Arc::clone(&schema),
        )
    };
    let store = open().unwrap();
    store
        .execute_blocking(Command::Add {
            entry: suffix_entry(&schema),
            prechecked: false,
        })
        .unwrap();
    let big = "v".repeat(60_000);
    let add_to = |store: &Store, uid: &str| add_described(store, &schema, uid, &big);
    let present = |store: &Store, uid: &str| {
        let snap = store.snapshot().unwrap();
        let dn = Dn::parse(format!("uid={uid},{SUFFIX}").as_bytes(), &schema).unwrap();
        snap.get(&dn).unwrap().is_some()
    };
    let mut acknowledged = 0;
    let mut refusals = 0;
    // Fill it, and go on a while after the first refusal: each refused
    // add must stay absent, each acknowledged one present.
    for n in 0..1000 {
        let uid = format!("u{n}");
        match add_to(&store, &uid) {
            Ok(_) => {
                acknowledged += 1;
                assert!(present(&store, &uid), "{uid} acknowledged but absent");
            }
            Err(e) => {
                assert_eq!(e.code(), ResultCode::UNWILLING_TO_PERFORM, "{e}");
                assert!(!present(&store, &uid), "{uid} refused ({e}) but visible");
                refusals += 1;
                if refusals == 20 {
                    break;
                }
            }
        }
    }
    assert!(refusals == 20, "the disk never filled");
    assert!(
        acknowledged > 20,
        "only {acknowledged} adds before the disk filled"
    );
    // Room again: writes resume without a restart.
    std::fs::remove_file(dir.join("filler")).unwrap();
    add_to(&store, "after-free").unwrap();
    // Closed (which gives back the map's room ahead), the disk filled
    // to the last byte, then opened on it.
    store.close();
    let mut fill = std::fs::File::create(dir.join("filler")).unwrap();
    while std::io::Write::write_all(&mut fill, &[0u8; 4096]).is_ok() {}
    drop(fill);
    let store = open().expect("a store opens on a full disk");
    assert!(present(&store, "after-free"));
    let refused = add_to(&store, "while-full").unwrap_err();
    assert_eq!(
        refused.code(),
        ResultCode::UNWILLING_TO_PERFORM,
        "{refused}"
    );
    assert!(!present(&store, "while-full"));
    std::fs::remove_file(dir.join("filler")).unwrap();
    add_to(&store, "after-restart").unwrap();
    assert!(store.snapshot().unwrap().check().unwrap().is_empty());
    store.close();
    let store = open().unwrap();
    assert!(present(&store, "after-restart"));
    assert!(!present(&store, "while-full"));
    store.close();
    drop(mount);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Adds the account `uid=<uid>` below the suffix, with `description`.
fn add_described(
    store: &Store,
    schema: &Schema,
    uid: &str,
    description: &str,
) -> Result<meridian_store::Effect, StoreError> {
    store.execute_blocking(Command::Add {
        entry: entry(
            schema,
            &format!("uid={uid},{SUFFIX}"),
            &[
                ("objectClass", &["account"]),
                ("uid", &[uid]),
                ("description", &[description]),
            ],
        ),
        prechecked: false,
    })
}
