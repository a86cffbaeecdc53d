//! What applying a command needs besides the transaction: the databases,
//! the schema and indexes, and what one attempt at a batch remembers.

use std::cell::RefCell;

use heed::RwTxn;
use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_model::entry::{ByPosition, Description, Entry, KnownClasses};
use meridian_model::modify::Change;

use super::tree;
use crate::dn_ids::DnIds;
use crate::feed::EntryChange;
use crate::keys::EntryId;
use crate::names::{Assigner, Resolver};
use crate::sorted_puts::SortedPuts;
use crate::{Dbs, StoreError, codec, index::Indexes};

/// Everything apply needs besides the transaction.
pub(crate) struct Context<'a> {
    pub(crate) dbs: &'a Dbs,
    pub(crate) schema: &'a Schema,
    pub(crate) indexes: &'a Indexes,
    pub(crate) suffixes: &'a [Dn],
    /// What applying keeps true between entries (`[groups]`).
    pub(crate) integrity: &'a crate::integrity::Integrity,
    /// A group was added since the adds' index keys were last written:
    /// its member keys wait in `pending_index`, and a lookup of a
    /// member must write them first (`integrity.rs`).
    pub(crate) groups_pending: &'a std::cell::Cell<bool>,
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
    /// ([`DnIds`]).
    pub(crate) dn_ids: &'a RefCell<DnIds>,
    /// Entries this attempt added or changed, for the scan columns'
    /// touch log (`columns.rs`).
    pub(crate) touched: &'a RefCell<Vec<EntryId>>,
    /// What this attempt changed, for the change feed (`feed.rs`).
    pub(crate) changes: &'a RefCell<Vec<EntryChange>>,
    /// The feed had followers when the attempt began: deletes keep the
    /// entry they remove for them.
    pub(crate) followed: bool,
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
    pub(crate) dn_ids: RefCell<DnIds>,
    touched: RefCell<Vec<EntryId>>,
    changes: RefCell<Vec<EntryChange>>,
    groups_pending: std::cell::Cell<bool>,
}

impl Attempt {
    pub(crate) fn new(inner: &crate::Inner, dn_ids: DnIds) -> Attempt {
        Attempt {
            names: Assigner::new(inner.name_table()),
            pending_index: RefCell::new(SortedPuts::default()),
            descriptions: RefCell::new(ByPosition::default()),
            classes: RefCell::new(KnownClasses::default()),
            dn_ids: RefCell::new(dn_ids),
            touched: RefCell::default(),
            changes: RefCell::default(),
            groups_pending: std::cell::Cell::new(false),
        }
    }

    pub(crate) fn context<'a>(&'a self, inner: &'a crate::Inner) -> Context<'a> {
        Context {
            dbs: &inner.dbs,
            schema: &inner.schema,
            indexes: &inner.indexes,
            suffixes: &inner.suffixes,
            integrity: &inner.integrity,
            groups_pending: &self.groups_pending,
            names: &self.names,
            pending_index: &self.pending_index,
            descriptions: &self.descriptions,
            classes: &self.classes,
            dn_ids: &self.dn_ids,
            touched: &self.touched,
            changes: &self.changes,
            followed: inner.feed.followed(),
        }
    }
}

impl Context<'_> {
    /// Notes that entry `id` is added or changed (`columns.rs`).
    pub(crate) fn touch(&self, id: EntryId) {
        self.touched.borrow_mut().push(id);
    }

    /// Notes a change for the change feed.
    pub(crate) fn changed(&self, change: EntryChange) {
        self.changes.borrow_mut().push(change);
    }

    /// The changes this attempt made, taken.
    pub(crate) fn take_changes(&self) -> Vec<EntryChange> {
        std::mem::take(&mut *self.changes.borrow_mut())
    }

    /// The entries this attempt added or changed, taken.
    pub(crate) fn take_touched(&self) -> Vec<EntryId> {
        std::mem::take(&mut *self.touched.borrow_mut())
    }

    /// Writes the adds' index keys waiting in [`Context::pending_index`].
    pub(crate) fn write_pending_index(&self, txn: &mut RwTxn<'_>) -> Result<(), StoreError> {
        self.groups_pending.set(false);
        let keys = std::mem::take(&mut *self.pending_index.borrow_mut());
        keys.write(txn, self.dbs.index)
    }

    /// Each change with its parsed description. Parsing depends on the
    /// schema alone, so a remembered description is the one a parse
    /// would give.
    pub(super) fn describe<'c>(
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
    pub(super) fn encode(&self, txn: &mut RwTxn<'_>, entry: &Entry) -> Result<Vec<u8>, StoreError> {
        codec::encode(entry, |position, attr| {
            self.names
                .number_of(txn, self.dbs, position, attr, self.schema)
        })
    }

    /// A record read in this transaction, decoded.
    pub(super) fn decode(&self, txn: &heed::RoTxn<'_>, bytes: &[u8]) -> Result<Entry, StoreError> {
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
    pub(super) fn load(
        &self,
        txn: &heed::RoTxn<'_>,
        id: EntryId,
        found_by: Option<&Dn>,
    ) -> Result<Entry, StoreError> {
        tree::load(&self.resolver(txn), id, found_by)
    }

    /// The first value of `attr` of the entry `id` ([`tree::first_value`]).
    pub(super) fn first_value(
        &self,
        txn: &heed::RoTxn<'_>,
        id: EntryId,
        attr: meridian_model::schema::AttrId,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        tree::first_value(&self.resolver(txn), id, attr)
    }

    /// Every value of `attr` of the entry `id` ([`tree::values_of`]).
    pub(super) fn values_of(
        &self,
        txn: &heed::RoTxn<'_>,
        id: EntryId,
        attr: meridian_model::schema::AttrId,
    ) -> Result<Vec<Vec<u8>>, StoreError> {
        tree::values_of(&self.resolver(txn), id, attr)
    }

    fn resolver<'t, 'x>(&'t self, txn: &'t heed::RoTxn<'x>) -> Resolver<'t, 'x> {
        Resolver {
            table: self.names.table(),
            txn,
            dbs: self.dbs,
            schema: self.schema,
        }
    }
}
