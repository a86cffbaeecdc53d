//! The pre- and post-read controls (RFC 4527): a command applied with its
//! target read before and/or after, in the same transaction. The read
//! before is part of the command's plan; the read after follows its
//! writes.

use heed::RwTxn;
use meridian_model::entry::Entry;

use super::Context;
use super::tree::lookup;
use crate::StoreError;
use crate::command::{Command, Effect};
use crate::keys::EntryId;

/// The target as it was, read before the command is planned.
pub(super) struct Before {
    /// The target's ID, if it exists: the entry keeps it through a
    /// rename, so "after" is found by it.
    id: Option<EntryId>,
    /// The target itself, when a pre-read was asked for.
    entry: Option<Box<Entry>>,
}

/// Reads the target of `command` (the entry itself only when `pre`).
pub(super) fn before(
    txn: &heed::RoTxn<'_>,
    ctx: &Context<'_>,
    pre: bool,
    command: &Command,
) -> Result<Before, StoreError> {
    let target = command.target();
    let id = match target {
        Some(dn) => lookup(txn, ctx.dbs, dn)?,
        None => None,
    };
    let entry = match (pre, id) {
        (true, Some(id)) => Some(Box::new(ctx.load(txn, id, target)?)),
        _ => None,
    };
    Ok(Before { id, entry })
}

/// The command's effect with the target read after it (when `post`) by
/// the ID it had before, or the one an add gave it.
pub(super) fn after(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    before: Before,
    post: bool,
    effect: Effect,
) -> Result<Effect, StoreError> {
    let id = match effect {
        Effect::Added(added) => Some(added),
        Effect::Deleted | Effect::DeletedSubtree(_) => None,
        _ => before.id,
    };
    let after = match (post, id) {
        (true, Some(id)) => Some(Box::new(ctx.load(txn, id, None)?)),
        _ => None,
    };
    Ok(Effect::ReadBack {
        effect: Box::new(effect),
        pre: before.entry,
        post: after,
    })
}
