use crate::frame::parse_header;
use crate::{Error, Result, Tag};

/// One decoded tag-length-value, borrowing its contents from the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tlv<'a> {
    /// The identifier octet.
    pub tag: Tag,
    /// The contents octets (for a constructed value: the encoded children).
    pub contents: &'a [u8],
}

/// A cursor over BER values in a byte slice that is already complete.
///
/// Because framing ([`crate::frame::pdu_length`]) has already guaranteed the
/// whole PDU is present, a value that runs past the end here is malformed,
/// never incomplete.
#[derive(Debug, Clone, Copy)]
pub struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader over `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Reader { data }
    }

    /// True when every byte has been consumed.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The bytes not yet consumed.
    pub fn rest(&self) -> &'a [u8] {
        self.data
    }

    /// The tag of the next value, without consuming it.
    pub fn peek_tag(&self) -> Option<Tag> {
        self.data.first().map(|&b| Tag(b))
    }

    /// Reads the next value, whatever its tag.
    pub fn read(&mut self) -> Result<Tlv<'a>> {
        let (tag, header_len, content_len) = match parse_header(self.data) {
            Ok(header) => header,
            Err(Error::Incomplete { .. }) => {
                return Err(Error::Malformed("value truncated inside its parent"));
            }
            Err(e) => return Err(e),
        };
        let end = usize::try_from(content_len)
            .ok()
            .and_then(|len| header_len.checked_add(len))
            .ok_or(Error::Malformed("length overflows"))?;
        let contents = self
            .data
            .get(header_len..end)
            .ok_or(Error::Malformed("value longer than its parent"))?;
        self.data = self.data.get(end..).unwrap_or_default();
        Ok(Tlv { tag, contents })
    }

    /// Reads the next value and checks its tag; returns the contents.
    pub fn expect(&mut self, tag: Tag, what: &'static str) -> Result<&'a [u8]> {
        match self.peek_tag() {
            Some(t) if t == tag => Ok(self.read()?.contents),
            _ => Err(Error::Malformed(what)),
        }
    }

    /// Reads the next value if it carries `tag`; otherwise consumes nothing.
    pub fn optional(&mut self, tag: Tag) -> Result<Option<&'a [u8]>> {
        if self.peek_tag() == Some(tag) {
            Ok(Some(self.read()?.contents))
        } else {
            Ok(None)
        }
    }

    /// Reads an INTEGER (or ENUMERATED, by tag) that must fit in an `i64`.
    pub fn integer(&mut self, tag: Tag, what: &'static str) -> Result<i64> {
        decode_integer(self.expect(tag, what)?)
    }

    /// Reads a BOOLEAN with the given tag.
    pub fn boolean(&mut self, tag: Tag, what: &'static str) -> Result<bool> {
        decode_boolean(self.expect(tag, what)?)
    }

    /// Fails unless every byte has been consumed: trailing bytes inside a
    /// value mean the peer and we disagree about its type.
    pub fn finish(&self, what: &'static str) -> Result<()> {
        if self.data.is_empty() {
            Ok(())
        } else {
            Err(Error::Malformed(what))
        }
    }
}

/// Decodes two's-complement INTEGER (and ENUMERATED) contents of 1 to 8
/// octets.
///
/// The encoding must be minimal: X.690 8.3.2 (for BER too, not only DER)
/// forbids a first octet of all zeros or all ones followed by an octet
/// whose top bit repeats it, such as eight leading zero octets. slapd
/// answers those with protocolError, and so do we.
pub fn decode_integer(contents: &[u8]) -> Result<i64> {
    let Some(&first) = contents.first() else {
        return Err(Error::Malformed("empty INTEGER"));
    };
    if let Some(&second) = contents.get(1)
        && ((first == 0x00 && second & 0x80 == 0) || (first == 0xff && second & 0x80 != 0))
    {
        return Err(Error::Malformed(
            "INTEGER not in its shortest form (X.690 8.3.2)",
        ));
    }
    if contents.len() > 8 {
        return Err(Error::Malformed("INTEGER does not fit in 64 bits"));
    }
    let init: i64 = if first & 0x80 != 0 { -1 } else { 0 };
    Ok(contents
        .iter()
        .fold(init, |acc, &b| (acc << 8) | i64::from(b)))
}

/// Decodes BOOLEAN contents: one octet, any non-zero value is TRUE (BER).
pub fn decode_boolean(contents: &[u8]) -> Result<bool> {
    match contents {
        [b] => Ok(*b != 0),
        _ => Err(Error::Malformed("BOOLEAN must be one octet")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_must_be_in_their_shortest_form() {
        assert!(decode_integer(&[0x00, 0x01]).is_err());
        assert!(decode_integer(&[0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01]).is_err());
        assert!(decode_integer(&[0xff, 0xff]).is_err());
        assert!(decode_integer(&[0xff, 0x80]).is_err());
        assert_eq!(decode_integer(&[0x00, 0xff]), Ok(255));
        assert_eq!(decode_integer(&[0xff, 0x00]), Ok(-256));
    }

    #[test]
    fn integers() {
        assert_eq!(decode_integer(&[0x00]), Ok(0));
        assert_eq!(decode_integer(&[0x7f]), Ok(127));
        assert_eq!(decode_integer(&[0x00, 0x80]), Ok(128));
        assert_eq!(decode_integer(&[0xff]), Ok(-1));
        assert_eq!(decode_integer(&[0xff, 0x7f]), Ok(-129));
        assert!(decode_integer(&[]).is_err());
        assert!(decode_integer(&[0; 9]).is_err());
    }

    #[test]
    fn nested_values_borrow_from_input() {
        let data = [0x30, 0x06, 0x02, 0x01, 0x05, 0x04, 0x01, b'x'];
        let mut r = Reader::new(&data);
        let seq = r.expect(Tag::SEQUENCE, "seq").unwrap();
        r.finish("trailing").unwrap();
        let mut inner = Reader::new(seq);
        assert_eq!(inner.integer(Tag::INTEGER, "int"), Ok(5));
        let s = inner.expect(Tag::OCTET_STRING, "str").unwrap();
        assert_eq!(s, b"x");
        assert_eq!(s.as_ptr(), data[7..].as_ptr());
        assert!(inner.is_empty());
    }

    #[test]
    fn child_longer_than_parent_is_malformed() {
        let mut r = Reader::new(&[0x04, 0x05, b'a']);
        assert!(matches!(r.read(), Err(Error::Malformed(_))));
    }

    #[test]
    fn optional_consumes_only_matching_tag() {
        let data = [0x80, 0x00, 0x04, 0x00];
        let mut r = Reader::new(&data);
        assert_eq!(r.optional(Tag::OCTET_STRING), Ok(None));
        assert_eq!(r.optional(Tag::context(0, false)), Ok(Some(&[][..])));
        assert_eq!(r.optional(Tag::OCTET_STRING), Ok(Some(&[][..])));
    }
}
