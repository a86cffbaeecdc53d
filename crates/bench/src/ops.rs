//! The operations of a scenario (`[[operation]]` tables), compiled into
//! request templates.

use std::collections::BTreeMap;

use meridian_proto::message::DerefAliases;
use meridian_proto::{
    Ava, BindRequest, Change, CompareRequest, Control, Depth, Filter, LdapMessage, ModifyDnRequest,
    ModifyOperation, ModifyRequest, PartialAttribute, ProtocolOp, Scope, SearchRequest, Seq,
    filter_str, message::Authentication,
};
use serde::Deserialize;

use crate::pdu::{Marker, PduTemplate};

/// The operation types the bench sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpKind {
    /// SearchRequest.
    Search,
    /// CompareRequest.
    Compare,
    /// ModifyRequest.
    Modify,
    /// AddRequest.
    Add,
    /// DelRequest.
    Delete,
    /// ModifyDNRequest.
    Modrdn,
    /// Simple BindRequest on the session's connection.
    Bind,
}

/// Search scope as a scenario writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ScopeSpec {
    /// baseObject.
    #[default]
    Base,
    /// singleLevel.
    One,
    /// wholeSubtree.
    Sub,
    /// subordinateSubtree.
    Children,
}

/// One change of a modify.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChangeSpec {
    /// `add`, `delete`, `replace` or `increment`.
    #[serde(rename = "type")]
    pub kind: ChangeKind,
    /// The attribute.
    pub attribute: String,
    /// Values (templates); may be empty for delete and replace.
    #[serde(default)]
    pub values: Vec<String>,
}

/// A modify change type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    /// add.
    Add,
    /// delete.
    Delete,
    /// replace.
    Replace,
    /// increment (RFC 4525).
    Increment,
}

/// An `[[operation]]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpSpec {
    /// Name in reports (defaults to the kind, numbered when repeated).
    pub name: Option<String>,
    /// What to send.
    pub kind: OpKind,
    /// Share of a closed-loop or fixed-rate mix.
    #[serde(default = "one")]
    pub weight: f64,
    /// Open loop: operations per second across all sessions.
    #[serde(default)]
    pub rate: f64,
    /// User profile: operations per user per second.
    #[serde(default)]
    pub per_user: f64,
    /// Target DN (search base, entry of the others, bind DN).
    #[serde(default)]
    pub dn: String,
    /// Search scope.
    #[serde(default)]
    pub scope: ScopeSpec,
    /// Search filter (RFC 4515).
    #[serde(default = "any_object")]
    pub filter: String,
    /// Attributes to return.
    #[serde(default)]
    pub attributes: Vec<String>,
    /// Search sizeLimit.
    #[serde(default)]
    pub size_limit: i32,
    /// Search timeLimit in seconds.
    #[serde(default)]
    pub time_limit: i32,
    /// Search typesOnly.
    #[serde(default)]
    pub types_only: bool,
    /// Modify changes.
    #[serde(default)]
    pub changes: Vec<ChangeSpec>,
    /// Compare attribute.
    #[serde(default)]
    pub attribute: String,
    /// Compare assertion value.
    #[serde(default)]
    pub value: String,
    /// Add: attribute to values.
    #[serde(default)]
    pub entry: BTreeMap<String, Vec<String>>,
    /// Modrdn new RDN.
    #[serde(default)]
    pub new_rdn: String,
    /// Modrdn deleteoldrdn.
    #[serde(default = "yes")]
    pub delete_old_rdn: bool,
    /// Modrdn newSuperior.
    pub new_superior: Option<String>,
    /// Bind password.
    #[serde(default)]
    pub password: String,
}

fn one() -> f64 {
    1.0
}
fn yes() -> bool {
    true
}
fn any_object() -> String {
    "(objectClass=*)".into()
}

/// An operation ready to send.
#[derive(Debug, Clone)]
pub struct Operation {
    /// Name in reports.
    pub name: String,
    /// What it is.
    pub kind: OpKind,
    /// The request.
    pub template: PduTemplate,
}

impl Operation {
    /// Compiles `spec`; the error names the field at fault.
    pub fn compile(spec: &OpSpec, name: String) -> Result<Operation, String> {
        let at = |e: String| format!("operation {name:?}: {e}");
        let mut m = Marker::default();
        let mut mark = |field: &str, text: &str| {
            m.mark(text)
                .map(String::into_bytes)
                .map_err(|e| at(format!("{field}: {e}")))
        };
        let dn = mark("dn", &spec.dn)?;
        let mut encoded = Vec::new();
        let message = |op| LdapMessage {
            message_id: 0,
            op,
            controls: Seq::<Control<'_>>::empty(),
        };
        match spec.kind {
            OpKind::Search => {
                let filter = mark("filter", &spec.filter)?;
                let filter_text = String::from_utf8_lossy(&filter).into_owned();
                let filter = filter_str::parse(&filter_text, 32)
                    .map_err(|e| at(format!("filter {:?}: {e}", spec.filter)))?;
                let filter = Filter::from_ber(&filter, Depth::new(64))
                    .map_err(|e| at(format!("filter {:?}: {e}", spec.filter)))?;
                let attributes: Vec<&[u8]> = spec.attributes.iter().map(|a| a.as_bytes()).collect();
                message(ProtocolOp::SearchRequest(SearchRequest {
                    base: &dn,
                    scope: match spec.scope {
                        ScopeSpec::Base => Scope::Base,
                        ScopeSpec::One => Scope::OneLevel,
                        ScopeSpec::Sub => Scope::Subtree,
                        ScopeSpec::Children => Scope::Subordinate,
                    },
                    deref: DerefAliases::Never,
                    size_limit: spec.size_limit,
                    time_limit: spec.time_limit,
                    types_only: spec.types_only,
                    filter,
                    attributes: Seq::from_items(&attributes),
                }))
                .encode(&mut encoded);
            }
            OpKind::Compare => {
                if spec.attribute.is_empty() {
                    return Err(at("a compare needs `attribute` and `value`".into()));
                }
                let value = mark("value", &spec.value)?;
                message(ProtocolOp::CompareRequest(CompareRequest {
                    dn: &dn,
                    ava: Ava {
                        attr: spec.attribute.as_bytes(),
                        value: &value,
                    },
                }))
                .encode(&mut encoded);
            }
            OpKind::Modify => {
                if spec.changes.is_empty() {
                    return Err(at(
                        "a modify needs at least one [[operation.changes]]".into()
                    ));
                }
                encode_modify(spec, &dn, &mut mark, &mut encoded)?;
            }
            OpKind::Add => {
                if spec.entry.is_empty() {
                    return Err(at(
                        "an add needs an [operation.entry] table of attributes".into()
                    ));
                }
                let values: Vec<Vec<Vec<u8>>> = spec
                    .entry
                    .values()
                    .map(|vs| vs.iter().map(|v| mark("entry", v)).collect())
                    .collect::<Result<_, _>>()?;
                meridian_proto::message::encode_add(
                    &mut encoded,
                    0,
                    &dn,
                    spec.entry
                        .keys()
                        .zip(&values)
                        .map(|(ty, vs)| (ty.as_bytes(), vs.iter().map(Vec::as_slice))),
                );
            }
            OpKind::Delete => message(ProtocolOp::DelRequest(&dn)).encode(&mut encoded),
            OpKind::Modrdn => {
                if spec.new_rdn.is_empty() {
                    return Err(at("a modrdn needs `new_rdn`".into()));
                }
                let new_rdn = mark("new_rdn", &spec.new_rdn)?;
                let superior = spec
                    .new_superior
                    .as_deref()
                    .map(|s| mark("new_superior", s))
                    .transpose()?;
                message(ProtocolOp::ModifyDnRequest(ModifyDnRequest {
                    dn: &dn,
                    new_rdn: &new_rdn,
                    delete_old_rdn: spec.delete_old_rdn,
                    new_superior: superior.as_deref(),
                }))
                .encode(&mut encoded);
            }
            OpKind::Bind => {
                let password = mark("password", &spec.password)?;
                message(ProtocolOp::BindRequest(BindRequest {
                    version: 3,
                    name: &dn,
                    auth: Authentication::Simple(&password),
                }))
                .encode(&mut encoded);
            }
        }
        if spec.dn.is_empty() && !matches!(spec.kind, OpKind::Bind | OpKind::Search) {
            return Err(at("`dn` is required".into()));
        }
        let template = m.compile(&encoded).map_err(at)?;
        Ok(Operation {
            name,
            kind: spec.kind,
            template,
        })
    }

    /// True when a response with `code` counts as a success.
    pub fn succeeded(&self, code: u32) -> bool {
        code == 0 || (self.kind == OpKind::Compare && (code == 5 || code == 6))
    }
}

/// A modify's changes, their values marked, encoded into `encoded`.
fn encode_modify(
    spec: &OpSpec,
    dn: &[u8],
    mark: &mut impl FnMut(&str, &str) -> Result<Vec<u8>, String>,
    encoded: &mut Vec<u8>,
) -> Result<(), String> {
    let values: Vec<Vec<Vec<u8>>> = spec
        .changes
        .iter()
        .map(|c| c.values.iter().map(|v| mark("changes.values", v)).collect())
        .collect::<Result<_, _>>()?;
    let value_refs: Vec<Vec<&[u8]>> = values
        .iter()
        .map(|vs| vs.iter().map(Vec::as_slice).collect())
        .collect();
    let changes: Vec<Change<'_>> = spec
        .changes
        .iter()
        .zip(&value_refs)
        .map(|(c, vs)| Change {
            operation: match c.kind {
                ChangeKind::Add => ModifyOperation::Add,
                ChangeKind::Delete => ModifyOperation::Delete,
                ChangeKind::Replace => ModifyOperation::Replace,
                ChangeKind::Increment => ModifyOperation::Increment,
            },
            modification: PartialAttribute {
                ty: c.attribute.as_bytes(),
                values: Seq::from_items(vs),
            },
        })
        .collect();
    LdapMessage {
        message_id: 0,
        op: ProtocolOp::ModifyRequest(ModifyRequest {
            dn,
            changes: Seq::from_items(&changes),
        }),
        controls: Seq::<Control<'_>>::empty(),
    }
    .encode(encoded);
    Ok(())
}
