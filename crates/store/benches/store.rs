//! Store benchmarks (issue 4). Results and commands: `docs/BENCHMARKS.md`.
//!
//! Dataset: `MERIDIAN_BENCH_ENTRIES` posixAccount+inetOrgPerson entries
//! (default 50,000) under one suffix, durable LMDB in a temporary
//! directory (`MERIDIAN_BENCH_BACKEND=memory` for the memory flavour),
//! default indexes and `uidNumber` eq and ord. Raw LMDB figures on the same environment
//! (lookups and a scan without decoding) are the ceiling.
// A benchmark measures time; it writes no directory data.
#![allow(clippy::disallowed_methods)]
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use meridian_config::StorageConfig;
use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_model::entry::Entry;
use meridian_model::modify::{ModOp, Modification};
use meridian_proto::{Depth, Filter, Scope, filter_str};
use meridian_store::{Command, Store, StoreOptions};

/// The `meridian` binary's allocator: the bench measures what the
/// server does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SUFFIX: &str = "dc=example,dc=com";

fn entry(schema: &Schema, dn: &str, attrs: &[(&str, &[&str])]) -> Entry {
    let dn = Dn::parse(dn.as_bytes(), schema).unwrap();
    Entry::new(
        dn,
        attrs
            .iter()
            .map(|(n, vs)| (n.as_bytes(), vs.iter().map(|v| v.as_bytes()))),
        schema,
    )
    .unwrap()
}

fn populate(store: &Store, schema: &Arc<Schema>, n: usize, runtime: &tokio::runtime::Runtime) {
    store
        .execute_blocking(Command::Add {
            entry: entry(
                schema,
                SUFFIX,
                &[
                    ("objectClass", &["dcObject", "organization"]),
                    ("dc", &["example"]),
                    ("o", &["x"]),
                ],
            ),
            prechecked: false,
        })
        .unwrap();
    runtime.block_on(async {
        for chunk in (0..n).collect::<Vec<_>>().chunks(2000) {
            let mut tasks = Vec::with_capacity(chunk.len());
            for &i in chunk {
                let store = store.clone();
                let schema = Arc::clone(schema);
                tasks.push(tokio::spawn(async move {
                    let uid = format!("user.{i}");
                    let num = (10_000 + i).to_string();
                    let e = entry(
                        &schema,
                        &format!("uid={uid},{SUFFIX}"),
                        &[
                            ("objectClass", &["inetOrgPerson", "posixAccount"]),
                            ("uid", &[&uid]),
                            ("cn", &[&format!("User {i}")]),
                            ("sn", &["User"]),
                            ("mail", &[&format!("{uid}@example.com")]),
                            ("uidNumber", &[&num]),
                            ("gidNumber", &["100"]),
                            ("homeDirectory", &[&format!("/home/{uid}")]),
                            ("loginShell", &["/bin/bash"]),
                            ("description", &["0"]),
                        ],
                    );
                    store
                        .execute(Command::Add {
                            entry: e,
                            prechecked: false,
                        })
                        .await
                        .unwrap();
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
        }
    });
}

fn bench(c: &mut Criterion) {
    let n: usize = std::env::var("MERIDIAN_BENCH_ENTRIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50_000);
    let schema = Arc::new(Schema::builtin().unwrap());
    let dir = std::env::temp_dir().join(format!("meridian-bench-store-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = Store::open(
        StoreOptions {
            path: dir.clone(),
            storage: StorageConfig {
                backend: match std::env::var("MERIDIAN_BENCH_BACKEND").as_deref() {
                    Ok("memory") => meridian_config::Backend::Memory,
                    _ => meridian_config::Backend::Mdb,
                },
                durability: match std::env::var("MERIDIAN_BENCH_DURABILITY").as_deref() {
                    Ok("relaxed") => meridian_config::Durability::Relaxed,
                    Ok("journal") => meridian_config::Durability::Journal,
                    _ => meridian_config::Durability::Durable,
                },
                indexes: {
                    let mut indexes = StorageConfig::default().indexes;
                    indexes.insert(
                        "uidNumber".into(),
                        vec![
                            meridian_config::IndexKind::Eq,
                            meridian_config::IndexKind::Ord,
                        ],
                    );
                    indexes
                },
                ..StorageConfig::default()
            },
            suffixes: vec![Dn::parse(SUFFIX.as_bytes(), &schema).unwrap()],
            groups: meridian_config::GroupsConfig::default(),
        },
        Arc::clone(&schema),
    )
    .unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let started = Instant::now();
    populate(&store, &schema, n, &runtime);
    eprintln!(
        "loaded {n} entries in {:.1} s ({:.0} adds/s, durable, group commit)",
        started.elapsed().as_secs_f64(),
        n as f64 / started.elapsed().as_secs_f64()
    );

    let dns: Vec<Dn> = (0..1024)
        .map(|i| {
            Dn::parse(
                format!("uid=user.{},{SUFFIX}", (i * 7919) % n).as_bytes(),
                &schema,
            )
            .unwrap()
        })
        .collect();
    let mut next = 0usize;
    c.bench_function("get_by_dn_decoded", |b| {
        b.iter(|| {
            next = (next + 1) % dns.len();
            let snap = store.snapshot().unwrap();
            black_box(snap.get(&dns[next]).unwrap().unwrap());
        })
    });
    c.bench_function("get_by_dn_raw_lmdb", |b| {
        b.iter(|| {
            next = (next + 1) % dns.len();
            let snap = store.snapshot().unwrap();
            black_box(snap.raw_get_len(&dns[next]).unwrap().unwrap());
        })
    });

    let base = Dn::parse(SUFFIX.as_bytes(), &schema).unwrap();
    let ber = filter_str::parse(&format!("(homeDirectory=/home/user.{})", n - 1), 8).unwrap();
    let unindexed = Filter::from_ber(&ber, Depth::new(8)).unwrap();
    let mut group = c.benchmark_group("scan");
    group.sample_size(10);
    group.bench_function("unindexed_subtree_search", |b| {
        b.iter(|| {
            let snap = store.snapshot().unwrap();
            let report = snap
                .search(&base, Scope::Subtree, &unindexed, |_, _| true)
                .unwrap();
            assert_eq!(report.matched, 1);
        })
    });
    // A range of 20 numbers, from the ordering index and, through an OR
    // with an item no index serves (and no entry matches), by a scan.
    let last_20 = 10_000 + n.saturating_sub(20);
    for (name, text) in [
        ("range_search_20_indexed", format!("(uidNumber>={last_20})")),
        (
            "range_search_20_scanned",
            format!("(|(uidNumber>={last_20})(!(objectClass=*)))"),
        ),
    ] {
        let ber = filter_str::parse(&text, 8).unwrap();
        let filter = Filter::from_ber(&ber, Depth::new(8)).unwrap();
        group.bench_function(name, |b| {
            b.iter(|| {
                let snap = store.snapshot().unwrap();
                let report = snap
                    .search(&base, Scope::Subtree, &filter, |_, _| true)
                    .unwrap();
                assert_eq!(report.matched, 20.min(n));
            })
        });
    }
    group.bench_function("raw_lmdb_scan", |b| {
        b.iter(|| black_box(store.snapshot().unwrap().raw_scan_len().unwrap()))
    });
    group.bench_function("raw_lmdb_scan_touching_every_line", |b| {
        b.iter(|| black_box(store.snapshot().unwrap().raw_scan_touch().unwrap()))
    });
    // Durable modifies under group commit: 1,000 clients, each sending
    // its next modify when the last is acknowledged; each commit takes
    // the modifies waiting (the average is printed). Reported per modify
    // (criterion's throughput), beside the raw ceiling below.
    const CLIENTS: usize = 1000;
    const ROUNDS: usize = 5;
    // The entries modified, one per client; the ceiling rewrites the same.
    let modified: Vec<Dn> = (0..CLIENTS)
        .map(|i| {
            Dn::parse(
                format!("uid=user.{},{SUFFIX}", (i * 31) % n).as_bytes(),
                &schema,
            )
            .unwrap()
        })
        .collect();
    let (mut modifies, mut commits) = (0u64, 0u64);
    group.throughput(Throughput::Elements((CLIENTS * ROUNDS) as u64));
    group.bench_function("durable_modifies_from_1000_clients", |b| {
        let mut round = 0u64;
        b.iter(|| {
            round += 1;
            let before = store.commits();
            runtime.block_on(async {
                let mut tasks = Vec::with_capacity(CLIENTS);
                for dn in &modified {
                    let (store, dn) = (store.clone(), dn.clone());
                    tasks.push(tokio::spawn(async move {
                        for step in 0..ROUNDS {
                            store
                                .execute(Command::Modify {
                                    dn: dn.clone(),
                                    changes: vec![Modification {
                                        op: ModOp::Replace,
                                        attr: "description".into(),
                                        values: vec![format!("{round}.{step}").into_bytes()],
                                    }],
                                    operational: vec![],
                                    permissive: false,
                                })
                                .await
                                .unwrap();
                        }
                    }));
                }
                for t in tasks {
                    t.await.unwrap();
                }
            });
            modifies += (CLIENTS * ROUNDS) as u64;
            commits += store.commits() - before;
        })
    });
    eprintln!(
        "durable modifies: {:.0} per commit on average",
        modifies as f64 / commits.max(1) as f64
    );
    // The ceiling: the same 1,000 records read and written back
    // unchanged in one durable transaction, no model work.
    group.throughput(Throughput::Elements(modified.len() as u64));
    group.bench_function("raw_lmdb_batch_of_1000_durable_rewrites", |b| {
        b.iter(|| store.raw_rewrite(&modified).unwrap())
    });
    group.finish();
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, bench);
criterion_main!(benches);
