//! Crash test: a child process writes through the store and prints every
//! acknowledged command; the parent kills it with SIGKILL at random
//! points, reopens the store, and checks that every acknowledged command
//! is there and that the store is consistent. Many rounds.
//!
//! The child is this same test binary, started with
//! `MERIDIAN_CRASH_CHILD` set (the usual trick to avoid shipping a
//! separate binary for a test).
//!
//! In journal mode every other kill also plays a crash of the machine:
//! the marker says another boot wrote it and `data.mdb` is overwritten
//! with noise, as if none of its unsynced pages had survived (or some in
//! the wrong order). Recovery must rebuild it from the base copy and the
//! journal alone.

// Tests time out their waits: they read the clock directly.
#![allow(clippy::disallowed_methods)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use meridian_config::{Durability, StorageConfig};
use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_model::modify::{ModOp, Modification};
use meridian_store::{Command, Store, StoreOptions};

mod common;
use common::{SUFFIX, entry, suffix_entry};
const WRITERS: usize = 4;
const ROUNDS: usize = 10;

fn storage(mode: Durability) -> StorageConfig {
    StorageConfig {
        durability: mode,
        // Small, so that every round rotates segments and copies the
        // database several times while it is being killed.
        journal_checkpoint_bytes: 16 << 10,
        ..StorageConfig::default()
    }
}

fn mode_named(name: &str) -> Durability {
    match name {
        "journal" => Durability::Journal,
        _ => Durability::Durable,
    }
}

fn open(dir: &Path, schema: &Arc<Schema>, mode: Durability) -> Store {
    Store::open(
        StoreOptions {
            path: dir.to_path_buf(),
            storage: storage(mode),
            suffixes: vec![Dn::parse(SUFFIX.as_bytes(), schema).unwrap()],
            groups: meridian_config::GroupsConfig::default(),
        },
        Arc::clone(schema),
    )
    .unwrap()
}

/// The child: writes until killed, printing one line per acknowledgement.
fn child(dir: &Path, round: usize, mode: Durability) {
    let schema = Arc::new(Schema::builtin().unwrap());
    let store = open(dir, &schema, mode);
    if round == 0 {
        store
            .execute_blocking(Command::Add {
                entry: suffix_entry(&schema),
                prechecked: false,
            })
            .unwrap();
        for t in 0..WRITERS {
            let uid = format!("counter{t}");
            store
                .execute_blocking(Command::Add {
                    entry: entry(
                        &schema,
                        &format!("uid={uid},{SUFFIX}"),
                        &[
                            ("objectClass", &["account"]),
                            ("uid", &[&uid]),
                            ("description", &["0"]),
                        ],
                    ),
                    prechecked: false,
                })
                .unwrap();
        }
        println!("READY");
    }
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let threads: Vec<_> = (0..WRITERS)
        .map(|t| {
            let store = store.clone();
            let schema = Arc::clone(&schema);
            let out = Arc::clone(&out);
            std::thread::spawn(move || {
                for i in 0u64.. {
                    let uid = format!("r{round}t{t}n{i}");
                    store
                        .execute_blocking(Command::Add {
                            entry: entry(
                                &schema,
                                &format!("uid={uid},{SUFFIX}"),
                                &[("objectClass", &["account"]), ("uid", &[&uid])],
                            ),
                            prechecked: false,
                        })
                        .unwrap();
                    let counter = (round as u64) * 1_000_000 + i;
                    store
                        .execute_blocking(Command::Modify {
                            dn: Dn::parse(format!("uid=counter{t},{SUFFIX}").as_bytes(), &schema)
                                .unwrap(),
                            changes: vec![Modification {
                                op: ModOp::Replace,
                                attr: "description".into(),
                                values: vec![counter.to_string().into_bytes()],
                            }],
                            operational: vec![],
                            permissive: false,
                        })
                        .unwrap();
                    let mut out = out.lock().unwrap();
                    writeln!(out, "ADD {uid}").unwrap();
                    writeln!(out, "SET {t} {counter}").unwrap();
                    out.flush().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
}

/// xorshift for kill delays; fixed seed so failures reproduce.
fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// Overwrites `path` with noise of the same length.
fn scramble(path: &Path, seed: &mut u64) {
    let len = std::fs::metadata(path).unwrap().len() as usize;
    let noise: Vec<u8> = (0..len).map(|_| next(seed) as u8).collect();
    std::fs::write(path, noise).unwrap();
}

#[test]
fn sigkill_loses_no_acknowledged_write() {
    crash_rounds("sigkill_loses_no_acknowledged_write", "durable");
}

#[test]
fn sigkill_and_machine_crash_in_journal_mode_lose_no_acknowledged_write() {
    crash_rounds(
        "sigkill_and_machine_crash_in_journal_mode_lose_no_acknowledged_write",
        "journal",
    );
}

fn crash_rounds(test: &str, mode_name: &str) {
    let mode = mode_named(mode_name);
    if let Ok(dir) = std::env::var("MERIDIAN_CRASH_CHILD") {
        let round = std::env::var("MERIDIAN_CRASH_ROUND")
            .unwrap()
            .parse()
            .unwrap();
        child(&PathBuf::from(dir), round, mode);
        return;
    }
    let dir =
        std::env::temp_dir().join(format!("meridian-crash-{mode_name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let schema = Arc::new(Schema::builtin().unwrap());
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut acknowledged_adds: Vec<String> = Vec::new();
    let mut counters = [0u64; WRITERS];
    for round in 0..ROUNDS {
        let mut child = Process::new(std::env::current_exe().unwrap())
            .args(["--exact", test, "--nocapture", "--test-threads=1"])
            .env("MERIDIAN_CRASH_CHILD", &dir)
            .env("MERIDIAN_CRASH_ROUND", round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::<String>::new()));
        let reader = {
            let lines = Arc::clone(&lines);
            let stdout = child.stdout.take().unwrap();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    lines.lock().unwrap().push(line);
                }
            })
        };
        // Let it write for a while (the first round also sets up). The
        // while starts at its first acknowledged add (or after 20 s), not
        // at its start: a busy machine can take longer than the whole
        // while just to start the child and open the store.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::time::Instant::now() < deadline
            && !lines.lock().unwrap().iter().any(|l| l.starts_with("ADD "))
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        let wait_ms = 150 + next(&mut seed) % 400;
        std::thread::sleep(Duration::from_millis(wait_ms));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        reader.join().unwrap();
        let lines = lines.lock().unwrap().clone();
        let mut round_adds = 0;
        for line in &lines {
            let mut parts = line.split_whitespace();
            match (parts.next(), parts.next(), parts.next()) {
                (Some("ADD"), Some(uid), None) => {
                    acknowledged_adds.push(uid.to_owned());
                    round_adds += 1;
                }
                (Some("SET"), Some(t), Some(v)) => {
                    let t: usize = t.parse().unwrap();
                    counters[t] = counters[t].max(v.parse().unwrap());
                }
                _ => {}
            }
        }
        assert!(
            round_adds > 0 || round == 0,
            "round {round}: the child acknowledged nothing"
        );

        if mode == Durability::Journal && round % 2 == 1 {
            std::fs::write(dir.join("journal/running"), "another boot").unwrap();
            scramble(&dir.join("data.mdb"), &mut seed);
        }
        let store = open(&dir, &schema, mode);
        let snap = store.snapshot().unwrap();
        for uid in &acknowledged_adds {
            let dn = Dn::parse(format!("uid={uid},{SUFFIX}").as_bytes(), &schema).unwrap();
            assert!(
                snap.get(&dn).unwrap().is_some(),
                "round {round}: acknowledged add of {uid} is lost"
            );
        }
        let description = schema.attribute_id("description").unwrap();
        for (t, &acked) in counters.iter().enumerate() {
            let dn = Dn::parse(format!("uid=counter{t},{SUFFIX}").as_bytes(), &schema).unwrap();
            let Some((_, e)) = snap.get(&dn).unwrap() else {
                assert_eq!(acked, 0, "counter entry lost");
                continue;
            };
            let stored: u64 = String::from_utf8(e.get(description).unwrap().values[0].clone())
                .unwrap()
                .parse()
                .unwrap();
            assert!(
                stored >= acked,
                "round {round}: counter {t} is {stored}, acknowledged {acked}"
            );
        }
        let problems = snap.check().unwrap();
        assert!(problems.is_empty(), "round {round}: {problems:#?}");
        drop(snap);
        store.close();
    }
    assert!(
        acknowledged_adds.len() > 50,
        "too few writes to mean anything: {}",
        acknowledged_adds.len()
    );
    eprintln!(
        "{} acknowledged adds survived {ROUNDS} SIGKILLs ({mode_name})",
        acknowledged_adds.len()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
