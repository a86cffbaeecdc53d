//! Bulk loads: many entries added in one command, each refused alone.
//!
//! A bulk load never fails as a whole for an entry's refusal: each
//! entry's plan decides its refusals before its writes, and a refused
//! entry is reported in the outcome while the rest go on. Only a
//! failure of the engine ends the command.

use heed::{PutFlags, RwTxn};
use meridian_model::entry::Entry;

use super::{Adds, add, new_entry_key, parent_of_new, write_new_entry};
use crate::apply::Context;
use crate::command::Effect;
use crate::keys::{self, EntryId};
use crate::sorted_puts;
use crate::{StoreError, codec};

/// Each entry added as a lone add would be, in order. An entry's plan
/// refuses before it writes, so a refusal leaves the transaction as it
/// was; only engine failures (which may leave it half written) end the
/// command. Prechecked entries (a bulk load's) claim their DNs first
/// ([`claim_dns`]).
pub(in crate::apply) fn add_many(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    entries: &[Entry],
    prechecked: bool,
) -> Result<Effect, StoreError> {
    let mut added = 0;
    let mut failed = Vec::new();
    let mut adds = Adds::start(txn, ctx.dbs)?;
    let mut claims = match prechecked {
        true => {
            adds.claimed = Some(vec![false; entries.len()]);
            claim_dns(txn, ctx, entries, adds.first_id)?
        }
        false => Vec::new(),
    }
    .into_iter();
    for (position, entry) in entries.iter().enumerate() {
        prefetch_ahead(entries, position);
        let result = match claims.next() {
            Some(claim) => add_claimed(txn, ctx, entry, claim, position, &mut adds),
            None => add(txn, ctx, entry, !prechecked, &mut adds),
        };
        match result {
            Ok(_) => added += 1,
            Err(e) if e.is_engine_failure() => return Err(e),
            Err(e) => failed.push((position, e)),
        }
    }
    adds.finish(txn, ctx.dbs)?;
    // Once every record is written: a group's members may come after it
    // in the load (their DNs are claimed before their records exist).
    let mut refused = failed.iter().map(|(position, _)| *position).peekable();
    for (position, entry) in entries.iter().enumerate() {
        if refused.next_if_eq(&position).is_some() {
            continue;
        }
        crate::apply::integrity::added(txn, ctx, entry)?;
    }
    Ok(Effect::AddedMany { added, failed })
}

/// What the first pass of a prechecked bulk add did with one entry's DN.
enum Claim {
    /// Wrote its `dn2id` key, with the entry's ID.
    Claimed(Vec<u8>),
    /// Found the key taken: by an entry stored before the command or by
    /// an earlier entry of the command (which may yet be refused).
    Taken,
    /// Refused it without a write (the root DSE, a DN too long to store).
    Refused(StoreError),
}

/// The first pass of a prechecked bulk add: every entry's `dn2id` key,
/// written with NO_OVERWRITE (the existence check) through one cursor,
/// in the order of the entries. Put one at a time, each key descended
/// the B-tree from the root (a fifth of a bulk load's writer, perf);
/// through one cursor, a key that falls on the leaf the cursor holds
/// (the next sibling of a load numbered in order) is placed from there.
/// Entry `i` gets the ID `first_id + i`: one refused later leaves a gap
/// (IDs only need to grow), and its key is removed ([`add_claimed`]).
fn claim_dns(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    entries: &[Entry],
    first_id: EntryId,
) -> Result<Vec<Claim>, StoreError> {
    let mut claims = Vec::with_capacity(entries.len());
    let mut cursor = ctx.dbs.dn2id.iter_mut(txn)?;
    for (position, entry) in entries.iter().enumerate() {
        let key = match new_entry_key(entry) {
            Ok(key) => key,
            Err(refused) => {
                claims.push(Claim::Refused(refused));
                continue;
            }
        };
        let id = keys::id_key(first_id + position as u64);
        match sorted_puts::put_through(&mut cursor, PutFlags::NO_OVERWRITE, &key, &id) {
            Ok(()) => claims.push(Claim::Claimed(key)),
            Err(heed::Error::Mdb(heed::MdbError::KeyExist)) => claims.push(Claim::Taken),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(claims)
}

/// The second pass of a prechecked bulk add, for the entry at `position`:
/// refusals in the order [`add`] gives them, then the writes. A claimed
/// DN whose entry is refused is removed from `dn2id` again. A DN found
/// taken goes through [`add`], which answers as a lone add would: the
/// entry that took it is stored (entryAlreadyExists), or was an earlier
/// entry of this command since refused (then this one may be added).
fn add_claimed(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    entry: &Entry,
    claim: Claim,
    position: usize,
    adds: &mut Adds,
) -> Result<Effect, StoreError> {
    let id = adds.first_id + position as u64;
    adds.next_id = id;
    let result = match claim {
        Claim::Refused(refused) => Err(refused),
        Claim::Taken => add(txn, ctx, entry, false, adds),
        Claim::Claimed(key) => match parent_of_new(txn, ctx, entry, &key, adds) {
            Ok(parent_id) => write_new_entry(txn, ctx, entry, id, parent_id),
            Err(refused) => {
                if !refused.is_engine_failure() {
                    ctx.dbs.dn2id.delete(txn, &key)?;
                }
                Err(refused)
            }
        },
    };
    adds.next_id = id + 1;
    if result.is_ok() {
        adds.mark_added(position);
    }
    result
}

/// Starts loading what `add` will read of the next few entries of a bulk
/// add. The entries were built on other threads, in many small blocks:
/// encoding them and deriving their index keys is a walk from each block
/// to the next, and in a bulk load most of those reads missed the cache
/// (a quarter of the writer's time sat in `encode`, perf). Each step
/// reads only pointers an earlier call has already loaded: the list of
/// attributes three entries ahead, their value lists two ahead, the
/// values themselves one ahead.
fn prefetch_ahead(entries: &[Entry], position: usize) {
    if let Some(entry) = entries.get(position + 3) {
        codec::prefetch_slice(&entry.attributes);
        codec::prefetch_slice(entry.dn.normalized().as_bytes());
    }
    if let Some(entry) = entries.get(position + 2) {
        for attr in &entry.attributes {
            codec::prefetch_slice(&attr.values);
            if let Some(name) = attr.name.given() {
                codec::prefetch_slice(name.as_bytes());
            }
        }
    }
    if let Some(entry) = entries.get(position + 1) {
        for value in entry.attributes.iter().flat_map(|a| &a.values) {
            codec::prefetch_slice(value);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use meridian_config::StorageConfig;

    use crate::apply::test_support::*;
    use crate::{Command, Effect};

    #[test]
    fn a_bulk_load_answers_each_entry_as_a_lone_add_would() {
        // A prechecked bulk load claims every DN first (claim_dns), then
        // decides each entry in order: a child before its parent, a DN
        // whose first claimer is refused or added, a DN stored before.
        let (schema, dir, store) = open_with_suffix("claimed-bulk", StorageConfig::default());
        let (_, lone_dir, lone) = open_with_suffix("claimed-lone", StorageConfig::default());
        let account = |rdns: &str, uid: &str| {
            let dn = format!("{rdns},{SUFFIX}");
            entry(&schema, &dn, &[("objectClass", "account"), ("uid", uid)])
        };
        let stored = account("uid=stored", "stored");
        for s in [&store, &lone] {
            let add = Command::Add {
                entry: stored.clone(),
                prechecked: false,
            };
            s.execute_blocking(add).unwrap();
        }
        let later = &[("objectClass", "organizationalUnit"), ("ou", "later")];
        let entries = vec![
            account("uid=c1,ou=later", "c1"), // before its parent
            entry(&schema, &format!("ou=later,{SUFFIX}"), later),
            account("uid=c2,ou=later", "c2"),
            account("uid=x,ou=nowhere", "x"), // no parent at all
            account("uid=x,ou=nowhere", "x"), // the same, refused alike
            account("uid=c2,ou=later", "c2"), // added above
            account("uid=c1,ou=later", "c1"), // refused above, now fine
            stored,
            account("uid=g,uid=c1,ou=later", "g"), // below the one just added
        ];
        let loaded = store
            .execute_blocking(Command::AddMany {
                entries: Arc::new(entries.clone()),
                prechecked: true,
            })
            .unwrap();
        let Effect::AddedMany { added, failed } = loaded else {
            panic!("{loaded:?}");
        };
        assert_eq!(added, 4, "{failed:?}");
        let bulk_snap = store.snapshot().unwrap();
        for (position, entry) in entries.iter().enumerate() {
            let alone = lone.execute_blocking(Command::Add {
                entry: entry.clone(),
                prechecked: true,
            });
            let in_bulk = failed.iter().find(|(p, _)| *p == position).map(|(_, e)| e);
            match (in_bulk, &alone) {
                (None, Ok(_)) => {}
                (Some(bulk), Err(alone)) => {
                    assert_eq!(bulk.to_string(), alone.to_string(), "entry {position}")
                }
                (bulk, alone) => panic!("entry {position}: {bulk:?} in bulk, {alone:?} alone"),
            }
        }
        let lone_snap = lone.snapshot().unwrap();
        for entry in &entries {
            assert_eq!(
                bulk_snap.get(&entry.dn).unwrap().is_some(),
                lone_snap.get(&entry.dn).unwrap().is_some(),
                "{}",
                entry.dn.original()
            );
        }
        // No claimed key outlives its refused entry.
        assert!(bulk_snap.check().unwrap().is_empty());
        drop((bulk_snap, lone_snap));
        store.close();
        lone.close();
        let _ = std::fs::remove_dir_all(dir);
        let _ = std::fs::remove_dir_all(lone_dir);
    }
}
