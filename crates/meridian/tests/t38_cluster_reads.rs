//! `cluster.reads` on real nodes: linearizable reads at a follower see
//! every write acknowledged before them and are refused (unavailable)
//! when no leader can confirm them; local reads are refused (busy) once
//! a cut-off node's copy is older than `cluster.max_staleness_ms`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::disallowed_methods
)]

mod support;

use std::time::{Duration, Instant};

use support::cluster::{Cluster, Outcome, PEOPLE, Writer1};

const COMPARE_TRUE: i64 = 6;

/// Compares until the answer is not `Unknown` (a connection the proxy
/// broke), at most `within`.
fn compare(reader: &mut Writer1, dn: &str, value: &str, within: Duration) -> Outcome {
    let deadline = Instant::now() + within;
    loop {
        match reader.compare(dn, "description", value) {
            Outcome::Unknown if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100));
            }
            outcome => return outcome,
        }
    }
}

/// Compares until the node serves the read again (compareTrue), at most
/// 20 s after its links were healed.
fn served_once_healed(reader: &mut Writer1, dn: &str, value: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match compare(reader, dn, value, Duration::from_secs(10)) {
            Outcome::Refused(COMPARE_TRUE, _) => return,
            other => {
                assert!(Instant::now() < deadline, "healed, still: {other:?}");
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}

#[test]
fn linearizable_reads_at_a_follower_see_every_acknowledged_write_and_need_a_leader() {
    let (cluster, leader) = Cluster::with_base("reads = \"linearizable\"\nwrite_timeout_ms = 2000");
    let follower = (1..=3).find(|id| *id != leader).unwrap();
    let own = format!("uid=own1,{PEOPLE}");
    let mut writer = Writer1::new(cluster.node(leader).ldap);
    let mut reader = Writer1::new(cluster.node(follower).ldap);
    // Each value is acknowledged at the leader, then read at once at the
    // follower on another connection: the follower must have it.
    for i in 0..200 {
        let value = format!("value {i}");
        assert_eq!(writer.replace(&own, "description", &value), Outcome::Ok);
        match reader.compare(&own, "description", &value) {
            Outcome::Refused(COMPARE_TRUE, _) => {}
            other => {
                panic!("write {i} acknowledged at the leader, unseen at the follower: {other:?}")
            }
        }
    }
    // A search, through OpenLDAP's client, too.
    assert_eq!(writer.replace(&own, "description", "searched"), Outcome::Ok);
    let (code, out) = support::cluster::admin_at(
        &support::cluster::url(&cluster, follower),
        "ldapsearch",
        &["-LLL", "-b", &own, "-s", "base", "description"],
        None,
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("description: searched"), "{out}");

    // Cut off, the follower cannot have a read confirmed: unavailable,
    // once cluster.write_timeout_ms has passed.
    cluster.isolate(follower);
    let mut cut_off = Writer1::new(cluster.node(follower).ldap);
    match compare(&mut cut_off, &own, "searched", Duration::from_secs(10)) {
        Outcome::Refused(52, message) => {
            assert!(
                message.contains("no leader confirmed the read"),
                "{message}"
            );
        }
        other => panic!("a linearizable read at a cut-off node: {other:?}"),
    }
    cluster.heal_all();
    served_once_healed(&mut cut_off, &own, "searched");
}

#[test]
fn local_reads_are_served_while_current_and_refused_busy_once_too_stale() {
    let (mut cluster, leader) = Cluster::with_base("reads = \"local\"\nmax_staleness_ms = 1000");
    let follower = (1..=3).find(|id| *id != leader).unwrap();
    let own = format!("uid=own1,{PEOPLE}");
    let mut writer = Writer1::new(cluster.node(leader).ldap);
    assert_eq!(writer.replace(&own, "description", "local"), Outcome::Ok);
    cluster.await_identical(Duration::from_secs(20));
    let mut reader = Writer1::new(cluster.node(follower).ldap);
    assert!(matches!(
        compare(&mut reader, &own, "local", Duration::from_secs(10)),
        Outcome::Refused(COMPARE_TRUE, _)
    ));
    // Cut off for longer than max_staleness_ms: busy, saying why.
    cluster.isolate(follower);
    std::thread::sleep(Duration::from_millis(2500));
    let mut cut_off = Writer1::new(cluster.node(follower).ldap);
    match compare(&mut cut_off, &own, "local", Duration::from_secs(10)) {
        Outcome::Refused(51, message) => {
            assert!(message.contains("cluster.max_staleness_ms"), "{message}");
        }
        other => panic!("a local read at a node cut off for 2.5 s: {other:?}"),
    }
    // Healed, it is current again and serves.
    cluster.heal_all();
    served_once_healed(&mut cut_off, &own, "local");
}
