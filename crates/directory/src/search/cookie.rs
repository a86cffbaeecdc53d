//! The paged results cookie of an unsorted search (version 3): where
//! the search stands, and a fingerprint of the search it belongs to.

use meridian_proto::SearchRequest;
/// Where a paged search stands between pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PagePosition {
    /// The naming context (a position in the searched ones' list).
    pub(super) context: u32,
    /// The last entry ID sent there (0: none yet).
    pub(super) last: meridian_store::EntryId,
    /// Entries sent on all pages so far: the size limit bounds the whole
    /// paged search, not each page (RFC 2696 section 3; slapd does the
    /// same).
    pub(super) total: u64,
}

/// A cookie: version 3, the position, a fingerprint of the search it
/// belongs to, and the naming context. No server state: nothing is held
/// between pages. (Version 2, before several naming contexts, had no
/// context: it is read as the first.)
pub(super) fn encode_cookie(position: PagePosition, fingerprint: u64) -> Vec<u8> {
    let mut c = Vec::with_capacity(29);
    c.push(3);
    c.extend_from_slice(&position.last.to_be_bytes());
    c.extend_from_slice(&position.total.to_be_bytes());
    c.extend_from_slice(&fingerprint.to_be_bytes());
    c.extend_from_slice(&position.context.to_be_bytes());
    c
}

pub(super) fn decode_cookie(cookie: &[u8], fingerprint: u64) -> Option<PagePosition> {
    let (&version, rest) = cookie.split_first()?;
    let context = match (version, rest.len()) {
        (2, 24) => 0,
        (3, 28) => u32::from_be_bytes(rest.get(24..28)?.try_into().ok()?),
        _ => return None,
    };
    let word = |i: usize| -> Option<u64> {
        Some(u64::from_be_bytes(
            rest.get(i * 8..i * 8 + 8)?.try_into().ok()?,
        ))
    };
    let position = PagePosition {
        context,
        last: word(0)?,
        total: word(1)?,
    };
    (word(2)? == fingerprint).then_some(position)
}

/// FNV-1a over what defines a search (base, scope, filter, attributes,
/// and the sort if it is sorted), so a cookie cannot be replayed against
/// a different one.
pub(super) fn fingerprint(req: &SearchRequest<'_>, sort: Option<&[u8]>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h ^= 0xff;
    };
    eat(req.base);
    eat(&[req.scope as u8, u8::from(req.types_only)]);
    let mut filter = Vec::new();
    req.filter.to_ber(&mut filter);
    eat(&filter);
    for a in req.attributes.iter() {
        eat(a);
    }
    if let Some(sort) = sort {
        eat(b"sorted by");
        eat(sort);
    }
    h
}
