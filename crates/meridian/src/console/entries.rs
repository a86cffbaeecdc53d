//! The entry browser's API: a level of the tree or a search, an entry
//! with the form its object classes give, and a change to it. Each
//! request binds as the signed-in identity, so the directory's own access
//! rules decide what the console shows and may change.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use meridian_proto::message::{Change, ModifyOperation, ModifyRequest, PartialAttribute};
use meridian_proto::{
    Depth, DerefAliases, Filter, ProtocolOp, ResultCode, Scope, SearchRequest, Seq,
};
use serde::{Deserialize, Serialize};

use super::Console;
use super::auth::SignedIn;
use super::http::{ApiError, ApiResult};
use super::schema::{Field, Schema};
use crate::ldap_client::{Client, OwnedEntry, Refused};

/// Entries one browse or search returns at most (the search asks the
/// directory for one more, to know there are more).
const MAX_ENTRIES: usize = 1000;
/// Changes one modify carries at most.
const MAX_CHANGES: usize = 256;

pub(super) fn routes() -> Router<Arc<Console>> {
    Router::new()
        .route("/api/entries", get(entries))
        .route("/api/entry", get(entry))
        .route("/api/entry/modify", post(modify))
}

async fn open(console: &Console, who: &SignedIn) -> ApiResult<Client> {
    Client::open(&console.endpoint(&who.dn, &who.password))
        .await
        .map_err(|e| ApiError::directory(&e))
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
            .read_entry("", &[b"namingContexts"])
            .await
            .map_err(|e| ApiError::directory(&e))?;
        let contexts = root.map(|r| r.texts("namingContexts")).unwrap_or_default();
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
    // The directory stops at one more than is shown: a container of a
    // million entries costs the console a thousand and one.
    let request = ProtocolOp::SearchRequest(SearchRequest {
        base: browse.base.as_bytes(),
        scope,
        deref: DerefAliases::Never,
        size_limit: i32::try_from(MAX_ENTRIES + 1).unwrap_or(i32::MAX),
        time_limit: 30,
        types_only: false,
        filter,
        attributes: Seq::from_items(&wanted),
    });
    let mut found = Vec::new();
    let outcome = client
        .search_each_of(request, |entry| {
            found.push(EntryView::of(entry));
            Ok(())
        })
        .await;
    let truncated = found.len() > MAX_ENTRIES;
    found.truncate(MAX_ENTRIES);
    match outcome {
        Ok(()) => Ok(Json(
            serde_json::json!({ "entries": found, "truncated": truncated }),
        )),
        Err(e) if Refused::is(&e, ResultCode::SIZE_LIMIT_EXCEEDED) => Ok(Json(
            serde_json::json!({ "entries": found, "truncated": true }),
        )),
        // Entries already found are shown with the refusal.
        Err(e) if !found.is_empty() => Ok(Json(serde_json::json!({
            "entries": found, "truncated": true, "error": format!("{e:#}")
        }))),
        Err(e) => Err(ApiError::directory(&e)),
    }
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
    let entry = client
        .read_entry(&named.dn, &[b"*", b"+"])
        .await
        .map_err(|e| ApiError::directory(&e))?
        .ok_or_else(|| ApiError::not_found(format!("{} is not visible", named.dn)))?;
    let schema = read_schema(&mut client, &entry).await;
    let mut form: Vec<Field> = schema.form(&entry.texts("objectClass"));
    for (name, _) in &entry.attributes {
        if !form.iter().any(|f| f.name.eq_ignore_ascii_case(name)) {
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
        .texts("subschemaSubentry")
        .pop()
        .unwrap_or_else(|| "cn=Subschema".to_owned());
    let published = client
        .read_entry(&subentry, &[b"objectClasses", b"attributeTypes"])
        .await
        .ok()
        .flatten()
        .unwrap_or_default();
    Schema::read(
        &published.texts("objectClasses"),
        &published.texts("attributeTypes"),
    )
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
