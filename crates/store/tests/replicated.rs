//! The store's side of replication: committed commands applied with a
//! marker in one transaction, a snapshot copy that says by its marker
//! what it holds, and its installation over another store's contents.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use meridian_config::StorageConfig;
use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_store::replicated::{decode_commands, encode_commands};
use meridian_store::{Command, Store, StoreError, StoreOptions};

mod common;
use common::{SUFFIX, entry, suffix_entry};

fn dir(tag: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "meridian-replicated-{}-{tag}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn open(schema: &Arc<Schema>, path: PathBuf) -> Store {
    let (store, _proposals) = Store::open_replicated(
        StoreOptions {
            path,
            storage: StorageConfig::default(),
            suffixes: vec![Dn::parse(SUFFIX.as_bytes(), schema).unwrap()],
            groups: meridian_config::GroupsConfig::default(),
        },
        Arc::clone(schema),
    )
    .unwrap();
    store
}

/// [`Store::copy_for_snapshot`] from a blocking thread, as the
/// replication layer calls it.
async fn copy_for_snapshot(store: &Store, path: &std::path::Path) -> Option<Vec<u8>> {
    let (store, path) = (store.clone(), path.to_path_buf());
    tokio::task::spawn_blocking(move || store.copy_for_snapshot(&path))
        .await
        .unwrap()
        .unwrap()
}

fn add(schema: &Schema, dn: &str, uid: &str) -> Command {
    Command::Add {
        entry: entry(
            schema,
            dn,
            &[("objectClass", &["account"]), ("uid", &[uid])],
        ),
        prechecked: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_commands_apply_with_their_marker_and_a_copy_installs_elsewhere() {
    let schema = Arc::new(Schema::builtin().unwrap());
    let (a_dir, b_dir) = (dir("a"), dir("b"));
    let a = open(&schema, a_dir.clone());
    let commands = [
        Command::Add {
            entry: suffix_entry(&schema),
            prechecked: false,
        },
        add(&schema, &format!("uid=one,{SUFFIX}"), "one"),
        // Refused (exists): the refusal is the command's result, the
        // others apply, the marker is stored.
        add(&schema, &format!("uid=one,{SUFFIX}"), "one"),
        add(&schema, &format!("uid=two,{SUFFIX}"), "two"),
    ];
    // Through the log's encoding, as a follower gets them.
    let bytes = encode_commands(commands.iter(), &schema);
    let decoded = decode_commands(&bytes, &schema).unwrap();
    assert_eq!(decoded.len(), 4);
    let results = a
        .apply_replicated(decoded, b"marker-1".to_vec())
        .await
        .unwrap()
        .results;
    assert!(results[0].is_ok() && results[1].is_ok() && results[3].is_ok());
    assert!(matches!(results[2], Err(StoreError::AlreadyExists(_))));
    assert_eq!(
        a.replication_marker().unwrap().as_deref(),
        Some(&b"marker-1"[..])
    );

    // Clients' commands never reach the writer directly.
    let copy = a_dir.join("copy.mdb");
    let room = |store: &Store| store.map_size() as u64 - store.map_used_bytes();
    assert!(room(&a) < 16 << 20, "the map starts at one step");
    assert_eq!(
        copy_for_snapshot(&a, &copy).await.as_deref(),
        Some(&b"marker-1"[..])
    );
    // Room was made before the copy, for the commits its read
    // transaction keeps from reusing pages.
    assert!(room(&a) >= 16 << 20, "room before a copy: {}", room(&a));

    // Another store, with other contents, becomes the copy.
    let b = open(&schema, b_dir.clone());
    b.apply_replicated(
        vec![add(&schema, &format!("uid=gone,{SUFFIX}"), "gone")],
        b"marker-0".to_vec(),
    )
    .await
    .unwrap();
    let marker = b.install_copy(copy.clone()).await.unwrap();
    assert_eq!(marker.as_deref(), Some(&b"marker-1"[..]));
    assert_eq!(
        b.replication_marker().unwrap().as_deref(),
        Some(&b"marker-1"[..])
    );
    let (da, db) = (
        a.snapshot().unwrap().raw_dump().unwrap(),
        b.snapshot().unwrap().raw_dump().unwrap(),
    );
    assert_eq!(
        da, db,
        "the installed store is the copied one, byte for byte"
    );
    // And it goes on applying as the original does.
    for store in [&a, &b] {
        store
            .apply_replicated(
                vec![add(&schema, &format!("uid=three,{SUFFIX}"), "three")],
                b"marker-2".to_vec(),
            )
            .await
            .unwrap()
            .results
            .into_iter()
            .for_each(|r| assert!(r.is_ok()));
    }
    assert_eq!(
        a.snapshot().unwrap().raw_dump().unwrap(),
        b.snapshot().unwrap().raw_dump().unwrap()
    );
    drop((a, b));
    let _ = std::fs::remove_dir_all(a_dir);
    let _ = std::fs::remove_dir_all(b_dir);
}

/// The `uid`s of the entries `filter` finds under the suffix, and
/// whether the search read a scan column.
fn uids(store: &Store, schema: &Schema, filter: &str) -> (Vec<String>, bool) {
    let ber = meridian_proto::filter_str::parse(filter, 32).unwrap();
    let filter = meridian_proto::Filter::from_ber(&ber, meridian_proto::Depth::new(32)).unwrap();
    let snapshot = store.snapshot().unwrap();
    let base = Dn::parse(SUFFIX.as_bytes(), schema).unwrap();
    let uid = schema.attribute_id("uid").unwrap();
    let mut found = Vec::new();
    let report = snapshot
        .search(&base, meridian_proto::Scope::Subtree, &filter, |_, e| {
            let value = &e.get(uid).unwrap().values[0];
            found.push(String::from_utf8(value.clone()).unwrap());
            true
        })
        .unwrap();
    found.sort();
    (found, report.columns)
}

fn described(schema: &Schema, uid: &str, description: &str) -> Command {
    Command::Add {
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
    }
}

/// A snapshot installed over a store replaces every entry under the same
/// IDs: the scan columns made of the old contents go with them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_installed_copy_drops_the_scan_columns_of_the_contents_it_replaces() {
    let schema = Arc::new(Schema::builtin().unwrap());
    let (a_dir, b_dir) = (dir("columns-a"), dir("columns-b"));
    let contents = |tag: &str| -> Vec<Command> {
        let mut commands = vec![Command::Add {
            entry: suffix_entry(&schema),
            prechecked: false,
        }];
        commands.extend((0..20).map(|i| described(&schema, &format!("{tag}{i}"), tag)));
        commands
    };
    let a = open(&schema, a_dir.clone());
    a.apply_replicated(contents("new"), b"marker-a".to_vec())
        .await
        .unwrap();
    let copy = a_dir.join("copy.mdb");
    copy_for_snapshot(&a, &copy).await;

    let b = open(&schema, b_dir.clone());
    b.apply_replicated(contents("old"), b"marker-b".to_vec())
        .await
        .unwrap();
    let wanted: Vec<String> = {
        let mut all: Vec<String> = (0..20).map(|i| format!("old{i}")).collect();
        all.sort();
        all
    };
    for _ in 0..2 {
        assert_eq!(
            uids(&b, &schema, "(description=old)"),
            (wanted.clone(), false)
        );
    }
    b.wait_for_scan_columns();
    assert_eq!(uids(&b, &schema, "(description=old)"), (wanted, true));

    b.install_copy(copy).await.unwrap();
    let (old, _) = uids(&b, &schema, "(description=old)");
    assert!(old.is_empty(), "the old contents are gone: {old:?}");
    let (new, _) = uids(&b, &schema, "(description=new)");
    assert_eq!(new.len(), 20, "{new:?}");
    drop((a, b));
    let _ = std::fs::remove_dir_all(a_dir);
    let _ = std::fs::remove_dir_all(b_dir);
}
