//! Key formats of the LMDB databases (see `docs/design/storage.md`).

use meridian_model::dn::Dn;

/// An entry ID: allocated in increasing order, never reused.
pub type EntryId = u64;

/// The `id2entry` key (big-endian, so key order is ID order).
pub fn id_key(id: EntryId) -> [u8; 8] {
    id.to_be_bytes()
}

/// Decodes an 8-byte big-endian ID.
pub fn id_from(bytes: &[u8]) -> Option<EntryId> {
    bytes.try_into().ok().map(u64::from_be_bytes)
}

/// The `dn2id` key: normalised RDNs from the root down, each followed by
/// a 0x00 byte. A subtree is then a key prefix, and the empty key is the
/// root. RDN strings are RFC 4514 escaped, so they never hold 0x00.
pub fn dn_key(dn: &Dn) -> Vec<u8> {
    let mut key = Vec::with_capacity(64);
    for rdn in dn.rdns().iter().rev() {
        key.extend_from_slice(rdn.as_bytes());
        key.push(0);
    }
    key
}

/// The `dn2id` key of the parent of the entry whose key is `key` and
/// whose DN is `dn`: `key` without its last RDN (no DN to build). Empty
/// for a top-level entry.
pub fn parent_key<'k>(key: &'k [u8], dn: &Dn) -> &'k [u8] {
    let own = dn.rdns().first().map_or(0, |rdn| rdn.len() + 1);
    key.get(..key.len().saturating_sub(own)).unwrap_or_default()
}

/// The `children` key: parent ID then child ID.
pub fn child_key(parent: EntryId, child: EntryId) -> [u8; 16] {
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&parent.to_be_bytes());
    key[8..].copy_from_slice(&child.to_be_bytes());
    key
}

/// Index key kinds (first byte of an `index` key).
pub mod kind {
    /// Equality: `'='`, attribute OID, 0x00, u32 key length, key, ID.
    pub const EQ: u8 = b'=';
    /// Presence: `'*'`, attribute OID, 0x00, ID.
    pub const PRES: u8 = b'*';
    /// Substrings: `'s'`, attribute OID, 0x00, 3-byte gram, ID.
    pub const SUB: u8 = b's';
}

/// The prefix of an equality index key (everything but the ID).
pub fn eq_prefix(oid: &str, value_key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(oid.len() + value_key.len() + 14);
    k.push(kind::EQ);
    k.extend_from_slice(oid.as_bytes());
    k.push(0);
    // The length makes the prefix exact: "ab" is not a prefix of "abc".
    k.extend_from_slice(&(value_key.len() as u32).to_be_bytes());
    k.extend_from_slice(value_key);
    k
}

/// The prefix of a presence index key.
pub fn pres_prefix(oid: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(oid.len() + 10);
    k.push(kind::PRES);
    k.extend_from_slice(oid.as_bytes());
    k.push(0);
    k
}

/// The prefix of a substring index key for one gram.
pub fn sub_prefix(oid: &str, gram: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(oid.len() + 13);
    k.push(kind::SUB);
    k.extend_from_slice(oid.as_bytes());
    k.push(0);
    k.extend_from_slice(gram);
    k
}

/// Appends an ID to an index prefix, making the full key.
pub fn with_id(mut prefix: Vec<u8>, id: EntryId) -> Vec<u8> {
    prefix.extend_from_slice(&id.to_be_bytes());
    prefix
}

/// [`with_id`] into a reused buffer (cleared first): a writer making many
/// keys in a row allocates once.
pub fn with_id_into(key: &mut Vec<u8>, prefix: &[u8], id: EntryId) {
    key.clear();
    key.extend_from_slice(prefix);
    key.extend_from_slice(&id.to_be_bytes());
}
