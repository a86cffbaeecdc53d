use crate::Tag;

/// Appends BER values to a caller-owned buffer.
///
/// The buffer is meant to be reused across messages, so steady-state
/// encoding allocates nothing. Constructed values are written with a
/// one-byte length placeholder; [`Writer::end`] patches it, moving the
/// contents right only when the length needs the long form (at least 128
/// bytes of contents, where the copy is cheap next to producing them).
#[derive(Debug)]
pub struct Writer<'b> {
    buf: &'b mut Vec<u8>,
}

/// An open constructed value; close it with [`Writer::end`].
#[derive(Debug)]
#[must_use = "a constructed value must be closed with Writer::end"]
pub struct Mark {
    length_at: usize,
}

impl<'b> Writer<'b> {
    /// A writer appending to `buf` (existing contents are kept).
    pub fn new(buf: &'b mut Vec<u8>) -> Self {
        Writer { buf }
    }

    /// Bytes in the underlying buffer.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// True when the underlying buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Opens a constructed value.
    pub fn start(&mut self, tag: Tag) -> Mark {
        self.buf.push(tag.0);
        self.buf.push(0);
        Mark {
            length_at: self.buf.len() - 1,
        }
    }

    /// Closes the value opened by `mark`, writing its final length.
    pub fn end(&mut self, mark: Mark) {
        let start = mark.length_at + 1;
        let len = self.buf.len() - start;
        if len < 0x80 {
            if let Some(slot) = self.buf.get_mut(mark.length_at) {
                *slot = len as u8;
            }
            return;
        }
        let (long, n) = long_form(len);
        if let Some(slot) = self.buf.get_mut(mark.length_at) {
            *slot = long.first().copied().unwrap_or(0x80);
        }
        // The contents move up by the length's extra octets: one memmove
        // (`Vec::splice` took several times the instructions of the move
        // itself, once per long value of every response).
        let end = self.buf.len();
        self.buf.resize(end + n, 0);
        self.buf.copy_within(start..end, start + n);
        if let (Some(slot), Some(octets)) = (self.buf.get_mut(start..start + n), long.get(1..=n)) {
            slot.copy_from_slice(octets);
        }
    }

    /// Writes a tag and a length; the caller writes exactly `len` bytes next.
    pub fn header(&mut self, tag: Tag, len: usize) {
        self.buf.push(tag.0);
        if len < 0x80 {
            self.buf.push(len as u8);
        } else {
            let (long, n) = long_form(len);
            self.buf
                .extend_from_slice(long.get(..=n).unwrap_or_default());
        }
    }

    /// Writes already-encoded bytes verbatim.
    pub fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Lets `append` write contents straight into the buffer (a value
    /// rendered in place instead of into a temporary). It must only
    /// append: what is already there holds the open values' headers.
    pub fn append_with(&mut self, append: impl FnOnce(&mut Vec<u8>)) {
        append(self.buf);
    }

    /// Writes a primitive value with the given contents (OCTET STRING,
    /// LDAPString, LDAPOID and every other string type).
    pub fn octets(&mut self, tag: Tag, contents: &[u8]) {
        self.header(tag, contents.len());
        self.buf.extend_from_slice(contents);
    }

    /// Writes an INTEGER or ENUMERATED in minimal two's complement.
    pub fn integer(&mut self, tag: Tag, value: i64) {
        let bytes = value.to_be_bytes();
        // Drop leading octets that only repeat the sign bit of the next one.
        let mut skip = 0;
        while skip < 7 {
            let (Some(&b), Some(&next)) = (bytes.get(skip), bytes.get(skip + 1)) else {
                break;
            };
            let redundant = (b == 0x00 && next & 0x80 == 0) || (b == 0xff && next & 0x80 != 0);
            if !redundant {
                break;
            }
            skip += 1;
        }
        self.octets(tag, bytes.get(skip..).unwrap_or_default());
    }

    /// Writes a BOOLEAN; TRUE is 0xFF as RFC 4511 section 5.1 requires.
    pub fn boolean(&mut self, tag: Tag, value: bool) {
        self.octets(tag, &[if value { 0xff } else { 0x00 }]);
    }

    /// Writes an empty primitive value (NULL, or an implicitly tagged NULL).
    pub fn null(&mut self, tag: Tag) {
        self.octets(tag, &[]);
    }
}

/// The long-form length octets for `len`: `(octets, n)` where `octets[0]` is
/// `0x80 | n` and `octets[1..=n]` are the big-endian length.
fn long_form(len: usize) -> ([u8; 9], usize) {
    let be = (len as u64).to_be_bytes();
    let n = 8 - (len.leading_zeros() as usize / 8);
    let mut out = [0u8; 9];
    out[0] = 0x80 | n as u8;
    for (dst, src) in out.iter_mut().skip(1).zip(be.iter().skip(8 - n)) {
        *dst = *src;
    }
    (out, n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Reader, decode_integer};
    use proptest::prelude::*;

    #[test]
    fn minimal_integers() {
        let cases: [(i64, &[u8]); 7] = [
            (0, &[0x00]),
            (127, &[0x7f]),
            (128, &[0x00, 0x80]),
            (256, &[0x01, 0x00]),
            (-1, &[0xff]),
            (-128, &[0x80]),
            (-129, &[0xff, 0x7f]),
        ];
        for (value, contents) in cases {
            let mut buf = Vec::new();
            Writer::new(&mut buf).integer(Tag::INTEGER, value);
            assert_eq!(&buf[2..], contents, "{value}");
        }
    }

    #[test]
    fn long_lengths_are_back_patched() {
        for len in [0usize, 127, 128, 255, 256, 65_535, 65_536, 1 << 20] {
            // Contents that show any byte moved to the wrong place, after
            // a value already written and inside another long value.
            let contents: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let mut buf = b"before".to_vec();
            let mut w = Writer::new(&mut buf);
            let outer = w.start(Tag::SEQUENCE);
            w.octets(Tag::OCTET_STRING, b"first");
            let m = w.start(Tag::SEQUENCE);
            w.octets(Tag::OCTET_STRING, &contents);
            w.end(m);
            w.octets(Tag::OCTET_STRING, b"last");
            w.end(outer);
            assert_eq!(&buf[..6], b"before");
            let mut r = Reader::new(&buf[6..]);
            let outer = r.expect(Tag::SEQUENCE, "outer").unwrap();
            assert!(r.is_empty());
            let mut r = Reader::new(outer);
            assert_eq!(r.expect(Tag::OCTET_STRING, "first").unwrap(), b"first");
            let seq = r.expect(Tag::SEQUENCE, "seq").unwrap();
            assert_eq!(r.expect(Tag::OCTET_STRING, "last").unwrap(), b"last");
            assert!(r.is_empty());
            let mut inner = Reader::new(seq);
            assert_eq!(inner.expect(Tag::OCTET_STRING, "s").unwrap(), &contents[..]);
            assert!(inner.is_empty());
        }
    }

    proptest! {
        #[test]
        fn integer_round_trip(v in any::<i64>()) {
            let mut buf = Vec::new();
            Writer::new(&mut buf).integer(Tag::INTEGER, v);
            let tlv = Reader::new(&buf).read().unwrap();
            prop_assert_eq!(decode_integer(tlv.contents).unwrap(), v);
        }
    }
}
