//! A follower whose disk fills while the cluster takes writes: the
//! majority goes on acknowledging them, the full node stops rather than
//! record a failure as a result, and once space is freed and it is
//! restarted it catches up and holds what the others hold. The node's
//! data directory is a tmpfs of a few mebibytes (root only; CI runs as
//! root).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::disallowed_methods
)]

mod support;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use meridian_testing::root::{Tmpfs, can_run_as_root};
use support::cluster::{Cluster, Outcome, PEOPLE, Writer1, cluster_role, setup_base};
use support::*;

const FULL: usize = 3;

#[test]
fn a_follower_on_a_full_disk_stops_the_majority_goes_on_and_it_catches_up() {
    if !can_run_as_root("mounting a tmpfs needs root") {
        return;
    }
    let mount: Mutex<Option<Tmpfs>> = Mutex::new(None);
    let mut cluster = Cluster::start_each(3, |id, dir| {
        if id == FULL {
            *mount.lock().unwrap() = Some(Tmpfs::mount(dir, "24m"));
        }
        String::new()
    });
    let mut leader = cluster.leader(Duration::from_secs(20));
    if leader == FULL {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_meridian"))
            .args(["cluster", "transfer-leader", "--id", "1", "--url"])
            .arg(support::cluster::url(&cluster, FULL))
            .args(["-D", ADMIN_DN, "-w", ADMIN_PASSWORD])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        leader = cluster.leader(Duration::from_secs(20));
    }
    assert_ne!(leader, FULL);
    setup_base(&cluster, leader);
    // The raft log prepares zeros ahead of its appends only where the
    // disk has room to spare: on this small one they would take the
    // room its vote must be written in, and it could not vote.
    let log = std::fs::metadata(cluster.node(FULL).dir.join("raft/log")).unwrap();
    assert!(
        log.len() < 1 << 20,
        "zeros prepared on a nearly full disk: the log is {} bytes",
        log.len()
    );

    // Entries of 4 KiB until the full node stops (its log or its
    // database cannot grow): each acknowledged by the other two.
    let big = "x".repeat(4096);
    let mut w = Writer1::new(cluster.node(leader).ldap);
    let mut added = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let uid = format!("big{}", added.len());
        let dn = format!("uid={uid},{PEOPLE}");
        let outcome = w.add(
            &dn,
            &[
                ("objectClass", &["account"]),
                ("uid", &[&uid]),
                ("description", &[&big]),
            ],
        );
        assert_eq!(
            outcome,
            Outcome::Ok,
            "add {uid} with a follower's disk full"
        );
        added.push(uid);
        if added.len() % 100 == 0 {
            let role = cluster_role(cluster.node(FULL).ldap);
            if role.as_deref() == Some("shutdown") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "node {FULL} never stopped on its full disk (role {role:?}, {} adds)",
                added.len()
            );
        }
    }
    eprintln!("node {FULL} stopped after {} adds of 4 KiB", added.len());
    // More writes: the majority does not need it.
    for n in 0..50 {
        assert_eq!(
            w.add_account(PEOPLE, &format!("after-full-{n}")),
            Outcome::Ok
        );
    }

    // Space freed, the node restarted: it catches up.
    mount.lock().unwrap().as_ref().unwrap().resize("512m");
    cluster.kill(FULL);
    cluster.start_node(FULL);
    let dump = cluster.await_identical(Duration::from_secs(60));
    for uid in added.iter().chain(["after-full-49".to_owned()].iter()) {
        assert!(dump.contains(&format!("uid={uid},")), "{uid} missing");
    }
    drop(cluster);
}
