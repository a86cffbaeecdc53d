//! Digests of a database for comparing replicas (`meridian verify`).
//!
//! Every record of every table is hashed (table, key and value) and
//! summed into one of [`BUCKETS`] buckets chosen by a hash of its key.
//! A bucket's sum does not depend on the order of its records, and a
//! record's bucket does not depend on the other records, so two replicas
//! that differ in one record differ in one bucket of one table, whatever
//! else they hold; [`Snapshot::bucket_items`] then lists that bucket's
//! records on each side, and [`Snapshot::describe`] names them (the DN
//! of an entry ID, the text of a DN key).
//!
//! Hashes are two CRC-32C with different seeds side by side: any change
//! of up to 32 bits in a record (one flipped byte among them) changes
//! both, which is what a check of replicas needs; it is not a defence
//! against someone forging a record.

use crate::read::Snapshot;
use crate::{StoreError, codec, keys};

/// Buckets per table.
pub const BUCKETS: usize = 4096;

/// The tables compared, by name.
pub const TABLES: [&str; 5] = ["meta", "id2entry", "dn2id", "children", "index"];

/// One table's bucket sums.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableDigest {
    /// Which table.
    pub table: &'static str,
    /// Records in it.
    pub records: u64,
    /// The sum of its records' hashes, per bucket.
    pub buckets: Vec<u64>,
}

fn hash(parts: &[&[u8]], seed: u32) -> u32 {
    let mut crc = seed;
    for part in parts {
        crc = crc32c::crc32c_append(crc, &(part.len() as u64).to_le_bytes());
        crc = crc32c::crc32c_append(crc, part);
    }
    crc
}

fn record_hash(table: &str, key: &[u8], value: &[u8]) -> u64 {
    let parts = [table.as_bytes(), key, value];
    (u64::from(hash(&parts, 0)) << 32) | u64::from(hash(&parts, 0x9e37_79b9))
}

fn bucket_of(key: &[u8]) -> usize {
    hash(&[key], 0x85eb_ca6b) as usize % BUCKETS
}

impl Snapshot<'_> {
    fn table(
        &self,
        name: &str,
    ) -> Result<heed::Database<heed::types::Bytes, heed::types::Bytes>, StoreError> {
        let (_, inner) = self.parts();
        let dbs = &inner.dbs;
        Ok(match name {
            "meta" => dbs.meta,
            "id2entry" => dbs.id2entry,
            "dn2id" => dbs.dn2id,
            "children" => dbs.children,
            "index" => dbs.index,
            other => return Err(StoreError::Config(format!("no table named {other}"))),
        })
    }

    /// Every table's bucket sums, in [`TABLES`] order.
    pub fn digests(&self) -> Result<Vec<TableDigest>, StoreError> {
        let (txn, _) = self.parts();
        TABLES
            .iter()
            .map(|&table| {
                let mut buckets = vec![0u64; BUCKETS];
                let mut records = 0;
                for item in self.table(table)?.iter(txn)? {
                    let (key, value) = item?;
                    if let Some(sum) = buckets.get_mut(bucket_of(key)) {
                        *sum = sum.wrapping_add(record_hash(table, key, value));
                    }
                    records += 1;
                }
                Ok(TableDigest {
                    table,
                    records,
                    buckets,
                })
            })
            .collect()
    }

    /// The records of one bucket of `table`: each key and its hash.
    pub fn bucket_items(
        &self,
        table: &str,
        bucket: usize,
    ) -> Result<Vec<(Vec<u8>, u64)>, StoreError> {
        let (txn, _) = self.parts();
        let mut out = Vec::new();
        for item in self.table(table)?.iter(txn)? {
            let (key, value) = item?;
            if bucket_of(key) == bucket {
                out.push((key.to_vec(), record_hash(table, key, value)));
            }
        }
        Ok(out)
    }

    /// A person's name for a key of `table`: the DN stored in an entry
    /// (by ID in `id2entry`), else the key's text or bytes.
    pub fn describe(&self, table: &str, key: &[u8]) -> String {
        if table == "id2entry"
            && let Some(id) = keys::id_from(key)
        {
            return self
                .stored_dn(id)
                .unwrap_or_else(|| format!("entry ID {id} (no readable DN here)"));
        }
        if key
            .iter()
            .all(|b| b.is_ascii_graphic() || *b == b' ' || *b == 0)
        {
            format!(
                "key {:?}",
                String::from_utf8_lossy(key).replace('\0', "\\0")
            )
        } else {
            format!(
                "key {}",
                key.iter().map(|b| format!("{b:02x}")).collect::<String>()
            )
        }
    }

    /// The DN text stored in entry `id`'s record, if it has one.
    pub fn stored_dn(&self, id: keys::EntryId) -> Option<String> {
        let (txn, inner) = self.parts();
        let record = inner.dbs.id2entry.get(txn, &keys::id_key(id)).ok()??;
        codec::decode_dn(record)
            .ok()
            .map(|dn| String::from_utf8_lossy(dn).into_owned())
    }
}
