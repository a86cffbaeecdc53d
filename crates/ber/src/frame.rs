//! PDU framing: is a whole message buffered yet?
//!
//! Like mini-redis's `Frame::check`, this looks only at the header, so a
//! connection can tell "wait for more bytes" from "refuse this peer" without
//! decoding anything. The size limit is applied to the *announced* length,
//! so a header claiming 2 GiB is refused at once instead of being waited for.

use crate::{Error, Result, Tag};

/// Parses a TLV header at the start of `data`.
///
/// Returns `(tag, header_len, content_len)`. `Incomplete` when the header
/// itself is cut short; `Malformed` for the indefinite form (forbidden by
/// RFC 4511 section 5.1), the high-tag-number form, or a length that does
/// not fit in 32 bits.
pub fn parse_header(data: &[u8]) -> Result<(Tag, usize, u64)> {
    let Some(&identifier) = data.first() else {
        return Err(Error::Incomplete { needed: 2 });
    };
    if identifier & 0x1f == 0x1f {
        return Err(Error::Malformed("high-tag-number form is not used by LDAP"));
    }
    let Some(&first) = data.get(1) else {
        return Err(Error::Incomplete { needed: 1 });
    };
    if first < 0x80 {
        return Ok((Tag(identifier), 2, u64::from(first)));
    }
    let count = usize::from(first & 0x7f);
    if count == 0 {
        return Err(Error::Malformed("indefinite length is forbidden in LDAP"));
    }
    // RFC 4511 lengths fit in 32 bits in every implementation we know of;
    // a longer length field is either hostile or broken.
    if count > 4 {
        return Err(Error::Malformed("length field longer than 4 bytes"));
    }
    let Some(bytes) = data.get(2..2 + count) else {
        return Err(Error::Incomplete {
            needed: 2 + count - data.len(),
        });
    };
    let length = bytes.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
    Ok((Tag(identifier), 2 + count, length))
}

/// Returns the total size of the PDU at the start of `buf` if all of it is
/// buffered.
///
/// The outer element must be a SEQUENCE (every LDAPMessage is one). A PDU
/// whose announced size exceeds `max_pdu_bytes` is [`Error::TooLarge`] even
/// if none of its contents has arrived yet.
pub fn pdu_length(buf: &[u8], max_pdu_bytes: usize) -> Result<usize> {
    let (tag, header_len, content_len) = parse_header(buf)?;
    if tag != Tag::SEQUENCE {
        return Err(Error::Malformed("an LDAPMessage must be a SEQUENCE"));
    }
    let total = header_len as u64 + content_len;
    if total > max_pdu_bytes as u64 {
        return Err(Error::TooLarge {
            length: total,
            max: max_pdu_bytes,
        });
    }
    // Bounded by max_pdu_bytes, which is a usize.
    let total = total as usize;
    if buf.len() < total {
        return Err(Error::Incomplete {
            needed: total - buf.len(),
        });
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_long_lengths() {
        assert_eq!(parse_header(&[0x30, 0x05]).unwrap(), (Tag::SEQUENCE, 2, 5));
        assert_eq!(
            parse_header(&[0x30, 0x82, 0x01, 0x00]).unwrap(),
            (Tag::SEQUENCE, 4, 256)
        );
    }

    #[test]
    fn incomplete_headers_ask_for_more() {
        assert!(parse_header(&[]).unwrap_err().is_incomplete());
        assert!(parse_header(&[0x30]).unwrap_err().is_incomplete());
        assert!(
            parse_header(&[0x30, 0x84, 0x00])
                .unwrap_err()
                .is_incomplete()
        );
    }

    #[test]
    fn indefinite_and_oversized_lengths_are_malformed() {
        assert!(matches!(
            parse_header(&[0x30, 0x80]),
            Err(Error::Malformed(_))
        ));
        assert!(matches!(
            parse_header(&[0x30, 0x85, 1, 2, 3, 4, 5]),
            Err(Error::Malformed(_))
        ));
    }

    #[test]
    fn huge_announced_length_is_refused_before_the_bytes_arrive() {
        let header = [0x30, 0x84, 0x80, 0x00, 0x00, 0x00];
        assert_eq!(
            pdu_length(&header, 1 << 20),
            Err(Error::TooLarge {
                length: (1u64 << 31) + 6,
                max: 1 << 20
            })
        );
    }

    #[test]
    fn whole_pdu_is_reported_only_when_buffered() {
        let pdu = [0x30, 0x03, 0x02, 0x01, 0x01, 0xff];
        assert_eq!(pdu_length(&pdu, 100), Ok(5));
        assert_eq!(
            pdu_length(&pdu[..4], 100),
            Err(Error::Incomplete { needed: 1 })
        );
        assert!(matches!(
            pdu_length(&[0x04, 0x00], 100),
            Err(Error::Malformed(_))
        ));
    }
}
