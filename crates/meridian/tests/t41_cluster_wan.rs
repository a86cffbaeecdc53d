//! A cluster across seed 000's Atlantic: Washington, Frankfurt and Sao
//! Paulo, node 1, 2 and 3, every peer link through the WAN emulator with
//! the round trips issue 46 gives (89, 120 and 195 ms). The cluster forms
//! and takes writes at every site; a site cut off by a partition (silent,
//! as a real one: no resets) refuses its writes with unavailable within
//! its write timeout while the other two go on over their 195 ms path;
//! healed, every replica is identical.

mod support;

use std::time::{Duration, Instant};

use support::cluster::{Cluster, Outcome, Writer1, setup_base};

const PEOPLE: &str = "ou=people,dc=example,dc=com";

/// The round trip between node `a`'s site and node `b`'s.
fn atlantic_rtt(a: usize, b: usize) -> u64 {
    match (a.min(b), a.max(b)) {
        (1, 2) => 89,
        (1, 3) => 120,
        (2, 3) => 195,
        _ => 0,
    }
}

/// Three nodes placed at the Atlantic sites, the timing `cluster local
/// --topology` gives them (a heartbeat of 1.5 times the longest round
/// trip), and a leader.
fn atlantic() -> (Cluster, usize) {
    let mut cluster = Cluster::start(
        3,
        "heartbeat_ms = 293\nelection_timeout_ms = 879\nwrite_timeout_ms = 5000",
    );
    for ((from, to), link) in &cluster.links {
        link.set_rtt(atlantic_rtt(*from, *to));
    }
    let leader = cluster.leader(Duration::from_secs(30));
    setup_base(&cluster, leader);
    (cluster, leader)
}

/// Retries `write` until it succeeds, for up to `within`.
fn until_ok(within: Duration, mut write: impl FnMut() -> Outcome) {
    let deadline = Instant::now() + within;
    loop {
        match write() {
            Outcome::Ok => return,
            other => {
                assert!(Instant::now() < deadline, "never succeeded: {other:?}");
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}

#[test]
fn every_site_writes_across_the_atlantic_and_the_replicas_agree() {
    let (mut cluster, _) = atlantic();
    for site in 1..=3 {
        let mut writer = Writer1::new(cluster.node(site).ldap);
        for n in 0..5 {
            let uid = format!("site{site}-{n}");
            assert_eq!(writer.add_account(PEOPLE, &uid), Outcome::Ok, "{uid}");
        }
    }
    let dump = cluster.await_identical(Duration::from_secs(30));
    for site in 1..=3 {
        assert!(
            dump.contains(&format!("uid=site{site}-4,{PEOPLE}")),
            "{dump}"
        );
    }
}

#[test]
fn a_site_cut_off_refuses_its_writes_and_the_other_two_go_on() {
    let (mut cluster, _) = atlantic();
    // Washington is cut off: Frankfurt and Sao Paulo, a majority, are
    // left with their 195 ms path between them.
    for ((from, to), link) in &cluster.links {
        if *from == 1 || *to == 1 {
            link.partition(true);
        }
    }
    let started = Instant::now();
    let mut at_washington = Writer1::new(cluster.node(1).ldap);
    let outcome = at_washington.replace(&format!("uid=own1,{PEOPLE}"), "description", "cut off");
    assert!(
        matches!(&outcome, Outcome::Refused(52, _)),
        "a write at the cut-off site: {outcome:?}"
    );
    // Refused by its write timeout (5 s), not left hanging.
    assert!(started.elapsed() < Duration::from_secs(30));
    for site in [2, 3] {
        let mut writer = Writer1::new(cluster.node(site).ldap);
        until_ok(Duration::from_secs(30), || {
            writer.replace(
                &format!("uid=own1,{PEOPLE}"),
                "description",
                &format!("site {site}"),
            )
        });
    }
    for link in cluster.links.values() {
        link.partition(false);
    }
    let dump = cluster.await_identical(Duration::from_secs(30));
    assert!(dump.contains("description: site 3"), "{dump}");
    assert!(!dump.contains("description: cut off"), "{dump}");
}
