//! What the writer keeps true between entries that name each other, in
//! the transaction of the write that calls for it (`[groups]`, resolved
//! in `crate::integrity`): so a reader never sees a group without its
//! members' memberOf, and every replica of a cluster, applying the same
//! log, keeps the same.
//!
//! - **memberOf**: adding a group, or members to one, adds the group's DN
//!   to each member's memberOf; removing members or the group removes
//!   it; renaming the group rewrites it. An entry added after a group
//!   that already names it gets its memberOf at once (slapd's overlay
//!   leaves it without: a deliberate difference).
//! - **Referential integrity**: deleting an entry deletes the values that
//!   name it in the refint types of every entry; renaming one (and the
//!   entries below it) rewrites them. A value whose removal the schema
//!   refuses (a group's last `member`, which `groupOfNames` requires) is
//!   left, as slapd's refint leaves it without `refint_nothing`.
//! - **Unique values**: an add or modify that would give a unique type a
//!   value another entry in the same subtree has is refused with
//!   constraintViolation (19) before it writes anything.
//!
//! The other entries are changed by internal modifies (`modify.rs`) that
//! add or delete values permissively: a member that does not exist (yet,
//! or in this database: members in another naming context are not
//! followed) is passed over, as is a change the schema refuses; a
//! failure of the engine fails the whole write. These modifies leave the
//! changed entries' modifiersName, modifyTimestamp and entryCSN as they
//! were: memberOf and the references are the server's bookkeeping, not a
//! client's change, and a first-wins cluster must not count them as a
//! conflicting write.

use heed::RwTxn;
use meridian_model::ModelError;
use meridian_model::dn::Dn;
use meridian_model::entry::Entry;
use meridian_model::modify::{ModOp, Modification};
use meridian_model::schema::AttrId;
use meridian_proto::ResultCode;

use super::tree::lookup;
use super::{Applied, Context, modify};
use crate::StoreError;
use crate::command::OperationalAttribute;
use crate::integrity::dn_of;
use crate::keys::{self, EntryId};

/// The entries whose `attr` has a value equal to `value` (for a DN
/// type: naming the same entry): by the equality index when it is built,
/// else by reading every entry (a configuration without the index, or
/// while it is built).
fn holders(
    txn: &RwTxn<'_>,
    ctx: &Context<'_>,
    attr: AttrId,
    value: &[u8],
) -> Result<Vec<EntryId>, StoreError> {
    if let Some(prefix) = ctx.indexes.eq_prefix_of(attr, value, ctx.schema) {
        let mut ids = Vec::new();
        for item in ctx.dbs.index.prefix_iter(txn, &prefix)? {
            let (key, _) = item?;
            if key.len() == prefix.len() + 8
                && let Some(id) = key.get(prefix.len()..).and_then(keys::id_from)
            {
                ids.push(id);
            }
        }
        return Ok(ids);
    }
    let mut ids = Vec::new();
    for item in ctx.dbs.id2entry.iter(txn)? {
        let (key, bytes) = item?;
        let entry = ctx.decode(txn, bytes)?;
        if entry
            .get(attr)
            .is_some_and(|values| values.has_value(value, ctx.schema))
            && let Some(id) = keys::id_from(key)
        {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// Changes another entry for the server: `Ok` also when the change is
/// refused (the entry is missing, the schema says no), which leaves the
/// transaction as it was.
fn modify_other(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    dn: &Dn,
    changes: &[Modification],
) -> Result<(), StoreError> {
    match modify(txn, ctx, dn, changes, &[], true) {
        Applied::Done(_) => Ok(()),
        Applied::Refused(e) => {
            tracing::debug!(dn = %dn.original(), "integrity: a change passed over: {e}");
            Ok(())
        }
        Applied::Spoiled(e) => Err(e),
    }
}

fn memberof_change(op: ModOp, attr: &str, group: &Dn) -> Modification {
    Modification {
        op,
        attr: attr.to_owned(),
        values: vec![group.original().as_bytes().to_vec()],
    }
}

/// A modify, with what it changes about groups kept: the one way every
/// modify goes, a client's and the server's own.
pub(super) fn modify(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    dn: &Dn,
    changes: &[Modification],
    operational: &[OperationalAttribute],
    permissive: bool,
) -> Applied {
    let Some(rules) = &ctx.integrity.memberof else {
        return modify::apply(txn, ctx, dn, changes, operational, permissive);
    };
    // Only a change of a member type or of the classes can change what
    // the entry says about groups: any other modify costs nothing more.
    let (members, classes) = (&rules.member_spellings, &rules.class_spellings);
    if !changes
        .iter()
        .any(|change| members.spells(&change.attr) || classes.spells(&change.attr))
    {
        return modify::apply(txn, ctx, dn, changes, operational, permissive);
    }
    // Values added to or deleted from member types, nothing else about
    // groups: those values are the members that come and go, and the
    // group's other members (ten thousand, in a big group) are not read.
    let by_values = changes.iter().all(|change| {
        !classes.spells(&change.attr)
            && (!members.spells(&change.attr)
                || (matches!(change.op, ModOp::Add | ModOp::Delete) && !change.values.is_empty()))
    });
    if by_values {
        let applied = modify::apply(txn, ctx, dn, changes, operational, permissive);
        let Applied::Done(effect) = applied else {
            return applied;
        };
        let kept = is_group_at(txn, ctx, rules, dn).and_then(|is_group| {
            if !is_group {
                return Ok(effect);
            }
            for change in changes.iter().filter(|c| members.spells(&c.attr)) {
                for value in &change.values {
                    if let Some(member) = dn_of(value, ctx.schema) {
                        let memberof = memberof_change(change.op, &rules.attr_name, dn);
                        modify_other(txn, ctx, &member, &[memberof])?;
                    }
                }
            }
            Ok(effect)
        });
        return Applied::written(kept);
    }
    let before = match group_view(txn, ctx, dn) {
        Ok(before) => before,
        Err(e) => return Applied::refused(e),
    };
    let applied = modify::apply(txn, ctx, dn, changes, operational, permissive);
    let Applied::Done(effect) = applied else {
        return applied;
    };
    let kept = group_view(txn, ctx, dn).and_then(|after| {
        let (before_set, after_set) = (normalized(&before), normalized(&after));
        let removed = before
            .iter()
            .filter(|m| !after_set.contains(m.normalized()));
        for member in removed {
            let change = memberof_change(ModOp::Delete, &rules.attr_name, dn);
            modify_other(txn, ctx, member, &[change])?;
        }
        let added = after
            .iter()
            .filter(|m| !before_set.contains(m.normalized()));
        for member in added {
            let change = memberof_change(ModOp::Add, &rules.attr_name, dn);
            modify_other(txn, ctx, member, &[change])?;
        }
        Ok(effect)
    });
    Applied::written(kept)
}

/// The normalised forms of `dns`, to look members up in.
fn normalized(dns: &[Dn]) -> std::collections::HashSet<&str> {
    dns.iter().map(Dn::normalized).collect()
}

/// The entry at `dn`, if it is there.
fn entry_at(txn: &RwTxn<'_>, ctx: &Context<'_>, dn: &Dn) -> Result<Option<Entry>, StoreError> {
    lookup(txn, ctx.dbs, dn)?
        .map(|id| ctx.load(txn, id, Some(dn)))
        .transpose()
}

/// Whether the entry at `dn` is a group, told by its classes alone (its
/// members are not decoded).
fn is_group_at(
    txn: &RwTxn<'_>,
    ctx: &Context<'_>,
    rules: &crate::integrity::MemberOf,
    dn: &Dn,
) -> Result<bool, StoreError> {
    let (Some(id), Some(object_class)) =
        (lookup(txn, ctx.dbs, dn)?, ctx.schema.object_class_attr())
    else {
        return Ok(false);
    };
    let classes = ctx.values_of(txn, id, object_class)?;
    Ok(rules.names_a_group_class(&classes, ctx.schema))
}

/// The members the entry at `dn` names as a group (none if it is not
/// one, or not there).
fn group_view(txn: &RwTxn<'_>, ctx: &Context<'_>, dn: &Dn) -> Result<Vec<Dn>, StoreError> {
    let (Some(rules), Some(entry)) = (&ctx.integrity.memberof, entry_at(txn, ctx, dn)?) else {
        return Ok(Vec::new());
    };
    Ok(if rules.is_group(&entry, ctx.schema) {
        rules.members(&entry, ctx.schema)
    } else {
        Vec::new()
    })
}

/// After `entry` was added: a group's members get its DN in memberOf,
/// and the entry gets the DNs of the groups that already name it.
pub(in crate::apply) fn added(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    entry: &Entry,
) -> Result<(), StoreError> {
    let Some(rules) = &ctx.integrity.memberof else {
        return Ok(());
    };
    if rules.is_group(entry, ctx.schema) {
        // Its member keys wait with the adds' others: a member added
        // later in this batch must find them.
        ctx.groups_pending.set(true);
        for member in rules.members(entry, ctx.schema) {
            let change = memberof_change(ModOp::Add, &rules.attr_name, &entry.dn);
            modify_other(txn, ctx, &member, &[change])?;
        }
    }
    if ctx.groups_pending.get() {
        ctx.write_pending_index(txn)?;
    }
    let mut groups: Vec<Dn> = Vec::new();
    for attr in &rules.members {
        // By the index only: without one, every add would read every
        // entry (a bulk load, quadratic). The entry then gets its
        // memberOf when the group next changes, as under slapd.
        if !ctx.indexes.has(*attr, meridian_config::IndexKind::Eq) {
            continue;
        }
        for id in holders(txn, ctx, *attr, entry.dn.original().as_bytes())? {
            let group = ctx.load(txn, id, None)?;
            if rules.is_group(&group, ctx.schema) && !groups.iter().any(|g| g.same_entry(&group.dn))
            {
                groups.push(group.dn);
            }
        }
    }
    if groups.is_empty() {
        return Ok(());
    }
    let change = Modification {
        op: ModOp::Add,
        attr: rules.attr_name.clone(),
        values: groups
            .iter()
            .map(|g| g.original().as_bytes().to_vec())
            .collect(),
    };
    modify_other(txn, ctx, &entry.dn, &[change])
}

/// After `entry` was deleted: a group's members lose its DN from
/// memberOf, and the values that name it in the refint types go.
pub(super) fn deleted(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    entry: &Entry,
) -> Result<(), StoreError> {
    if let Some(rules) = &ctx.integrity.memberof
        && rules.is_group(entry, ctx.schema)
    {
        for member in rules.members(entry, ctx.schema) {
            let change = memberof_change(ModOp::Delete, &rules.attr_name, &entry.dn);
            modify_other(txn, ctx, &member, &[change])?;
        }
    }
    for (attr, name) in &ctx.integrity.refint {
        for id in holders(txn, ctx, *attr, entry.dn.original().as_bytes())? {
            let holder = ctx.load(txn, id, None)?;
            let naming = values_naming(&holder, *attr, &entry.dn, ctx);
            if naming.is_empty() {
                continue;
            }
            let change = Modification {
                op: ModOp::Delete,
                attr: name.clone(),
                values: naming,
            };
            modify_other(txn, ctx, &holder.dn, &[change])?;
        }
    }
    Ok(())
}

/// The values of `attr` in `entry` that name `target`, as stored.
fn values_naming(entry: &Entry, attr: AttrId, target: &Dn, ctx: &Context<'_>) -> Vec<Vec<u8>> {
    entry.get(attr).map_or_else(Vec::new, |values| {
        values
            .values
            .iter()
            .filter(|value| dn_of(value, ctx.schema).is_some_and(|dn| dn.same_entry(target)))
            .cloned()
            .collect()
    })
}

/// After entries moved (a rename: the entry and those below it, each
/// `(old DN, new DN)`): the values naming their old DNs in the refint
/// types name the new ones, then each moved group's members get its new
/// DN in memberOf in place of the old.
pub(super) fn renamed(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    moves: &[(Dn, Dn)],
) -> Result<(), StoreError> {
    if ctx.integrity.memberof.is_none() && ctx.integrity.refint.is_empty() {
        return Ok(());
    }
    for (old, new) in moves {
        for (attr, name) in &ctx.integrity.refint {
            for id in holders(txn, ctx, *attr, old.original().as_bytes())? {
                let holder = ctx.load(txn, id, None)?;
                let naming = values_naming(&holder, *attr, old, ctx);
                if naming.is_empty() {
                    continue;
                }
                // A Name and Optional UID value keeps its UID.
                let renamed = naming
                    .iter()
                    .map(|value| {
                        let uid = value
                            .iter()
                            .rposition(|b| *b == b'#')
                            .filter(|_| Dn::parse(value, ctx.schema).is_err())
                            .and_then(|at| value.get(at..))
                            .unwrap_or_default();
                        [new.original().as_bytes(), uid].concat()
                    })
                    .collect();
                let changes = [
                    Modification {
                        op: ModOp::Delete,
                        attr: name.clone(),
                        values: naming,
                    },
                    Modification {
                        op: ModOp::Add,
                        attr: name.clone(),
                        values: renamed,
                    },
                ];
                modify_other(txn, ctx, &holder.dn, &changes)?;
            }
        }
    }
    let Some(rules) = &ctx.integrity.memberof else {
        return Ok(());
    };
    for (old, new) in moves {
        for member in group_view(txn, ctx, new)? {
            let changes = [
                memberof_change(ModOp::Delete, &rules.attr_name, old),
                memberof_change(ModOp::Add, &rules.attr_name, new),
            ];
            modify_other(txn, ctx, &member, &changes)?;
        }
    }
    Ok(())
}

/// Refuses `entry` (at `id` when it exists already) if it would give a
/// unique type a value another entry in the same subtree has.
pub(super) fn check_unique(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    entry: &Entry,
    id: Option<EntryId>,
) -> Result<(), StoreError> {
    let integrity = ctx.integrity;
    if integrity.unique.is_empty() {
        return Ok(());
    }
    let within: Vec<&Dn> = if integrity.unique_subtrees.is_empty() {
        ctx.suffixes.iter().collect()
    } else {
        integrity
            .unique_subtrees
            .iter()
            .filter(|subtree| entry.dn.is_within(subtree))
            .collect()
    };
    if !within.iter().any(|subtree| entry.dn.is_within(subtree)) {
        return Ok(());
    }
    // The adds before it in this batch must be seen.
    ctx.write_pending_index(txn)?;
    for (attr, name) in &integrity.unique {
        let Some(values) = entry.get(*attr) else {
            continue;
        };
        for value in &values.values {
            for other in holders(txn, ctx, *attr, value)? {
                if Some(other) == id {
                    continue;
                }
                let other = ctx.load(txn, other, None)?;
                let clash = within.iter().any(|subtree| other.dn.is_within(subtree));
                if clash {
                    return Err(StoreError::Model(ModelError::new(
                        ResultCode::CONSTRAINT_VIOLATION,
                        format!(
                            "{name}: the value {:?} is another entry's, and groups.unique_attributes keeps it unique",
                            String::from_utf8_lossy(value)
                        ),
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Whether a modify by `changes` may give a unique type a value: only
/// then is the entry checked.
pub(super) fn touches_unique(ctx: &Context<'_>, changes: &[Modification]) -> bool {
    let spellings = &ctx.integrity.unique_spellings;
    !spellings.is_empty()
        && changes
            .iter()
            .any(|change| change.op != ModOp::Delete && spellings.spells(&change.attr))
}

/// The entry `dn` would be after `changes`, for [`check_unique`], with
/// its ID; `None` when it is not there (the modify will say so).
pub(super) fn after_changes(
    txn: &RwTxn<'_>,
    ctx: &Context<'_>,
    dn: &Dn,
    changes: &[Modification],
) -> Result<Option<(Entry, EntryId)>, StoreError> {
    let Some(id) = lookup(txn, ctx.dbs, dn)? else {
        return Ok(None);
    };
    let entry = ctx.load(txn, id, Some(dn))?;
    let changes = changes.iter().map(Modification::as_change);
    let changed = meridian_model::modify::apply_changes(entry, changes, ctx.schema, true)?;
    Ok(Some((changed, id)))
}
