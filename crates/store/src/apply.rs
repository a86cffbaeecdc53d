//! Applying one command inside a write transaction.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::ops::Bound;

use heed::{PutFlags, RwTxn};
use meridian_model::dn::Dn;
use meridian_model::entry::{ByPosition, Description, Entry, KnownClasses, Writer};
use meridian_model::modify::{self, Change, ModOp, Modification};
use meridian_model::schema::AttrId;
use meridian_model::{ModelError, Schema};
use meridian_proto::ResultCode;

use crate::command::{Command, OperationalAttribute, Outcome};
use crate::keys::{self, EntryId};
use crate::names::{Assigner, Resolver};
use crate::sorted_puts::{self, SortedPuts};
use crate::{Dbs, StoreError, codec, index::Indexes, splice};

/// The meta key holding the next entry ID.
pub(crate) const NEXT_ID: &[u8] = b"next_id";
/// The meta key present while a bulk load is in progress or after one
/// failed: its value says which load.
pub(crate) const LOAD_INCOMPLETE: &[u8] = b"load_incomplete";
/// ID 0 is the root: the parent of every suffix entry.
pub(crate) const ROOT_ID: EntryId = 0;

/// Everything apply needs besides the transaction.
pub(crate) struct Context<'a> {
    pub(crate) dbs: &'a Dbs,
    pub(crate) schema: &'a Schema,
    pub(crate) indexes: &'a Indexes,
    pub(crate) suffixes: &'a [meridian_model::dn::Dn],
    /// Attribute name numbers for the records this batch writes.
    pub(crate) names: &'a Assigner,
    /// The index keys of adds, not yet written: they go in key order
    /// ([`SortedPuts`]) once the run of adds they belong to ends. The
    /// writer writes them ([`Context::write_pending_index`]) before any
    /// other command, which might delete or read index keys, and before
    /// the commit. No add reads the index.
    pub(crate) pending_index: &'a RefCell<SortedPuts>,
    /// The descriptions of the last modify's changes, by position: the
    /// modifies of a batch mostly change the same types in the same
    /// order (the server's operational replacements always do), and
    /// comparing a name with the last one there is cheaper than parsing
    /// it (the parses were a twelfth of the writer's instructions under
    /// a stream of modifies, callgrind).
    pub(crate) descriptions: &'a RefCell<ByPosition<Description>>,
    /// The rules of the object class lists the batch's modifies checked.
    pub(crate) classes: &'a RefCell<KnownClasses>,
    /// Entry IDs of DNs modified before, guesses to check
    /// ([`DnIds`](crate::dn_ids::DnIds)).
    pub(crate) dn_ids: &'a RefCell<crate::dn_ids::DnIds>,
}

/// What one attempt at a batch's transaction keeps, for its [`Context`]
/// to borrow: fresh per attempt, since names numbered and index keys
/// left waiting by a failed attempt are gone with its transaction. The
/// remembered entry IDs are the writer's, lent to the attempt.
pub(crate) struct Attempt {
    pub(crate) names: Assigner,
    pending_index: RefCell<SortedPuts>,
    descriptions: RefCell<ByPosition<Description>>,
    classes: RefCell<KnownClasses>,
    pub(crate) dn_ids: RefCell<crate::dn_ids::DnIds>,
}

impl Attempt {
    pub(crate) fn new(inner: &crate::Inner, dn_ids: crate::dn_ids::DnIds) -> Attempt {
        Attempt {
            names: Assigner::new(inner.name_table()),
            pending_index: RefCell::new(SortedPuts::default()),
            descriptions: RefCell::new(ByPosition::default()),
            classes: RefCell::new(KnownClasses::default()),
            dn_ids: RefCell::new(dn_ids),
        }
    }

    pub(crate) fn context<'a>(&'a self, inner: &'a crate::Inner) -> Context<'a> {
        Context {
            dbs: &inner.dbs,
            schema: &inner.schema,
            indexes: &inner.indexes,
            suffixes: &inner.suffixes,
            names: &self.names,
            pending_index: &self.pending_index,
            descriptions: &self.descriptions,
            classes: &self.classes,
            dn_ids: &self.dn_ids,
        }
    }
}

impl Context<'_> {
    /// Writes the adds' index keys waiting in [`Context::pending_index`].
    pub(crate) fn write_pending_index(&self, txn: &mut RwTxn<'_>) -> Result<(), StoreError> {
        let keys = std::mem::take(&mut *self.pending_index.borrow_mut());
        keys.write(txn, self.dbs.index)
    }

    /// Each change with its parsed description. Parsing depends on the
    /// schema alone, so a remembered description is the one a parse
    /// would give.
    fn describe<'c>(
        &self,
        changes: impl Iterator<Item = Change<'c>>,
    ) -> Result<Vec<(Description, Change<'c>)>, StoreError> {
        let mut recent = self.descriptions.borrow_mut();
        changes
            .enumerate()
            .map(|(position, change)| {
                if let Some(desc) = recent.get(position, change.attr) {
                    return Ok((desc.clone(), change));
                }
                let desc = Description::parse(change.attr.as_bytes(), self.schema)?;
                recent.remember(position, change.attr, desc.clone());
                Ok((desc, change))
            })
            .collect()
    }

    /// The stored form of `entry`, numbering new attribute names.
    fn encode(&self, txn: &mut RwTxn<'_>, entry: &Entry) -> Result<Vec<u8>, StoreError> {
        codec::encode(entry, |position, attr| {
            self.names
                .number_of(txn, self.dbs, position, attr, self.schema)
        })
    }

    /// A record read in this transaction, decoded.
    fn decode(&self, txn: &heed::RoTxn<'_>, bytes: &[u8]) -> Result<Entry, StoreError> {
        let names = Resolver {
            table: self.names.table(),
            txn,
            dbs: self.dbs,
            schema: self.schema,
        };
        codec::decode(bytes, &names)
    }

    /// The entry with ID `id` (which must exist), found by `found_by` if
    /// given ([`codec::decode_as`]).
    fn load(
        &self,
        txn: &heed::RoTxn<'_>,
        id: EntryId,
        found_by: Option<&Dn>,
    ) -> Result<Entry, StoreError> {
        load(
            &Resolver {
                table: self.names.table(),
                txn,
                dbs: self.dbs,
                schema: self.schema,
            },
            id,
            found_by,
        )
    }
}

pub(crate) fn apply(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    command: &Command,
) -> Result<Outcome, StoreError> {
    match command {
        Command::Add { entry, prechecked } => {
            let mut adds = Adds::start(txn, ctx.dbs)?;
            let added = add(txn, ctx, entry, !prechecked, &mut adds)?;
            adds.finish(txn, ctx.dbs)?;
            Ok(added)
        }
        Command::Delete { dn } => delete(txn, ctx, dn),
        Command::DeleteSubtree { dn } => delete_subtree(txn, ctx, dn),
        Command::Guarded { assertion, command } => {
            guard(txn, ctx, assertion, command)?;
            apply(txn, ctx, command)
        }
        Command::Modify {
            dn,
            changes,
            operational,
            permissive,
        } => modify(txn, ctx, dn, changes, operational, *permissive),
        // Planned, then written: `apply_in_batch` has both steps.
        Command::ModifyDn { .. } => apply_in_batch(txn, ctx, command).into_result(),
        Command::RebuildIndexes => rebuild_indexes(txn, ctx),
        Command::BuildIndexes {
            from,
            to,
            types,
            complete,
        } => build_indexes(txn, ctx, *from..*to, types, *complete),
        Command::AddMany {
            entries,
            prechecked,
        } => add_many(txn, ctx, entries, *prechecked),
        Command::ReadBack { pre, post, command } => read_back(txn, ctx, *pre, *post, command),
        Command::SetLoadState(state) => {
            match state {
                Some(what) => ctx.dbs.meta.put(txn, LOAD_INCOMPLETE, what.as_bytes())?,
                None => {
                    ctx.dbs.meta.delete(txn, LOAD_INCOMPLETE)?;
                }
            }
            Ok(Outcome::LoadStateSet)
        }
    }
}

/// The entry a command writes, by DN (`None` for commands without one).
fn target_dn(command: &Command) -> Option<&Dn> {
    command.target()
}

/// Applies `command` with its target read before and/or after, in this
/// transaction. The entry keeps its ID through a rename, so "after" is
/// found by the ID "before" had (or the one an add chose).
fn read_back(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    pre: bool,
    post: bool,
    command: &Command,
) -> Result<Outcome, StoreError> {
    let id = match target_dn(command) {
        Some(dn) => lookup(txn, ctx.dbs, dn)?,
        None => None,
    };
    let before = match (pre, id) {
        (true, Some(id)) => Some(Box::new(ctx.load(txn, id, target_dn(command))?)),
        _ => None,
    };
    let outcome = apply(txn, ctx, command)?;
    let id = match outcome {
        Outcome::Added(added) => Some(added),
        Outcome::Deleted | Outcome::DeletedSubtree(_) => None,
        _ => id,
    };
    let after = match (post, id) {
        (true, Some(id)) => Some(Box::new(ctx.load(txn, id, None)?)),
        _ => None,
    };
    Ok(Outcome::ReadBack {
        outcome: Box::new(outcome),
        pre: before,
        post: after,
    })
}

/// `add` for each entry. `add` refuses before it writes, so a refusal
/// leaves the transaction as it was; only engine failures (which may
/// leave it half written) end the command. Prechecked entries (a bulk
/// load's) claim their DNs first ([`claim_dns`]).
fn add_many(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    entries: &[Entry],
    prechecked: bool,
) -> Result<Outcome, StoreError> {
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
    Ok(Outcome::AddedMany { added, failed })
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
) -> Result<Outcome, StoreError> {
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

/// Evaluates an assertion against the target of `command`.
fn guard(
    txn: &RwTxn<'_>,
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
            return guard(txn, ctx, assertion, command);
        }
        // No single target entry: the assertion does not apply.
        other => match target_dn(other) {
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

fn delete_subtree(txn: &mut RwTxn<'_>, ctx: &Context<'_>, dn: &Dn) -> Result<Outcome, StoreError> {
    let dbs = ctx.dbs;
    if lookup(txn, dbs, dn)?.is_none() {
        return Err(no_such(txn, dbs, dn));
    }
    // Every DN key under the root, deepest first, so each delete is of a
    // leaf and keeps the children links consistent.
    let mut members: Vec<(Vec<u8>, EntryId)> = Vec::new();
    for item in dbs.dn2id.prefix_iter(txn, &keys::dn_key(dn))? {
        let (key, value) = item?;
        if let Some(id) = keys::id_from(value) {
            members.push((key.to_vec(), id));
        }
    }
    members.sort_by_key(|(key, _)| std::cmp::Reverse(key.iter().filter(|b| **b == 0).count()));
    let count = members.len() as u64;
    for (_, id) in members {
        remove_leaf(txn, ctx, id)?;
    }
    Ok(Outcome::DeletedSubtree(count))
}

fn unwilling(message: String) -> StoreError {
    ModelError::new(ResultCode::UNWILLING_TO_PERFORM, message).into()
}

/// A rename worked out and checked, nothing written yet.
struct RenamePlan {
    id: EntryId,
    parent_id: EntryId,
    old_parent_id: EntryId,
    new_dn: Dn,
    new: Entry,
    /// The entry's index key prefixes before and after.
    old_keys: BTreeSet<Vec<u8>>,
    new_keys: BTreeSet<Vec<u8>>,
    /// The `dn2id` keys of the entry and its subtree, with their IDs.
    moved: Vec<(Vec<u8>, EntryId)>,
}

/// Every check of a rename, and what it will write; reads only, so a
/// refusal here has written nothing and fails alone in its batch
/// ([`apply_in_batch`]).
fn plan_rename(
    txn: &RwTxn<'_>,
    ctx: &Context<'_>,
    dn: &Dn,
    new_rdn: &str,
    delete_old_rdn: bool,
    new_superior: Option<&Dn>,
    operational: &[OperationalAttribute],
) -> Result<RenamePlan, StoreError> {
    let dbs = ctx.dbs;
    let schema = ctx.schema;
    let Some(id) = lookup(txn, dbs, dn)? else {
        return Err(no_such(txn, dbs, dn));
    };
    if ctx.suffixes.iter().any(|s| s.same_entry(dn)) {
        return Err(unwilling(format!(
            "{} is a naming context and cannot be renamed",
            dn.original()
        )));
    }
    let rdn = Dn::parse(new_rdn.as_bytes(), schema)?;
    if rdn.rdn_count() != 1 {
        return Err(ModelError::new(
            ResultCode::INVALID_DN_SYNTAX,
            format!("newrdn {new_rdn:?} must be exactly one RDN"),
        )
        .into());
    }
    let old_parent = dn.parent().unwrap_or_else(Dn::root);
    let parent = new_superior.cloned().unwrap_or_else(|| old_parent.clone());
    if parent.is_within(dn) {
        return Err(unwilling(format!(
            "cannot move {} below itself",
            dn.original()
        )));
    }
    let parent_id = if parent.is_root() {
        return Err(unwilling("an entry cannot be moved to the root".into()));
    } else {
        match lookup(txn, dbs, &parent)? {
            Some(pid) => pid,
            None => return Err(no_such(txn, dbs, &parent)),
        }
    };
    let new_text = format!("{new_rdn},{}", parent.original());
    let new_dn = Dn::parse(new_text.as_bytes(), schema)?;
    let renamed_in_place = new_dn.same_entry(dn);
    if !renamed_in_place && lookup(txn, dbs, &new_dn)?.is_some() {
        return Err(StoreError::AlreadyExists(new_dn.original().to_owned()));
    }
    let old = ctx.load(txn, id, Some(dn))?;
    // New RDN values are added; old ones removed when asked (unless they
    // are also in the new RDN); then the operational attributes.
    let mut changes: Vec<Modification> = Vec::new();
    let new_values = new_dn.rdn_values().first().cloned().unwrap_or_default();
    let old_values = dn.rdn_values().first().cloned().unwrap_or_default();
    let name_of = |attr| {
        schema
            .attr(attr)
            .map_or(String::new(), |a| a.name().to_owned())
    };
    if delete_old_rdn {
        for (attr, value) in old_values.iter() {
            let rule = schema.attr(*attr).and_then(|a| a.equality);
            let key = |v: &[u8]| rule.map_or_else(|| Some(v.to_vec()), |r| r.key(v, schema));
            let kept = new_values
                .iter()
                .any(|(a, v)| a == attr && key(v) == key(value));
            if !kept {
                changes.push(Modification {
                    op: ModOp::Delete,
                    attr: name_of(*attr),
                    values: vec![value.clone()],
                });
            }
        }
    }
    // The new RDN's values first, so removing the old ones never leaves
    // the (new) RDN without its values.
    let staged = Entry {
        dn: new_dn.clone(),
        ..old.clone()
    }
    .with_rdn_values(schema);
    let staged = modify::apply(&staged, &changes, schema, true)?;
    let replacements: Vec<Modification> = operational
        .iter()
        .map(|(attr, values)| Modification {
            op: ModOp::Replace,
            attr: attr.clone().into_owned(),
            values: values.clone(),
        })
        .collect();
    let new = modify::apply(&staged, &replacements, schema, false)?;
    new.check(schema, Writer::Server)?;

    // The subtree's names must all fit under the new one.
    let old_prefix = keys::dn_key(dn);
    let new_prefix = keys::dn_key(&new_dn);
    let mut moved: Vec<(Vec<u8>, EntryId)> = Vec::new();
    for item in dbs.dn2id.prefix_iter(txn, &old_prefix)? {
        let (key, value) = item?;
        if let Some(child) = keys::id_from(value) {
            moved.push((key.to_vec(), child));
        }
    }
    let deepest = moved.iter().map(|(key, _)| key.len()).max().unwrap_or(0);
    check_dn_key_len(
        (new_prefix.len() + deepest).saturating_sub(old_prefix.len()),
        new_dn.original(),
    )?;
    let old_parent_id = parent_id_of(txn, ctx, dn)?;
    let old_keys = ctx.indexes.entry_keys(&old, schema);
    let new_keys = ctx.indexes.entry_keys(&new, schema);
    Ok(RenamePlan {
        id,
        parent_id,
        old_parent_id,
        old_keys,
        new_keys,
        new_dn,
        new,
        moved,
    })
}

/// Writes a planned rename: the entry, its index keys and parent link,
/// and the subtree's DNs. A failure here comes after a write.
fn write_rename(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    dn: &Dn,
    plan: RenamePlan,
) -> Result<Outcome, StoreError> {
    let dbs = ctx.dbs;
    let RenamePlan {
        id,
        parent_id,
        old_parent_id,
        new_dn,
        new,
        old_keys,
        new_keys,
        moved,
    } = plan;
    write_index(txn, dbs, old_keys.difference(&new_keys), id, false)?;
    write_index(txn, dbs, new_keys.difference(&old_keys), id, true)?;
    let record = ctx.encode(txn, &new)?;
    dbs.id2entry.put(txn, &keys::id_key(id), &record)?;
    #[cfg(test)]
    tests::fail_after_writing(new.dn.original())?;
    dbs.children
        .delete(txn, &keys::child_key(old_parent_id, id))?;
    dbs.children
        .put(txn, &keys::child_key(parent_id, id), &[])?;

    // Move the subtree: descendants keep their IDs and children links;
    // their dn2id keys and stored DNs follow.
    let old_prefix = keys::dn_key(dn);
    let new_prefix = keys::dn_key(&new_dn);
    let depth = dn.rdn_count();
    let mut descendants = 0u64;
    for (key, child) in moved {
        dbs.dn2id.delete(txn, &key)?;
        let mut new_key = new_prefix.clone();
        new_key.extend_from_slice(key.get(old_prefix.len()..).unwrap_or_default());
        dbs.dn2id.put(txn, &new_key, &keys::id_key(child))?;
        if child == id {
            continue;
        }
        let mut entry = ctx.load(txn, child, None)?;
        let syntactic = meridian_proto::dn::Dn::parse(entry.dn.original())
            .map_err(|e| StoreError::Engine(format!("stored DN of entry {child}: {e}")))?;
        let relative = meridian_proto::dn::Dn {
            rdns: syntactic
                .rdns
                .iter()
                .take(syntactic.rdns.len().saturating_sub(depth))
                .cloned()
                .collect(),
        };
        let text = format!("{relative},{}", new_dn.original());
        entry.dn = Dn::parse(text.as_bytes(), ctx.schema)?;
        let record = ctx.encode(txn, &entry)?;
        dbs.id2entry.put(txn, &keys::id_key(child), &record)?;
        descendants += 1;
    }
    Ok(Outcome::Renamed(descendants))
}

/// Entries read per step of a rebuild: the transaction cannot iterate one
/// database while writing another, so entries are read in chunks.
const REBUILD_CHUNK: usize = 1024;

fn rebuild_indexes(txn: &mut RwTxn<'_>, ctx: &Context<'_>) -> Result<Outcome, StoreError> {
    ctx.dbs.index.clear(txn)?;
    let count = index_entries(txn, ctx, 0..EntryId::MAX, None)?;
    record_indexes_built(txn, ctx)?;
    Ok(Outcome::Reindexed(count))
}

/// One step of an online build ([`Command::BuildIndexes`]).
fn build_indexes(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    ids: std::ops::Range<EntryId>,
    types: &[String],
    complete: bool,
) -> Result<Outcome, StoreError> {
    let wanted: Vec<AttrId> = types
        .iter()
        .filter_map(|oid| ctx.schema.attribute_id(oid))
        .collect();
    let entries = index_entries(txn, ctx, ids, Some(&wanted))?;
    if complete {
        record_indexes_built(txn, ctx)?;
    }
    Ok(Outcome::IndexesBuilt { entries, complete })
}

/// Writes the index keys of the entries with IDs in `ids`, of the types
/// `only` names (all when `None`); the number of entries. Entries are
/// read [`REBUILD_CHUNK`] at a time, each chunk before its keys are
/// written: a transaction cannot iterate one database while it writes
/// another.
fn index_entries(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    ids: std::ops::Range<EntryId>,
    only: Option<&[AttrId]>,
) -> Result<u64, StoreError> {
    use std::ops::Bound;
    let dbs = ctx.dbs;
    let mut count = 0u64;
    let mut next = ids.start;
    let end = keys::id_key(ids.end);
    let mut prefix = Vec::with_capacity(keys::MAX_KEY);
    while next < ids.end {
        let start = keys::id_key(next);
        let range: (Bound<&[u8]>, Bound<&[u8]>) =
            (Bound::Included(&start[..]), Bound::Excluded(&end[..]));
        let mut chunk: Vec<(EntryId, Vec<u8>)> = Vec::with_capacity(REBUILD_CHUNK);
        for item in dbs.id2entry.range(txn, &range)? {
            let (key, value) = item?;
            let Some(id) = keys::id_from(key) else {
                continue;
            };
            chunk.push((id, value.to_vec()));
            if chunk.len() == REBUILD_CHUNK {
                break;
            }
        }
        let Some(&(last, _)) = chunk.last() else {
            break;
        };
        let mut index_keys = SortedPuts::default();
        for (id, bytes) in &chunk {
            let entry = ctx.decode(txn, bytes)?;
            for attr in &entry.attributes {
                if only.is_some_and(|only| !only.contains(&attr.desc.attr)) {
                    continue;
                }
                let values = attr.values.iter().map(Vec::as_slice);
                ctx.indexes
                    .each_key_of(attr.desc.attr, values, ctx.schema, &mut prefix, |key| {
                        index_keys.push(key, *id)
                    });
            }
        }
        index_keys.write(txn, dbs.index)?;
        count += chunk.len() as u64;
        next = last.saturating_add(1);
    }
    Ok(count)
}

/// Records every configured index as built, in the transaction that
/// completes them; the writer tells the planner once it commits.
fn record_indexes_built(txn: &mut RwTxn<'_>, ctx: &Context<'_>) -> Result<(), StoreError> {
    ctx.dbs
        .meta
        .put(txn, crate::index::BUILT_KEY, &ctx.indexes.record(false))?;
    Ok(())
}

/// The ID of `dn`, if it exists.
pub(crate) fn lookup(
    txn: &heed::RoTxn<'_>,
    dbs: &Dbs,
    dn: &meridian_model::dn::Dn,
) -> Result<Option<EntryId>, StoreError> {
    let key = keys::dn_key(dn);
    if key.len() > keys::MAX_KEY {
        // Could never have been stored (`check_dn_key_len`).
        return Ok(None);
    }
    Ok(dbs.dn2id.get(txn, &key)?.and_then(keys::id_from))
}

/// Refuses a `dn2id` key of `len` bytes that an add or a rename is about
/// to write for `dn` (or below it) when LMDB cannot store it: it would
/// answer `MDB_BAD_VALSIZE`, which tells a client nothing.
fn check_dn_key_len(len: usize, dn: &str) -> Result<(), StoreError> {
    if len <= keys::MAX_KEY {
        return Ok(());
    }
    Err(unwilling(format!(
        "the DN is too long to store: {dn:?} (or its deepest entry) takes {len} bytes in normalised form, one byte added per RDN, and at most {} fit",
        keys::MAX_KEY
    )))
}

/// The deepest existing ancestor of `dn` (its matchedDN when missing).
pub(crate) fn matched(
    txn: &heed::RoTxn<'_>,
    dbs: &Dbs,
    dn: &meridian_model::dn::Dn,
) -> Result<String, StoreError> {
    let mut cur = dn.parent();
    while let Some(candidate) = cur {
        if candidate.is_root() {
            break;
        }
        if let Some(id) = lookup(txn, dbs, &candidate)? {
            if let Some(bytes) = dbs.id2entry.get(txn, &keys::id_key(id))? {
                return Ok(String::from_utf8_lossy(codec::decode_dn(bytes)?).into_owned());
            }
        }
        cur = candidate.parent();
    }
    Ok(String::new())
}

fn no_such(txn: &heed::RoTxn<'_>, dbs: &Dbs, dn: &meridian_model::dn::Dn) -> StoreError {
    match matched(txn, dbs, dn) {
        Ok(matched) => StoreError::NoSuchObject {
            dn: dn.original().to_owned(),
            matched,
        },
        Err(e) => e,
    }
}

fn write_index<P: AsRef<[u8]>>(
    txn: &mut RwTxn<'_>,
    dbs: &Dbs,
    prefixes: impl IntoIterator<Item = P>,
    id: EntryId,
    put: bool,
) -> Result<(), StoreError> {
    let mut key = Vec::new();
    for prefix in prefixes {
        keys::with_id_into(&mut key, prefix.as_ref(), id);
        if put {
            dbs.index.put(txn, &key, &[])?;
        } else {
            dbs.index.delete(txn, &key)?;
        }
    }
    Ok(())
}

/// What the adds of one command share. The next entry ID is read from
/// `meta` once and written back once, not twice per entry; the last
/// parent found is remembered, since a bulk load adds siblings one after
/// another (nothing is deleted within the command, so it stays valid).
struct Adds {
    next_id: EntryId,
    first_id: EntryId,
    /// The `dn2id` key of the last parent looked up, and its ID.
    last_parent: Option<(Vec<u8>, EntryId)>,
    /// Of a prechecked bulk add, whose first pass claimed every entry's
    /// DN with the ID `first_id + position` ([`claim_dns`]): which
    /// entries are added so far. A parent found with such an ID is a
    /// parent only once its own entry is added.
    claimed: Option<Vec<bool>>,
}

/// The ID the next added entry gets.
fn stored_next_id(txn: &heed::RoTxn<'_>, dbs: &Dbs) -> Result<EntryId, StoreError> {
    match dbs.meta.get(txn, NEXT_ID)? {
        Some(bytes) => {
            keys::id_from(bytes).ok_or_else(|| StoreError::Engine("corrupt next_id".into()))
        }
        None => Ok(1),
    }
}

/// [`stored_next_id`] as of the last commit.
pub(crate) fn next_entry_id(inner: &crate::Inner) -> Result<EntryId, StoreError> {
    let _map = inner.hold_map();
    let txn = inner.env.read_txn()?;
    stored_next_id(&txn, &inner.dbs)
}

impl Adds {
    fn start(txn: &RwTxn<'_>, dbs: &Dbs) -> Result<Adds, StoreError> {
        let next_id = stored_next_id(txn, dbs)?;
        Ok(Adds {
            next_id,
            first_id: next_id,
            last_parent: None,
            claimed: None,
        })
    }

    /// Records that the entry at `position` of a prechecked bulk add is
    /// added.
    fn mark_added(&mut self, position: usize) {
        if let Some(slot) = self.claimed.as_mut().and_then(|a| a.get_mut(position)) {
            *slot = true;
        }
    }

    /// False for an ID a bulk add's first pass claimed for an entry not
    /// (or not yet) added.
    fn is_live(&self, id: EntryId) -> bool {
        let (Some(added), Some(position)) = (&self.claimed, id.checked_sub(self.first_id)) else {
            return true;
        };
        usize::try_from(position).is_ok_and(|p| added.get(p) == Some(&true))
    }

    /// The ID of the parent whose `dn2id` key is `key`, if it exists.
    fn parent_id(
        &mut self,
        txn: &RwTxn<'_>,
        dbs: &Dbs,
        key: &[u8],
    ) -> Result<Option<EntryId>, StoreError> {
        if let Some((last, id)) = &self.last_parent {
            if last.as_slice() == key {
                return Ok(Some(*id));
            }
        }
        let found = dbs.dn2id.get(txn, key)?.and_then(keys::id_from);
        let found = found.filter(|&id| self.is_live(id));
        if let Some(id) = found {
            self.last_parent = Some((key.to_vec(), id));
        }
        Ok(found)
    }

    /// Writes back the next ID if any add used one.
    fn finish(self, txn: &mut RwTxn<'_>, dbs: &Dbs) -> Result<(), StoreError> {
        if self.next_id != self.first_id {
            dbs.meta.put(txn, NEXT_ID, &self.next_id.to_be_bytes())?;
        }
        Ok(())
    }
}

/// Adds `entry`; `check`: against the schema first (false only for
/// entries the caller checked). Every refusal (entryAlreadyExists,
/// noSuchObject, a schema violation) comes before anything is written,
/// so a refused entry needs no rollback ([`apply_in_batch`]); `dn2id`
/// is written first and with NO_OVERWRITE, which is also the existence
/// check. Any later failure is the engine's.
fn add(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    entry: &Entry,
    check: bool,
    adds: &mut Adds,
) -> Result<Outcome, StoreError> {
    let dbs = ctx.dbs;
    let key = new_entry_key(entry)?;
    // An existing entry is reported as such before any other refusal
    // (as slapd does); with `check` that needs a lookup, since the schema
    // check comes before the write. A prechecked entry that exists has a
    // parent, so the parent check passes and the write below reports it.
    if check && dbs.dn2id.get(txn, &key)?.is_some() {
        return Err(already_exists(entry));
    }
    let parent_id = parent_of_new(txn, ctx, entry, &key, adds)?;
    if check {
        entry.check(ctx.schema, Writer::Server)?;
    }
    let id = adds.next_id;
    if dbs
        .dn2id
        .get_or_put(txn, &key, &keys::id_key(id))?
        .is_some()
    {
        return Err(already_exists(entry));
    }
    let outcome = write_new_entry(txn, ctx, entry, id, parent_id)?;
    adds.next_id += 1;
    Ok(outcome)
}

/// The `dn2id` key of an entry to add, or why it cannot be added.
fn new_entry_key(entry: &Entry) -> Result<Vec<u8>, StoreError> {
    if entry.dn.is_root() {
        return Err(ModelError::new(
            ResultCode::UNWILLING_TO_PERFORM,
            "the root DSE cannot be added",
        )
        .into());
    }
    let key = keys::dn_key(&entry.dn);
    check_dn_key_len(key.len(), entry.dn.original())?;
    Ok(key)
}

fn already_exists(entry: &Entry) -> StoreError {
    StoreError::AlreadyExists(entry.dn.original().to_owned())
}

/// The ID of the parent of an entry to add (whose `dn2id` key is `key`),
/// or noSuchObject.
fn parent_of_new(
    txn: &RwTxn<'_>,
    ctx: &Context<'_>,
    entry: &Entry,
    key: &[u8],
    adds: &mut Adds,
) -> Result<EntryId, StoreError> {
    if ctx.suffixes.iter().any(|s| s.same_entry(&entry.dn)) {
        return Ok(ROOT_ID);
    }
    let parent_key = keys::parent_key(key, &entry.dn);
    if parent_key.is_empty() {
        return Err(StoreError::NoSuchObject {
            dn: entry.dn.original().to_owned(),
            matched: String::new(),
        });
    }
    // Looked up by key: a bulk load adds millions of entries and
    // building each parent's DN would cost more than the lookup.
    match adds.parent_id(txn, ctx.dbs, parent_key)? {
        Some(id) => Ok(id),
        None => {
            let parent = entry.dn.parent().unwrap_or_else(Dn::root);
            Err(no_such(txn, ctx.dbs, &parent))
        }
    }
}

/// Writes a new entry whose `dn2id` key is in place: its record, its
/// link from its parent, its index keys (queued).
fn write_new_entry(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    entry: &Entry,
    id: EntryId,
    parent_id: EntryId,
) -> Result<Outcome, StoreError> {
    let dbs = ctx.dbs;
    // Encoded only now, since it may number (and store) new attribute
    // names: a refused add must leave nothing behind, not even a name,
    // or a store that never saw it (a journal replay) would number the
    // next new name differently. Encoding fails only in the engine.
    let record = ctx.encode(txn, entry)?;
    // IDs only grow, so the new record goes after every other: APPEND
    // fills pages instead of splitting them in half (half the file for
    // a bulk load), and skips the search for the insertion point.
    dbs.id2entry
        .put_with_flags(txn, heed::PutFlags::APPEND, &keys::id_key(id), &record)?;
    // The new child has the largest ID, so its link goes last among its
    // parent's; and last in the database when the parent is the newest
    // one with children, as in a bulk load of siblings: then APPEND skips
    // the search (LMDB answers KEYEXIST, and nothing is written, when the
    // key is not the last).
    let link = keys::child_key(parent_id, id);
    match dbs
        .children
        .put_with_flags(txn, heed::PutFlags::APPEND, &link, &[])
    {
        Err(heed::Error::Mdb(heed::MdbError::KeyExist)) => dbs.children.put(txn, &link, &[])?,
        other => other?,
    }
    let mut pending_index = ctx.pending_index.borrow_mut();
    ctx.indexes
        .for_each_entry_key(entry, ctx.schema, |prefix| pending_index.push(prefix, id));
    drop(pending_index);
    #[cfg(test)]
    tests::fail_after_writing(entry.dn.original())?;
    Ok(Outcome::Added(id))
}

/// The entry with ID `id` (which must exist), found by `found_by` if
/// given ([`codec::decode_as`]).
pub(crate) fn load(
    names: &Resolver<'_, '_>,
    id: EntryId,
    found_by: Option<&Dn>,
) -> Result<Entry, StoreError> {
    let bytes = names
        .dbs
        .id2entry
        .get(names.txn, &keys::id_key(id))?
        .ok_or_else(|| StoreError::Engine(format!("dn2id points at missing entry {id}")))?;
    codec::decode_as(bytes, names, found_by)
}

fn parent_id_of(
    txn: &heed::RoTxn<'_>,
    ctx: &Context<'_>,
    dn: &meridian_model::dn::Dn,
) -> Result<EntryId, StoreError> {
    let dbs = ctx.dbs;
    if ctx.suffixes.iter().any(|s| s.same_entry(dn)) {
        return Ok(ROOT_ID);
    }
    match dn.parent() {
        Some(parent) if !parent.is_root() => lookup(txn, dbs, &parent)?
            .ok_or_else(|| StoreError::Engine(format!("parent of {} is missing", dn.original()))),
        _ => Ok(ROOT_ID),
    }
}

/// True if the entry has at least one child.
pub(crate) fn has_children(
    txn: &heed::RoTxn<'_>,
    dbs: &Dbs,
    id: EntryId,
) -> Result<bool, StoreError> {
    Ok(dbs
        .children
        .prefix_iter(txn, &id.to_be_bytes())?
        .next()
        .transpose()?
        .is_some())
}

fn delete(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    dn: &meridian_model::dn::Dn,
) -> Result<Outcome, StoreError> {
    let id = deletable(txn, ctx.dbs, dn)?;
    remove_leaf(txn, ctx, id)?;
    Ok(Outcome::Deleted)
}

/// The ID of the entry a delete of `dn` removes, or why it may not;
/// reads only.
fn deletable(
    txn: &heed::RoTxn<'_>,
    dbs: &Dbs,
    dn: &meridian_model::dn::Dn,
) -> Result<EntryId, StoreError> {
    let Some(id) = lookup(txn, dbs, dn)? else {
        return Err(no_such(txn, dbs, dn));
    };
    if has_children(txn, dbs, id)? {
        return Err(StoreError::NotAllowedOnNonLeaf(dn.original().to_owned()));
    }
    Ok(id)
}

/// Removes the leaf entry `id`: its record, its index keys, its DN key and
/// its parent's link to it (delete, and each entry of a subtree delete).
fn remove_leaf(txn: &mut RwTxn<'_>, ctx: &Context<'_>, id: EntryId) -> Result<(), StoreError> {
    let dbs = ctx.dbs;
    let entry = ctx.load(txn, id, None)?;
    let parent = parent_id_of(txn, ctx, &entry.dn)?;
    write_index(
        txn,
        dbs,
        ctx.indexes.entry_keys(&entry, ctx.schema),
        id,
        false,
    )?;
    dbs.id2entry.delete(txn, &keys::id_key(id))?;
    dbs.dn2id.delete(txn, &keys::dn_key(&entry.dn))?;
    dbs.children.delete(txn, &keys::child_key(parent, id))?;
    Ok(())
}

/// A modify checked and computed, nothing written yet.
struct ModifyPlan {
    new: Entry,
    /// The entry's index keys before and after, when an indexed type
    /// changes (otherwise its keys stay as they are).
    index: Option<IndexChange>,
}

/// The index keys a modify changes: those of `old` not in `new` go, those
/// of `new` not in `old` come.
pub(crate) struct IndexChange {
    pub(crate) old: BTreeSet<Vec<u8>>,
    pub(crate) new: BTreeSet<Vec<u8>>,
}

impl IndexChange {
    fn write(&self, txn: &mut RwTxn<'_>, dbs: &Dbs, id: EntryId) -> Result<(), StoreError> {
        write_index(txn, dbs, self.old.difference(&self.new), id, false)?;
        write_index(txn, dbs, self.new.difference(&self.old), id, true)
    }
}

/// A modify inside another command (an assertion's guard, a pre/post
/// read): the writer's own path, its refusals as errors.
fn modify(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    dn: &meridian_model::dn::Dn,
    changes: &[Modification],
    operational: &[OperationalAttribute],
    permissive: bool,
) -> Result<Outcome, StoreError> {
    modify_through_cursor(txn, ctx, dn, changes, operational, permissive).into_result()
}

/// The client's changes, then the server's operational replacements,
/// borrowed from the command (this runs on the writer thread: copies of
/// the values would be made and freed there for every modify).
fn all_changes<'c>(
    changes: &'c [Modification],
    operational: &'c [OperationalAttribute],
) -> impl Iterator<Item = Change<'c>> {
    changes
        .iter()
        .map(Modification::as_change)
        .chain(operational.iter().map(|(attr, values)| Change {
            op: ModOp::Replace,
            attr,
            values,
        }))
}

/// The checks and the new entry of a modify of `old` by `described` (the
/// first `client` changes are the client's); reads nothing, so a refusal
/// here has written nothing.
fn plan_changes(
    ctx: &Context<'_>,
    old: Entry,
    described: &[(Description, Change<'_>)],
    client: usize,
    permissive: bool,
) -> Result<ModifyPlan, StoreError> {
    // Index keys can only change if an indexed type was touched; only
    // then are the old keys taken, and the entry itself is changed
    // without a copy.
    let touches_index = described
        .iter()
        .any(|(desc, _)| ctx.indexes.get(desc.attr).is_some());
    let old_keys = touches_index.then(|| ctx.indexes.entry_keys(&old, ctx.schema));
    let pairs = described.iter().map(|(desc, change)| (desc, *change));
    let new = modify::apply_described_changes(old, pairs, ctx.schema, permissive)?;
    // The values checked are the client's: the operational ones are the
    // server's own (a timestamp, its DN, a CSN), made well-formed by the
    // directory; checking their syntax again (a DN parse, a time parse)
    // was a twentieth of the writer's time at the server.
    let client = described.get(..client).unwrap_or(described);
    new.check_after_modify(
        ctx.schema,
        Writer::Server,
        |attr| client.iter().any(|(desc, _)| desc.attr == attr),
        &mut ctx.classes.borrow_mut(),
    )?;
    let index = old_keys.map(|old| IndexChange {
        old,
        new: ctx.indexes.entry_keys(&new, ctx.schema),
    });
    Ok(ModifyPlan { new, index })
}

/// A modify as the writer applies it: the record is read through a
/// cursor and the new one written through the same cursor, so `id2entry`
/// is searched once, not twice. The B-tree searches were about a third
/// of the writer's time under a stream of modifies (`perf`): each one
/// walks pages that are mostly not in the CPU's cache. The new record is
/// made from the old one's bytes where it can be ([`splice`]), from the
/// decoded entry otherwise. While the cursor holds the transaction, names
/// are read from memory ([`Assigner::source`]); a new entry that would
/// need a new name, and the index keys, are written after it is dropped.
fn modify_through_cursor(
    txn: &mut RwTxn<'_>,
    ctx: &Context<'_>,
    dn: &meridian_model::dn::Dn,
    changes: &[Modification],
    operational: &[OperationalAttribute],
    permissive: bool,
) -> Applied {
    let dbs = ctx.dbs;
    // The ID remembered from an earlier modify, or `dn2id`'s.
    let guess = ctx.dn_ids.borrow().guess(dn);
    let id = match guess {
        Some(id) => id,
        None => match lookup(txn, dbs, dn) {
            Ok(Some(id)) => id,
            Ok(None) => return Applied::Refused(no_such(txn, dbs, dn)),
            Err(e) => return Applied::Refused(e),
        },
    };
    let key = keys::id_key(id);
    let only = (Bound::Included(&key[..]), Bound::Included(&key[..]));
    let mut cursor = match dbs.id2entry.range_mut(txn, &only) {
        Ok(cursor) => cursor,
        Err(e) => return Applied::Refused(e.into()),
    };
    let found = match cursor.next() {
        Some(Ok((_, bytes))) => {
            // A record that carries exactly this DN's text is this
            // entry (entries are unique by DN): only that proves a
            // guess, and only such an ID is remembered, so a client that
            // spells a DN otherwise than it was added makes no guesses.
            let proven = codec::stored_dn(bytes) == Some(dn.original().as_bytes());
            if guess.is_some() && !proven {
                None
            } else {
                if guess.is_none() && proven {
                    ctx.dn_ids.borrow_mut().remember(dn, id);
                }
                Some(Ok(bytes))
            }
        }
        Some(Err(e)) => Some(Err(e.into())),
        None if guess.is_some() => None,
        None => Some(Err(StoreError::Engine(format!(
            "dn2id points at missing entry {id}"
        )))),
    };
    let Some(found) = found else {
        // A wrong guess (the entry renamed or deleted since, or its ID
        // given again after a batch that failed): forgotten, and
        // `dn2id` decides.
        drop(cursor);
        ctx.dn_ids.borrow_mut().forget(dn);
        return modify_through_cursor(txn, ctx, dn, changes, operational, permissive);
    };
    // Each description parsed once, for the types changed and for
    // applying the change.
    let planned = found.and_then(|bytes| {
        let described = ctx.describe(all_changes(changes, operational))?;
        if let Some(spliced) = splice::splice(ctx, bytes, dn, &described, changes.len()) {
            return Ok(Planned::Spliced(spliced));
        }
        let old = codec::decode_as(bytes, &ctx.names.source(ctx.schema), Some(dn))?;
        plan_changes(ctx, old, &described, changes.len(), permissive).map(Planned::Entry)
    });
    let planned = match planned {
        Ok(planned) => planned,
        Err(refusal) => return Applied::Refused(refusal),
    };
    let written = match planned.known_record(ctx) {
        #[allow(unsafe_code)]
        Some(record) => {
            // SAFETY: nothing read through the cursor is borrowed any more
            // (the old record was decoded into an owned entry, or spliced
            // into an owned record), so the overwrite invalidates no
            // reference.
            let put = unsafe { cursor.put_current(&key, &record) };
            drop(cursor);
            put.map(|_| ()).map_err(StoreError::from)
        }
        None => {
            drop(cursor);
            planned
                .record(txn, ctx)
                .and_then(|record| Ok(dbs.id2entry.put(txn, &key, &record)?))
        }
    };
    let written = written.and_then(|()| {
        if let Some(index) = planned.index() {
            index.write(txn, dbs, id)?;
        }
        #[cfg(test)]
        tests::fail_after_writing(planned.dn_text(dn))?;
        Ok(Outcome::Modified)
    });
    match written {
        Ok(outcome) => Applied::Done(outcome),
        Err(e) => Applied::Spoiled(e),
    }
}

/// A modify's new record, planned one way or the other.
enum Planned {
    Spliced(splice::Spliced),
    Entry(ModifyPlan),
}

impl Planned {
    /// The new record, if every name it holds has its number already
    /// (a spliced record always: it takes no name without one).
    fn known_record(&self, ctx: &Context<'_>) -> Option<Cow<'_, [u8]>> {
        match self {
            Planned::Spliced(spliced) => Some(Cow::Borrowed(&spliced.record)),
            Planned::Entry(plan) => known_record(ctx, &plan.new).map(Cow::Owned),
        }
    }

    /// The new record, numbering the names that need it.
    fn record(&self, txn: &mut RwTxn<'_>, ctx: &Context<'_>) -> Result<Cow<'_, [u8]>, StoreError> {
        match self {
            Planned::Spliced(spliced) => Ok(Cow::Borrowed(&spliced.record)),
            Planned::Entry(plan) => ctx.encode(txn, &plan.new).map(Cow::Owned),
        }
    }

    /// The index keys the modify changes, if any.
    fn index(&self) -> Option<&IndexChange> {
        match self {
            Planned::Spliced(spliced) => spliced.index.as_ref(),
            Planned::Entry(plan) => plan.index.as_ref(),
        }
    }

    /// The DN text the new record carries (a spliced record carries
    /// exactly `dn`'s).
    #[cfg(test)]
    fn dn_text<'a>(&'a self, dn: &'a Dn) -> &'a str {
        match self {
            Planned::Spliced(_) => dn.original(),
            Planned::Entry(plan) => plan.new.dn.original(),
        }
    }
}

/// The stored form of `new` if every name it holds has its number
/// already; `None` if one would need a new number (which only a write
/// to `meta` can give) or it cannot be encoded (which encoding it again
/// reports).
fn known_record(ctx: &Context<'_>, new: &Entry) -> Option<Vec<u8>> {
    let mut needs_new_name = false;
    let record = codec::encode(new, |position, attr| {
        Ok(ctx
            .names
            .known_number_of(position, attr, ctx.schema)
            .unwrap_or_else(|| {
                needs_new_name = true;
                0
            }))
    });
    record.ok().filter(|_| !needs_new_name)
}

/// What applying one command in the batch's transaction did.
pub(crate) enum Applied {
    /// It succeeded: its writes are in the transaction.
    Done(Outcome),
    /// It was refused before its first write: the transaction is as it
    /// was, and the batch's other commands commit as if it had never
    /// been applied.
    Refused(StoreError),
    /// It failed after it may have begun to write: part of it may be in
    /// the transaction, which must be given up.
    Spoiled(StoreError),
}

impl Applied {
    /// For a command inside another: its refusals are errors like any.
    fn into_result(self) -> Result<Outcome, StoreError> {
        match self {
            Applied::Done(outcome) => Ok(outcome),
            Applied::Refused(e) | Applied::Spoiled(e) => Err(e),
        }
    }
}

/// Applies `command` straight in the batch's transaction, with no nested
/// transaction of its own. Nested transactions are what would let any
/// command fail alone, but each copies again every page its parent has
/// already made dirty, down to the leaf (a fifth of the writer's time
/// under a stream of modifies), and LMDB does not allow them with a
/// writable map (`MDB_WRITEMAP`, see `docs/design/storage.md`). Instead
/// the common commands decide their refusals before their first write: a
/// modify and a rename (each planned, then written), an add (its
/// existence check is its first write's own NO_OVERWRITE), a bulk load
/// (each of whose adds is refused alone), a delete and an assertion's
/// guard. Any other failure
/// may have come after a write: `Spoiled`, and the writer commits the
/// commands before this one without it (`writer::commit_commands`).
pub(crate) fn apply_in_batch(txn: &mut RwTxn<'_>, ctx: &Context<'_>, command: &Command) -> Applied {
    let written = match command {
        Command::Modify {
            dn,
            changes,
            operational,
            permissive,
        } => return modify_through_cursor(txn, ctx, dn, changes, operational, *permissive),
        _ if command.is_add() => match apply(txn, ctx, command) {
            Err(refusal) if !refusal.is_engine_failure() => return Applied::Refused(refusal),
            written => written,
        },
        Command::Delete { dn } => match deletable(txn, ctx.dbs, dn) {
            Err(refusal) => return Applied::Refused(refusal),
            Ok(id) => remove_leaf(txn, ctx, id).map(|()| Outcome::Deleted),
        },
        Command::ModifyDn {
            dn,
            new_rdn,
            delete_old_rdn,
            new_superior,
            operational,
        } => {
            let plan = plan_rename(
                txn,
                ctx,
                dn,
                new_rdn,
                *delete_old_rdn,
                new_superior.as_deref(),
                operational,
            );
            match plan {
                Err(refusal) => return Applied::Refused(refusal),
                Ok(plan) => write_rename(txn, ctx, dn, plan),
            }
        }
        Command::Guarded { assertion, command } => match guard(txn, ctx, assertion, command) {
            Err(refusal) => return Applied::Refused(refusal),
            Ok(()) => return apply_in_batch(txn, ctx, command),
        },
        _ => apply(txn, ctx, command),
    };
    match written {
        Ok(outcome) => Applied::Done(outcome),
        Err(e) => Applied::Spoiled(e),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::{Arc, Mutex, PoisonError};

    use meridian_config::{Durability, StorageConfig};
    use meridian_model::Schema;
    use meridian_model::dn::Dn;
    use meridian_model::entry::Entry;
    use meridian_model::modify::{ModOp, Modification};

    use crate::{Command, Outcome, Store, StoreError, StoreOptions};

    /// The DNs (as written) whose modify or add fails once all its writes
    /// are done, as an engine failure in the middle of a command would.
    /// One list for the tests running in parallel: each adds and removes
    /// its own DN (see [`failing_after_writing`]), and names DNs no other
    /// test writes (`uid=u…-TAG`, one set per caller, `uid=add…`, `uid=mix…`).
    static FAIL_AFTER_WRITING: Mutex<Vec<String>> = Mutex::new(Vec::new());

    pub(super) fn fail_after_writing(written: &str) -> Result<(), StoreError> {
        let failing = FAIL_AFTER_WRITING
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if failing.iter().any(|dn| dn == written) {
            return Err(StoreError::Engine("injected failure after writing".into()));
        }
        Ok(())
    }

    /// `result` is the failure [`fail_after_writing`] injected.
    fn assert_injected(result: &Result<Outcome, StoreError>) {
        assert!(
            matches!(result, Err(StoreError::Engine(m)) if m.contains("injected")),
            "{result:?}"
        );
    }

    /// Makes writes of `dn` fail after writing until the guard is dropped.
    fn failing_after_writing(dn: String) -> impl Drop {
        struct Injected(String);
        impl Drop for Injected {
            fn drop(&mut self) {
                FAIL_AFTER_WRITING
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .retain(|dn| *dn != self.0);
            }
        }
        FAIL_AFTER_WRITING
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(dn.clone());
        Injected(dn)
    }

    fn entry(schema: &Schema, dn: &str, attrs: &[(&str, &str)]) -> Entry {
        Entry::new(
            Dn::parse(dn.as_bytes(), schema).unwrap(),
            attrs.iter().map(|(n, v)| (n.as_bytes(), [v.as_bytes()])),
            schema,
        )
        .unwrap()
    }

    const SUFFIX: &str = "dc=example,dc=com";

    /// A store in a fresh directory named after `tag`, holding the
    /// suffix entry.
    fn open_with_suffix(tag: &str, storage: StorageConfig) -> (Arc<Schema>, PathBuf, Store) {
        let schema = Arc::new(Schema::builtin().unwrap());
        let dir = std::env::temp_dir().join(format!("meridian-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = Store::open(
            StoreOptions {
                path: dir.clone(),
                storage,
                suffixes: vec![Dn::parse(SUFFIX.as_bytes(), &schema).unwrap()],
            },
            Arc::clone(&schema),
        )
        .unwrap();
        let base = entry(
            &schema,
            SUFFIX,
            &[
                ("objectClass", "organization"),
                ("objectClass", "dcObject"),
                ("dc", "example"),
                ("o", "x"),
            ],
        );
        store
            .execute_blocking(Command::Add {
                entry: base,
                prechecked: false,
            })
            .unwrap();
        (schema, dir, store)
    }

    /// Submits `commands` at once and waits for them all. While the
    /// writer syncs one batch the rest wait and go into the next batches
    /// together, which the test needs and this checks.
    fn run_together(store: &Store, commands: Vec<Command>) -> Vec<Result<Outcome, StoreError>> {
        let count = commands.len() as u64;
        let commits_before = store.commits();
        let submitted: Vec<_> = commands
            .into_iter()
            .map(|command| store.submit_blocking(command).unwrap())
            .collect();
        let results = submitted.into_iter().map(|s| s.wait_blocking()).collect();
        assert!(
            store.commits() - commits_before < count,
            "the commands shared batches"
        );
        results
    }

    #[test]
    fn a_modify_failing_in_its_writes_fails_alone() {
        modifies_failing_in_their_writes_fail_alone("unnested", StorageConfig::default());
    }

    #[test]
    fn a_modify_failing_in_its_writes_fails_alone_in_journal_mode() {
        // Journal mode maps the database writable (MDB_WRITEMAP), where
        // LMDB has no nested transactions at all.
        let storage = StorageConfig {
            durability: Durability::Journal,
            ..StorageConfig::default()
        };
        modifies_failing_in_their_writes_fail_alone("unnested-journal", storage);
    }

    fn modifies_failing_in_their_writes_fail_alone(tag: &str, storage: StorageConfig) {
        // Modifies go without a nested transaction of their own. One that
        // fails after it began to write leaves its part in the batch's
        // transaction: the commands before it must be committed without
        // it, so that the others commit and nothing of it does. Failing
        // ones first, last, and two in a row.
        let (schema, dir, store) = open_with_suffix(tag, storage);
        let add = |e: Entry| {
            store
                .execute_blocking(Command::Add {
                    entry: e,
                    prechecked: false,
                })
                .unwrap()
        };
        const USERS: usize = 40;
        // Each caller its own DNs: the list of failing DNs is shared by
        // the tests running at the same time.
        let uid = |i: usize| format!("u{i}-{tag}");
        let dn = |i: usize| format!("uid={},{SUFFIX}", uid(i));
        for i in 0..USERS {
            add(entry(
                &schema,
                &dn(i),
                &[("objectClass", "account"), ("uid", &uid(i))],
            ));
        }
        let failing = [0, 17, 18, USERS - 1];
        let injected: Vec<_> = failing
            .iter()
            .map(|&i| failing_after_writing(dn(i)))
            .collect();
        let modifies = (0..USERS)
            .map(|i| Command::Modify {
                dn: Dn::parse(dn(i).as_bytes(), &schema).unwrap(),
                changes: vec![Modification {
                    op: ModOp::Replace,
                    attr: "description".into(),
                    values: vec![b"changed".to_vec()],
                }],
                operational: vec![],
                permissive: false,
            })
            .collect();
        let results = run_together(&store, modifies);
        drop(injected);
        let snap = store.snapshot().unwrap();
        for (i, result) in results.iter().enumerate() {
            let (_, stored) = snap
                .get(&Dn::parse(dn(i).as_bytes(), &schema).unwrap())
                .unwrap()
                .unwrap();
            let description = schema.attribute_id("description").unwrap();
            let changed = stored.get(description).is_some();
            if failing.contains(&i) {
                assert_injected(result);
                assert!(!changed, "the failed modify left its change");
            } else {
                assert!(result.is_ok(), "modify {i}: {result:?}");
                assert!(changed, "modify {i} is lost");
            }
        }
        assert!(snap.check().unwrap().is_empty());
        drop(snap);
        store.close();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_rename_failing_in_its_writes_fails_alone() {
        // A rename failing after its first write (an engine failure)
        // spoils the transaction; it is cut out of the batch, and the
        // renames around it commit.
        let storage = StorageConfig {
            durability: Durability::Journal,
            ..StorageConfig::default()
        };
        let (schema, dir, store) = open_with_suffix("rename-spoiled", storage);
        const USERS: usize = 12;
        let old = |i: usize| format!("uid=mv{i},{SUFFIX}");
        let new = |i: usize| format!("uid=moved{i},{SUFFIX}");
        for i in 0..USERS {
            let add = Command::Add {
                entry: entry(
                    &schema,
                    &old(i),
                    &[("objectClass", "account"), ("uid", &format!("mv{i}"))],
                ),
                prechecked: false,
            };
            store.execute_blocking(add).unwrap();
        }
        let failing = 5;
        let injected = failing_after_writing(new(failing));
        let renames = (0..USERS)
            .map(|i| Command::ModifyDn {
                dn: Dn::parse(old(i).as_bytes(), &schema).unwrap(),
                new_rdn: format!("uid=moved{i}"),
                delete_old_rdn: true,
                new_superior: None,
                operational: vec![],
            })
            .collect();
        let results = run_together(&store, renames);
        drop(injected);
        let snap = store.snapshot().unwrap();
        let exists = |dn: String| {
            snap.get(&Dn::parse(dn.as_bytes(), &schema).unwrap())
                .unwrap()
                .is_some()
        };
        for (i, result) in results.iter().enumerate() {
            if i == failing {
                assert_injected(result);
                assert!(
                    exists(old(i)) && !exists(new(i)),
                    "the failed rename left a trace"
                );
            } else {
                assert!(result.is_ok(), "rename {i}: {result:?}");
                assert!(!exists(old(i)) && exists(new(i)), "rename {i} is lost");
            }
        }
        assert!(snap.check().unwrap().is_empty());
        drop(snap);
        store.close();
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Runs `f` in a write transaction of `store` with a writer's
    /// context, then commits what it left there.
    fn in_writer_transaction(
        store: &Store,
        f: impl FnOnce(&mut heed::RwTxn<'_>, &super::Context<'_>),
    ) {
        let inner = &store.inner;
        let attempt = super::Attempt::new(inner, crate::dn_ids::DnIds::new(16));
        let ctx = attempt.context(inner);
        let mut txn = inner.env.write_txn().unwrap();
        f(&mut txn, &ctx);
        txn.commit().unwrap();
    }

    /// The person `uid=s1` the splice tests modify, with `more`.
    fn person(schema: &Schema, more: &[(&str, &str)]) -> Entry {
        let mut attrs = vec![
            ("objectClass", "inetOrgPerson"),
            ("uid", "s1"),
            ("cn", "S"),
            ("sn", "One"),
            ("description", "old"),
        ];
        attrs.extend_from_slice(more);
        entry(schema, &format!("uid=s1,{SUFFIX}"), &attrs)
    }

    /// A store holding `person` with every name the splice tests use,
    /// so that each has its number (the splice takes no name numbered in
    /// its own batch).
    fn open_for_splices(tag: &str) -> (Arc<Schema>, PathBuf, Store) {
        let (schema, dir, store) = open_with_suffix(tag, StorageConfig::default());
        let every_name = [
            ("description;lang-de", "Eins"),
            ("cn;lang-de", "Es"),
            ("mail", "s@example.com"),
            ("telephoneNumber", "+1 555 0100"),
            ("modifyTimestamp", "20261125000000Z"),
            ("modifiersName", "cn=admin"),
        ];
        store
            .execute_blocking(Command::Add {
                entry: person(&schema, &every_name),
                prechecked: false,
            })
            .unwrap();
        (schema, dir, store)
    }

    fn replace(attr: &str, values: &[&str]) -> Modification {
        Modification {
            op: ModOp::Replace,
            attr: attr.into(),
            values: values.iter().map(|v| v.as_bytes().to_vec()).collect(),
        }
    }

    #[test]
    fn a_splice_writes_the_record_and_index_keys_the_entry_path_would() {
        let (schema, dir, store) = open_for_splices("splice-same");
        let record = person(
            &schema,
            &[
                ("mail", "s@example.com"),
                ("mail", "one@example.com"),
                ("telephoneNumber", "+1 555 0100"),
            ],
        );
        let server: Vec<crate::command::OperationalAttribute> = vec![
            ("modifyTimestamp".into(), vec![b"20261125120000Z".to_vec()]),
            (
                "modifiersName".into(),
                vec![b"cn=admin,dc=example,dc=com".to_vec()],
            ),
        ];
        // Of an indexed type the entry keeps another description of:
        // only the server's changes are spliced so (the client's values
        // of such a type would be checked again by the entry path).
        let german: Vec<crate::command::OperationalAttribute> =
            vec![("cn;lang-de".into(), vec![b"Es".to_vec()])];
        // (the client's changes, the server's, whether index keys change)
        let cases = [
            (vec![replace("description", &["new"])], &[][..], false),
            (vec![replace("description", &["new"])], &server[..], false),
            (vec![replace("cn", &["S", "Ess"])], &[], true),
            (vec![replace("mail", &[])], &server, true),
            (
                vec![
                    replace("telephoneNumber", &[]),
                    replace("description", &["a", "b"]),
                ],
                &[],
                false,
            ),
            (
                vec![
                    replace("mail", &["new@example.com"]),
                    replace("description", &[]),
                ],
                &server,
                true,
            ),
            (vec![replace("cn", &["S"])], &[], false),
            (vec![], &german, true),
        ];
        in_writer_transaction(&store, |txn, ctx| {
            let bytes = ctx.encode(txn, &record).unwrap();
            for (changes, operational, keys_change) in &cases {
                let described = ctx
                    .describe(super::all_changes(changes, operational))
                    .unwrap();
                let n = changes.len();
                let spliced = super::splice::splice(ctx, &bytes, &record.dn, &described, n)
                    .unwrap_or_else(|| panic!("{changes:?}: not spliced"));
                let plan = super::plan_changes(ctx, record.clone(), &described, n, false).unwrap();
                let entry_path = super::known_record(ctx, &plan.new).unwrap();
                assert_eq!(spliced.record, entry_path, "{changes:?}: record");
                let differences = |index: Option<super::IndexChange>| {
                    index.map_or((vec![], vec![]), |i| {
                        let gone: Vec<_> = i.old.difference(&i.new).cloned().collect();
                        let come: Vec<_> = i.new.difference(&i.old).cloned().collect();
                        (gone, come)
                    })
                };
                let spliced_keys = differences(spliced.index);
                assert_eq!(spliced_keys, differences(plan.index), "{changes:?}: keys");
                let changed = !spliced_keys.0.is_empty() || !spliced_keys.1.is_empty();
                assert_eq!(changed, *keys_change, "{changes:?}: keys changed");
            }
        });
        drop(store);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_splice_leaves_records_against_the_rules_to_the_entry_path() {
        // Records no writer stores (each store checks an entry's RDN and
        // values when it writes them), which a schema changed since
        // could make: the entry path refuses a modify of them, so the
        // splice must leave it to that path, not succeed.
        let (schema, dir, store) = open_for_splices("splice-rules");
        let changes = vec![replace("description", &["new"])];
        let set = |mut e: Entry, name: &str, value: &str| {
            for attr in e.attributes.iter_mut().filter(|a| a.name(&schema) == name) {
                attr.values = [value.as_bytes().to_vec()].into_iter().collect();
            }
            e
        };
        let cases = [
            ("valid", person(&schema, &[]), true),
            (
                "without its RDN's value",
                set(person(&schema, &[]), "uid", "other"),
                false,
            ),
            (
                "with an invalid value of the changed type",
                set(
                    person(&schema, &[("description;lang-de", "Eins")]),
                    "description;lang-de",
                    "",
                ),
                false,
            ),
        ];
        in_writer_transaction(&store, |txn, ctx| {
            let described = ctx.describe(super::all_changes(&changes, &[])).unwrap();
            for (what, record, valid) in cases {
                let bytes = ctx.encode(txn, &record).unwrap();
                let spliced = super::splice::splice(ctx, &bytes, &record.dn, &described, 1);
                let planned = super::plan_changes(ctx, record, &described, 1, false);
                assert_eq!(spliced.is_some(), valid, "{what}: splice");
                assert_eq!(planned.is_ok(), valid, "{what}: entry path");
            }
        });
        drop(store);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_refused_rename_writes_nothing_before_it_is_refused() {
        // Every refusal of a rename comes before its first write, so it
        // fails alone in its batch without costing the others a second
        // transaction (apply_in_batch): the transaction it ran in holds
        // nothing of it.
        let (schema, dir, store) = open_with_suffix("rename-refused", StorageConfig::default());
        let long = "l".repeat(240);
        let ou = |name: &str| {
            entry(
                &schema,
                &format!("ou={name},{SUFFIX}"),
                &[("objectClass", "organizationalUnit"), ("ou", name)],
            )
        };
        for e in [
            ou("a"),
            ou("b"),
            ou(&long),
            entry(
                &schema,
                &format!("uid=c,ou=a,{SUFFIX}"),
                &[("objectClass", "account"), ("uid", "c")],
            ),
            entry(
                &schema,
                &format!("uid={long},uid=c,ou=a,{SUFFIX}"),
                &[("objectClass", "account"), ("uid", &long)],
            ),
        ] {
            store
                .execute_blocking(Command::Add {
                    entry: e,
                    prechecked: false,
                })
                .unwrap();
        }
        let dn = |text: &str| Dn::parse(format!("{text}{SUFFIX}").as_bytes(), &schema).unwrap();
        let rename = |from: &str, new_rdn: &str, under: Option<&str>| Command::ModifyDn {
            dn: dn(from),
            new_rdn: new_rdn.into(),
            delete_old_rdn: true,
            new_superior: under.map(|u| Box::new(dn(u))),
            operational: vec![],
        };
        use meridian_proto::ResultCode as Code;
        let refused = [
            (
                rename("uid=nobody,ou=a,", "uid=x", None),
                Code::NO_SUCH_OBJECT,
            ),
            (rename("ou=a,", "ou=b", None), Code::ENTRY_ALREADY_EXISTS),
            (
                rename("ou=a,", "ou=a", Some("ou=nowhere,")),
                Code::NO_SUCH_OBJECT,
            ),
            (
                rename("ou=a,", "ou=a", Some("uid=c,ou=a,")),
                Code::UNWILLING_TO_PERFORM,
            ),
            (rename("", "dc=other", None), Code::UNWILLING_TO_PERFORM),
            (
                rename("ou=a,", "ou=x+ou=y,ou=z", None),
                Code::INVALID_DN_SYNTAX,
            ),
            (
                rename("uid=c,ou=a,", "cn=c", None),
                Code::OBJECT_CLASS_VIOLATION,
            ),
            // Its subtree's deepest name would be too long to store.
            (
                rename("uid=c,ou=a,", "uid=c", Some(&format!("ou={long},"))),
                Code::UNWILLING_TO_PERFORM,
            ),
        ];
        let before = store.snapshot().unwrap().raw_dump().unwrap();
        in_writer_transaction(&store, |txn, ctx| {
            for (command, code) in &refused {
                match super::apply_in_batch(txn, ctx, command) {
                    super::Applied::Refused(e) => assert_eq!(e.code(), *code, "{command:?}: {e}"),
                    super::Applied::Done(_) => panic!("{command:?} was applied"),
                    super::Applied::Spoiled(e) => panic!("{command:?} failed after writing: {e}"),
                }
            }
        });
        let after = store.snapshot().unwrap().raw_dump().unwrap();
        assert!(before == after, "a refused rename wrote to the transaction");
        // The same move one level up fits, and goes through.
        let fits = rename("uid=c,ou=a,", "uid=c", Some("ou=b,"));
        assert_eq!(store.execute_blocking(fits).unwrap(), Outcome::Renamed(1));
        store.close();
        let _ = std::fs::remove_dir_all(&dir);
    }

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
        let Outcome::AddedMany { added, failed } = loaded else {
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

    #[test]
    fn unnested_adds_fail_alone_and_leave_nothing_behind() {
        // Adds and bulk loads go without a nested transaction too. Three
        // ways one can fail among others: refused before it writes (it
        // exists), failing in the engine after its writes (cut out of the
        // batch), and refused in a prechecked bulk load,
        // where the existence check is the first write: its new
        // attribute name must not be numbered, or a journal replay,
        // which never sees it, would number the next name differently.
        let (schema, dir, store) = open_with_suffix("unnested-add", StorageConfig::default());
        let user = |i: usize| {
            entry(
                &schema,
                &format!("uid=add{i},{SUFFIX}"),
                &[("objectClass", "account"), ("uid", &format!("add{i}"))],
            )
        };
        store
            .execute_blocking(Command::Add {
                entry: user(0),
                prechecked: false,
            })
            .unwrap();
        const USERS: usize = 40;
        let failing = 17;
        let injected = failing_after_writing(user(failing).dn.original().to_owned());
        // add0 exists: its add is refused before writing.
        let results = run_together(
            &store,
            (0..USERS)
                .map(|i| Command::Add {
                    entry: user(i),
                    prechecked: false,
                })
                .collect(),
        );
        drop(injected);
        let snap = store.snapshot().unwrap();
        for (i, result) in results.iter().enumerate() {
            let found = snap.get(&user(i).dn).unwrap().is_some();
            match i {
                0 => assert!(
                    matches!(result, Err(StoreError::AlreadyExists(_))),
                    "{result:?}"
                ),
                _ if i == failing => {
                    assert_injected(result);
                    assert!(!found, "the failed add left its entry");
                }
                _ => {
                    assert!(result.is_ok(), "add {i}: {result:?}");
                    assert!(found, "add {i} is lost");
                }
            }
        }
        assert!(snap.check().unwrap().is_empty());
        drop(snap);
        // A bulk load of an existing entry, with a name never stored.
        let again = entry(
            &schema,
            &format!("uid=add1,{SUFFIX}"),
            &[
                ("objectClass", "account"),
                ("uid", "add1"),
                ("description", "new name"),
            ],
        );
        let loaded = store
            .execute_blocking(Command::AddMany {
                entries: Arc::new(vec![again, user(USERS)]),
                prechecked: true,
            })
            .unwrap();
        assert!(
            matches!(&loaded, crate::Outcome::AddedMany { added: 1, failed }
                if matches!(failed.as_slice(), [(0, StoreError::AlreadyExists(_))])),
            "{loaded:?}"
        );
        assert_eq!(
            store.inner.name_table().number_of("description"),
            None,
            "the refused add numbered its attribute name"
        );
        let snap = store.snapshot().unwrap();
        assert!(snap.get(&user(USERS).dn).unwrap().is_some());
        // Index keys, dn2id and children agree with the entries.
        assert!(snap.check().unwrap().is_empty());
        drop(snap);
        store.close();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn index_keys_of_adds_are_written_before_a_later_write_in_the_batch() {
        // The adds' index keys wait for the end of their run of adds.
        // A modify or a delete of an entry added earlier in the same
        // batch must find them written, or it leaves them stale behind.
        let mut storage = StorageConfig::default();
        storage.indexes.insert(
            "description".into(),
            vec![
                meridian_config::IndexKind::Eq,
                meridian_config::IndexKind::Sub,
            ],
        );
        let (schema, dir, store) = open_with_suffix("pending", storage);
        const USERS: usize = 30;
        let dn = |i: usize| format!("uid=mix{i},{SUFFIX}");
        let mut writes = Vec::new();
        for i in 0..USERS {
            let add = Command::Add {
                entry: entry(
                    &schema,
                    &dn(i),
                    &[
                        ("objectClass", "account"),
                        ("uid", &format!("mix{i}")),
                        ("description", &format!("first {i}")),
                    ],
                ),
                prechecked: false,
            };
            let modify = Command::Modify {
                dn: Dn::parse(dn(i).as_bytes(), &schema).unwrap(),
                changes: vec![Modification {
                    op: ModOp::Replace,
                    attr: "description".into(),
                    values: vec![format!("second {i}").into_bytes()],
                }],
                operational: vec![],
                permissive: false,
            };
            writes.extend([add, modify]);
            if i % 3 == 0 {
                writes.push(Command::Delete {
                    dn: Dn::parse(dn(i).as_bytes(), &schema).unwrap(),
                });
            }
        }
        for result in run_together(&store, writes) {
            result.unwrap();
        }
        let snap = store.snapshot().unwrap();
        let problems = snap.check().unwrap();
        assert!(
            problems.is_empty(),
            "{} problems, the first: {:?}",
            problems.len(),
            problems.first()
        );
        drop(snap);
        store.close();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
