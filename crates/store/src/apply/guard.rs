//! Guards: a command applies only if its target matches a filter (the
//! assertion control, RFC 4528), or only if its target is unchanged
//! since the command was prepared (`cluster.conflicts = "first-wins"`).
//! Checked before the command's plan, so a failed guard is a refusal
//! like any other.

use meridian_model::ModelError;
use meridian_proto::ResultCode;

use super::Context;
use super::tree::{lookup, no_such};
use crate::StoreError;
use crate::command::Command;

/// Evaluates an assertion against the target of `command`.
pub(super) fn check(
    txn: &heed::RoTxn<'_>,
    ctx: &Context<'_>,
    assertion: &[u8],
    command: &Command,
) -> Result<(), StoreError> {
    let filter = meridian_proto::Filter::from_ber(assertion, meridian_proto::Depth::new(64))
        .map_err(|e| {
            ModelError::new(ResultCode::PROTOCOL_ERROR, format!("assertion filter: {e}"))
        })?;
    let compiled = meridian_model::filter::CompiledFilter::compile(&filter, ctx.schema);
    let target = match command {
        Command::Add { entry, .. } => Some(entry.clone()),
        Command::Guarded { command, .. }
        | Command::ReadBack { command, .. }
        | Command::Unchanged { command, .. } => {
            return check(txn, ctx, assertion, command);
        }
        // No single target entry: the assertion does not apply.
        other => match other.target() {
            Some(dn) => match lookup(txn, ctx.dbs, dn)? {
                Some(id) => Some(ctx.load(txn, id, Some(dn))?),
                None => return Err(no_such(txn, ctx.dbs, dn)),
            },
            None => None,
        },
    };
    match target {
        Some(entry) if compiled.matches(&entry, ctx.schema) => Ok(()),
        Some(_) => Err(ModelError::new(
            ResultCode::ASSERTION_FAILED,
            "the assertion control's filter is not TRUE for the entry",
        )
        .into()),
        None => Ok(()),
    }
}

/// Refuses `command` if its target's entryCSN is no longer `seen`: a
/// write to the entry was committed after this one was prepared, and
/// first-wins keeps that one.
pub(super) fn unchanged(
    txn: &heed::RoTxn<'_>,
    ctx: &Context<'_>,
    seen: &[u8],
    command: &Command,
) -> Result<(), StoreError> {
    let Some(dn) = command.target() else {
        return Ok(());
    };
    let Some(id) = lookup(txn, ctx.dbs, dn)? else {
        return Err(no_such(txn, ctx.dbs, dn));
    };
    let now = match ctx.schema.entry_csn_attr() {
        Some(csn) => ctx.first_value(txn, id, csn)?,
        None => None,
    };
    let now = now.as_deref();
    if now == Some(seen) {
        return Ok(());
    }
    Err(ModelError::new(
        ResultCode::ASSERTION_FAILED,
        format!(
            "conflict: {} was changed by another write (entryCSN {}) committed after this one was prepared (entryCSN {}); cluster.conflicts is first-wins, so the first write stands: read the entry again and retry",
            dn.original(),
            String::from_utf8_lossy(now.unwrap_or_default()),
            String::from_utf8_lossy(seen)
        ),
    )
    .into())
}
