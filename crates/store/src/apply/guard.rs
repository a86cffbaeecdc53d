//! The assertion control's guard (RFC 4528): a command applies only if
//! its target matches a filter. Checked before the command's plan, so a
//! failed assertion is a refusal like any other.

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
        Command::Guarded { command, .. } | Command::ReadBack { command, .. } => {
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
