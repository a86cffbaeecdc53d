//! Applying one command inside the batch's write transaction.
//!
//! Every command kind has its own file, in the same shape: a *plan* that
//! reads only and decides every refusal of the command, then the
//! *writes*. [`apply`] is the one entry point, and the one place that
//! decides what a failure means for the batch ([`Applied`]): an error of
//! the plan is a refusal, which leaves the transaction as it was, so the
//! batch's other commands commit without it; an error of the writes
//! spoils the transaction, which the writer gives up
//! (`writer::commit_commands`).
//!
//! Why not a nested transaction per command: each copies again every
//! page its parent has already made dirty, down to the leaf (a fifth of
//! the writer's time under a stream of modifies), and LMDB has none with
//! a writable map (`MDB_WRITEMAP`, see `docs/design/storage.md`).
//!
//! | file | command |
//! |---|---|
//! | [`add`], [`add::bulk`] | `Add`, `AddMany` (bulk loads, each entry refused alone) |
//! | [`modify`] (with [`modify::splice`], [`modify::dn_ids`]) | `Modify` |
//! | [`rename`] | `ModifyDn` |
//! | [`delete`] | `Delete`, `DeleteSubtree` |
//! | [`index_build`] | `RebuildIndexes`, `BuildIndexes` |
//! | [`guard`], [`read_back`] | `Guarded`, `ReadBack` (wrap another command) |
//! | here, [`transaction`] | `Transaction` (several commands, all or none) |
//! | [`tree`] | reads and writes every command shares |
//! | [`context`] | what a command reads besides the transaction |

pub(crate) mod add;
mod context;
mod delete;
mod guard;
mod index_build;
mod integrity;
pub(crate) mod modify;
mod read_back;
mod rename;
#[cfg(test)]
mod test_support;
pub(crate) mod tree;

use heed::RwTxn;

pub(crate) use crate::dn_ids::DnIds;
pub(crate) use context::{Attempt, Context};
pub(crate) use tree::ROOT_ID;

use crate::StoreError;
use crate::command::{Command, Effect};

/// The meta key present while a bulk load is in progress or after one
/// failed: its value says which load.
pub(crate) const LOAD_INCOMPLETE: &[u8] = b"load_incomplete";

/// What applying one command in the batch's transaction did.
#[derive(Debug)]
pub(crate) enum Applied {
    /// It succeeded: its writes are in the transaction.
    Done(Effect),
    /// It was refused before its first write: the transaction is as it
    /// was, and the batch's other commands commit as if it had never
    /// been applied.
    Refused(StoreError),
    /// It failed after it may have begun to write: part of it may be in
    /// the transaction, which must be given up.
    Spoiled(StoreError),
}

impl Applied {
    /// A command whose plan failed with `e`: refused, unless the engine
    /// itself failed, which may have left the transaction unusable (LMDB
    /// marks a transaction in error after a failed operation).
    pub(super) fn refused(e: StoreError) -> Applied {
        match e.is_engine_failure() {
            true => Applied::Spoiled(e),
            false => Applied::Refused(e),
        }
    }

    /// A command whose plan passed, with what its writes gave.
    pub(super) fn written(result: Result<Effect, StoreError>) -> Applied {
        match result {
            Ok(effect) => Applied::Done(effect),
            Err(e) => Applied::Spoiled(e),
        }
    }
}

/// Applies `command` in the batch's transaction: its plan, then, if the
/// plan passed, its writes.
pub(crate) fn apply(txn: &mut RwTxn<'_>, ctx: &Context<'_>, command: &Command) -> Applied {
    match command {
        Command::Add { entry, prechecked } => {
            let planned = integrity::check_unique(txn, ctx, entry, None).and_then(|()| {
                let mut adds = add::Adds::start(txn, ctx.dbs)?;
                let claimed = add::plan(txn, ctx, entry, !prechecked, &mut adds)?;
                Ok((claimed, adds))
            });
            match planned {
                Err(refusal) => Applied::refused(refusal),
                Ok((claimed, adds)) => Applied::written(
                    add::write(txn, ctx, entry, claimed, adds)
                        .and_then(|effect| integrity::added(txn, ctx, entry).map(|()| effect)),
                ),
            }
        }
        // Each entry is planned and refused alone, inside the command.
        Command::AddMany {
            entries,
            prechecked,
        } => Applied::written(add::bulk::add_many(txn, ctx, entries, *prechecked)),
        // Planned and written in one function, sharing a cursor.
        Command::Modify {
            dn,
            changes,
            operational,
            permissive,
        } => {
            if integrity::touches_unique(ctx, changes) {
                let checked =
                    integrity::after_changes(txn, ctx, dn, changes).and_then(|after| match after {
                        Some((entry, id)) => integrity::check_unique(txn, ctx, &entry, Some(id)),
                        None => Ok(()),
                    });
                if let Err(refusal) = checked {
                    return Applied::refused(refusal);
                }
            }
            integrity::modify(txn, ctx, dn, changes, operational, *permissive)
        }
        Command::ModifyDn {
            dn,
            new_rdn,
            delete_old_rdn,
            new_superior,
            operational,
        } => {
            let new_superior = new_superior.as_deref();
            let plan = rename::plan(
                txn,
                ctx,
                dn,
                new_rdn,
                *delete_old_rdn,
                new_superior,
                operational,
            );
            match plan {
                Err(refusal) => Applied::refused(refusal),
                Ok(plan) => Applied::written(rename::write(txn, ctx, dn, plan)),
            }
        }
        Command::Delete { dn } => match delete::plan(txn, ctx.dbs, dn) {
            Err(refusal) => Applied::refused(refusal),
            Ok(id) => Applied::written(delete::write(txn, ctx, id)),
        },
        Command::DeleteSubtree { dn } => match delete::plan_subtree(txn, ctx.dbs, dn) {
            Err(refusal) => Applied::refused(refusal),
            Ok(members) => Applied::written(delete::write_subtree(txn, ctx, members)),
        },
        Command::Guarded { assertion, command } => {
            match guard::check(txn, ctx, assertion, command) {
                Err(refusal) => Applied::refused(refusal),
                Ok(()) => apply(txn, ctx, command),
            }
        }
        Command::Unchanged { seen, command } => match guard::unchanged(txn, ctx, seen, command) {
            Err(refusal) => Applied::refused(refusal),
            Ok(()) => apply(txn, ctx, command),
        },
        Command::ReadBack { pre, post, command } => {
            match read_back::before(txn, ctx, *pre, command) {
                Err(refusal) => Applied::refused(refusal),
                Ok(before) => match apply(txn, ctx, command) {
                    Applied::Done(effect) => {
                        Applied::written(read_back::after(txn, ctx, before, *post, effect))
                    }
                    not_done => not_done,
                },
            }
        }
        // Maintenance: nothing to refuse, only writes.
        Command::RebuildIndexes => Applied::written(index_build::rebuild(txn, ctx)),
        Command::BuildIndexes {
            from,
            to,
            types,
            complete,
        } => Applied::written(index_build::build_step(
            txn,
            ctx,
            *from..*to,
            types,
            *complete,
        )),
        Command::SetLoadState(state) => Applied::written(set_load_state(txn, ctx, state)),
        Command::Transaction { commands } => transaction(txn, ctx, commands),
    }
}

/// Applies a transaction's updates in order, all or none: a refusal of
/// the first leaves the transaction as it was (refused); a refusal of a
/// later one comes after the earlier ones' writes, so it spoils the
/// transaction and the writer commits the batch's other commands
/// without this one (`writer::commit_commands`). A full map is passed up
/// as it is, for the writer to grow the map and try again.
fn transaction(txn: &mut RwTxn<'_>, ctx: &Context<'_>, commands: &[Command]) -> Applied {
    let failed = |at: usize, error: StoreError| StoreError::InTransaction {
        at,
        error: Box::new(error),
    };
    let mut effects = Vec::with_capacity(commands.len());
    for (at, command) in commands.iter().enumerate() {
        if matches!(command, Command::Transaction { .. }) {
            return Applied::refused(failed(
                at,
                StoreError::internal("a transaction inside a transaction"),
            ));
        }
        // As the writer does between commands: an add's index keys may
        // wait, anything else may read them.
        if !command.is_add()
            && let Err(e) = ctx.write_pending_index(txn)
        {
            return Applied::Spoiled(e);
        }
        match apply(txn, ctx, command) {
            Applied::Done(effect) => effects.push(effect),
            Applied::Refused(refusal) if at == 0 => return Applied::Refused(failed(at, refusal)),
            Applied::Spoiled(StoreError::MapFull) => return Applied::Spoiled(StoreError::MapFull),
            Applied::Refused(error) | Applied::Spoiled(error) => {
                return Applied::Spoiled(failed(at, error));
            }
        }
    }
    Applied::Done(Effect::Transaction(effects))
}

/// Records that a bulk load is under way (`Some`, saying which) or over.
fn set_load_state(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    state: &Option<String>,
) -> Result<Effect, StoreError> {
    match state {
        Some(what) => ctx.dbs.meta.put(txn, LOAD_INCOMPLETE, what.as_bytes())?,
        None => {
            ctx.dbs.meta.delete(txn, LOAD_INCOMPLETE)?;
        }
    }
    Ok(Effect::LoadStateSet)
}
