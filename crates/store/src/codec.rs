//! The stored form of an entry (the `id2entry` value), version 1:
//!
//! ```text
//! u8      format version (1)
//! varint  length of the DN, then the DN as the client wrote it (UTF-8)
//! varint  number of attributes
//!   varint  length of the attribute name as written (with options)
//!   varint  number of values
//!     varint  length of the value, then the value bytes
//! ```
//!
//! Varints are LEB128. Values are kept exactly as given; normalised keys
//! live only in the indexes. The version byte lets a later format sit
//! beside this one without a flag day.

use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_model::entry::Entry;
use meridian_model::filter::{AttrName, AttributeVisitor, Target};
use meridian_model::schema::AttrId;

use crate::StoreError;

const VERSION: u8 = 1;

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Encodes an entry.
pub fn encode(entry: &Entry) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.push(VERSION);
    put_bytes(&mut out, entry.dn.original().as_bytes());
    put_varint(&mut out, entry.attributes.len() as u64);
    for attr in &entry.attributes {
        put_bytes(&mut out, attr.name.as_bytes());
        put_varint(&mut out, attr.values.len() as u64);
        for v in &attr.values {
            put_bytes(&mut out, v);
        }
    }
    out
}

struct Cursor<'a> {
    data: &'a [u8],
}

fn corrupt(what: &str) -> StoreError {
    StoreError::Engine(format!("corrupt entry record: {what}"))
}

impl<'a> Cursor<'a> {
    fn varint(&mut self) -> Result<u64, StoreError> {
        // Nearly every length is below 128: one byte (the scan's hot path).
        if let Some((&b, rest)) = self.data.split_first() {
            if b < 0x80 {
                self.data = rest;
                return Ok(u64::from(b));
            }
        }
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self
                .data
                .split_first()
                .ok_or_else(|| corrupt("truncated varint"))?;
            self.data = rest;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(corrupt("varint too long"))
    }

    fn bytes(&mut self) -> Result<&'a [u8], StoreError> {
        let len = usize::try_from(self.varint()?).map_err(|_| corrupt("length"))?;
        if len > self.data.len() {
            return Err(corrupt("length past the end"));
        }
        let (head, rest) = self.data.split_at(len);
        self.data = rest;
        Ok(head)
    }
}

/// The DN of a stored entry, without decoding the rest.
pub fn decode_dn(bytes: &[u8]) -> Result<&[u8], StoreError> {
    let (&version, rest) = bytes.split_first().ok_or_else(|| corrupt("empty"))?;
    if version != VERSION {
        return Err(corrupt("unknown format version"));
    }
    Cursor { data: rest }.bytes()
}

/// Decodes an entry.
pub fn decode(bytes: &[u8], schema: &Schema) -> Result<Entry, StoreError> {
    let (&version, rest) = bytes.split_first().ok_or_else(|| corrupt("empty"))?;
    if version != VERSION {
        return Err(corrupt("unknown format version"));
    }
    let mut c = Cursor { data: rest };
    let dn_text = c.bytes()?;
    let dn = if dn_text.is_empty() {
        Dn::root()
    } else {
        Dn::parse(dn_text, schema)?
    };
    let count = c.varint()?;
    let mut attrs: Vec<(&[u8], Vec<&[u8]>)> = Vec::with_capacity(count.min(1024) as usize);
    for _ in 0..count {
        let name = c.bytes()?;
        let n = c.varint()?;
        let mut values = Vec::with_capacity(n.min(1024) as usize);
        for _ in 0..n {
            values.push(c.bytes()?);
        }
        attrs.push((name, values));
    }
    if !c.data.is_empty() {
        return Err(corrupt("trailing bytes"));
    }
    Ok(Entry::new(dn, attrs, schema)?)
}

/// A stored entry evaluated where it lies: filters run on the record's
/// bytes, and only entries that match are decoded into an [`Entry`].
/// A malformed record yields no attributes (the full decode reports it).
#[derive(Debug, Clone, Copy)]
pub struct RawEntry<'a> {
    bytes: &'a [u8],
}

impl<'a> RawEntry<'a> {
    /// Wraps a stored record.
    pub fn new(bytes: &'a [u8]) -> Self {
        RawEntry { bytes }
    }

    /// The cursor positioned at the attribute count.
    fn attributes_cursor(&self) -> Option<Cursor<'a>> {
        let (&version, rest) = self.bytes.split_first()?;
        if version != VERSION {
            return None;
        }
        let mut c = Cursor { data: rest };
        c.bytes().ok()?;
        Some(c)
    }
}

/// The values of one stored attribute, read lazily.
struct Values<'a> {
    cursor: Cursor<'a>,
    left: u64,
}

impl<'a> Iterator for Values<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        self.cursor.bytes().ok()
    }
}

impl Target for RawEntry<'_> {
    fn visit_attributes(&self, _schema: &Schema, visit: &mut AttributeVisitor<'_>) {
        let Some(mut c) = self.attributes_cursor() else {
            return;
        };
        let Ok(count) = c.varint() else { return };
        for _ in 0..count {
            let Ok(name) = c.bytes() else { return };
            let Ok(n) = c.varint() else { return };
            let values_start = Cursor { data: c.data };
            // Skip the values on the main cursor first.
            for _ in 0..n {
                if c.bytes().is_err() {
                    return;
                }
            }
            let mut values = Values {
                cursor: values_start,
                left: n,
            };
            if !visit(AttrName::Raw(name), &mut values) {
                return;
            }
        }
    }

    fn dn_values(&self, schema: &Schema) -> Vec<(AttrId, Vec<u8>)> {
        decode_dn(self.bytes)
            .ok()
            .filter(|dn| !dn.is_empty())
            .and_then(|dn| Dn::parse(dn, schema).ok())
            .map(|dn| dn.rdn_values().iter().flatten().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let schema = Schema::builtin().unwrap();
        let dn = Dn::parse(b"uid=jdoe,ou=People,dc=example,dc=com", &schema).unwrap();
        let attrs: &[(&str, &[&[u8]])] = &[
            ("objectClass", &[b"inetOrgPerson"]),
            ("cn;lang-de", &["Jöhn".as_bytes()]),
            ("jpegPhoto", &[&[0u8, 255, 1, 2][..], &[7u8; 300][..]]),
        ];
        let e = Entry::new(
            dn,
            attrs
                .iter()
                .map(|(n, vs)| (n.as_bytes(), vs.iter().copied())),
            &schema,
        )
        .unwrap();
        let bytes = encode(&e);
        assert_eq!(decode(&bytes, &schema).unwrap(), e);
        assert_eq!(
            decode_dn(&bytes).unwrap(),
            b"uid=jdoe,ou=People,dc=example,dc=com"
        );
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut], &schema).is_err());
        }
    }
}
