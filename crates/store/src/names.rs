//! Attribute names as stored.
//!
//! Each distinct attribute description text a record holds (`cn`,
//! `objectClass`, `cn;lang-de`) gets a number the first time the writer
//! stores it: `meta` key `name/` + the number (u32 big-endian) holds the
//! text. Records (format 2, `codec.rs`) carry the number, so a name costs
//! one or two bytes per entry instead of its length, and a reader gets
//! the description already parsed instead of parsing it per attribute
//! per entry.
//!
//! Numbers are assigned in the order the writer first meets a name, so
//! two stores applying the same commands assign the same numbers. Names
//! are never renumbered or removed.
//!
//! Readers use the table published after the last commit; a record newer
//! than that table (a commit that landed between the two) is resolved
//! from `meta` in the reader's own transaction, which sees what the
//! record's transaction wrote.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use heed::{RoTxn, RwTxn};
use meridian_model::Schema;
use meridian_model::entry::{AttrName, Attribute, ByPosition, Description};

use crate::{Dbs, StoreError};

/// The prefix of the `meta` keys holding names.
const PREFIX: &[u8] = b"name/";

fn key(number: u32) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[..5].copy_from_slice(PREFIX);
    k[5..].copy_from_slice(&number.to_be_bytes());
    k
}

/// One stored name.
#[derive(Debug, Clone)]
pub(crate) struct Name {
    /// The description as the client wrote it.
    pub(crate) text: String,
    /// Parsed with the schema of this process; `None` if the schema no
    /// longer knows the type (decoding such an entry fails).
    pub(crate) desc: Option<Description>,
    /// `text` as a decoded attribute holds it: nothing to allocate when
    /// it is the type's primary name.
    pub(crate) spelled: AttrName,
}

impl Name {
    fn new(text: String, schema: &Schema) -> Name {
        let desc = Description::parse(text.as_bytes(), schema).ok();
        // Without a description, decoding fails before the spelling is
        // read: this default is never used.
        let spelled = match &desc {
            Some(desc) => AttrName::new(&text, desc, schema),
            None => AttrName::default(),
        };
        Name {
            text,
            desc,
            spelled,
        }
    }
}

/// Every name known at one commit.
#[derive(Debug, Default, Clone)]
pub(crate) struct NameTable {
    list: Vec<Name>,
    /// Looked up when the writer's caches of recent and primary names
    /// (`Assigner`) miss. Keyed by the standard library's hasher: a
    /// `lang-*` option is free text, so a client may store as many
    /// names as it likes, and with FxHash it could choose them to
    /// collide.
    numbers: HashMap<String, u32>,
}

impl NameTable {
    /// Reads every name from `meta`.
    pub(crate) fn load(
        txn: &RoTxn<'_>,
        dbs: &Dbs,
        schema: &Schema,
    ) -> Result<NameTable, StoreError> {
        let mut table = NameTable::default();
        for item in dbs.meta.prefix_iter(txn, PREFIX)? {
            let (k, v) = item?;
            let number = k
                .get(PREFIX.len()..)
                .and_then(|n| <[u8; 4]>::try_from(n).ok())
                .map(u32::from_be_bytes);
            if number != Some(table.list.len() as u32) {
                return Err(StoreError::Corrupt(format!(
                    "attribute name table: key {k:02x?} out of sequence"
                )));
            }
            table.push(String::from_utf8_lossy(v).into_owned(), schema);
        }
        Ok(table)
    }

    fn push(&mut self, text: String, schema: &Schema) {
        self.numbers.insert(text.clone(), self.list.len() as u32);
        self.list.push(Name::new(text, schema));
    }

    fn len(&self) -> u32 {
        self.list.len() as u32
    }

    /// The name numbered `number`, if this table has it.
    pub(crate) fn get(&self, number: u32) -> Option<&Name> {
        self.list.get(number as usize)
    }
}

/// Where decoding finds names.
pub(crate) trait NameSource {
    /// The name numbered `number`.
    fn name(&self, number: u32) -> Result<std::borrow::Cow<'_, Name>, StoreError>;
    /// The schema the names' descriptions were parsed with.
    fn schema(&self) -> &Schema;
    /// The names known in memory, by number: a scan looks its names up
    /// here directly and calls [`NameSource::name`] only for the others
    /// (perf: the call and its `Result<Cow>` return, copied through the
    /// stack, were a third of an unindexed search's CPU).
    fn known(&self) -> &[Name];
}

/// A table alone (tests): unknown numbers are errors.
impl NameSource for (NameTable, &Schema) {
    fn known(&self) -> &[Name] {
        &self.0.list
    }

    fn name(&self, number: u32) -> Result<std::borrow::Cow<'_, Name>, StoreError> {
        self.0
            .list
            .get(number as usize)
            .map(std::borrow::Cow::Borrowed)
            .ok_or_else(|| {
                StoreError::corrupt(format_args!(
                    "entry record: unknown attribute name {number}"
                ))
            })
    }
    fn schema(&self) -> &Schema {
        self.1
    }
}

impl NameTable {
    /// A table of `texts`, numbered in order (tests).
    #[cfg(test)]
    pub(crate) fn of(texts: &[&str], schema: &Schema) -> NameTable {
        let mut table = NameTable::default();
        for t in texts {
            table.push((*t).to_owned(), schema);
        }
        table
    }

    /// The number of `text`, if it has one.
    #[cfg(test)]
    pub(crate) fn number_of(&self, text: &str) -> Option<u32> {
        self.numbers.get(text).copied()
    }
}

/// Looks names up for decoding, in the transaction the record was read in.
pub(crate) struct Resolver<'a, 't> {
    pub(crate) table: &'a NameTable,
    pub(crate) txn: &'a RoTxn<'t>,
    pub(crate) dbs: &'a Dbs,
    pub(crate) schema: &'a Schema,
}

impl NameSource for Resolver<'_, '_> {
    fn known(&self) -> &[Name] {
        &self.table.list
    }

    fn schema(&self) -> &Schema {
        self.schema
    }

    /// The name numbered `number`: from the table, or (for a record newer
    /// than the table) from `meta`.
    fn name(&self, number: u32) -> Result<std::borrow::Cow<'_, Name>, StoreError> {
        if let Some(name) = self.table.list.get(number as usize) {
            return Ok(std::borrow::Cow::Borrowed(name));
        }
        let text = self.dbs.meta.get(self.txn, &key(number))?.ok_or_else(|| {
            StoreError::corrupt(format_args!(
                "entry record: unknown attribute name {number}"
            ))
        })?;
        Ok(std::borrow::Cow::Owned(Name::new(
            String::from_utf8_lossy(text).into_owned(),
            self.schema,
        )))
    }
}

/// [`Assigner::source`]: the names a batch knows, read from memory.
pub(crate) struct AssignedNames<'a> {
    assigner: &'a Assigner,
    schema: &'a Schema,
}

impl NameSource for AssignedNames<'_> {
    fn known(&self) -> &[Name] {
        &self.assigner.table.list
    }

    fn schema(&self) -> &Schema {
        self.schema
    }

    fn name(&self, number: u32) -> Result<std::borrow::Cow<'_, Name>, StoreError> {
        let table = &self.assigner.table;
        if let Some(name) = table.list.get(number as usize) {
            return Ok(std::borrow::Cow::Borrowed(name));
        }
        let pending = self.assigner.pending.borrow();
        let text = (number as usize)
            .checked_sub(table.list.len())
            .and_then(|p| pending.get(p))
            .ok_or_else(|| {
                StoreError::corrupt(format_args!(
                    "entry record: unknown attribute name {number}"
                ))
            })?;
        Ok(std::borrow::Cow::Owned(Name::new(
            text.clone(),
            self.schema,
        )))
    }
}

/// The writer's side: numbers for names, new ones written to `meta` in
/// the transaction that first stores them.
pub(crate) struct Assigner {
    table: Arc<NameTable>,
    /// Names first stored by this batch, in number order after the table's.
    pending: RefCell<Vec<String>>,
    /// The same names with their numbers, for looking them up: a batch
    /// may store thousands of new names (an add of as many
    /// `description;lang-xN`), and a scan of the list for each was the
    /// square of their number. Keyed by the standard library's hasher:
    /// new names are a client's.
    pending_numbers: RefCell<HashMap<String, u32>>,
    /// The table's name (and number) last seen at each attribute
    /// position of a record: the records of a load list the same names
    /// in the same order, and comparing one name is cheaper than a hash
    /// lookup (which was a tenth of a bulk load's writer). Names of the
    /// table only: a pending name may be taken back by a rollback.
    recent: RefCell<ByPosition<u32>>,
    /// The table's number of each type's primary name, by type
    /// ([`meridian_model::schema::AttrId::index`]): attributes spelled so
    /// (nearly all) are numbered without a look at their text.
    primary: RefCell<Vec<Option<u32>>>,
}

impl Assigner {
    pub(crate) fn new(table: Arc<NameTable>) -> Assigner {
        Assigner {
            table,
            pending: RefCell::new(Vec::new()),
            pending_numbers: RefCell::new(HashMap::new()),
            recent: RefCell::new(ByPosition::default()),
            primary: RefCell::new(Vec::new()),
        }
    }

    /// The number of `attr`'s name ([`Assigner::number`]).
    pub(crate) fn number_of(
        &self,
        txn: &mut RwTxn<'_>,
        dbs: &Dbs,
        position: usize,
        attr: &Attribute,
        schema: &Schema,
    ) -> Result<u32, StoreError> {
        self.number_of_with(position, attr, schema, |text| self.assign(txn, dbs, text))
    }

    /// The number of `attr`'s name if it has one already (in the table or
    /// from this batch); `None` for a name never stored, which only
    /// [`Assigner::number_of`] may number.
    pub(crate) fn known_number_of(
        &self,
        position: usize,
        attr: &Attribute,
        schema: &Schema,
    ) -> Option<u32> {
        self.number_of_with(position, attr, schema, |_| Err(()))
            .ok()
    }

    fn number_of_with<E>(
        &self,
        position: usize,
        attr: &Attribute,
        schema: &Schema,
        assign: impl FnOnce(&str) -> Result<u32, E>,
    ) -> Result<u32, E> {
        if attr.name.given().is_some() || !attr.desc.options.is_empty() {
            return self.number(position, attr.name(schema), assign);
        }
        let slot = attr.desc.attr.index();
        if let Some(&Some(n)) = self.primary.borrow().get(slot) {
            return Ok(n);
        }
        let n = self.number(position, attr.name(schema), assign)?;
        // Only the table's numbers: a pending one may be rolled back.
        if n < self.table.len() {
            let mut primary = self.primary.borrow_mut();
            if primary.len() <= slot {
                primary.resize(slot + 1, None);
            }
            if let Some(cell) = primary.get_mut(slot) {
                *cell = Some(n);
            }
        }
        Ok(n)
    }

    /// The number of `text`, or `assign`'s for a name never stored.
    /// `position`: the attribute's place in its record (see `recent`).
    fn number<E>(
        &self,
        position: usize,
        text: &str,
        assign: impl FnOnce(&str) -> Result<u32, E>,
    ) -> Result<u32, E> {
        if let Some(&n) = self.recent.borrow().get(position, text) {
            return Ok(n);
        }
        if let Some(&n) = self.table.numbers.get(text) {
            self.recent.borrow_mut().remember(position, text, n);
            return Ok(n);
        }
        if let Some(&n) = self.pending_numbers.borrow().get(text) {
            return Ok(n);
        }
        assign(text)
    }

    /// Numbers a name never stored and stores it in `meta`.
    fn assign(&self, txn: &mut RwTxn<'_>, dbs: &Dbs, text: &str) -> Result<u32, StoreError> {
        let mut pending = self.pending.borrow_mut();
        let n = self.table.len() + pending.len() as u32;
        dbs.meta.put(txn, &key(n), text.as_bytes())?;
        pending.push(text.to_owned());
        self.pending_numbers.borrow_mut().insert(text.to_owned(), n);
        Ok(n)
    }

    /// The names this batch can decode without its transaction: the
    /// table's and its own new ones (both in memory), for a record read
    /// through a cursor that holds the transaction.
    pub(crate) fn source<'a>(&'a self, schema: &'a Schema) -> AssignedNames<'a> {
        AssignedNames {
            assigner: self,
            schema,
        }
    }

    /// The table this batch started from.
    pub(crate) fn table(&self) -> &NameTable {
        &self.table
    }

    /// The table after this batch committed, if it added names.
    pub(crate) fn committed(&self, schema: &Schema) -> Option<Arc<NameTable>> {
        let pending = self.pending.borrow();
        if pending.is_empty() {
            return None;
        }
        let mut table = (*self.table).clone();
        for text in pending.iter() {
            table.push(text.clone(), schema);
        }
        Some(Arc::new(table))
    }
}
