//! The changes of a followed server after its first refresh, applied in
//! groups: every change already read (up to [`GROUP`]) at once. What
//! Meridian holds of them is found with one search (their entryUUIDs in
//! one filter), the writes they need are planned in the order the
//! changes came (a later change of an entry planned against what the
//! earlier one made of it), then sent together and their results read
//! together: two round trips for the group instead of two per change.
//! Meridian applies one connection's writes in the order they were sent.

use std::collections::HashMap;
use std::path::Path;

use anyhow::bail;
use meridian_proto::message::{Change as Modification, ModifyDnRequest, ModifyOperation};
use meridian_proto::message::{ModifyRequest, PartialAttribute};
use meridian_proto::{Ava, Filter, LdapMessage, ProtocolOp, ResultCode, Scope, Seq};

use super::{Copy, KEPT_OPERATIONAL, differences, encode_add, relax, same_dn, save_cookie};
use super::{split_dn, uuid_text};
use crate::ldap_client::{OwnedEntry, Refused};

/// Most changes applied in one group.
pub(super) const GROUP: usize = 500;

/// Most entryUUIDs named in one search's filter.
const UUIDS_PER_SEARCH: usize = 100;

/// One change as the source sent it.
pub(super) struct Change {
    pub(super) uuid: [u8; 16],
    /// The entry as it is now; `None`: deleted.
    pub(super) entry: Option<OwnedEntry>,
    /// The cookie that came with it.
    pub(super) cookie: Option<Vec<u8>>,
}

/// One write to Meridian.
pub(super) enum Op {
    Add([u8; 16], OwnedEntry),
    Rename {
        from: String,
        to: String,
    },
    Modify {
        dn: String,
        changes: Vec<(String, Vec<Vec<u8>>)>,
    },
    Delete(String),
}

/// The writes that make `existing` into `wanted`: a rename if it moved,
/// then a modify of what differs.
pub(super) fn plan_update(existing: &OwnedEntry, wanted: &OwnedEntry, ops: &mut Vec<Op>) {
    if !same_dn(&existing.dn, &wanted.dn) {
        ops.push(Op::Rename {
            from: existing.dn.clone(),
            to: wanted.dn.clone(),
        });
    }
    let changes = differences(existing, wanted);
    if !changes.is_empty() {
        ops.push(Op::Modify {
            dn: wanted.dn.clone(),
            changes,
        });
    }
}

/// Appends `op` as message `id`.
fn encode_op(op: &Op, id: i32, buf: &mut Vec<u8>) {
    match op {
        Op::Add(_, entry) => encode_add(entry, id, buf),
        Op::Rename { from, to } => {
            let (rdn, superior) = split_dn(to);
            LdapMessage {
                message_id: id,
                op: ProtocolOp::ModifyDnRequest(ModifyDnRequest {
                    dn: from.as_bytes(),
                    new_rdn: rdn.as_bytes(),
                    delete_old_rdn: true,
                    new_superior: Some(superior.as_bytes()),
                }),
                controls: Seq::empty(),
            }
            .encode(buf);
        }
        Op::Modify { dn, changes } => {
            let values: Vec<Vec<&[u8]>> = changes
                .iter()
                .map(|(_, v)| v.iter().map(Vec::as_slice).collect())
                .collect();
            let modifications: Vec<Modification<'_>> = changes
                .iter()
                .zip(&values)
                .map(|((name, _), values)| Modification {
                    operation: ModifyOperation::Replace,
                    modification: PartialAttribute {
                        ty: name.as_bytes(),
                        values: Seq::from_items(values),
                    },
                })
                .collect();
            let controls = relax();
            LdapMessage {
                message_id: id,
                op: ProtocolOp::ModifyRequest(ModifyRequest {
                    dn: dn.as_bytes(),
                    changes: Seq::from_items(&modifications),
                }),
                controls: Seq::from_items(&controls),
            }
            .encode(buf);
        }
        Op::Delete(dn) => LdapMessage {
            message_id: id,
            op: ProtocolOp::DelRequest(dn.as_bytes()),
            controls: Seq::empty(),
        }
        .encode(buf),
    }
}

impl Copy {
    /// Applies the changes gathered, then saves the last cookie among
    /// them: what it covers is applied.
    pub(super) async fn apply_group(&mut self, state: &Path) -> anyhow::Result<()> {
        let group = std::mem::take(&mut self.group);
        if group.is_empty() {
            return Ok(());
        }
        let mut uuids: Vec<[u8; 16]> = group.iter().map(|c| c.uuid).collect();
        uuids.sort_unstable();
        uuids.dedup();
        let mut current = self.find_many(&uuids).await?;
        let mut ops = Vec::new();
        for change in &group {
            match (&change.entry, current.get(&change.uuid)) {
                (Some(wanted), Some(existing)) => plan_update(existing, wanted, &mut ops),
                (Some(wanted), None) => ops.push(Op::Add(change.uuid, wanted.clone())),
                (None, Some(existing)) => ops.push(Op::Delete(existing.dn.clone())),
                (None, None) => {}
            }
            match &change.entry {
                Some(wanted) => current.insert(change.uuid, wanted.clone()),
                None => current.remove(&change.uuid),
            };
        }
        self.send_ops(ops).await?;
        if let Some(cookie) = group.iter().rev().find_map(|c| c.cookie.as_deref()) {
            save_cookie(state, Some(cookie))?;
        }
        Ok(())
    }

    /// Sends `ops` together and deals with their results: an add whose
    /// parent is not there waits for it, one whose DN is taken is made
    /// the same the slow way, a delete of what is gone is done.
    pub(super) async fn send_ops(&mut self, ops: Vec<Op>) -> anyhow::Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        let results = self.target.call_many(&ops, encode_op).await?;
        let mut added = false;
        for (op, (code, message)) in ops.into_iter().zip(results) {
            match (op, code) {
                (Op::Add(..), ResultCode::SUCCESS) => added = true,
                (_, ResultCode::SUCCESS) | (Op::Delete(_), ResultCode::NO_SUCH_OBJECT) => {}
                (Op::Add(uuid, entry), ResultCode::NO_SUCH_OBJECT) => {
                    self.waiting.push((uuid, entry));
                }
                (Op::Add(uuid, entry), ResultCode::ENTRY_ALREADY_EXISTS) => {
                    self.delete_dn(&entry.dn).await?;
                    Box::pin(self.add(&uuid, entry)).await?;
                }
                (Op::Delete(dn), ResultCode::NOT_ALLOWED_ON_NON_LEAF) => {
                    self.delete_dn(&dn).await?;
                }
                (Op::Add(_, entry), code) => {
                    bail!("adding {} to Meridian: {code:?}: {message}", entry.dn)
                }
                (Op::Rename { from, to }, code) => {
                    bail!("renaming {from} to {to} in Meridian: {code:?}: {message}")
                }
                (Op::Modify { dn, .. }, code) => {
                    bail!("modifying {dn} in Meridian: {code:?}: {message}")
                }
                (Op::Delete(dn), code) => bail!("deleting {dn} in Meridian: {code:?}: {message}"),
            }
        }
        if added {
            self.settle_waiting().await?;
        }
        Ok(())
    }

    /// The entries Meridian holds with these entryUUIDs, by UUID.
    async fn find_many(
        &mut self,
        uuids: &[[u8; 16]],
    ) -> anyhow::Result<HashMap<[u8; 16], OwnedEntry>> {
        let mut found = HashMap::new();
        let mut attributes: Vec<&[u8]> = vec![b"*"];
        attributes.extend(KEPT_OPERATIONAL.iter().map(|a| a.as_bytes()));
        let base = self.base.clone();
        for chunk in uuids.chunks(UUIDS_PER_SEARCH) {
            let texts: Vec<String> = chunk.iter().map(uuid_text).collect();
            let items: Vec<Filter<'_>> = texts
                .iter()
                .map(|text| {
                    Filter::Equality(Ava {
                        attr: b"entryUUID",
                        value: text.as_bytes(),
                    })
                })
                .collect();
            let filter = Filter::Or(Seq::from_items(&items));
            let searched = self
                .target
                .search_each(&base, Scope::Subtree, filter, &attributes, |entry| {
                    let uuid = entry
                        .values("entryUUID")
                        .and_then(|v| v.first())
                        .and_then(|v| meridian_store::feed::uuid_octets(v));
                    if let Some(uuid) = uuid {
                        found.insert(uuid, entry);
                    }
                    Ok(())
                })
                .await;
            match searched {
                Err(e) if Refused::is(&e, ResultCode::NO_SUCH_OBJECT) => {}
                other => other?,
            }
        }
        Ok(found)
    }
}
