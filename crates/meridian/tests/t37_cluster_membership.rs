//! A running cluster changed by its administrator: `meridian cluster
//! status | add-learner | promote | transfer-leader | remove` against
//! real `meridian serve` nodes, and the same operation through
//! OpenLDAP's `ldapexop`, refused to anyone but the administrator.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::disallowed_methods
)]

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::cluster::{Cluster, Outcome, PEOPLE, Writer1, admin_at, setup_base, url};
use support::*;

const CLUSTER_ADMIN_OID: &str = "2.25.241941608197083682915838068312096323903.5.1";

/// `meridian cluster ARGS --url URL` as the administrator: exit code,
/// stdout and stderr. Asked again while the answer is `unavailable`
/// (52: no leader yet, as in a cluster just started), for up to 20 s.
fn cluster_command(url: &str, args: &[&str]) -> (i32, String) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = Command::new(env!("CARGO_BIN_EXE_meridian"))
            .arg("cluster")
            .args(args)
            .args(["--url", url, "-D", ADMIN_DN])
            .env("MERIDIAN_ADMIN_PASSWORD", ADMIN_PASSWORD)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if text.contains("unavailable (52)") && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        return (out.status.code().unwrap_or(-1), text);
    }
}

/// The `voters:` line of a node's status.
fn voters(url: &str) -> String {
    let (code, status) = cluster_command(url, &["status"]);
    assert_eq!(code, 0, "{status}");
    status
        .lines()
        .find_map(|line| line.strip_prefix("voters: "))
        .unwrap_or_else(|| panic!("no voters line in {status}"))
        .to_owned()
}

/// OpenLDAP's `ldapexop` sending the cluster administration operation
/// with `command`, as the administrator or anonymously.
fn ldapexop(url: &str, as_admin: bool, command: &str) -> std::process::Output {
    let mut exop = Command::new("ldapexop");
    exop.args(["-x", "-H", url]);
    if as_admin {
        exop.args(["-D", ADMIN_DN, "-w", ADMIN_PASSWORD]);
    }
    exop.arg(format!("{CLUSTER_ADMIN_OID}:{command}"))
        .env("LDAPNOINIT", "1")
        .output()
        .unwrap()
}

/// Kills node `id` and removes its database, its raft log and its lock,
/// as a lost disk would: its directory, for its log file.
fn wipe(cluster: &mut Cluster, id: usize) -> std::path::PathBuf {
    cluster.kill(id);
    let dir = cluster.node(id).dir.clone();
    for data in ["db", "raft"] {
        std::fs::remove_dir_all(dir.join(data)).unwrap();
    }
    let _ = std::fs::remove_file(dir.join("lock"));
    dir
}

fn wait_for(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_node_is_added_promoted_given_the_lead_and_another_removed_while_writes_go_on() {
    let mut cluster = Cluster::start_with_spares(3, 1);
    let leader = cluster.leader(Duration::from_secs(20));
    assert_ne!(leader, 4, "the spare is no member yet");
    setup_base(&cluster, leader);
    let follower = (1..=3).find(|id| *id != leader).unwrap();
    assert_eq!(voters(&url(&cluster, follower)), "1 2 3");

    // Added at a follower: sent on to the leader, which reaches the new
    // node at the address the command gives (no config names it).
    let peer = cluster.peer_address(4);
    let ldap4 = url(&cluster, 4);
    let add_learner = |at: &str| {
        cluster_command(
            at,
            &[
                "add-learner",
                "--id",
                "4",
                "--peer",
                &peer,
                "--ldap",
                &ldap4,
            ],
        )
    };
    let (code, out) = add_learner(&url(&cluster, follower));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("node 4 added as a learner"), "{out}");
    wait_for("node 4 a learner", Duration::from_secs(30), || {
        support::cluster::cluster_role(cluster.node(4).ldap).as_deref() == Some("learner")
    });
    cluster.await_identical(Duration::from_secs(30));
    // Adding it again is refused, naming why.
    let (code, out) = add_learner(&url(&cluster, leader));
    assert_ne!(code, 0);
    assert!(out.contains("already a learner"), "{out}");

    let (code, out) = cluster_command(&url(&cluster, follower), &["promote", "--id", "4"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(voters(&url(&cluster, 4)), "1 2 3 4");

    // The lead handed to the new node; writes at another node reach it
    // through the address recorded in the membership.
    let (code, out) = cluster_command(&url(&cluster, follower), &["transfer-leader", "--id", "4"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(cluster.leader(Duration::from_secs(20)), 4);
    for at in [4, follower] {
        let mut w = Writer1::new(cluster.node(at).ldap);
        assert_eq!(
            w.add_account(PEOPLE, &format!("under-4-at-{at}")),
            Outcome::Ok
        );
    }

    // The old leader removed, then stopped: three voters go on.
    let (code, out) = cluster_command(&url(&cluster, 4), &["remove", "--id", &leader.to_string()]);
    assert_eq!(code, 0, "{out}");
    // Issue 44, R4: removed, it says so, names no leader, and refuses
    // reads it can no longer keep current.
    wait_for("the removed node says so", Duration::from_secs(10), || {
        support::cluster::cluster_role(cluster.node(leader).ldap).as_deref() == Some("removed")
    });
    let (code, out) = admin_at(
        &url(&cluster, leader),
        "ldapsearch",
        &["-b", PEOPLE, "-s", "base", "1.1"],
        None,
    );
    assert_eq!(code, 52, "{out}");
    assert!(out.contains("was removed from the cluster"), "{out}");
    cluster.kill(leader);
    let expected: Vec<String> = (1..=4)
        .filter(|id| *id != leader)
        .map(|id| id.to_string())
        .collect();
    assert_eq!(voters(&url(&cluster, 4)), expected.join(" "));
    let mut w = Writer1::new(cluster.node(follower).ldap);
    assert_eq!(w.add_account(PEOPLE, "after-removal"), Outcome::Ok);
    let dump = cluster.await_identical(Duration::from_secs(30));
    for uid in ["under-4-at-4", "after-removal"] {
        assert!(dump.contains(&format!("uid={uid},")), "{uid} missing");
    }
}

#[test]
fn cluster_administration_is_the_administrators_and_says_what_is_wrong() {
    let mut cluster = Cluster::start(3, "write_timeout_ms = 2000");
    let leader = cluster.leader(Duration::from_secs(20));
    let at = url(&cluster, leader);
    // Through OpenLDAP's ldapexop, as the administrator: the status.
    let status = ldapexop(&at, true, "status");
    assert!(status.status.success(), "{status:?}");
    // The answer has several lines: ldapexop shows it in base64, folded.
    let shown = String::from_utf8_lossy(&status.stdout).replace("\n ", "");
    let encoded = shown
        .lines()
        .find_map(|line| line.strip_prefix("data:: "))
        .unwrap_or_else(|| panic!("no value in {shown}"));
    let text =
        String::from_utf8(meridian_ldif::base64::decode(encoded.as_bytes()).unwrap()).unwrap();
    // (Its role may have changed since it was found leading: a cluster
    // just started may hold a second election.)
    assert!(text.contains(&format!("node: {leader}\nrole: ")), "{text}");
    assert!(text.contains("voters: 1 2 3"), "{text}");
    // Anonymous, and a user: refused with insufficientAccessRights (50).
    let anonymous = ldapexop(&at, false, "transfer-leader 1");
    let said = String::from_utf8_lossy(&anonymous.stderr);
    assert!(!anonymous.status.success());
    assert!(said.contains("Insufficient access (50)"), "{said}");
    // Nonsense, an unknown node, a node that cannot lead.
    let (code, out) = cluster_command(&at, &["promote", "--id", "9"]);
    assert_ne!(code, 0);
    assert!(out.contains("node 9 is not a learner"), "{out}");
    let (code, out) = cluster_command(&at, &["remove", "--id", "9"]);
    assert_ne!(code, 0);
    assert!(out.contains("not a member"), "{out}");
    let (code, out) = cluster_command(&at, &["transfer-leader", "--id", "9"]);
    assert_ne!(code, 0);
    assert!(out.contains("not a voter"), "{out}");
    let garbage = ldapexop(&at, true, "promote everyone");
    let said = String::from_utf8_lossy(&garbage.stderr);
    assert!(!garbage.status.success());
    assert!(said.contains("Protocol error (2)"), "{said}");
    assert!(said.contains("not a node ID"), "{said}");
    // Issue 44, R4: a node that could never be reached is refused at
    // once, and a learner that never caught up is not made a voter.
    for (command, says) in [
        (
            "add-learner 0 127.0.0.1:4000 ldap://127.0.0.1:4001",
            "out of range",
        ),
        (
            "add-learner 4096 127.0.0.1:4000 ldap://127.0.0.1:4001",
            "out of range",
        ),
        (
            "add-learner 5 notanaddress ldap://127.0.0.1:4001",
            "is not HOST:PORT",
        ),
        (
            "add-learner 5 127.0.0.1:4000 http://127.0.0.1:4001",
            "is not ldap://",
        ),
    ] {
        let refused = ldapexop(&at, true, command);
        let said = String::from_utf8_lossy(&refused.stderr);
        assert!(!refused.status.success(), "{command}");
        assert!(
            said.contains("Server is unwilling to perform (53)"),
            "{command}: {said}"
        );
        assert!(said.contains(says), "{command}: {said}");
    }
    // Port 1: nothing listens there.
    let leader = cluster.leader(Duration::from_secs(20));
    let at = url(&cluster, leader);
    let added = ldapexop(&at, true, "add-learner 5 127.0.0.1:1 ldap://127.0.0.1:1");
    assert!(added.status.success(), "{added:?}");
    let promote = ldapexop(&at, true, "promote 5");
    let said = String::from_utf8_lossy(&promote.stderr);
    assert!(!promote.status.success());
    assert!(said.contains("Server is unavailable (52)"), "{said}");
    assert!(said.contains("node 5 has not caught up"), "{said}");
    assert_eq!(voters(&at), "1 2 3");
    drop(cluster);

    // A single server does not serve it, and says so.
    let single = Server::start("");
    let (code, out) = cluster_command(&format!("ldap://{}", single.addr), &["status"]);
    assert_ne!(code, 0);
    assert!(out.contains("is not a cluster node"), "{out}");
}

#[test]
fn a_node_that_lost_its_disk_rejoins_by_a_membership_change() {
    // Snapshots often, so the log the wiped node would need is purged.
    // (Restarted empty under its old membership, a voter is not taken
    // back: it would vote without the entries it acknowledged, and
    // openraft stalls its replication when its log goes back.)
    let (mut cluster, leader) = Cluster::with_base("snapshot_every_entries = 100");
    let wiped = (1..=3).find(|id| *id != leader).unwrap();
    let mut w = Writer1::new(cluster.node(leader).ldap);
    for n in 0..300 {
        assert_eq!(w.add_account(PEOPLE, &format!("before-{n}")), Outcome::Ok);
    }
    wipe(&mut cluster, wiped);
    let at = url(&cluster, leader);
    let id = wiped.to_string();
    let (code, out) = cluster_command(&at, &["remove", "--id", &id]);
    assert_eq!(code, 0, "{out}");
    for n in 0..100 {
        assert_eq!(w.add_account(PEOPLE, &format!("without-{n}")), Outcome::Ok);
    }
    // Started empty, then added and promoted as a new node would be.
    cluster.start_node(wiped);
    let peer = cluster.peer_address(wiped);
    let ldap = url(&cluster, wiped);
    let (code, out) = cluster_command(
        &at,
        &["add-learner", "--id", &id, "--peer", &peer, "--ldap", &ldap],
    );
    assert_eq!(code, 0, "{out}");
    wait_for("the wiped node a learner", Duration::from_secs(30), || {
        support::cluster::cluster_role(cluster.node(wiped).ldap).as_deref() == Some("learner")
    });
    cluster.await_identical(Duration::from_secs(60));
    let (code, out) = cluster_command(&at, &["promote", "--id", &id]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(voters(&at), "1 2 3");
    let mut at_wiped = Writer1::new(cluster.node(wiped).ldap);
    assert_eq!(at_wiped.add_account(PEOPLE, "at-the-rejoined"), Outcome::Ok);
    let dump = cluster.await_identical(Duration::from_secs(30));
    for uid in ["before-299", "without-99", "at-the-rejoined"] {
        assert!(dump.contains(&format!("uid={uid},")), "{uid} missing");
    }
    // The log it missed was purged: it came back from a snapshot.
    let log = std::fs::read_to_string(cluster.node(wiped).dir.join("serve.log")).unwrap();
    assert!(
        log.contains("snapshot installed"),
        "node {wiped} came back without a snapshot:\n{log}"
    );
}

/// Issue 44, R1. A node that lost its disk once took session 1 again,
/// the session its earlier life wrote under; catching up on the log, it
/// took that life's first batch for the one a client had just sent it,
/// applied the client's command in its place, answered success, and its
/// replica differed from the others for good (and the client's write,
/// skipped everywhere else as a duplicate, was lost).
#[test]
fn a_node_that_lost_its_disk_never_answers_for_a_batch_of_its_earlier_life() {
    let (mut cluster, leader) = Cluster::with_base("");
    let wiped = (1..=3).find(|id| *id != leader).unwrap();
    // Batches of the wiped node's first life, still in the leader's log
    // (no snapshot purged it): it replays them when it comes back.
    let mut w = Writer1::new(cluster.node(wiped).ldap);
    for n in 0..30 {
        assert_eq!(
            w.add_account(PEOPLE, &format!("first-life-{n}")),
            Outcome::Ok
        );
    }
    drop(w);
    wipe(&mut cluster, wiped);
    let at = url(&cluster, leader);
    let id = wiped.to_string();
    let (code, out) = cluster_command(&at, &["remove", "--id", &id]);
    assert_eq!(code, 0, "{out}");
    // The new life's first write waits at the node, not yet a member,
    // while the leader adds it and streams it the log from the start.
    cluster.start_node(wiped);
    let addr = cluster.node(wiped).ldap;
    let write = std::thread::spawn(move || {
        let mut w = Writer1::new(addr);
        w.add_account(PEOPLE, "second-life")
    });
    std::thread::sleep(Duration::from_millis(300));
    let peer = cluster.peer_address(wiped);
    let ldap = url(&cluster, wiped);
    let (code, out) = cluster_command(
        &at,
        &["add-learner", "--id", &id, "--peer", &peer, "--ldap", &ldap],
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(write.join().unwrap(), Outcome::Ok);
    let dump = cluster.await_identical(Duration::from_secs(30));
    for uid in ["first-life-0", "first-life-29", "second-life"] {
        assert!(dump.contains(&format!("uid={uid},")), "{uid} missing");
    }
}

/// Issue 44, R2. A voter that lost its disk and was started again with
/// its old configuration stayed a healthy-looking follower with nothing
/// applied: the leader's stream to it stalled on a log gone back. It now
/// asks where the cluster is; the leader restarts its stream, and the
/// node votes again only once it holds what the cluster had committed.
#[test]
fn a_voter_that_lost_its_disk_and_restarts_as_it_was_catches_up_by_itself() {
    let (mut cluster, leader) = Cluster::with_base("");
    let wiped = (1..=3).find(|id| *id != leader).unwrap();
    let mut w = Writer1::new(cluster.node(leader).ldap);
    for n in 0..50 {
        assert_eq!(w.add_account(PEOPLE, &format!("before-{n}")), Outcome::Ok);
    }
    let dir = wipe(&mut cluster, wiped);
    cluster.start_node(wiped);
    for n in 0..10 {
        assert_eq!(w.add_account(PEOPLE, &format!("after-{n}")), Outcome::Ok);
    }
    let dump = cluster.await_identical(Duration::from_secs(30));
    for uid in ["before-0", "before-49", "after-9"] {
        assert!(dump.contains(&format!("uid={uid},")), "{uid} missing");
    }
    let log = std::fs::read_to_string(dir.join("serve.log")).unwrap();
    assert!(
        log.contains("started with an empty log in a cluster that has committed entries"),
        "node {wiped} did not say it came back empty:\n{log}"
    );
    // It takes writes again, as any node.
    let mut at_wiped = Writer1::new(cluster.node(wiped).ldap);
    assert_eq!(at_wiped.add_account(PEOPLE, "at-the-wiped"), Outcome::Ok);
    cluster.await_identical(Duration::from_secs(30));
}

/// The default indexes and `description` equality.
const WITH_DESCRIPTION: &str = "\n[storage.indexes]\nobjectClass = [\"eq\"]\nuid = [\"eq\", \"sub\"]\ncn = [\"eq\", \"sub\"]\nmail = [\"eq\"]\nentryUUID = [\"eq\"]\ndescription = [\"eq\"]\n";

#[test]
fn an_index_added_to_every_node_is_built_by_the_leader_through_the_log() {
    let (mut cluster, leader) = Cluster::with_base("");
    let mut w = Writer1::new(cluster.node(leader).ldap);
    // More entries than one build step takes (512 IDs).
    for n in 0..700 {
        let uid = format!("d{n}");
        let dn = format!("uid={uid},{PEOPLE}");
        let description = format!("described {n}");
        let attributes: [(&str, &[&str]); 3] = [
            ("objectClass", &["account"]),
            ("uid", &[&uid]),
            ("description", &[&description]),
        ];
        assert_eq!(w.add(&dn, &attributes), Outcome::Ok);
    }
    cluster.await_identical(Duration::from_secs(30));
    // Every node stopped, given the index, started again.
    for id in 1..=3 {
        cluster.kill(id);
        let config = &cluster.node(id).config;
        let mut text = std::fs::read_to_string(config).unwrap();
        text.push_str(WITH_DESCRIPTION);
        std::fs::write(config, text).unwrap();
    }
    for id in 1..=3 {
        cluster.start_node(id);
    }
    // The build is the leader's; which node that is may change while
    // the nodes come up, so every node's log is read.
    let logs: Vec<_> = (1..=3)
        .map(|id| cluster.node(id).dir.join("serve.log"))
        .collect();
    wait_for("a leader's build", Duration::from_secs(60), || {
        logs.iter().any(|log| {
            std::fs::read_to_string(log)
                .unwrap()
                .contains("indexes built online")
        })
    });
    let leader = cluster.leader(Duration::from_secs(20));
    let mut w = Writer1::new(cluster.node(leader).ldap);
    assert_eq!(w.add_account(PEOPLE, "after-the-build"), Outcome::Ok);
    cluster.await_identical(Duration::from_secs(30));
    // Every node's database holds every key of the new index, and
    // records it built: the build's steps were applied everywhere.
    for id in 1..=3 {
        cluster.kill(id);
        let (ok, out) = cluster.check(id);
        assert!(ok, "node {id}: {out}");
        assert!(out.contains("indexes consistent"), "node {id}: {out}");
    }
}
