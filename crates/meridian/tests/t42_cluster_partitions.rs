//! Several write leaders: a cluster whose naming contexts are partitions,
//! each ordered by its own Raft group with its own preferred leader
//! (seed 000's object spaces, each mastered at one site). Three real
//! `meridian serve` nodes on loopback, every link through our TCP proxy.

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

use support::cluster::{Cluster, Outcome, PEOPLE, Writer1, admin_at, root_dse_values, url};
use support::*;

const FRANKFURT: &str = "ou=Frankfurt,dc=example,dc=com";
const SAO_PAULO: &str = "ou=SaoPaulo,dc=example,dc=com";

/// Three partitions: `dc=example,dc=com` led from node 1, Frankfurt's
/// subtree from node 2, Sao Paulo's from node 3.
fn three_sites() -> Cluster {
    Cluster::start_partitioned(
        3,
        &format!("additional_suffixes = [{FRANKFURT:?}, {SAO_PAULO:?}]"),
        &format!(
            "preferred_leader = 1\npreferred_leaders = {{ {FRANKFURT:?} = 2, \"ou=saopaulo, dc=example, dc=com\" = 3 }}"
        ),
    )
}

/// Each partition's leader as node `id` sees it, by suffix.
fn partition_leaders(cluster: &Cluster, id: usize) -> Vec<(String, Option<usize>)> {
    let values =
        root_dse_values(cluster.node(id).ldap, &["meridianClusterPartition"]).unwrap_or_default();
    values
        .into_iter()
        .filter(|(name, _)| name == "meridianClusterPartition")
        .filter_map(|(_, value)| {
            // "SUFFIX role=R leader=L term=T applied=A"
            let (suffix, rest) = value.split_once(" role=")?;
            let leader = rest
                .split_whitespace()
                .find_map(|word| word.strip_prefix("leader="))?
                .parse()
                .ok();
            Some((suffix.to_owned(), leader))
        })
        .collect()
}

/// Waits until every node names, for each partition, the leader `want`
/// gives it.
fn await_leaders(cluster: &Cluster, want: &[(&str, usize)], within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let seen: Vec<_> = (1..=3).map(|id| partition_leaders(cluster, id)).collect();
        let settled = seen.iter().all(|leaders| {
            want.iter().all(|(suffix, leader)| {
                leaders
                    .iter()
                    .any(|(s, l)| s.eq_ignore_ascii_case(suffix) && *l == Some(*leader))
            })
        });
        if settled {
            return;
        }
        if Instant::now() >= deadline {
            for id in 1..=3 {
                let (_, status) = meridian(&["cluster", "status", "--url", &url(cluster, id)]);
                eprintln!("--- node {id}:\n{status}");
            }
            panic!("partition leaders not as wanted ({want:?}) after {within:?}: {seen:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn meridian(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(args)
        .env("MERIDIAN_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!("{}{}", text(&out.stdout), text(&out.stderr)),
    )
}

fn ou(dn: &str) -> String {
    let name = dn
        .strip_prefix("ou=")
        .and_then(|rest| rest.split(',').next())
        .unwrap();
    format!("dn: {dn}\nobjectClass: organizationalUnit\nou: {name}\n")
}

#[test]
fn each_partition_is_led_at_its_own_site_and_a_client_anywhere_sees_one_tree() {
    let mut cluster = three_sites();
    let all = [("dc=example,dc=com", 1), (FRANKFURT, 2), (SAO_PAULO, 3)];
    await_leaders(&cluster, &all, Duration::from_secs(30));

    // The suffix entries, each written at a node that does not lead its
    // partition: forwarded to that partition's leader.
    let (code, out) = admin_at(
        &url(&cluster, 3),
        "ldapadd",
        &[],
        Some(support::cluster::BASE),
    );
    assert_eq!(code, 0, "{out}");
    let (code, out) = admin_at(&url(&cluster, 1), "ldapadd", &[], Some(&ou(FRANKFURT)));
    assert_eq!(code, 0, "{out}");
    let (code, out) = admin_at(&url(&cluster, 2), "ldapadd", &[], Some(&ou(SAO_PAULO)));
    assert_eq!(code, 0, "{out}");

    // Every node writes into every partition.
    for id in 1..=3 {
        let mut w = Writer1::new(cluster.node(id).ldap);
        for parent in [PEOPLE, FRANKFURT, SAO_PAULO] {
            for n in 0..5 {
                assert_eq!(
                    w.add_account(parent, &format!("n{id}-{n}")),
                    Outcome::Ok,
                    "node {id} under {parent}"
                );
            }
            let dn = format!("uid=n{id}-0,{parent}");
            assert_eq!(w.replace(&dn, "description", "changed"), Outcome::Ok);
        }
    }
    // One tree at every node: a subtree search of the first suffix
    // finds the entries of the partitions glued below it.
    let dump = cluster.await_identical(Duration::from_secs(30));
    for parent in [PEOPLE, FRANKFURT, SAO_PAULO] {
        for id in 1..=3 {
            let dn = format!("dn: uid=n{id}-4,{parent}");
            assert!(dump.to_lowercase().contains(&dn.to_lowercase()), "{dn}");
        }
    }

    // A rename across partitions is refused as across naming contexts.
    let moved = format!("uid=n1-1,{PEOPLE}");
    let (code, out) = admin_at(
        &url(&cluster, 2),
        "ldapmodrdn",
        &["-s", FRANKFURT, &moved, "uid=n1-1"],
        None,
    );
    assert_eq!(code, 71, "affectsMultipleDSAs: {out}");

    // The status names every partition; one can be asked for alone.
    let (code, out) = meridian(&["cluster", "status", "--url", &url(&cluster, 1)]);
    assert_eq!(code, 0, "{out}");
    for suffix in ["dc=example,dc=com", FRANKFURT, SAO_PAULO] {
        assert!(out.contains(&format!("partition: {suffix}")), "{out}");
    }
    let (code, out) = meridian(&[
        "cluster",
        "status",
        "--partition",
        "OU=frankfurt, DC=example, DC=com",
        "--url",
        &url(&cluster, 3),
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("partition: {FRANKFURT}")) && out.matches("partition:").count() == 1,
        "that partition only: {out}"
    );
    let (code, out) = meridian(&[
        "cluster",
        "status",
        "--partition",
        "ou=Tokyo,dc=example,dc=com",
        "--url",
        &url(&cluster, 3),
    ]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("is not a partition of this cluster"), "{out}");

    // Frankfurt's leader dies: its partition elects another and goes
    // on; the others keep their leaders.
    cluster.kill(2);
    let mut w = Writer1::new(cluster.node(1).ldap);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match w.add_account(FRANKFURT, "after-kill") {
            Outcome::Ok => break,
            other => assert!(Instant::now() < deadline, "{other:?}"),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(w.add_account(SAO_PAULO, "after-kill"), Outcome::Ok);
    // Back, it takes its partition's lead again once it caught up.
    cluster.start_node(2);
    await_leaders(&cluster, &all, Duration::from_secs(40));
    cluster.await_identical(Duration::from_secs(30));

    let (code, out) = meridian(&[
        "verify",
        "--wait",
        "20",
        "--cluster-dir",
        cluster.root.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}");
    for suffix in ["dc=example,dc=com", FRANKFURT, SAO_PAULO] {
        assert!(
            out.contains(&format!("partition {suffix}: 3 replicas identical")),
            "{out}"
        );
    }
}
