//! Many clients writing the same few entries at every node at once, in
//! both conflict modes, through a partition of the leader and its heal;
//! readers at every node read with `cluster.reads = "linearizable"`.
//! Every entry's history (all its writes and reads, with their times and
//! answers) must be linearizable, checked by the general checker
//! (`meridian_testing::linearizable`), and every replica identical at
//! the end.
//!
//! Under first-wins a write carries the entryCSN its node saw
//! ([`meridian_store::Command::Unchanged`], as the directory builds it)
//! and one that lost the race is refused on every replica alike: it
//! never happened, and the checker leaves it out. The test also checks
//! that such refusals do occur, and that some writes win.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    // Real time is what linearizability is about: each operation's
    // invocation and answer are instants.
    clippy::disallowed_methods
)]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use meridian_store::{Command, StoreError};
use meridian_testing::linearizable::{self, Action, Operation, Recorder};
use meridian_testing::rng::Rng;
use support::{Harness, SUFFIX, add, base, describe, describe_stamped, description};

const WITHIN: Duration = Duration::from_secs(20);
const KEYS: usize = 3;
const WRITERS_PER_NODE: u64 = 2;

fn key(k: usize) -> String {
    format!("cn=register{k},{SUFFIX}")
}

/// What the storm recorded, and what it counted.
#[derive(Default)]
struct Record {
    histories: Recorder,
    acknowledged: AtomicU64,
    conflicts: AtomicU64,
    not_applied: AtomicU64,
    unknown: AtomicU64,
}

/// The value a description holds: `v<N>`, or 0 before any write.
fn value_of(text: Option<String>) -> u64 {
    text.and_then(|t| t.strip_prefix('v').and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

/// One writer at node `at` until `stop`: each write a new value to one
/// of the keys.
async fn writer(
    harness: Arc<Harness>,
    at: u64,
    seed: u64,
    first_wins: bool,
    values: Arc<AtomicU64>,
    record: Arc<Record>,
    stop: Arc<AtomicBool>,
) {
    let mut rng = Rng(seed);
    while !stop.load(Ordering::Relaxed) {
        let dn = key(rng.below(KEYS));
        let value = values.fetch_add(1, Ordering::Relaxed);
        let text = format!("v{value}");
        let command = if first_wins {
            // Unique per write, in the CSN syntax the directory writes.
            let csn = format!("20261128000000.{value:06}Z#000000#{at:03}#000000");
            let write = describe_stamped(&harness.schema, &dn, &text, &csn);
            match harness.entry_csn(at, &dn) {
                Some(seen) => Command::Unchanged {
                    seen,
                    command: Box::new(write),
                },
                None => write,
            }
        } else {
            describe(&harness.schema, &dn, &text)
        };
        let invoked = Instant::now();
        let result = harness.write(at, command).await;
        let answered = Instant::now();
        let answered = match result {
            Ok(()) => {
                record.acknowledged.fetch_add(1, Ordering::Relaxed);
                Some(answered)
            }
            // assertionFailed (122), first-wins' refusal of the loser.
            Err(StoreError::Model(e)) if e.code.0 == 122 => {
                // A conflict refused on every replica: it never happened.
                record.conflicts.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            Err(StoreError::Unavailable(m)) if m.contains("was not applied") => {
                record.not_applied.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            Err(_) => {
                // No answer to rely on: it may have happened, or may yet.
                record.unknown.fetch_add(1, Ordering::Relaxed);
                None
            }
        };
        record.histories.push(
            &dn,
            Operation {
                invoked,
                answered,
                action: Action::Write(value),
                by: format!("writer at node {at} (v{value})"),
            },
        );
    }
}

/// One reader at node `at` until `stop`.
async fn reader(
    harness: Arc<Harness>,
    at: u64,
    seed: u64,
    record: Arc<Record>,
    stop: Arc<AtomicBool>,
) {
    let mut rng = Rng(seed);
    while !stop.load(Ordering::Relaxed) {
        let dn = key(rng.below(KEYS));
        read_once(&harness, at, &dn, &record).await;
        // A read served at once never awaits: let the others run.
        tokio::task::yield_now().await;
    }
}

async fn read_once(harness: &Harness, at: u64, dn: &str, record: &Record) {
    let invoked = Instant::now();
    let Ok(entry) = harness.read_linearizable(at, dn).await else {
        // Refused (no leader confirmed it in time): no answer.
        tokio::time::sleep(Duration::from_millis(10)).await;
        return;
    };
    let answered = Instant::now();
    let saw = value_of(entry.and_then(|e| description(&harness.schema, &e)));
    record.histories.push(
        dn,
        Operation {
            invoked,
            answered: Some(answered),
            action: Action::Read(saw),
            by: format!("reader at node {at} (saw v{saw})"),
        },
    );
}

/// The storm: writers and readers at every node, the leader partitioned
/// away for a while and healed, then every history checked and every
/// replica compared.
async fn storm(first_wins: bool) -> Arc<Record> {
    let harness = Harness::start(3, |options| {
        options.reads = meridian_replication::ReadMode::Linearizable;
        // Shorter than the partition: writes caught in it time out
        // without an answer (may or may not have been applied).
        options.write_timeout = Duration::from_millis(400);
    })
    .await;
    let leader = harness.leader(WITHIN).await;
    // The setup's adds, each until it is known applied: the short write
    // timeout can expire on a busy machine before the first commits.
    let mut setup = base(&harness.schema);
    for k in 0..KEYS {
        let csn = format!("20261128000000.000000Z#000000#000#{k:06}");
        let entry = add(
            &harness.schema,
            &key(k),
            &[
                ("objectClass", &["applicationProcess"]),
                ("cn", &[&format!("register{k}")]),
                ("entryCSN", &[&csn]),
            ],
        );
        setup.push(entry);
    }
    for command in setup {
        loop {
            match harness.write(leader, command.clone()).await {
                Ok(()) | Err(StoreError::AlreadyExists(_)) => break,
                Err(StoreError::Unavailable(_)) => continue,
                Err(e) => panic!("setting up: {e}"),
            }
        }
    }
    harness.await_identical(WITHIN).await;

    let harness = Arc::new(harness);
    let record = Arc::new(Record::default());
    let stop = Arc::new(AtomicBool::new(false));
    let values = Arc::new(AtomicU64::new(1));
    let mut tasks = tokio::task::JoinSet::new();
    for at in 1..=3u64 {
        for w in 0..WRITERS_PER_NODE {
            tasks.spawn(writer(
                Arc::clone(&harness),
                at,
                0x9e37_79b9 + at * 31 + w,
                first_wins,
                Arc::clone(&values),
                Arc::clone(&record),
                Arc::clone(&stop),
            ));
        }
        tasks.spawn(reader(
            Arc::clone(&harness),
            at,
            0x5151 + at,
            Arc::clone(&record),
            Arc::clone(&stop),
        ));
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    // The leader's site cut off: its pending writes have no answer, a
    // new leader is elected by the others, writes go on there.
    harness.partition(leader, true);
    let others: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    harness.leader_among(&others, WITHIN).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    harness.partition(leader, false);
    tokio::time::sleep(Duration::from_millis(800)).await;
    stop.store(true, Ordering::Relaxed);
    while tasks.join_next().await.is_some() {}

    harness.await_identical(WITHIN).await;
    // One last read of every key at every node, after everything.
    for at in 1..=3 {
        for k in 0..KEYS {
            read_once(&harness, at, &key(k), &record).await;
        }
    }
    let operations = record.histories.operations();
    assert!(
        operations > 200,
        "too few operations to mean anything: {operations}"
    );
    if let Err(violations) = record.histories.check(linearizable::DEFAULT_BUDGET) {
        panic!("not linearizable ({operations} operations):\n{violations}");
    }
    eprintln!(
        "{} acknowledged, {} refused as conflicts, {} not applied, {} without an answer",
        record.acknowledged.load(Ordering::Relaxed),
        record.conflicts.load(Ordering::Relaxed),
        record.not_applied.load(Ordering::Relaxed),
        record.unknown.load(Ordering::Relaxed)
    );
    record
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_writer_wins_storm_is_linearizable_through_a_partition() {
    let record = storm(false).await;
    assert_eq!(record.conflicts.load(Ordering::Relaxed), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_wins_storm_is_linearizable_through_a_partition_and_refuses_losers() {
    let record = storm(true).await;
    assert!(
        record.conflicts.load(Ordering::Relaxed) > 0,
        "no write ever lost a race"
    );
    assert!(record.acknowledged.load(Ordering::Relaxed) > 0);
}
