//! Replication with real processes and real faults: three `meridian
//! serve` nodes on loopback, every link through our TCP proxy
//! (`support/cluster.rs`). Clients write at every node and record each
//! answer; after the faults heal and the cluster is quiet, every
//! acknowledged write is there, each DN's value is one its writer could
//! have left, and every node holds the same entries (all attributes,
//! operational ones included: entryUUID, entryCSN, timestamps).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::disallowed_methods
)]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use meridian_testing::history::{
    Read as HistoryRead, Register, Write as HistoryWrite, WriteOutcome,
};
use support::cluster::{Cluster, Outcome, PEOPLE, Writer1, admin_at, setup_base, url};
use support::*;

/// The fault scenarios' cluster: writes wait 4 s for a leader; the
/// readers' reads are linearizable, so their history can be checked.
const UNDER_FAULTS: &str = "write_timeout_ms = 4000\nreads = \"linearizable\"";

/// What one writer did: its adds and its replaces of its own entry's
/// description, in order, with their outcomes.
struct Record {
    node: usize,
    adds: Vec<(String, Outcome)>,
    replaces: Vec<Replace>,
}

/// One replace of a writer's own description: `v<node>-<n>` is its
/// `n`-th (from 0).
struct Replace {
    value: String,
    outcome: Outcome,
    invoked: Instant,
    completed: Instant,
}

/// One read of a writer's entry: whose (its node), when, what it saw.
struct ReadRecord {
    of: usize,
    invoked: Instant,
    completed: Instant,
    description: Option<String>,
    csn: Option<String>,
}

type Reads = Vec<ReadRecord>;

/// A writer at `node`: adds `uid=w<node>-<n>` and, after each add,
/// replaces the description of `uid=own<node>` with a unique value,
/// until `stop`.
fn writer(
    cluster_ldap: std::net::SocketAddr,
    node: usize,
    stop: Arc<AtomicBool>,
    acknowledged: Arc<AtomicUsize>,
) -> Record {
    let mut w = Writer1::new(cluster_ldap);
    let mut record = Record {
        node,
        adds: Vec::new(),
        replaces: Vec::new(),
    };
    let own = format!("uid=own{node},{PEOPLE}");
    for n in 0.. {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let uid = format!("w{node}-{n}");
        let outcome = w.add_account(PEOPLE, &uid);
        if outcome == Outcome::Ok {
            acknowledged.fetch_add(1, Ordering::SeqCst);
        }
        if outcome == Outcome::Unknown {
            // The node is down: try again shortly, without spinning.
            std::thread::sleep(Duration::from_millis(20));
        }
        record.adds.push((uid, outcome));
        let value = format!("v{node}-{n}");
        let invoked = Instant::now();
        let outcome = w.replace(&own, "description", &value);
        record.replaces.push(Replace {
            value,
            outcome,
            invoked,
            completed: Instant::now(),
        });
    }
    record
}

/// `attributes` of the entry `dn` read by ldapsearch at `url` as the
/// administrator (the search must succeed): its LDIF.
fn read_base(url: &str, dn: &str, attributes: &[&str]) -> String {
    let mut args = vec!["-LLL", "-b", dn, "-s", "base"];
    args.extend_from_slice(attributes);
    let (code, out) = admin_at(url, "ldapsearch", &args, None);
    assert_eq!(code, 0, "{out}");
    out
}

/// The outcomes a fault may give a write: success, `unavailable` (52)
/// after the write timeout, or no answer (the node died). Anything else
/// is a failure of the system.
fn assert_allowed(what: &str, outcome: &Outcome) {
    match outcome {
        Outcome::Ok | Outcome::Unknown => {}
        Outcome::Refused(52, _) => {}
        Outcome::Refused(code, message) => panic!("{what}: refused with {code}: {message}"),
    }
}

/// Checks every record against the final state read at `at`.
fn check_records(cluster: &Cluster, at: usize, records: &[Record]) {
    let url = url(cluster, at);
    let (code, listing) = admin_at(
        &url,
        "ldapsearch",
        &[
            "-LLL",
            "-b",
            PEOPLE,
            "-s",
            "one",
            "(objectClass=account)",
            "uid",
        ],
        None,
    );
    assert_eq!(code, 0, "{listing}");
    let present: std::collections::BTreeSet<&str> = listing
        .lines()
        .filter_map(|l| l.strip_prefix("uid: "))
        .collect();
    for record in records {
        let mut acknowledged = 0;
        for (uid, outcome) in &record.adds {
            assert_allowed(uid, outcome);
            if *outcome == Outcome::Ok {
                acknowledged += 1;
                assert!(
                    present.contains(uid.as_str()),
                    "acknowledged add of {uid} lost"
                );
            }
            // A write the cluster said it did not apply is not there.
            if let Outcome::Refused(52, message) = outcome
                && message.contains("was not applied")
            {
                assert!(
                    !present.contains(uid.as_str()),
                    "{uid} applied after {message}"
                );
            }
        }
        assert!(
            acknowledged > 0,
            "node {}'s writer got no write through",
            record.node
        );
        // One writer per DN, one write at a time: the final value is the
        // last acknowledged one or one tried after it without an answer.
        let own = format!("uid=own{},{PEOPLE}", record.node);
        let text = read_base(&url, &own, &["description"]);
        let value = text
            .lines()
            .find_map(|l| l.strip_prefix("description: "))
            .unwrap_or("");
        let last_ok = record
            .replaces
            .iter()
            .rposition(|r| r.outcome == Outcome::Ok)
            .expect("some replace acknowledged");
        let allowed: Vec<&str> = record.replaces[last_ok..]
            .iter()
            .enumerate()
            .filter(|(i, r)| *i == 0 || r.outcome != Outcome::Ok)
            .map(|(_, r)| r.value.as_str())
            .collect();
        assert!(
            allowed.contains(&value),
            "node {}'s entry holds {value:?}; allowed: the last acknowledged {:?} or a later unanswered one",
            record.node,
            record.replaces[last_ok].value
        );
    }
}

/// Adds `<prefix><n>` accounts at `leader` until its log is purged
/// past `index` (a purge waits for a moment when no replication stream
/// reads the entries, so how many writes it takes varies); how many.
fn write_until_purged(
    cluster: &Cluster,
    leader: usize,
    w: &mut Writer1,
    prefix: &str,
    index: u64,
) -> usize {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut n = 0;
    loop {
        assert_eq!(w.add_account(PEOPLE, &format!("{prefix}{n}")), Outcome::Ok);
        n += 1;
        if n % 25 == 0 {
            let purged: u64 = support::cluster::root_dse_value(
                cluster.node(leader).ldap,
                "meridianClusterPurged",
            )
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
            if purged >= index {
                return n;
            }
            assert!(
                Instant::now() < deadline,
                "the leader never purged its log (purged {purged})"
            );
        }
    }
}

#[test]
fn writes_at_any_node_are_replicated_and_read_back_where_written() {
    let mut cluster = Cluster::start(3, "");
    let leader = cluster.leader(Duration::from_secs(20));
    let follower = if leader == 1 { 2 } else { 1 };
    // The base is added at a follower: forwarded, and answered once
    // applied there.
    setup_base(&cluster, follower);
    for id in 1..=3 {
        let url = url(&cluster, id);
        let change = format!(
            "dn: uid=own1,{PEOPLE}\nchangetype: modify\nreplace: description\ndescription: from node {id}\n"
        );
        let (code, out) = admin_at(&url, "ldapmodify", &[], Some(&change));
        assert_eq!(code, 0, "ldapmodify at node {id}: {out}");
        // Read back on the node written to: never older than the write.
        let out = read_base(
            &url,
            &format!("uid=own1,{PEOPLE}"),
            &["description", "entryCSN"],
        );
        assert!(
            out.contains(&format!("description: from node {id}")),
            "node {id}: {out}"
        );
        // entryCSN carries the node the client wrote to.
        assert!(
            out.contains(&format!("#{id:03x}#")),
            "node {id}'s CSN: {out}"
        );
    }
    // The same DN added at two nodes at once: exactly one succeeds.
    let entry = format!("dn: uid=twice,{PEOPLE}\nobjectClass: account\nuid: twice\n");
    let (a, b) = std::thread::scope(|s| {
        let (e1, e2) = (entry.clone(), entry.clone());
        let (u1, u2) = (url(&cluster, 1), url(&cluster, 2));
        let a = s.spawn(move || admin_at(&u1, "ldapadd", &[], Some(&e1)));
        let b = s.spawn(move || admin_at(&u2, "ldapadd", &[], Some(&e2)));
        (a.join().unwrap(), b.join().unwrap())
    });
    let codes = [a.0, b.0];
    assert!(
        codes.contains(&0) && codes.contains(&68),
        "one add succeeds, one finds it exists: {a:?} {b:?}"
    );
    let dump = cluster.await_identical(Duration::from_secs(20));
    assert!(dump.contains("uid=twice"));
    assert!(
        dump.contains("entryUUID"),
        "operational attributes compared too"
    );
}

/// A reader at `at`: reads every writer's description in turn until
/// `stop`, recording what each read returned and when.
fn reader(addr: std::net::SocketAddr, writers: usize, stop: Arc<AtomicBool>) -> Reads {
    let mut r = Writer1::new(addr);
    let mut reads = Vec::new();
    for n in 0.. {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let of = n % writers + 1;
        let invoked = Instant::now();
        match r.read_many(
            &format!("uid=own{of},{PEOPLE}"),
            &["description", "entryCSN"],
        ) {
            Ok(mut values) => reads.push(ReadRecord {
                of,
                invoked,
                completed: Instant::now(),
                csn: values.pop().flatten(),
                description: values.pop().flatten(),
            }),
            // Refused (no leader confirmed it) or no answer: it saw
            // nothing, and says nothing of the register.
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    reads
}

/// Writers and linearizable readers at every node for 1.5 s, then
/// `fault`, then 1.5 s more, and on until every writer has had a write
/// acknowledged (at most 30 s: a writer with none fails the test); what
/// each writer did, what readers saw.
fn under_load(cluster: &mut Cluster, fault: impl FnOnce(&mut Cluster)) -> (Vec<Record>, Reads) {
    let stop = Arc::new(AtomicBool::new(false));
    let n = cluster.nodes.len();
    let acknowledged: Vec<Arc<AtomicUsize>> = (0..n).map(|_| Arc::default()).collect();
    let writers: Vec<_> = (1..=n)
        .map(|node| {
            let addr = cluster.node(node).ldap;
            let stop = Arc::clone(&stop);
            let acknowledged = Arc::clone(&acknowledged[node - 1]);
            std::thread::spawn(move || writer(addr, node, stop, acknowledged))
        })
        .collect();
    let readers: Vec<_> = (1..=n)
        .map(|node| {
            let addr = cluster.node(node).ldap;
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || reader(addr, n, stop))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    fault(cluster);
    std::thread::sleep(Duration::from_millis(1500));
    // A follower's writes go through the leader: after a restart of every
    // node, its first may wait out a retry (`proposer.rs`).
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline && acknowledged.iter().any(|a| a.load(Ordering::SeqCst) == 0) {
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::SeqCst);
    let records: Vec<Record> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    let reads: Reads = readers
        .into_iter()
        .flat_map(|r| r.join().unwrap())
        .collect();
    eprintln!("{} linearizable reads recorded", reads.len());
    for r in &records {
        let count = |o: &dyn Fn(&Outcome) -> bool| r.adds.iter().filter(|(_, x)| o(x)).count();
        eprintln!(
            "writer at node {}: {} adds acknowledged, {} unavailable, {} unanswered",
            r.node,
            count(&|o| *o == Outcome::Ok),
            count(&|o| matches!(o, Outcome::Refused(52, _))),
            count(&|o| *o == Outcome::Unknown)
        );
    }
    (records, reads)
}

/// After the faults: every node holds the same entries, every writer's
/// record holds against each, and each writer's DN has a linearizable
/// history (its writes, every reader's reads, the final value).
fn check_after(cluster: &mut Cluster, (records, reads): &(Vec<Record>, Reads)) {
    cluster.await_identical(Duration::from_secs(30));
    for node in 1..=cluster.nodes.len() {
        check_records(cluster, node, records);
    }
    let mut final_reader = Writer1::new(cluster.node(1).ldap);
    for record in records {
        let node = record.node;
        // `v<node>-<n>` is write n + 1; no value is the initial one, 0.
        let index = |value: &Option<String>| -> usize {
            value.as_deref().map_or(0, |v| {
                v.strip_prefix(&format!("v{node}-"))
                    .and_then(|n| n.parse::<usize>().ok())
                    .map_or(usize::MAX, |n| n + 1)
            })
        };
        let history = Register {
            writes: record
                .replaces
                .iter()
                .map(|r| HistoryWrite {
                    invoked: r.invoked,
                    completed: r.completed,
                    outcome: match &r.outcome {
                        Outcome::Ok => WriteOutcome::Acknowledged,
                        Outcome::Refused(52, m) if m.contains("was not applied") => {
                            WriteOutcome::NotApplied
                        }
                        _ => WriteOutcome::Unknown,
                    },
                })
                .collect(),
            reads: reads
                .iter()
                .filter(|r| r.of == node)
                .map(|r| HistoryRead {
                    invoked: r.invoked,
                    completed: r.completed,
                    saw: index(&r.description),
                    by: format!("a read of {:?}", r.description),
                })
                .collect(),
        };
        // entryCSN rises with each write: one CSN per value read, and a
        // later write's above an earlier one's.
        let mut csns = std::collections::BTreeMap::new();
        for r in reads.iter().filter(|r| r.of == node) {
            let (Some(csn), n) = (&r.csn, index(&r.description)) else {
                continue;
            };
            let known = csns.entry(n).or_insert_with(|| csn.clone());
            assert_eq!(
                known, csn,
                "uid=own{node}: write {n} read with two entryCSNs"
            );
        }
        for (earlier, later) in csns.iter().zip(csns.iter().skip(1)) {
            assert!(
                earlier.1 < later.1,
                "uid=own{node}: write {} has entryCSN {}, not above write {}'s {}",
                later.0,
                later.1,
                earlier.0,
                earlier.1
            );
        }
        let now = final_reader
            .read(&format!("uid=own{node},{PEOPLE}"), "description")
            .unwrap_or_else(|e| panic!("reading node {node}'s final value: {e:?}"));
        if let Err(violation) = history.check(index(&now)) {
            panic!("uid=own{node}'s history is not linearizable: {violation}");
        }
    }
    // Every node's database is consistent (`meridian check`, stopped).
    for id in 1..=cluster.nodes.len() {
        cluster.kill(id);
        let (ok, said) = cluster.check(id);
        assert!(ok, "meridian check of node {id}: {said}");
    }
}

#[test]
fn a_leader_killed_mid_load_loses_no_acknowledged_write() {
    let (mut cluster, leader) = Cluster::with_base(UNDER_FAULTS);
    let records = under_load(&mut cluster, |cluster| {
        cluster.kill(leader);
        let killed_at = Instant::now();
        // The survivors elect a leader and take writes again.
        let next = cluster.leader(Duration::from_secs(20));
        assert_ne!(next, leader);
        eprintln!("new leader {next} after {:?}", killed_at.elapsed());
        std::thread::sleep(Duration::from_millis(2000));
        cluster.start_node(leader);
        // The restarted node serves writes again (however long it takes
        // a loaded machine to bring it up to date).
        let mut probe = Writer1::new(cluster.node(leader).ldap);
        let deadline = Instant::now() + Duration::from_secs(30);
        for attempt in 0.. {
            match probe.add_account(PEOPLE, &format!("back-{attempt}")) {
                Outcome::Ok => break,
                other => {
                    assert!(
                        Instant::now() < deadline,
                        "the restarted node {leader} took no write: {other:?}"
                    );
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    });
    check_after(&mut cluster, &records);
}

#[test]
fn a_leader_paused_past_its_lease_steps_down_and_loses_nothing() {
    let (mut cluster, leader) = Cluster::with_base(UNDER_FAULTS);
    let records = under_load(&mut cluster, |cluster| {
        signal(cluster.node(leader).pid(), "STOP");
        let next = cluster.leader(Duration::from_secs(20));
        assert_ne!(next, leader);
        std::thread::sleep(Duration::from_millis(1000));
        // It wakes believing it leads, with requests in its sockets.
        signal(cluster.node(leader).pid(), "CONT");
    });
    check_after(&mut cluster, &records);
}

#[test]
fn a_leader_that_cannot_send_loses_its_place_and_nothing_acknowledged() {
    // One way: the leader's own connections to the others are cut (no
    // appends, no heartbeats), theirs to it still work (their votes
    // reach it).
    let (mut cluster, leader) = Cluster::with_base(UNDER_FAULTS);
    let records = under_load(&mut cluster, |cluster| {
        for to in (1..=3).filter(|to| *to != leader) {
            cluster.links[&(leader, to)].cut();
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while support::cluster::cluster_role(cluster.node(leader).ldap).as_deref() == Some("leader")
        {
            assert!(Instant::now() < deadline, "the cut-off leader kept leading");
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(1000));
        cluster.heal_all();
    });
    check_after(&mut cluster, &records);
}

#[test]
fn slow_links_and_every_node_killed_at_once_lose_nothing_acknowledged() {
    let (mut cluster, _) = Cluster::with_base(UNDER_FAULTS);
    let records = under_load(&mut cluster, |cluster| {
        for proxy in cluster.links.values() {
            proxy.delay(20);
        }
        std::thread::sleep(Duration::from_millis(1000));
        for id in 1..=3 {
            cluster.kill(id);
        }
        for proxy in cluster.links.values() {
            proxy.delay(0);
        }
        for id in 1..=3 {
            cluster.start_node(id);
        }
        cluster.leader(Duration::from_secs(20));
    });
    check_after(&mut cluster, &records);
}

fn verify(root: &std::path::Path) -> (i32, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["verify", "--wait", "20", "--cluster-dir"])
        .arg(root)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!("{}{}", text(&out.stdout), text(&out.stderr)),
    )
}

#[test]
fn verify_passes_identical_replicas_and_names_the_entry_that_differs() {
    let (mut cluster, leader) = Cluster::with_base("");
    let mut w = Writer1::new(cluster.node(leader).ldap);
    for n in 0..50 {
        assert_eq!(w.add_account(PEOPLE, &format!("v{n}")), Outcome::Ok);
    }
    cluster.await_identical(Duration::from_secs(20));
    // Beside the running servers, at one log position.
    let (code, out) = verify(&cluster.root);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("3 replicas identical"), "{out}");

    // One replica changed behind the cluster's back: node 3's database
    // served alone, without [cluster], and one entry modified there.
    for id in 1..=3 {
        cluster.kill(id);
    }
    let mut alone = std::process::Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&cluster.node(3).dir)
        .env("MERIDIAN_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(alone.stdout.take().unwrap()));
    let addr = loop {
        let line = lines.next().expect("the lone server listens").unwrap();
        if let Some(addr) = line.strip_prefix("meridian listening on ") {
            break addr.to_owned();
        }
    };
    let change = format!(
        "dn: uid=v17,{PEOPLE}\nchangetype: modify\nreplace: description\ndescription: changed behind the cluster\n"
    );
    let (code, out) = admin_at(&format!("ldap://{addr}"), "ldapmodify", &[], Some(&change));
    assert_eq!(code, 0, "{out}");
    signal(alone.id(), "TERM");
    alone.wait().unwrap();
    let (code, out) = verify(&cluster.root);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("uid=v17,{PEOPLE}")),
        "the differing entry is named: {out}"
    );
    assert!(!out.contains("uid=v18,"), "only that entry: {out}");
}

#[test]
fn a_node_whose_machine_crashed_rebuilds_its_database_from_snapshot_and_log() {
    // Applied state is not synced in a cluster; after a machine crash a
    // node discards its database and rebuilds it: its own last snapshot,
    // then the log (which was synced).
    let (mut cluster, leader) = Cluster::with_base("snapshot_every_entries = 20");
    let mut w = Writer1::new(cluster.node(leader).ldap);
    for n in 0..60 {
        assert_eq!(w.add_account(PEOPLE, &format!("m{n}")), Outcome::Ok);
    }
    let crashed = if leader == 1 { 2 } else { 1 };
    cluster.await_identical(Duration::from_secs(20));
    cluster.kill(crashed);
    // What a machine crash leaves: the marker of another boot.
    let marker = cluster
        .node(crashed)
        .dir
        .join("db")
        .join("replicated.running");
    assert!(marker.is_file(), "a running replica marks its database");
    std::fs::write(&marker, "another-boot").unwrap();
    cluster.start_node(crashed);
    assert_eq!(w.add_account(PEOPLE, "after-crash"), Outcome::Ok);
    let dump = cluster.await_identical(Duration::from_secs(30));
    assert!(dump.contains("uid=m59,") && dump.contains("uid=after-crash,"));
    let log = std::fs::read_to_string(cluster.node(crashed).dir.join("serve.log")).unwrap();
    assert!(log.contains("discarded and rebuilt"), "{log}");
}

#[test]
fn followers_set_to_refer_answer_writes_with_the_leaders_url() {
    let (cluster, leader) = Cluster::with_base("followers = \"referral\"");
    let follower = if leader == 1 { 2 } else { 1 };
    let change = format!(
        "dn: uid=own1,{PEOPLE}\nchangetype: modify\nreplace: description\ndescription: x\n"
    );
    let (code, out) = admin_at(&url(&cluster, follower), "ldapmodify", &[], Some(&change));
    assert_eq!(code, 10, "a referral (10): {out}");
    assert!(
        out.contains(&url(&cluster, leader)),
        "to the leader's URL: {out}"
    );
    // Reads are served where they are asked.
    let (code, out) = admin_at(
        &url(&cluster, follower),
        "ldapsearch",
        &["-LLL", "-b", PEOPLE, "-s", "base", "ou"],
        None,
    );
    assert_eq!(code, 0, "{out}");
}

#[test]
fn a_referral_added_at_one_node_is_honoured_at_the_others() {
    // The directory learns that referral objects exist when it prepares
    // one; the other nodes learn it when they apply the add.
    let (cluster, leader) = Cluster::with_base("");
    let referral = format!(
        "dn: ou=elsewhere,{PEOPLE}\nobjectClass: referral\nobjectClass: extensibleObject\nou: elsewhere\nref: ldap://other.example:389/ou=elsewhere,dc=example,dc=com\n"
    );
    let (code, out) = admin_at(&url(&cluster, leader), "ldapadd", &[], Some(&referral));
    assert_eq!(code, 0, "{out}");
    for id in (1..=3).filter(|id| *id != leader) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (code, out) = admin_at(
                &url(&cluster, id),
                "ldapsearch",
                &[
                    "-LLL",
                    "-b",
                    &format!("uid=x,ou=elsewhere,{PEOPLE}"),
                    "-s",
                    "base",
                ],
                None,
            );
            if code == 10 {
                assert!(
                    out.contains("ldap://other.example:389/"),
                    "node {id}: {out}"
                );
                break;
            }
            assert!(
                Instant::now() < deadline,
                "node {id} does not refer: {code} {out}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[test]
fn a_node_down_does_not_keep_the_log_from_being_purged() {
    // The leader's log is bounded by its snapshots even while a follower
    // is away, which then catches up from a snapshot.
    let (mut cluster, leader) = Cluster::with_base("snapshot_every_entries = 20");
    let away = if leader == 3 { 2 } else { 3 };
    cluster.kill(away);
    let mut w = Writer1::new(cluster.node(leader).ldap);
    let n = write_until_purged(&cluster, leader, &mut w, "d", 100);
    cluster.start_node(away);
    let dump = cluster.await_identical(Duration::from_secs(30));
    assert!(dump.contains(&format!("uid=d{},", n - 1)));
}

/// A CA of the test, PEM files written where asked.
struct TestCa(rcgen::CertifiedIssuer<'static, rcgen::KeyPair>);

impl TestCa {
    fn new(name: &str) -> TestCa {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.distinguished_name.push(
            rcgen::DnType::CommonName,
            format!("Meridian test CA {name}"),
        );
        TestCa(
            rcgen::CertifiedIssuer::self_signed(params, rcgen::KeyPair::generate().unwrap())
                .unwrap(),
        )
    }

    /// A node's certificate (for 127.0.0.1), its key and this CA, in `dir`.
    fn issue(&self, dir: &std::path::Path) {
        let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
        let pair = rcgen::KeyPair::generate().unwrap();
        let signed = params.signed_by(&pair, &self.0).unwrap();
        std::fs::write(dir.join("peer.key"), pair.serialize_pem()).unwrap();
        std::fs::write(dir.join("peer.pem"), signed.pem()).unwrap();
        std::fs::write(dir.join("peer-ca.pem"), self.0.pem()).unwrap();
    }
}

#[test]
fn peer_links_are_tls_and_a_node_that_cannot_be_verified_is_refused() {
    let ca = TestCa::new("A");
    let mut cluster = Cluster::start_each(3, |_, dir| {
        ca.issue(dir);
        let file = |name: &str| format!("{:?}", dir.join(name).display().to_string());
        format!(
            "tls_certificate_file = {}\ntls_key_file = {}\ntls_ca_file = {}\n",
            file("peer.pem"),
            file("peer.key"),
            file("peer-ca.pem")
        )
    });
    let leader = cluster.leader(Duration::from_secs(20));
    setup_base(&cluster, leader);
    cluster.await_identical(Duration::from_secs(20));

    // Node 3 comes back with a certificate of another CA (and trusts only
    // that one): neither side verifies the other, nothing crosses.
    let stranger = if leader == 3 { 2 } else { 3 };
    cluster.kill(stranger);
    TestCa::new("B").issue(&cluster.node(stranger).dir);
    cluster.start_node(stranger);
    let logs = || -> String {
        (1..=3)
            .map(|id| std::fs::read_to_string(cluster.node(id).dir.join("serve.log")).unwrap())
            .collect()
    };
    let refusals_before = logs().matches("refused").count();
    let mut w = Writer1::new(cluster.node(leader).ldap);
    assert_eq!(w.add_account(PEOPLE, "while-refused"), Outcome::Ok);
    // Gated on events, not a pause: the entry reached the third node, and
    // the leader has been refused by the stranger since it was written.
    let third = (1..=3).find(|id| *id != leader && *id != stranger).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !(support::cluster::dump(cluster.node(third).ldap).contains("uid=while-refused,")
        && logs().matches("refused").count() > refusals_before)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the write never reached node {third}, or no refusal was logged:\n{}",
            logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let dump = support::cluster::dump(cluster.node(stranger).ldap);
    assert!(
        !dump.contains("uid=while-refused,"),
        "a node of another CA got entries"
    );
}

#[test]
fn a_node_with_other_indexes_is_refused_naming_the_key() {
    // Applying writes index keys: a node indexing differently would hold
    // another database after the same log. It is refused.
    let mut cluster = Cluster::start_each(3, |id, _| {
        if id == 3 {
            "[storage.indexes]\ndescription = [\"eq\"]\n".to_owned()
        } else {
            String::new()
        }
    });
    let leader = cluster.leader(Duration::from_secs(20));
    assert_ne!(leader, 3, "node 3 cannot gather votes");
    setup_base(&cluster, leader);
    // Gated on events, not a pause: the base reached the other follower,
    // and node 3's refusal naming the key is logged.
    let logs = || -> String {
        (1..=3)
            .map(|id| std::fs::read_to_string(cluster.node(id).dir.join("serve.log")).unwrap())
            .collect()
    };
    let other = (1..=2).find(|id| *id != leader).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(support::cluster::dump(cluster.node(other).ldap).contains("ou=people")
        && logs().contains("another configuration of storage.indexes"))
    {
        assert!(
            Instant::now() < deadline,
            "the base never reached node {other}, or the refusal naming the key was never logged:\n{}",
            logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!support::cluster::dump(cluster.node(3).ldap).contains("ou=people"));
}

#[test]
fn a_learner_replicates_serves_reads_forwards_writes_and_never_votes() {
    let mut cluster = Cluster::start_with_learners(3, 1, |_, _| String::new());
    let leader = cluster.leader(Duration::from_secs(20));
    assert_ne!(leader, 4);
    setup_base(&cluster, leader);
    // The leader adds it; it takes the log.
    let deadline = Instant::now() + Duration::from_secs(20);
    while support::cluster::cluster_role(cluster.node(4).ldap).as_deref() != Some("learner") {
        assert!(Instant::now() < deadline, "node 4 never became a learner");
        std::thread::sleep(Duration::from_millis(100));
    }
    // A write at the learner is forwarded and read back there.
    let change = format!(
        "dn: uid=own1,{PEOPLE}\nchangetype: modify\nreplace: description\ndescription: via the learner\n"
    );
    let (code, out) = admin_at(&url(&cluster, 4), "ldapmodify", &[], Some(&change));
    assert_eq!(code, 0, "{out}");
    let out = read_base(
        &url(&cluster, 4),
        &format!("uid=own1,{PEOPLE}"),
        &["description"],
    );
    assert!(out.contains("via the learner"), "{out}");
    cluster.await_identical(Duration::from_secs(20));
    // Without it the voters go on; with the leader gone too, the two
    // remaining voters still elect (the learner's vote is not needed).
    cluster.kill(4);
    cluster.kill(leader);
    let next = cluster.leader(Duration::from_secs(20));
    assert!(next != leader && next != 4);
    let mut w = Writer1::new(cluster.node(next).ldap);
    assert_eq!(w.add_account(PEOPLE, "without-the-learner"), Outcome::Ok);
    cluster.start_node(4);
    cluster.start_node(leader);
    let dump = cluster.await_identical(Duration::from_secs(30));
    assert!(dump.contains("uid=without-the-learner,"));
}

#[test]
fn with_ack_all_a_write_waits_for_every_voter() {
    let (mut cluster, leader) = Cluster::with_base("ack = \"all\"\nwrite_timeout_ms = 2000");
    let follower = if leader == 1 { 2 } else { 1 };
    // Every voter up: answered, at the leader and at a follower.
    for at in [leader, follower] {
        let mut w = Writer1::new(cluster.node(at).ldap);
        assert_eq!(w.add_account(PEOPLE, &format!("all-{at}")), Outcome::Ok);
    }
    // One voter down: a majority still commits, but the answer says not
    // every voter has it.
    let down = (1..=3).find(|id| *id != leader && *id != follower).unwrap();
    cluster.kill(down);
    let mut w = Writer1::new(cluster.node(leader).ldap);
    match w.add_account(PEOPLE, "not-everywhere") {
        Outcome::Refused(52, message) => assert!(message.contains("not every voter"), "{message}"),
        other => panic!("with a voter down under ack = all: {other:?}"),
    }
    // It is applied all the same, and the node catches up.
    cluster.start_node(down);
    let dump = cluster.await_identical(Duration::from_secs(30));
    assert!(dump.contains("uid=not-everywhere,"));
}
