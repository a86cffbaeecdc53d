//! The replication protocol on an in-process cluster (`support/`): three
//! nodes in this process, their peer links through the WAN emulator.
//! Elections, forwarded writes, the answers a client gets, partitions,
//! a leader that cannot send, slow links, a restarted node and a node
//! that lost its disk, checked on the stores themselves.
//!
//! Found by this file: a stopped node's peer connections outlived it
//! (each ran on a task of its own), answering for a Raft that was shut
//! down, so its restarted self was never reached on them; they now end
//! with the node (`peer_server.rs`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::time::Duration;

use meridian_store::StoreError;
use support::{Harness, SUFFIX, account, base, describe, description};

const WITHIN: Duration = Duration::from_secs(20);

fn people(uid: &str) -> String {
    format!("uid={uid},ou=People,{SUFFIX}")
}

/// A cluster of three with the base entries, and its leader.
async fn three() -> (Harness, u64) {
    let harness = Harness::start(3, |_| {}).await;
    let leader = harness.leader(WITHIN).await;
    for command in base(&harness.schema) {
        harness.write(leader, command).await.unwrap();
    }
    (harness, leader)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_at_any_node_is_applied_on_every_node() {
    let (harness, leader) = three().await;
    for id in 1..=3 {
        harness
            .write(id, account(&harness.schema, &format!("at{id}")))
            .await
            .unwrap();
        // Answered once applied at the node the client wrote to.
        assert!(harness.read(id, &people(&format!("at{id}"))).is_some());
    }
    harness.await_identical(WITHIN).await;
    for id in 1..=3 {
        for at in 1..=3 {
            assert!(harness.read(id, &people(&format!("at{at}"))).is_some());
        }
    }
    // A refusal is the same answer wherever the write was made.
    let again = harness.write(leader, account(&harness.schema, "at1")).await;
    assert!(
        matches!(again, Err(StoreError::AlreadyExists(_))),
        "{again:?}"
    );
    let follower = (1..=3).find(|id| *id != leader).unwrap();
    let again = harness
        .write(follower, account(&harness.schema, "at2"))
        .await;
    assert!(
        matches!(again, Err(StoreError::AlreadyExists(_))),
        "{again:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_leader_answers_unavailable_and_the_majority_goes_on() {
    let (harness, old) = three().await;
    harness
        .write(old, account(&harness.schema, "before"))
        .await
        .unwrap();
    harness.await_identical(WITHIN).await;
    harness.partition(old, true);
    let refused = harness
        .write(
            old,
            describe(&harness.schema, &people("before"), "minority"),
        )
        .await;
    assert!(
        matches!(refused, Err(StoreError::Unavailable(_))),
        "{refused:?}"
    );
    let majority: Vec<u64> = (1..=3).filter(|id| *id != old).collect();
    let new = harness.leader_among(&majority, WITHIN).await;
    harness
        .write(
            new,
            describe(&harness.schema, &people("before"), "majority"),
        )
        .await
        .unwrap();
    harness.partition(old, false);
    harness.await_identical(WITHIN).await;
    for id in 1..=3 {
        let entry = harness.read(id, &people("before")).unwrap();
        assert_eq!(
            description(&harness.schema, &entry).as_deref(),
            Some("majority")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_send_is_replaced() {
    let (harness, old) = three().await;
    // Only the leader's own connections are cut: the others still reach
    // it, it reaches no one (no heartbeats, no appends).
    for to in (1..=3).filter(|to| *to != old) {
        harness.links[&(old, to)].sever();
    }
    let others: Vec<u64> = (1..=3).filter(|id| *id != old).collect();
    let new = harness.leader_among(&others, WITHIN).await;
    assert_ne!(new, old);
    harness
        .write(new, account(&harness.schema, "after"))
        .await
        .unwrap();
    for to in (1..=3).filter(|to| *to != old) {
        harness.links[&(old, to)].restore();
    }
    harness.await_identical(WITHIN).await;
    assert!(harness.read(old, &people("after")).is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_commit_over_slow_links() {
    // 200 ms round trips, with the timing such a path needs: a heartbeat
    // longer than the round trip (openraft waits that long for its
    // answer) and three of them to an election.
    let harness = Harness::start(3, |o| {
        o.heartbeat = Duration::from_millis(300);
        o.election_timeout = Duration::from_millis(900);
    })
    .await;
    let leader = harness.leader(WITHIN).await;
    for command in base(&harness.schema) {
        harness.write(leader, command).await.unwrap();
    }
    // A new connection's handshake is a round trip and a half, and must
    // survive the deadline of the call that opened it (`network.rs`):
    // every connection is made again over the slow path.
    harness.set_rtt(Duration::from_millis(200));
    for link in harness.links.values() {
        link.sever();
        link.restore();
    }
    for id in 1..=3 {
        for n in 0..3 {
            let uid = format!("slow{id}-{n}");
            let written =
                tokio::time::timeout(WITHIN, harness.write(id, account(&harness.schema, &uid)))
                    .await;
            assert!(matches!(written, Ok(Ok(()))), "{uid}: {written:?}");
        }
    }
    harness.set_rtt(Duration::ZERO);
    harness.await_identical(WITHIN).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followers_pipelined_writes_go_in_several_batches_and_apply_in_order() {
    // 2,000 writes submitted at once at a follower 100 ms from its
    // leader: eight batches of 256, several on their way at a time
    // (`cluster.batches_in_flight`). Write `i` deletes value `i - 1` and
    // adds value `i`: applied out of order, a delete would find no
    // value and the write would fail.
    let (harness, leader) = three().await;
    harness
        .write(leader, account(&harness.schema, "ordered"))
        .await
        .unwrap();
    harness
        .write(leader, describe(&harness.schema, &people("ordered"), "v0"))
        .await
        .unwrap();
    harness.await_identical(WITHIN).await;
    harness.set_rtt(Duration::from_millis(100));
    let follower = (1..=3).find(|id| *id != leader).unwrap();
    let dn = meridian_model::dn::Dn::parse(people("ordered").as_bytes(), &harness.schema).unwrap();
    let mut answers = Vec::new();
    for i in 1..=2000u32 {
        let change = |op, value: String| meridian_model::modify::Modification {
            op,
            attr: "description".into(),
            values: vec![value.into_bytes()],
        };
        let command = meridian_store::Command::Modify {
            dn: dn.clone(),
            changes: vec![
                change(meridian_model::modify::ModOp::Delete, format!("v{}", i - 1)),
                change(meridian_model::modify::ModOp::Add, format!("v{i}")),
            ],
            operational: vec![],
            permissive: false,
        };
        answers.push(harness.node(follower).store.submit(command).await.unwrap());
    }
    for (i, answer) in answers.into_iter().enumerate() {
        let result = tokio::time::timeout(WITHIN, answer.wait()).await;
        assert!(matches!(result, Ok(Ok(_))), "write {}: {result:?}", i + 1);
    }
    harness.set_rtt(Duration::ZERO);
    harness.await_identical(WITHIN).await;
    for id in 1..=3 {
        let entry = harness.read(id, &people("ordered")).unwrap();
        assert_eq!(
            description(&harness.schema, &entry).as_deref(),
            Some("v2000")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_and_a_node_that_lost_its_disk_catch_up() {
    let mut harness = Harness::start(3, |o| o.snapshot_every = 20).await;
    let leader = harness.leader(WITHIN).await;
    for command in base(&harness.schema) {
        harness.write(leader, command).await.unwrap();
    }
    let (restarted, wiped) = {
        let mut followers = (1..=3).filter(|id| *id != leader);
        (followers.next().unwrap(), followers.next().unwrap())
    };
    harness.stop(restarted).await;
    harness.stop(wiped).await;
    harness.wipe(wiped);
    // One node alone cannot commit: start the restarted one first.
    harness.restart(restarted).await;
    // Alone, the leader may have stepped down: two nodes elect again.
    let leader = harness.leader(WITHIN).await;
    for n in 0..60 {
        harness
            .write(leader, account(&harness.schema, &format!("while{n}")))
            .await
            .unwrap();
    }
    // The wiped node comes back empty and is rebuilt (a snapshot: the log
    // was compacted every 20 entries).
    harness.restart(wiped).await;
    harness.await_identical(Duration::from_secs(60)).await;
    assert!(harness.read(wiped, &people("while59")).is_some());
    // It was rebuilt from a snapshot: the log it needed was purged.
    assert!(harness.node(leader).node.status().purged > 0);
    assert!(harness.node(wiped).node.status().snapshot > 0);
    assert!(harness.read(restarted, &people("while0")).is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_goes_back_to_the_preferred_node_once_it_is_healthy() {
    let harness = Harness::start(3, |o| o.preferred_leader = Some(2)).await;
    // Whoever wins the first election hands the lead to node 2.
    harness.await_leader(2, WITHIN).await;
    for command in base(&harness.schema) {
        harness.write(2, command).await.unwrap();
    }
    // Cut off, it loses the lead; the others go on without it.
    harness.partition(2, true);
    let other = harness.leader_among(&[1, 3], WITHIN).await;
    harness
        .write(other, account(&harness.schema, "meanwhile"))
        .await
        .unwrap();
    // Back and caught up, it is handed the lead again.
    harness.partition(2, false);
    harness.await_leader(2, WITHIN).await;
    harness
        .write(2, account(&harness.schema, "after"))
        .await
        .unwrap();
    harness.await_identical(WITHIN).await;
    assert!(harness.read(2, &people("meanwhile")).is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_narrow_link_to_one_node_holds_nobody_back() {
    let (harness, leader) = three().await;
    let far = (1..=3).find(|id| *id != leader).unwrap();
    // 100 ms and 1 Mbit/s each way between the far node and the others:
    // the majority is the leader and the near node, so writes commit at
    // the near node's pace, and the far node catches up behind.
    for ((from, to), link) in &harness.links {
        if *from == far || *to == far {
            link.change(|c| {
                c.delay = Duration::from_millis(50);
                c.bandwidth = Some(125_000);
            });
        }
    }
    for n in 0..200 {
        let written = tokio::time::timeout(
            WITHIN,
            harness.write(leader, account(&harness.schema, &format!("narrow{n}"))),
        )
        .await;
        assert!(matches!(written, Ok(Ok(()))), "narrow{n}: {written:?}");
    }
    harness.await_identical(Duration::from_secs(60)).await;
    assert!(harness.read(far, &people("narrow199")).is_some());
}
