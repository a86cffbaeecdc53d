//! Index keys gathered over a command and written in key order through
//! one cursor.
//!
//! Put one at a time (`mdb_put`), every key descends the B-tree from the
//! root, and in a write transaction each page on the way is also looked
//! up in the transaction's dirty list. Through one cursor and in key
//! order, most keys land on the leaf the cursor already holds: before
//! any descent, LMDB's `mdb_cursor_set` compares the key with the first
//! and last keys of that leaf and, when it falls between them, searches
//! only that page. A bulk load's adds share a few index keys per
//! attribute value (every entry's `objectClass: inetOrgPerson`, with its
//! own ID appended), so sorted, they arrive as runs on the same leaves.

use std::ops::Range;

use heed::types::Bytes;
use heed::{Database, PutFlags, RwIter, RwTxn};

use crate::StoreError;
use crate::keys::EntryId;

/// Keys (each an index prefix and an entry ID) waiting to be written with
/// empty values, all in one buffer.
#[derive(Debug, Default)]
pub(crate) struct SortedPuts {
    bytes: Vec<u8>,
    keys: Vec<Range<usize>>,
}

impl SortedPuts {
    /// Queues the key `prefix` + `id` (as [`crate::keys::with_id_into`]
    /// makes it).
    pub(crate) fn push(&mut self, prefix: &[u8], id: EntryId) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(prefix);
        self.bytes.extend_from_slice(&id.to_be_bytes());
        self.keys.push(start..self.bytes.len());
    }

    /// True when no key waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Writes every queued key to `db`, in key order.
    pub(crate) fn write(
        mut self,
        txn: &mut RwTxn<'_>,
        db: Database<Bytes, Bytes>,
    ) -> Result<(), StoreError> {
        if self.keys.is_empty() {
            return Ok(());
        }
        // `get` never fails here (every range was cut from this buffer by
        // `push`); it only spares the code a panic path.
        let bytes = &self.bytes;
        self.keys
            .sort_unstable_by(|a, b| bytes.get(a.clone()).cmp(&bytes.get(b.clone())));
        let mut cursor = db.iter_mut(txn)?;
        let mut last: Option<&[u8]> = None;
        for range in &self.keys {
            let key = bytes
                .get(range.clone())
                .ok_or_else(|| StoreError::internal("index key outside its buffer"))?;
            // A key queued twice (a gram repeated in a value) is put once.
            if last == Some(key) {
                continue;
            }
            last = Some(key);
            put_through(&mut cursor, PutFlags::empty(), key, &[])?;
        }
        Ok(())
    }
}

/// Puts `key` with `value` through `cursor`: without MDB_CURRENT a plain
/// insert at `key`, which starts from the cursor's page (see the module
/// comment). `key` and `value` must not borrow from the database.
pub(crate) fn put_through(
    cursor: &mut RwIter<'_, Bytes, Bytes>,
    flags: PutFlags,
    key: &[u8],
    value: &[u8],
) -> heed::Result<()> {
    // SAFETY: heed's one condition for writing through a cursor is that
    // neither the key nor the value borrows from the database, which a
    // write may move; every caller passes buffers of its own.
    #[allow(unsafe_code)]
    unsafe {
        cursor.put_current_with_options::<Bytes>(flags, key, value)
    }
}
