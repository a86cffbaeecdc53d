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
    let mut key = Vec::with_capacity(dn.normalized().len() + 1);
    for rdn in dn.rdns().rev() {
        key.extend_from_slice(rdn.as_bytes());
        key.push(0);
    }
    key
}

/// The `dn2id` key of the parent of the entry whose key is `key` and
/// whose DN is `dn`: `key` without its last RDN (no DN to build). Empty
/// for a top-level entry.
pub fn parent_key<'k>(key: &'k [u8], dn: &Dn) -> &'k [u8] {
    let own = dn.rdn().map_or(0, |rdn| rdn.len() + 1);
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
    /// Ordering: `'o'`, attribute OID, 0x00, the sortable key framed
    /// (see [`super::ord_prefix_into`]), ID.
    pub const ORD: u8 = b'o';
}

/// The largest key LMDB stores (`MDB_MAXKEYSIZE` as heed builds it);
/// a longer one is refused with `MDB_BAD_VALSIZE`.
pub const MAX_KEY: usize = 511;

/// The prefix of an equality index key (everything but the ID).
///
/// A value key too long for an LMDB key once the ID is appended (a
/// 600-byte cn) is cut, and an FNV-1a digest of the whole key follows
/// its first bytes; the length field keeps the full length. Lookups build
/// their prefix the same way, so they find it; values that share the cut
/// part and the digest are told apart by the filter evaluation every
/// candidate goes through. Keys that fit are as they always were.
pub fn eq_prefix(oid: &str, value_key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity((1 + oid.len() + 1 + 4 + value_key.len()).min(MAX_KEY));
    eq_prefix_into(&mut k, oid, value_key);
    k
}

/// [`eq_prefix`] into a reused buffer (cleared first).
pub fn eq_prefix_into(k: &mut Vec<u8>, oid: &str, value_key: &[u8]) {
    const ID: usize = 8;
    const DIGEST: usize = 8;
    let head = 1 + oid.len() + 1 + 4;
    type_head_into(k, kind::EQ, oid);
    // The length makes the prefix exact: "ab" is not a prefix of "abc".
    k.extend_from_slice(&(value_key.len() as u32).to_be_bytes());
    if head + value_key.len() + ID <= MAX_KEY {
        k.extend_from_slice(value_key);
    } else {
        let keep = MAX_KEY.saturating_sub(head + DIGEST + ID);
        k.extend_from_slice(value_key.get(..keep).unwrap_or(value_key));
        k.extend_from_slice(&fnv1a64(value_key).to_be_bytes());
    }
}

/// FNV-1a, 64 bits: a fixed function (index keys are on disk), and a
/// collision costs only a candidate that the filter then drops.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The head every index key of one kind and type starts with: the kind
/// byte, the type's OID and 0x00, into `k` (cleared first).
fn type_head_into(k: &mut Vec<u8>, kind: u8, oid: &str) {
    k.clear();
    k.push(kind);
    k.extend_from_slice(oid.as_bytes());
    k.push(0);
}

/// The prefix of a presence index key.
pub fn pres_prefix(oid: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(oid.len() + 10);
    pres_prefix_into(&mut k, oid);
    k
}

/// [`pres_prefix`] into a reused buffer (cleared first).
pub fn pres_prefix_into(k: &mut Vec<u8>, oid: &str) {
    type_head_into(k, kind::PRES, oid);
}

/// The prefix of a substring index key for one gram.
pub fn sub_prefix(oid: &str, gram: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(oid.len() + 13);
    sub_prefix_into(&mut k, oid, gram);
    k
}

/// [`sub_prefix`] into a reused buffer (cleared first).
pub fn sub_prefix_into(k: &mut Vec<u8>, oid: &str, gram: &[u8]) {
    type_head_into(k, kind::SUB, oid);
    k.extend_from_slice(gram);
}

/// The prefix every ordering key of one attribute type starts with.
pub fn ord_attr_prefix(oid: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(MAX_KEY);
    type_head_into(&mut k, kind::ORD, oid);
    k
}

/// The prefix of an ordering index key (everything but the ID): the
/// type's prefix, then `sortable` (a rule's sortable key, whose byte order
/// is the value order) framed so that key order stays value order when
/// the ID follows: each 0x00 becomes 0x00 0xFF and 0x00 0x00 ends it, so
/// no framed value is a proper prefix of another. A frame too long for an
/// LMDB key is cut to fit: values that share the cut part share the key
/// (a candidate more for the filter to drop), and order is kept, since
/// cutting two framed values at one length never reverses them.
pub fn ord_prefix_into(k: &mut Vec<u8>, oid: &str, sortable: &[u8]) {
    const ID: usize = 8;
    type_head_into(k, kind::ORD, oid);
    let room = MAX_KEY.saturating_sub(ID);
    for &b in sortable {
        if k.len() >= room {
            break;
        }
        k.push(b);
        if b == 0 {
            k.push(0xFF);
        }
    }
    // After a cut, this goes too: the frame is then exactly `room` long.
    k.extend_from_slice(&[0, 0]);
    k.truncate(room);
}

/// [`ord_prefix_into`] into a new buffer.
pub fn ord_prefix(oid: &str, sortable: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(MAX_KEY);
    ord_prefix_into(&mut k, oid, sortable);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordering_keys_sort_as_their_values_and_always_fit() {
        let oid = "1.3.6.1.1.1.1.0";
        let long = |fill: u8, last: u8| {
            let mut v = vec![fill; 1000];
            v.push(last);
            v
        };
        // In value order, each with the zero bytes the frame escapes.
        let values: Vec<Vec<u8>> = vec![
            vec![],
            vec![0],
            vec![0, 0],
            vec![0, 1],
            vec![1],
            vec![1, 0],
            vec![1, 0xFF],
            long(0x41, 1),
            long(0x41, 2),
            vec![0xFF],
            vec![0xFF, 0],
        ];
        for (i, a) in values.iter().enumerate() {
            for (j, b) in values.iter().enumerate() {
                let (ka, kb) = (ord_prefix(oid, a), ord_prefix(oid, b));
                // With IDs that would reverse an unframed pair.
                let (ia, ib) = (with_id(ka.clone(), u64::MAX), with_id(kb.clone(), 0));
                assert!(ia.len() <= MAX_KEY && ib.len() <= MAX_KEY);
                if a.len() < 400 && b.len() < 400 {
                    assert_eq!(ka.cmp(&kb), i.cmp(&j), "{a:?} {b:?}");
                    if i < j {
                        assert!(ia < ib, "{a:?} {b:?}");
                    }
                } else {
                    // Cut: order kept, equal allowed.
                    assert!(i > j || ka <= kb, "{a:?} {b:?}");
                }
            }
        }
        assert_eq!(
            ord_prefix(oid, &long(0x41, 1)),
            ord_prefix(oid, &long(0x41, 2))
        );
        assert!(ord_prefix(oid, b"ab").starts_with(&ord_attr_prefix(oid)));
    }

    #[test]
    fn equality_keys_always_fit_and_keep_their_short_form() {
        let oid = "2.5.4.3";
        assert_eq!(eq_prefix(oid, b"abc")[1 + oid.len() + 1 + 4..], *b"abc");
        let long_a = vec![b'a'; 2000];
        let mut long_b = long_a.clone();
        long_b[1999] = b'b';
        for value in [&long_a, &long_b] {
            assert_eq!(with_id(eq_prefix(oid, value), 1).len(), MAX_KEY);
        }
        // Cut at the same place, told apart by the digest.
        assert_ne!(eq_prefix(oid, &long_a), eq_prefix(oid, &long_b));
        // The longest that fits is kept whole.
        let fits = vec![b'x'; MAX_KEY - 8 - (1 + oid.len() + 1 + 4)];
        assert!(eq_prefix(oid, &fits).ends_with(&fits));
        // FNV-1a's published check values.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
