//! Scan columns: the values of attribute types that searches keep
//! filtering on without an index, held in memory, so such a search reads
//! them instead of every stored entry (`storage.scan_columns_bytes`).
//!
//! A column holds a *row* for every entry with a value of its type or a
//! subtype: the entry's record cut down to those attributes
//! ([`codec::project`]), in the record's own format, so a filter item is
//! evaluated on a row by the same code as on a record. A column is made
//! from one snapshot (the LMDB transaction `built_at`) and never changed.
//! What the writer changed since is in the *touch log*: for each write
//! transaction, the IDs of the entries it added or changed, logged
//! before the transaction commits. A search whose snapshot is at or after
//! `built_at` takes as candidates the rows its filter item matches and
//! every ID touched after `built_at`; each candidate is then read from
//! the search's snapshot and the whole filter checked, as for an index's
//! candidates. So a column can cost time but never change a result: an
//! entry changed since the column was made is a candidate whatever its
//! row says, and a deleted one is not found and dropped. A search at a
//! snapshot older than the column scans.
//!
//! The second search that would scan for a type asks for its column,
//! which a thread of its own makes from a fresh snapshot (one search
//! alone does not pay for one, and no client waits for one); searches
//! scan until it is there. A column is dropped once the IDs touched
//! since it was made pass an eighth of its rows, and the next such search
//! asks for a fresh one. The columns share the budget; the least recently
//! used go first to make room, and a type whose column alone would not
//! fit gets none.
//!
//! A search reads a column as it would the records: in ID order, every
//! row passing through the search's `examine` (its time and lookthrough
//! limits, and the step that yields to other requests), the rows its
//! filter item matches and the touched IDs read from the snapshot and
//! checked whole (`Snapshot::search_examining`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use heed::RoTxn;
use meridian_model::Schema;
use meridian_model::entry::Description;
use meridian_model::schema::AttrId;
use meridian_proto::Filter;

use crate::keys::{self, EntryId};
use crate::names::NameSource;
use crate::{Dbs, StoreError, codec};

/// The columns of one store and the writer's touch log.
pub(crate) struct Columns {
    /// `storage.scan_columns_bytes`; 0: no columns, nothing logged.
    budget: u64,
    state: Mutex<State>,
    /// A clock for least-recently-used order.
    tick: AtomicU64,
    /// Where searches ask for a column: the thread that makes them
    /// ([`run_maker`]); `None` before it starts and once the store closes.
    requests: Mutex<Option<SyncSender<AttrId>>>,
}

/// Column requests waiting for the maker; more are dropped (the search
/// that asked scans, and a later one asks again).
pub(crate) const REQUESTS_QUEUED: usize = 16;

#[derive(Default)]
struct State {
    columns: HashMap<AttrId, Arc<Column>>,
    /// Types asked of the maker and not yet made.
    requested: HashSet<AttrId>,
    /// Types the maker is making a column of, each with the log position
    /// it needs kept: everything after it (the maker's snapshot is newer).
    building: HashMap<AttrId, u64>,
    /// Searches that would have scanned for each type without a column.
    demand: HashMap<AttrId, u32>,
    /// Types whose column alone is larger than the budget.
    too_big: HashSet<AttrId>,
    /// Write transactions' touched IDs, oldest first.
    log: VecDeque<Touched>,
    /// Every write transaction up to this one may be missing from the
    /// log: no column can be made from a snapshot older than it.
    dropped_through: u64,
    /// Bumped when the database is replaced wholesale: a column being
    /// made from the old one is thrown away.
    epoch: u64,
}

/// The entries one write transaction added or changed.
struct Touched {
    txn: u64,
    ids: Vec<EntryId>,
}

/// One type's rows, from one snapshot.
pub(crate) struct Column {
    /// The snapshot (LMDB transaction ID) the rows were read in.
    built_at: u64,
    /// The rows' entries, ascending.
    ids: Vec<EntryId>,
    /// Row `i` is `rows[ends[i - 1]..ends[i]]`.
    ends: Vec<u32>,
    rows: Vec<u8>,
    /// Row `i`'s values as keys of the type's equality rule, each a
    /// varint length and the key, in `keys[key_ends[i - 1]..key_ends[i]]`:
    /// an equality item is then a byte comparison per value instead of
    /// an evaluation (perf: the evaluation was three quarters of a column
    /// search). Empty when some row's values could not all be read.
    key_ends: Vec<u32>,
    keys: Vec<u8>,
    /// [`Columns::tick`] when a search last used it.
    last_used: AtomicU64,
    /// IDs touched since `built_at` (counted as logged, repeats included).
    touched: AtomicUsize,
}

/// Part `i` of `data`, which `ends` cuts after each part.
fn part<'d>(data: &'d [u8], ends: &[u32], i: usize) -> Option<&'d [u8]> {
    let start = match i.checked_sub(1) {
        Some(before) => *ends.get(before)? as usize,
        None => 0,
    };
    data.get(start..*ends.get(i)? as usize)
}

/// Bytes a column of `ids` IDs, `offsets` part ends and `bytes` of rows
/// and keys holds.
fn footprint(ids: usize, offsets: usize, bytes: usize) -> u64 {
    (ids * size_of::<EntryId>() + offsets * size_of::<u32>() + bytes) as u64
}

impl Column {
    /// Memory held, counted against the budget.
    fn bytes(&self) -> u64 {
        footprint(
            self.ids.capacity(),
            self.ends.capacity() + self.key_ends.capacity(),
            self.rows.capacity() + self.keys.capacity(),
        )
    }

    /// The index of the first row above `after`.
    fn first_after(&self, after: Option<EntryId>) -> usize {
        after.map_or(0, |a| self.ids.partition_point(|id| *id <= a))
    }

    /// Whether every row has its equality keys.
    pub(crate) fn has_keys(&self) -> bool {
        self.key_ends.len() == self.ids.len()
    }

    /// Whether any value of row `i` has the equality key `key` (the
    /// column must have keys).
    pub(crate) fn row_has_key(&self, i: usize, key: &[u8]) -> bool {
        let mut keys = part(&self.keys, &self.key_ends, i).unwrap_or_default();
        while let Some(len) = codec::take_varint(&mut keys) {
            let Some((this, rest)) = usize::try_from(len)
                .ok()
                .and_then(|l| keys.split_at_checked(l))
            else {
                return false;
            };
            if this == key {
                return true;
            }
            keys = rest;
        }
        false
    }

    /// Touched IDs past which the column is dropped: an eighth of its
    /// rows, and at least a few hundred (a small column is cheap to
    /// make, and a few touched candidates cheap to read).
    fn stale_after(&self) -> usize {
        (self.ids.len() / 8).max(256)
    }

    /// The IDs of up to `n` rows spread evenly over the column.
    pub(crate) fn sample(&self, n: usize) -> impl Iterator<Item = EntryId> {
        let len = self.ids.len();
        let n = n.min(len);
        (0..n).filter_map(move |k| self.ids.get(k * len / n).copied())
    }

    /// How many rows are of entries above `after`.
    pub(crate) fn rows_after_count(&self, after: Option<EntryId>) -> usize {
        self.ids.len().saturating_sub(self.first_after(after))
    }

    /// The rows of entries above `after` (all if `None`): each row's
    /// number (for [`Column::row_has_key`]), ID and bytes.
    pub(crate) fn rows_after(
        &self,
        after: Option<EntryId>,
    ) -> impl Iterator<Item = (usize, EntryId, &[u8])> {
        (self.first_after(after)..self.ids.len())
            .filter_map(move |i| Some((i, *self.ids.get(i)?, part(&self.rows, &self.ends, i)?)))
    }
}

/// What a search may read instead of records for a type without an
/// index.
pub(crate) enum Found {
    /// This column; these IDs were touched since it was made.
    Column(Arc<Column>, Vec<EntryId>),
    /// Nothing: scan.
    Scan,
}

/// The maker's right to make one type's column ([`Columns::claim`]).
pub(crate) struct Claim {
    attr: AttrId,
    epoch: u64,
}

impl Columns {
    pub(crate) fn new(budget: u64) -> Columns {
        Columns {
            budget,
            state: Mutex::new(State::default()),
            tick: AtomicU64::new(0),
            requests: Mutex::new(None),
        }
    }

    /// Connects the maker thread; its requests go to `sender`.
    pub(crate) fn start(&self, sender: SyncSender<AttrId>) {
        *self.requests.lock().unwrap_or_else(PoisonError::into_inner) = Some(sender);
    }

    /// Disconnects the maker thread, which then ends.
    pub(crate) fn stop(&self) {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Gives back a claim whose column could not be read.
    pub(crate) fn give_up(&self, claim: Claim) {
        let mut state = self.state();
        state.building.remove(&claim.attr);
        state.trim();
    }

    /// Whether a column asked for is still being made (tests wait for
    /// it: [`crate::Store::wait_for_scan_columns`]).
    pub(crate) fn pending(&self) -> bool {
        let state = self.state();
        !state.requested.is_empty() || !state.building.is_empty()
    }

    /// Memory the columns hold.
    pub(crate) fn held_bytes(&self) -> u64 {
        self.state().columns.values().map(|c| c.bytes()).sum()
    }

    /// Whether the writer has anything to log.
    pub(crate) fn enabled(&self) -> bool {
        self.budget > 0
    }

    /// The writer, before it commits transaction `txn`: the entries it
    /// added or changed. A transaction that then fails to commit leaves
    /// its IDs in the log, which only makes them candidates needlessly.
    pub(crate) fn log(&self, txn: u64, ids: Vec<EntryId>) {
        if !self.enabled() {
            return;
        }
        let mut state = self.state();
        let count = ids.len();
        state.log.push_back(Touched { txn, ids });
        state.columns.retain(|_, column| {
            if column.built_at >= txn {
                return true;
            }
            let touched = column.touched.fetch_add(count, Ordering::Relaxed) + count;
            touched <= column.stale_after()
        });
        state.trim();
    }

    /// The writer, before it commits transaction `txn`, which replaces
    /// the database's contents (a snapshot installed from a replica):
    /// every column goes, and none is made from an older snapshot.
    pub(crate) fn replaced(&self, txn: u64) {
        let mut state = self.state();
        state.columns.clear();
        state.log.clear();
        state.dropped_through = state.dropped_through.max(txn);
        state.epoch += 1;
    }

    /// What a search at `snapshot` may read for a filter item on `attr`,
    /// which no index serves. The second search to find nothing for a
    /// type asks the maker for its column.
    pub(crate) fn find(&self, attr: AttrId, snapshot: u64) -> Found {
        if !self.enabled() {
            return Found::Scan;
        }
        let mut state = self.state();
        if let Some(column) = state.columns.get(&attr) {
            if column.built_at > snapshot {
                return Found::Scan;
            }
            column
                .last_used
                .store(self.tick.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
            let touched = state.touched_since(column.built_at).copied().collect();
            return Found::Column(Arc::clone(column), touched);
        }
        if state.too_big.contains(&attr)
            || state.building.contains_key(&attr)
            || state.requested.contains(&attr)
        {
            return Found::Scan;
        }
        let demand = state.demand.entry(attr).or_insert(0);
        *demand = demand.saturating_add(1);
        if *demand < 2 {
            return Found::Scan;
        }
        let requests = self.requests.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(sender) = requests.as_ref()
            && sender.try_send(attr).is_ok()
        {
            state.requested.insert(attr);
        }
        Found::Scan
    }

    /// The maker, before it opens the snapshot it will read `attr`'s
    /// rows in: the right to make the column, if it is still wanted. From
    /// here the log keeps every transaction the snapshot may lack.
    pub(crate) fn claim(&self, attr: AttrId) -> Option<Claim> {
        let mut state = self.state();
        state.requested.remove(&attr);
        if state.columns.contains_key(&attr) || state.too_big.contains(&attr) {
            return None;
        }
        let floor = state.dropped_through;
        state.building.insert(attr, floor);
        Some(Claim {
            attr,
            epoch: state.epoch,
        })
    }

    /// Makes the column `claim` is for, reading `txn` (opened after the
    /// claim), and keeps it if it fits and the database was not replaced
    /// meanwhile; `None` if not kept.
    pub(crate) fn make(
        &self,
        claim: Claim,
        txn: &RoTxn<'_>,
        dbs: &Dbs,
        names: &dyn NameSource,
        schema: &Schema,
    ) -> Result<Option<Arc<Column>>, StoreError> {
        let made = read_column(txn, dbs, names, schema, &claim, self.budget);
        let mut state = self.state();
        state.building.remove(&claim.attr);
        let Some(column) = made? else {
            tracing::info!(
                attribute = schema.attr(claim.attr).map_or("?", |a| a.name()),
                budget = self.budget,
                "a scan column of this attribute would not fit storage.scan_columns_bytes: its searches scan"
            );
            state.too_big.insert(claim.attr);
            state.trim();
            return Ok(None);
        };
        if state.epoch != claim.epoch {
            state.trim();
            return Ok(None);
        }
        let touched = state.touched_since(column.built_at).count();
        column.touched.store(touched, Ordering::Relaxed);
        column
            .last_used
            .store(self.tick.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
        // Room, least recently used first.
        let mut held: u64 = state.columns.values().map(|c| c.bytes()).sum();
        while held + column.bytes() > self.budget {
            let Some(oldest) = state
                .columns
                .iter()
                .min_by_key(|(_, c)| c.last_used.load(Ordering::Relaxed))
                .map(|(attr, _)| *attr)
            else {
                break;
            };
            if let Some(gone) = state.columns.remove(&oldest) {
                held = held.saturating_sub(gone.bytes());
            }
        }
        let column = Arc::new(column);
        state.columns.insert(claim.attr, Arc::clone(&column));
        state.trim();
        Ok(Some(column))
    }
}

/// The parts of `filter` a scan column can stand in for, each with its
/// type: items that must each be TRUE for the filter to be (the filter
/// itself, or what an AND requires) and that are about one type (a leaf,
/// or an OR of leaves on one type). objectClass (every entry has one),
/// NOT and extensible matches (which may test the DN, which rows do not
/// hold) are never among them.
pub(crate) fn necessary_items<'f>(
    filter: &Filter<'f>,
    schema: &Schema,
) -> Vec<(AttrId, Filter<'f>)> {
    fn collect<'f>(filter: &Filter<'f>, schema: &Schema, out: &mut Vec<(AttrId, Filter<'f>)>) {
        match filter {
            Filter::And(children) => {
                for child in children.iter() {
                    collect(&child, schema, out);
                }
            }
            _ => {
                if let Some(attr) = single_type(filter, schema) {
                    out.push((attr, *filter));
                }
            }
        }
    }
    let mut out = Vec::new();
    collect(filter, schema, &mut out);
    out
}

/// The one type `filter` is about, if it is a leaf or an OR of leaves
/// on one type (not objectClass).
fn single_type(filter: &Filter<'_>, schema: &Schema) -> Option<AttrId> {
    let type_of = |name: &[u8]| {
        Description::parse_selector(name, schema)
            .ok()
            .map(|d| d.attr)
            .filter(|a| schema.object_class_attr() != Some(*a))
    };
    match filter {
        Filter::Equality(ava)
        | Filter::GreaterOrEqual(ava)
        | Filter::LessOrEqual(ava)
        | Filter::Approx(ava) => type_of(ava.attr),
        Filter::Substrings(s) => type_of(s.attr),
        Filter::Present(attr) => type_of(attr),
        Filter::Or(children) => {
            let mut found = None;
            for child in children.iter() {
                let attr = single_type(&child, schema)?;
                if found.is_some_and(|f| f != attr) {
                    return None;
                }
                found = Some(attr);
            }
            found
        }
        Filter::And(_) | Filter::Not(_) | Filter::Extensible(_) => None,
    }
}

/// The maker thread: makes each column asked for, one at a time, each
/// from a fresh snapshot, until the store closes ([`Columns::stop`]).
/// Its snapshot is held while it reads, as a long search's is.
pub(crate) fn run_maker(inner: &crate::Inner, requests: &Receiver<AttrId>) {
    while let Ok(attr) = requests.recv() {
        let Some(claim) = inner.columns.claim(attr) else {
            continue;
        };
        let snapshot = match crate::read::Snapshot::new(inner) {
            Ok(snapshot) => snapshot,
            Err(e) => {
                inner.columns.give_up(claim);
                tracing::warn!(error = %e, "a scan column could not be made: its type's searches scan");
                continue;
            }
        };
        let (txn, _) = snapshot.parts();
        let resolver = snapshot.resolver();
        if let Err(e) = inner
            .columns
            .make(claim, txn, &inner.dbs, &resolver, &inner.schema)
        {
            tracing::warn!(error = %e, "a scan column could not be made: its type's searches scan");
        }
    }
}

impl State {
    /// The IDs logged by transactions after `txn`.
    fn touched_since(&self, txn: u64) -> impl Iterator<Item = &EntryId> {
        self.log
            .iter()
            .filter(move |t| t.txn > txn)
            .flat_map(|t| &t.ids)
    }

    /// Drops the log's transactions no column needs: those at or before
    /// the oldest snapshot a column was made (or is being made) from;
    /// with none, all but the newest transaction, which may not have
    /// committed yet (the writer logs before it commits, one transaction
    /// at a time).
    fn trim(&mut self) {
        let needed = self
            .columns
            .values()
            .map(|c| c.built_at)
            .chain(self.building.values().copied())
            .min();
        let newest = self.log.back().map_or(0, |t| t.txn);
        let keep_above = needed.unwrap_or(newest.saturating_sub(1));
        while let Some(front) = self.log.front() {
            if front.txn > keep_above {
                break;
            }
            self.dropped_through = self.dropped_through.max(front.txn);
            self.log.pop_front();
        }
    }
}

/// Reads the rows of `claim`'s type from every entry in `txn`; `None`
/// once they pass `budget` bytes.
fn read_column(
    txn: &RoTxn<'_>,
    dbs: &Dbs,
    names: &dyn NameSource,
    schema: &Schema,
    claim: &Claim,
    budget: u64,
) -> Result<Option<Column>, StoreError> {
    let family = schema.family(claim.attr);
    // Per name number: 0 not yet known, 1 not the type's, 2 the type's.
    let mut kinds = vec![0u8; names.known().len()];
    let mut keep = |number: u32| -> bool {
        if let Some(&kind) = kinds.get(number as usize)
            && kind != 0
        {
            return kind == 2;
        }
        // A name that cannot be read or resolved is kept: a row may hold
        // more than its type, never less.
        let wanted = names.name(number).map_or(true, |name| {
            name.desc
                .as_ref()
                .is_none_or(|desc| family.contains(&desc.attr))
        });
        if let Some(kind) = kinds.get_mut(number as usize) {
            *kind = if wanted { 2 } else { 1 };
        }
        wanted
    };
    let limit = budget.min(u64::from(u32::MAX));
    let equality = schema.attr(claim.attr).and_then(|t| t.equality);
    let mut ids = Vec::new();
    let mut ends = Vec::new();
    let mut rows = Vec::new();
    // Equality keys, while every row's values can be read.
    let mut keyed = equality.is_some();
    let mut key_ends = Vec::new();
    let mut keys = Vec::new();
    for item in dbs.id2entry.iter(txn)? {
        let (key, record) = item?;
        let Some(id) = keys::id_from(key) else {
            continue;
        };
        // A record that cannot be read is kept whole: its row then reads
        // as the record does in a scan (no attributes).
        let kept = match codec::project(record, &mut keep, &mut rows) {
            Ok(kept) => kept,
            Err(_) => {
                rows.extend_from_slice(record);
                true
            }
        };
        if !kept {
            continue;
        }
        let row_start = ends.last().map_or(0, |e| *e as usize);
        ids.push(id);
        ends.push(u32::try_from(rows.len()).unwrap_or(u32::MAX));
        if let (true, Some(rule), Some(row)) = (keyed, equality, rows.get(row_start..)) {
            // A value whose key the rule cannot make is Undefined for
            // every assertion: it has no key. A value of a name the
            // schema cannot place (a row may hold more than its type)
            // leaves the column without keys.
            let mut readable = true;
            let read = codec::visit(row, names, &mut |part| {
                if let codec::StoredPart::Value { attr, value, .. } = part {
                    match attr {
                        Some(attr) if family.contains(&attr) => {
                            if let Some(key) = rule.key(value, schema) {
                                codec::put_bytes(&mut keys, &key);
                            }
                        }
                        Some(_) => {}
                        None => readable = false,
                    }
                }
            });
            keyed = read.is_ok() && readable;
            key_ends.push(u32::try_from(keys.len()).unwrap_or(u32::MAX));
        }
        let held = footprint(
            ids.len(),
            ends.len() + key_ends.len(),
            rows.len() + keys.len(),
        );
        if held > limit {
            return Ok(None);
        }
    }
    if !keyed {
        key_ends = Vec::new();
        keys = Vec::new();
    }
    ids.shrink_to_fit();
    ends.shrink_to_fit();
    rows.shrink_to_fit();
    key_ends.shrink_to_fit();
    keys.shrink_to_fit();
    Ok(Some(Column {
        built_at: txn.id() as u64,
        ids,
        ends,
        rows,
        key_ends,
        keys,
        last_used: AtomicU64::new(0),
        touched: AtomicUsize::new(0),
    }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;

    fn description() -> AttrId {
        let schema = Schema::builtin().unwrap();
        schema.attribute_id("description").unwrap()
    }

    /// The log keeps what a column or a claim may need and no more; the
    /// second search to find no column asks for one, once.
    #[test]
    fn the_log_keeps_what_columns_need() {
        let columns = Columns::new(1 << 20);
        let (sender, requests) = std::sync::mpsc::sync_channel(4);
        columns.start(sender);
        // Nothing needs the log: only the newest transaction stays (it
        // may not have committed yet).
        for txn in 1..=5 {
            columns.log(txn, vec![txn]);
        }
        assert_eq!(columns.state().log.len(), 1);
        assert_eq!(columns.state().dropped_through, 4);
        assert!(matches!(columns.find(description(), 5), Found::Scan));
        assert!(requests.try_recv().is_err());
        assert!(matches!(columns.find(description(), 5), Found::Scan));
        assert_eq!(requests.try_recv().unwrap(), description());
        assert!(matches!(columns.find(description(), 5), Found::Scan));
        assert!(requests.try_recv().is_err(), "asked once");
        let claim = columns.claim(description()).unwrap();
        // While it is made, the log keeps everything its snapshot (opened
        // after the claim) may lack.
        for txn in 6..=9 {
            columns.log(txn, vec![txn * 10]);
        }
        let kept: Vec<u64> = columns.state().log.iter().map(|t| t.txn).collect();
        assert_eq!(kept, [5, 6, 7, 8, 9]);
        // A database replaced meanwhile: the column will not be kept.
        columns.replaced(10);
        assert_eq!(columns.state().epoch, claim.epoch + 1);
        assert!(columns.state().log.is_empty());
        columns.give_up(claim);
        assert!(columns.state().building.is_empty());
        columns.stop();
        assert!(requests.recv().is_err(), "the maker's channel is closed");
    }

    #[test]
    fn no_budget_no_columns_and_no_log() {
        let columns = Columns::new(0);
        columns.log(1, vec![1]);
        assert!(columns.state().log.is_empty());
        let (sender, requests) = std::sync::mpsc::sync_channel(4);
        columns.start(sender);
        for _ in 0..3 {
            assert!(matches!(columns.find(description(), 1), Found::Scan));
        }
        assert!(requests.try_recv().is_err());
    }
}
