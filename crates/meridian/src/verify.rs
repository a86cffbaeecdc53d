//! `meridian verify`: are the replicas of a cluster identical?
//!
//! For each partition (naming context, with its own Raft group and
//! database), opens each node's database read-only (beside its running
//! server, as `export` does), waits until every node has applied the same
//! position of that partition's log (the replication marker each
//! transaction stores), then compares the digests of every table
//! (`meridian_store::digest`): one sum per bucket of records. Where a
//! bucket differs it lists that bucket's records on each node and names
//! the ones that differ, by DN where they are entries. Exit status 0:
//! identical; 1: differences, or nodes that never reached one log
//! position within `--wait`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use meridian_store::Store;
use meridian_store::digest::TableDigest;

use crate::setup::{CommonArgs, Setup};

/// Flags of `meridian verify`.
#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// A node's data directory (with `--config`'s other settings);
    /// repeat for each node.
    #[arg(long = "node-data-dir", value_name = "DIR")]
    node_data_dirs: Vec<PathBuf>,
    /// The data directory of `meridian cluster local`: every `node*/`
    /// in it, each with its own config.toml.
    #[arg(long, value_name = "DIR")]
    cluster_dir: Option<PathBuf>,
    /// How long to wait for the nodes to reach one log position, in seconds.
    #[arg(long, default_value_t = 30)]
    wait: u64,
    /// Instead: compare a running server (the source of a live
    /// migration, `migrate --follow`) with the Meridian at `--into`,
    /// entry by entry over LDAP.
    #[arg(long, value_name = "URL", conflicts_with_all = ["cluster_dir", "node_data_dirs"])]
    against: Option<String>,
    /// `--against`: the DN to bind to that server as.
    #[arg(long, value_name = "DN", requires = "against")]
    bind_dn: Option<String>,
    /// `--against`: a file whose first line is its password.
    #[arg(long, value_name = "FILE", requires = "against")]
    bind_password_file: Option<PathBuf>,
    /// `--against`: the subtree compared.
    #[arg(long, value_name = "DN", requires = "against")]
    base: Option<String>,
    /// `--against`: the Meridian compared with it.
    #[arg(long, value_name = "URL", requires = "against")]
    into: Option<String>,
    /// `--against`: Meridian's administrator DN.
    #[arg(long, value_name = "DN", default_value = "cn=admin,dc=example,dc=com")]
    into_bind_dn: String,
    /// `--against`: a file whose first line is Meridian's administrator
    /// password.
    #[arg(long, value_name = "FILE", requires = "against")]
    into_password_file: Option<PathBuf>,
    /// `--against`: the CA file for `ldaps://` URLs.
    #[arg(long, value_name = "FILE")]
    tls_ca_file: Option<PathBuf>,
}

/// What `--against` compares, from the flags.
fn comparison(args: &VerifyArgs, url: &str) -> anyhow::Result<crate::verify_against::Comparison> {
    let missing = |flag: &str| anyhow::anyhow!("--against needs {flag}");
    let endpoint = |url: &str, dn: &str, file: Option<&PathBuf>, flag: &str| {
        Ok::<_, anyhow::Error>(crate::ldap_client::Endpoint {
            url: url.to_owned(),
            bind_dn: dn.to_owned(),
            password: crate::ldap_client::password_from(file.ok_or_else(|| missing(flag))?)?,
            tls_ca_file: args.tls_ca_file.clone(),
        })
    };
    let source_dn = args
        .bind_dn
        .as_deref()
        .ok_or_else(|| missing("--bind-dn"))?;
    let into = args.into.as_deref().ok_or_else(|| missing("--into"))?;
    Ok(crate::verify_against::Comparison {
        source: endpoint(
            url,
            source_dn,
            args.bind_password_file.as_ref(),
            "--bind-password-file",
        )?,
        target: endpoint(
            into,
            &args.into_bind_dn,
            args.into_password_file.as_ref(),
            "--into-password-file",
        )?,
        base: args.base.clone().ok_or_else(|| missing("--base"))?,
    })
}

/// One node's database of one partition, opened read-only.
struct Replica {
    name: String,
    store: Store,
}

/// Each node's name and setup.
fn load_nodes(args: &VerifyArgs) -> anyhow::Result<Vec<(String, Setup)>> {
    let mut sources: Vec<(String, CommonArgs)> = Vec::new();
    if let Some(dir) = &args.cluster_dir {
        let mut nodes: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join("config.toml").is_file())
            .collect();
        nodes.sort();
        for node in nodes {
            sources.push((
                node.display().to_string(),
                args.common.with_config(node.join("config.toml")),
            ));
        }
    }
    for dir in &args.node_data_dirs {
        sources.push((
            dir.display().to_string(),
            args.common.with_data_dir(dir.clone()),
        ));
    }
    if sources.len() < 2 {
        anyhow::bail!(
            "give at least two nodes: --cluster-dir DIR, or --node-data-dir once per node"
        );
    }
    sources
        .into_iter()
        .map(|(name, common)| Ok((name, common.load(|_| {})?)))
        .collect()
}

/// The applied log position each replica's database records.
fn positions(replicas: &[Replica]) -> anyhow::Result<Vec<Option<Vec<u8>>>> {
    replicas
        .iter()
        .map(|r| Ok(r.store.replication_marker()?))
        .collect()
}

pub(crate) fn run(args: VerifyArgs) -> anyhow::Result<()> {
    if let Some(url) = &args.against {
        return crate::verify_against::run(&comparison(&args, url)?);
    }
    let nodes = load_nodes(&args)?;
    let Some((_, first)) = nodes.first() else {
        anyhow::bail!("no node to verify");
    };
    let suffixes = first.suffixes().to_vec();
    let several = suffixes.len() > 1;
    #[allow(clippy::disallowed_methods)] // A timeout: how long to wait for quiet.
    let deadline = std::time::Instant::now() + Duration::from_secs(args.wait);
    let mut differences = 0usize;
    for suffix in &suffixes {
        let replicas: Vec<Replica> = nodes
            .iter()
            .map(|(name, setup)| {
                if !setup.suffixes().iter().any(|s| s.same_entry(suffix)) {
                    anyhow::bail!("{name} has no naming context {}", suffix.original());
                }
                Ok(Replica {
                    name: name.clone(),
                    store: setup.open_store_read_only_of(suffix)?,
                })
            })
            .collect::<anyhow::Result<_>>()?;
        let heading = if several {
            format!("partition {}: ", suffix.original())
        } else {
            String::new()
        };
        let (found, records, tables) = verify_partition(&replicas, deadline, args.wait)
            .with_context(|| heading.trim_end_matches(": ").to_owned())?;
        if found == 0 {
            println!(
                "{heading}{} replicas identical: {records} records in {tables} tables",
                replicas.len()
            );
        } else {
            let first = replicas.first().map_or("", |r| r.name.as_str());
            println!("{heading}{found} records differ from {first}");
        }
        differences += found;
    }
    if differences > 0 {
        anyhow::bail!("{differences} records differ");
    }
    Ok(())
}

/// Compares one partition's replicas once they are at one log position:
/// the records that differ (each printed), and the reference's record
/// and table counts.
fn verify_partition(
    replicas: &[Replica],
    deadline: std::time::Instant,
    wait: u64,
) -> anyhow::Result<(usize, u64, usize)> {
    // The same position on every node, and digests taken at it: a node
    // that moves on while it is read is caught by reading its position
    // again after its digests.
    let digests = loop {
        let before = positions(replicas)?;
        let same = before.iter().all(|p| Some(p) == before.first());
        if same {
            // One thread per replica: each scan is its own database.
            let digests: Vec<Vec<TableDigest>> = std::thread::scope(|scope| {
                let scans: Vec<_> = replicas
                    .iter()
                    .map(|r| {
                        scope.spawn(|| -> anyhow::Result<Vec<TableDigest>> {
                            Ok(r.store.snapshot()?.digests()?)
                        })
                    })
                    .collect();
                scans
                    .into_iter()
                    .map(|scan| {
                        scan.join()
                            .map_err(|_| anyhow::anyhow!("a digest thread failed"))?
                    })
                    .collect::<anyhow::Result<_>>()
            })?;
            if positions(replicas)? == before {
                break digests;
            }
        }
        #[allow(clippy::disallowed_methods)] // The timeout of `run`.
        let late = std::time::Instant::now() >= deadline;
        if late {
            anyhow::bail!(
                "the nodes did not reach one log position within {wait} s (writes going on?): run verify when the cluster is quiet"
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let reference = digests.first().cloned().unwrap_or_default();
    let mut differences = 0usize;
    for (replica, tables) in replicas.iter().zip(&digests).skip(1) {
        for (ours, theirs) in reference.iter().zip(tables) {
            if ours == theirs {
                continue;
            }
            for (bucket, (a, b)) in ours.buckets.iter().zip(&theirs.buckets).enumerate() {
                if a == b {
                    continue;
                }
                if let Some(first) = replicas.first() {
                    differences += report_bucket(first, replica, ours.table, bucket)?;
                }
            }
        }
    }
    let records: u64 = reference.iter().map(|t| t.records).sum();
    Ok((differences, records, reference.len()))
}

/// Lists the records of one bucket that differ between two replicas.
fn report_bucket(a: &Replica, b: &Replica, table: &str, bucket: usize) -> anyhow::Result<usize> {
    let (sa, sb) = (a.store.snapshot()?, b.store.snapshot()?);
    let left: BTreeMap<Vec<u8>, u64> = sa.bucket_items(table, bucket)?.into_iter().collect();
    let right: BTreeMap<Vec<u8>, u64> = sb.bucket_items(table, bucket)?.into_iter().collect();
    let mut found = 0;
    for key in left
        .keys()
        .chain(right.keys().filter(|k| !left.contains_key(*k)))
    {
        let (x, y) = (left.get(key), right.get(key));
        if x == y {
            continue;
        }
        found += 1;
        // Named where it can be read: a damaged record may not name itself.
        let name = match (x, y) {
            (Some(_), _) => sa.describe(table, key),
            (None, _) => sb.describe(table, key),
        };
        let what = match (x, y) {
            (Some(_), None) => format!("only on {}", a.name),
            (None, Some(_)) => format!("only on {}", b.name),
            _ => format!("differs between {} and {}", a.name, b.name),
        };
        println!("{table}: {name}: {what}");
    }
    Ok(found)
}
