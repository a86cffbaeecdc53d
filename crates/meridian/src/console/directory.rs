//! The directory page's API: each node's health and readiness, the
//! cluster's status (as `meridian cluster status` prints it, asked as
//! the signed-in identity) and the last hour of metrics.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::routing::get;
use axum::{Extension, Json, Router};
use serde::{Deserialize, Serialize};

use super::Console;
use super::auth::SignedIn;

pub(super) fn routes() -> Router<Arc<Console>> {
    Router::new()
        .route("/api/directory", get(status))
        .route("/api/directory/metrics", get(metrics))
}

#[derive(Serialize)]
struct Probe {
    status: Option<u16>,
    body: String,
}

/// A node's `/healthz` or `/readyz`.
async fn probe(url: &str, path: &str) -> Probe {
    match super::watch::get(url, path).await {
        Ok((status, body)) => Probe {
            status: Some(status),
            body: body.trim().to_owned(),
        },
        Err(e) => Probe {
            status: None,
            body: format!("{e:#}"),
        },
    }
}

/// `GET /api/directory`: the nodes' health and readiness, and the
/// cluster's status as the signed-in identity may see it (the cluster
/// operation answers the administrator only; a single server says it is
/// not a cluster node).
async fn status(
    State(console): State<Arc<Console>>,
    Extension(who): Extension<Arc<SignedIn>>,
) -> Json<serde_json::Value> {
    let mut nodes = Vec::new();
    for url in console.watch.urls() {
        nodes.push(serde_json::json!({
            "metrics_url": url,
            "health": probe(url, "/healthz").await,
            "ready": probe(url, "/readyz").await,
        }));
    }
    let cluster = cluster_status(&console, &who).await;
    Json(serde_json::json!({
        "url": console.url,
        "signed_in_as": who.dn,
        "nodes": nodes,
        "cluster": cluster,
        "job_running": console.jobs.running(),
    }))
}

/// One node's answer for one partition, as `key: value` pairs.
type StatusGroup = serde_json::Map<String, serde_json::Value>;

/// The cluster's status as `who` may see it: asked of the console's node
/// and, when that node does not lead, of the leader it names too (only
/// the leader knows each replica's lag). A single server is not a
/// cluster node, and the operation answers the administrator only: the
/// error says which.
async fn cluster_status(console: &Console, who: &SignedIn) -> serde_json::Value {
    /// Nodes asked at most (the console's node and each partition's leader).
    const MAX_ASKED: usize = 8;
    let mut asked: Vec<String> = Vec::new();
    let mut groups: Vec<StatusGroup> = Vec::new();
    let mut pending = vec![console.url.clone()];
    while let Some(url) = pending.pop() {
        if asked.contains(&url) || asked.len() >= MAX_ASKED {
            continue;
        }
        asked.push(url.clone());
        let mut endpoint = console.endpoint(&who.dn, &who.password);
        endpoint.url.clone_from(&url);
        let addressed = crate::cluster::admin::Addressed {
            command: meridian_replication::AdminCommand::Status,
            partition: None,
        };
        match crate::cluster::admin::ask_as(&endpoint, &addressed, Duration::from_secs(10)).await {
            Ok(text) => {
                for mut group in parse_status(&text) {
                    let leads = group.get("role").is_some_and(|r| r == "leader");
                    let leader_url = group
                        .get("leader")
                        .and_then(|l| l.as_str())
                        .and_then(|l| l.split_whitespace().nth(1))
                        .map(str::to_owned);
                    if let (false, Some(leader)) = (leads, leader_url) {
                        pending.push(leader);
                    }
                    group.insert("asked".into(), serde_json::Value::String(url.clone()));
                    groups.push(group);
                }
            }
            // The console's own node refusing is the answer; a leader it
            // named not answering is shown beside what the node said.
            Err(e) if groups.is_empty() => return serde_json::json!({ "error": format!("{e:#}") }),
            Err(e) => {
                let mut group = StatusGroup::new();
                group.insert("asked".into(), serde_json::Value::String(url));
                group.insert("error".into(), serde_json::Value::String(format!("{e:#}")));
                groups.push(group);
            }
        }
    }
    serde_json::json!({ "status": groups })
}

/// The status text's `key: value` lines; the replicas as a list. A
/// status of several partitions heads each with `partition: SUFFIX`.
fn parse_status(text: &str) -> Vec<StatusGroup> {
    let mut groups: Vec<StatusGroup> = Vec::new();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(": ") else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        let begins = match key {
            "partition" => true,
            "node" => groups.last().is_none_or(|g| g.contains_key("node")),
            _ => groups.is_empty(),
        };
        if begins {
            groups.push(StatusGroup::new());
        }
        let Some(group) = groups.last_mut() else {
            continue;
        };
        if key == "replica" {
            let replicas = group
                .entry("replicas")
                .or_insert_with(|| serde_json::Value::Array(Vec::new()));
            if let serde_json::Value::Array(list) = replicas {
                list.push(serde_json::Value::String(value.to_owned()));
            }
        } else {
            group.insert(key.to_owned(), serde_json::Value::String(value.to_owned()));
        }
    }
    groups
}

#[derive(Deserialize)]
struct Window {
    #[serde(default)]
    minutes: Option<f64>,
}

/// `GET /api/directory/metrics?minutes=60`: each node's points.
async fn metrics(
    State(console): State<Arc<Console>>,
    Query(window): Query<Window>,
) -> Json<Vec<super::watch::Series>> {
    let minutes = window.minutes.unwrap_or(60.0).clamp(1.0, 60.0);
    Json(console.watch.series(minutes * 60.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_reads_as_groups_with_their_replicas() {
        let text = "node: 1\nrole: leader\nterm: 3\nreplica: 2 127.0.0.1:7002 matched=9 lag=0\n\
                    replica: 3 127.0.0.1:7003 matched=7 lag=2\n";
        let groups = parse_status(text);
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0]["role"], "leader");
        assert_eq!(groups[0]["replicas"].as_array().unwrap().len(), 2);
        let partitions =
            "partition: dc=a\nnode: 1\nrole: leader\npartition: dc=b\nnode: 1\nrole: follower\n";
        let groups = parse_status(partitions);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[1]["partition"], "dc=b");
        assert_eq!(groups[1]["role"], "follower");
    }
}
