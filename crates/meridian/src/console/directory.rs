//! The directory page's API: each node's health and readiness, the
//! cluster's status (as `meridian cluster status` prints it), the last
//! hour of metrics, and the entry browser. Everything that reads or
//! changes entries binds as the signed-in identity, so the directory's
//! own access rules decide what the console shows and may change.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use meridian_proto::message::{Change, ModifyOperation, ModifyRequest, PartialAttribute};
use meridian_proto::{Depth, Filter, ProtocolOp, ResultCode, Scope, Seq};
use serde::{Deserialize, Serialize};

use super::Console;
use super::auth::SignedIn;
use super::http::{ApiError, ApiResult};
use super::schema::{Field, Schema};
use crate::ldap_client::{Client, OwnedEntry};

/// Entries one browse or search returns at most.
const MAX_ENTRIES: usize = 1000;
/// Changes one modify carries at most.
const MAX_CHANGES: usize = 256;

pub(super) fn routes() -> Router<Arc<Console>> {
    Router::new()
        .route("/api/directory", get(status))
        .route("/api/directory/metrics", get(metrics))
        .route("/api/entries", get(entries))
        .route("/api/entry", get(entry))
        .route("/api/entry/modify", post(modify))
}

async fn open(console: &Console, who: &SignedIn) -> ApiResult<Client> {
    Client::open(&console.endpoint(&who.dn, &who.password))
        .await
        .map_err(|e| ApiError::directory(&e))
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
            "health": probe(&url, "/healthz").await,
            "ready": probe(&url, "/readyz").await,
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

/// An attribute value as JSON: text, or base64 when it is not UTF-8.
#[derive(Serialize)]
struct Value {
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    base64: Option<String>,
}

impl Value {
    fn of(bytes: &[u8]) -> Value {
        match std::str::from_utf8(bytes) {
            Ok(text) => Value {
                text: Some(text.to_owned()),
                base64: None,
            },
            Err(_) => Value {
                text: None,
                base64: Some(meridian_ldif::base64::encode(bytes)),
            },
        }
    }
}

#[derive(Serialize)]
struct EntryView {
    dn: String,
    attributes: Vec<(String, Vec<Value>)>,
}

/// Attributes never shown, even to an identity that may read them.
fn hidden(name: &str) -> bool {
    name.eq_ignore_ascii_case("userPassword")
        || name.eq_ignore_ascii_case("authPassword")
        || name.to_ascii_lowercase().starts_with("userpassword;")
}

impl EntryView {
    fn of(entry: OwnedEntry) -> EntryView {
        EntryView {
            dn: entry.dn,
            attributes: entry
                .attributes
                .into_iter()
                .filter(|(name, _)| !hidden(name))
                .map(|(name, values)| (name, values.iter().map(|v| Value::of(v)).collect()))
                .collect(),
        }
    }
}

#[derive(Deserialize)]
struct Browse {
    /// Empty: the naming contexts (the tree's roots).
    #[serde(default)]
    base: String,
    /// base, one (default) or sub.
    #[serde(default)]
    scope: String,
    #[serde(default)]
    filter: String,
    /// Attributes to return (comma-separated); default the tree's.
    #[serde(default)]
    attributes: String,
}

/// `GET /api/entries?base=DN&scope=one&filter=...`: a level of the tree
/// or a search, as the signed-in identity sees it.
async fn entries(
    State(console): State<Arc<Console>>,
    Extension(who): Extension<Arc<SignedIn>>,
    Query(browse): Query<Browse>,
) -> ApiResult<Json<serde_json::Value>> {
    let mut client = open(&console, &who).await?;
    if browse.base.is_empty() {
        let root = client
            .search_all(
                "",
                Scope::Base,
                Filter::Present(b"objectClass"),
                &[b"namingContexts"],
            )
            .await
            .map_err(|e| ApiError::directory(&e))?;
        let contexts: Vec<String> = root
            .first()
            .and_then(|e| e.values("namingContexts"))
            .unwrap_or_default()
            .iter()
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect();
        return Ok(Json(serde_json::json!({ "roots": contexts })));
    }
    let scope = match browse.scope.as_str() {
        "base" => Scope::Base,
        "" | "one" => Scope::OneLevel,
        "sub" => Scope::Subtree,
        other => {
            return Err(ApiError::bad_request(format!(
                "scope {other:?}: base, one or sub"
            )));
        }
    };
    let filter_text = if browse.filter.trim().is_empty() {
        "(objectClass=*)"
    } else {
        browse.filter.trim()
    };
    let ber = meridian_proto::filter_str::parse(filter_text, 32)
        .map_err(|e| ApiError::bad_request(format!("filter {filter_text:?}: {e}")))?;
    let filter = Filter::from_ber(&ber, Depth::new(32))
        .map_err(|e| ApiError::bad_request(format!("filter {filter_text:?}: {e}")))?;
    let wanted: Vec<&str> = if browse.attributes.trim().is_empty() {
        vec![
            "objectClass",
            "hasSubordinates",
            "numSubordinates",
            "cn",
            "uid",
            "ou",
        ]
    } else {
        browse.attributes.split(',').map(str::trim).collect()
    };
    let wanted: Vec<&[u8]> = wanted.iter().map(|a| a.as_bytes()).collect();
    let mut found = Vec::new();
    let mut truncated = false;
    let outcome = client
        .search_each(&browse.base, scope, filter, &wanted, |entry| {
            if found.len() < MAX_ENTRIES {
                found.push(EntryView::of(entry));
            } else {
                truncated = true;
            }
            Ok(())
        })
        .await;
    if let Err(e) = outcome {
        // Entries already found are shown with the refusal (a size
        // limit is the common case).
        if found.is_empty() {
            return Err(ApiError::directory(&e));
        }
        return Ok(Json(serde_json::json!({
            "entries": found, "truncated": true, "error": format!("{e:#}")
        })));
    }
    Ok(Json(
        serde_json::json!({ "entries": found, "truncated": truncated }),
    ))
}

#[derive(Deserialize)]
struct Named {
    dn: String,
}

/// `GET /api/entry?dn=DN`: the entry (user and operational attributes,
/// passwords left out) and the form its object classes give.
async fn entry(
    State(console): State<Arc<Console>>,
    Extension(who): Extension<Arc<SignedIn>>,
    Query(named): Query<Named>,
) -> ApiResult<Json<serde_json::Value>> {
    let mut client = open(&console, &who).await?;
    let found = client
        .search_all(
            &named.dn,
            Scope::Base,
            Filter::Present(b"objectClass"),
            &[b"*", b"+"],
        )
        .await
        .map_err(|e| ApiError::directory(&e))?;
    let Some(entry) = found.into_iter().next() else {
        return Err(ApiError::not_found(format!("{} is not visible", named.dn)));
    };
    let classes: Vec<String> = entry
        .values("objectClass")
        .unwrap_or_default()
        .iter()
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect();
    let schema = read_schema(&mut client, &entry).await;
    let mut form: Vec<Field> = schema.form(&classes);
    for (name, _) in &entry.attributes {
        if !hidden(name) && !form.iter().any(|f| f.name.eq_ignore_ascii_case(name)) {
            form.push(schema.field(name));
        }
    }
    form.retain(|f| !hidden(&f.name));
    Ok(Json(serde_json::json!({
        "entry": EntryView::of(entry),
        "form": form,
    })))
}

/// The schema the entry's subschema subentry publishes (empty when it
/// cannot be read: the form then lists the entry's own attributes).
async fn read_schema(client: &mut Client, entry: &OwnedEntry) -> Schema {
    let subentry = entry
        .values("subschemaSubentry")
        .and_then(|v| v.first())
        .map_or_else(
            || "cn=Subschema".to_owned(),
            |v| String::from_utf8_lossy(v).into_owned(),
        );
    let found = client
        .search_all(
            &subentry,
            Scope::Base,
            Filter::Present(b"objectClass"),
            &[b"objectClasses", b"attributeTypes"],
        )
        .await
        .unwrap_or_default();
    let texts = |name: &str| -> Vec<String> {
        found
            .first()
            .and_then(|e| e.values(name))
            .unwrap_or_default()
            .iter()
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect()
    };
    Schema::read(&texts("objectClasses"), &texts("attributeTypes"))
}

#[derive(Deserialize)]
struct ModifyForm {
    dn: String,
    changes: Vec<ChangeForm>,
}

#[derive(Deserialize)]
struct ChangeForm {
    /// add, delete or replace.
    op: String,
    attribute: String,
    #[serde(default)]
    values: Vec<String>,
}

/// `POST /api/entry/modify`: one ModifyRequest as the signed-in
/// identity; the directory's answer (its refusal is a 422 naming the
/// result code and the directory's message).
async fn modify(
    State(console): State<Arc<Console>>,
    Extension(who): Extension<Arc<SignedIn>>,
    Json(form): Json<ModifyForm>,
) -> ApiResult<Json<serde_json::Value>> {
    if form.changes.is_empty() || form.changes.len() > MAX_CHANGES {
        return Err(ApiError::bad_request(format!(
            "a modify carries 1 to {MAX_CHANGES} changes"
        )));
    }
    let mut operations = Vec::new();
    for change in &form.changes {
        let operation = match change.op.as_str() {
            "add" => ModifyOperation::Add,
            "delete" => ModifyOperation::Delete,
            "replace" => ModifyOperation::Replace,
            other => {
                return Err(ApiError::bad_request(format!(
                    "change {other:?}: add, delete or replace"
                )));
            }
        };
        if change.attribute.trim().is_empty() {
            return Err(ApiError::bad_request("a change names its attribute"));
        }
        operations.push(operation);
    }
    let values: Vec<Vec<&[u8]>> = form
        .changes
        .iter()
        .map(|c| c.values.iter().map(String::as_bytes).collect())
        .collect();
    let changes: Vec<Change<'_>> = form
        .changes
        .iter()
        .zip(&values)
        .zip(operations)
        .map(|((c, values), operation)| Change {
            operation,
            modification: PartialAttribute {
                ty: c.attribute.trim().as_bytes(),
                values: Seq::from_items(values),
            },
        })
        .collect();
    let mut client = open(&console, &who).await?;
    let (code, message) = client
        .call(
            ProtocolOp::ModifyRequest(ModifyRequest {
                dn: form.dn.as_bytes(),
                changes: Seq::from_items(&changes),
            }),
            &[],
        )
        .await
        .map_err(|e| ApiError::directory(&e))?;
    let name = meridian_bench::stats::code_name(i64::from(code.0));
    if code != ResultCode::SUCCESS {
        return Err(ApiError(
            axum::http::StatusCode::UNPROCESSABLE_ENTITY,
            format!("{name} ({}): {message}", code.0),
        ));
    }
    Ok(Json(
        serde_json::json!({ "code": code.0, "result": name, "message": message }),
    ))
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

    #[test]
    fn passwords_are_never_shown() {
        let view = EntryView::of(OwnedEntry {
            dn: "uid=a".into(),
            attributes: vec![
                ("cn".into(), vec![b"A".to_vec()]),
                ("userPassword".into(), vec![b"{SSHA}x".to_vec()]),
                ("jpegPhoto".into(), vec![vec![0xff, 0xd8]]),
            ],
        });
        let json = serde_json::to_string(&view).unwrap();
        assert!(
            !json.contains("SSHA") && !json.contains("userPassword"),
            "{json}"
        );
        assert!(json.contains("\"base64\":\"/9g=\""), "{json}");
    }
}
