//! The values of the server-side sort controls (RFC 2891) and of the
//! virtual list view controls (draft-ietf-ldapext-ldapv3-vlv-09), request
//! and response alike: the server decodes requests and encodes responses,
//! our tests and clients the other way round.

use meridian_ber::{Error, Reader, Result, Tag, Writer};

use crate::controls::sequence_reader;
use crate::message::MAX_INT;
use crate::result::ResultCode;

/// One key of a sort request: `SEQUENCE { attributeType
/// AttributeDescription, orderingRule [0] MatchingRuleId OPTIONAL,
/// reverseOrder [1] BOOLEAN DEFAULT FALSE }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SortKey<'a> {
    /// The attribute description the entries are ordered by.
    pub attr: &'a [u8],
    /// The matching rule named by the client, if any.
    pub ordering_rule: Option<&'a [u8]>,
    /// Descending order.
    pub reverse: bool,
}

const ORDERING_RULE: Tag = Tag::context(0, false);
const REVERSE_ORDER: Tag = Tag::context(1, false);

/// Decodes a sort request value, `SortKeyList ::= SEQUENCE OF SortKey`:
/// at least one key. Decoding stops after `most` keys and returns them,
/// the rest unread: a list longer than the caller's bound is refused
/// by it (by the control's criticality, RFC 2891), not as malformed, so
/// the caller asks for one key more than it allows.
pub fn decode_sort_request(value: Option<&[u8]>, most: usize) -> Result<Vec<SortKey<'_>>> {
    let mut list = sequence_reader(value, "the sort control's value must be a SortKeyList")?;
    let mut keys = Vec::new();
    while !list.is_empty() {
        if keys.len() >= most {
            return Ok(keys);
        }
        let body = list.expect(Tag::SEQUENCE, "each sort key must be a SEQUENCE")?;
        let mut key = Reader::new(body);
        let attr = key.expect(
            Tag::OCTET_STRING,
            "a sort key starts with an attribute type",
        )?;
        let ordering_rule = key.optional(ORDERING_RULE)?;
        let reverse = match key.optional(REVERSE_ORDER)? {
            Some(contents) => meridian_ber::decode_boolean(contents)?,
            None => false,
        };
        key.finish("trailing bytes in a sort key")?;
        if attr.is_empty() {
            return Err(Error::Malformed("a sort key's attribute type is empty"));
        }
        keys.push(SortKey {
            attr,
            ordering_rule,
            reverse,
        });
    }
    if keys.is_empty() {
        return Err(Error::Malformed("a SortKeyList holds at least one key"));
    }
    Ok(keys)
}

/// Encodes a sort request value (for clients and tests).
pub fn encode_sort_request(keys: &[SortKey<'_>], buf: &mut Vec<u8>) {
    let mut w = Writer::new(buf);
    let list = w.start(Tag::SEQUENCE);
    for key in keys {
        let k = w.start(Tag::SEQUENCE);
        w.octets(Tag::OCTET_STRING, key.attr);
        if let Some(rule) = key.ordering_rule {
            w.octets(ORDERING_RULE, rule);
        }
        if key.reverse {
            w.boolean(REVERSE_ORDER, true);
        }
        w.end(k);
    }
    w.end(list);
}

/// A sort response value: `SortResult ::= SEQUENCE { sortResult
/// ENUMERATED, attributeType [0] AttributeDescription OPTIONAL }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SortResult<'a> {
    /// success, or why the results are not sorted.
    pub code: ResultCode,
    /// The sort key's attribute the failure is about, if one is.
    pub attr: Option<&'a [u8]>,
}

const SORT_RESULT_ATTRIBUTE: Tag = Tag::context(0, false);

impl<'a> SortResult<'a> {
    /// Encodes the value.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        let mut w = Writer::new(buf);
        let seq = w.start(Tag::SEQUENCE);
        w.integer(Tag::ENUMERATED, i64::from(self.code.0));
        if let Some(attr) = self.attr {
            w.octets(SORT_RESULT_ATTRIBUTE, attr);
        }
        w.end(seq);
    }

    /// Decodes a value.
    pub fn decode(value: Option<&'a [u8]>) -> Result<Self> {
        let mut r = sequence_reader(value, "the sort response must be a SortResult")?;
        let code = r.integer(Tag::ENUMERATED, "expected sortResult")?;
        let attr = r.optional(SORT_RESULT_ATTRIBUTE)?;
        r.finish("trailing bytes in SortResult")?;
        Ok(SortResult {
            code: ResultCode(u32::try_from(code).map_err(|_| Error::Malformed("bad sortResult"))?),
            attr,
        })
    }
}

/// Where a virtual list view's window is centred.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VlvTarget<'a> {
    /// `byOffset [0] SEQUENCE { offset INTEGER (1..maxInt), contentCount
    /// INTEGER (0..maxInt) }`: a position in the client's idea of the list
    /// (`content_count` 0: the client has none).
    ByOffset {
        /// 1 is the first entry.
        offset: u32,
        /// The client's estimate of the list's length.
        content_count: u32,
    },
    /// `greaterThanOrEqual [1] AssertionValue`: the first entry whose
    /// first sort key is at or after this value in the sort order.
    GreaterOrEqual(&'a [u8]),
}

/// A virtual list view request value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlvRequest<'a> {
    /// Entries wanted before the target.
    pub before: u32,
    /// Entries wanted after the target.
    pub after: u32,
    /// The target.
    pub target: VlvTarget<'a>,
    /// The contextID of an earlier response, if the client sends one.
    pub context: Option<&'a [u8]>,
}

const BY_OFFSET: Tag = Tag::context(0, true);
const GREATER_OR_EQUAL: Tag = Tag::context(1, false);

/// An INTEGER (0..maxInt).
fn count(r: &mut Reader<'_>, what: &'static str) -> Result<u32> {
    let n = r.integer(Tag::INTEGER, what)?;
    if !(0..=MAX_INT).contains(&n) {
        return Err(Error::Malformed("a count outside 0..maxInt"));
    }
    u32::try_from(n).map_err(|_| Error::Malformed("a count outside 0..maxInt"))
}

impl<'a> VlvRequest<'a> {
    /// Decodes a request value.
    pub fn decode(value: Option<&'a [u8]>) -> Result<Self> {
        let mut r = sequence_reader(
            value,
            "the virtual list view control's value must be a VirtualListViewRequest",
        )?;
        let before = count(&mut r, "expected beforeCount")?;
        let after = count(&mut r, "expected afterCount")?;
        let target = match r.peek_tag() {
            Some(BY_OFFSET) => {
                let mut by = Reader::new(r.expect(BY_OFFSET, "expected byOffset")?);
                let offset = count(&mut by, "expected offset")?;
                let content_count = count(&mut by, "expected contentCount")?;
                by.finish("trailing bytes in byOffset")?;
                VlvTarget::ByOffset {
                    offset,
                    content_count,
                }
            }
            Some(GREATER_OR_EQUAL) => {
                VlvTarget::GreaterOrEqual(r.expect(GREATER_OR_EQUAL, "expected an assertion")?)
            }
            _ => {
                return Err(Error::Malformed(
                    "the target must be byOffset or greaterThanOrEqual",
                ));
            }
        };
        let context = r.optional(Tag::OCTET_STRING)?;
        r.finish("trailing bytes in VirtualListViewRequest")?;
        Ok(VlvRequest {
            before,
            after,
            target,
            context,
        })
    }

    /// Encodes a request value (for clients and tests).
    pub fn encode(&self, buf: &mut Vec<u8>) {
        let mut w = Writer::new(buf);
        let seq = w.start(Tag::SEQUENCE);
        w.integer(Tag::INTEGER, i64::from(self.before));
        w.integer(Tag::INTEGER, i64::from(self.after));
        match self.target {
            VlvTarget::ByOffset {
                offset,
                content_count,
            } => {
                let by = w.start(BY_OFFSET);
                w.integer(Tag::INTEGER, i64::from(offset));
                w.integer(Tag::INTEGER, i64::from(content_count));
                w.end(by);
            }
            VlvTarget::GreaterOrEqual(value) => w.octets(GREATER_OR_EQUAL, value),
        }
        if let Some(context) = self.context {
            w.octets(Tag::OCTET_STRING, context);
        }
        w.end(seq);
    }
}

/// A virtual list view response value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlvResponse<'a> {
    /// The target's position in the list (1 is the first).
    pub target_position: u32,
    /// The list's length.
    pub content_count: u32,
    /// `virtualListViewResult`.
    pub result: ResultCode,
    /// A context for the client to send back, if any.
    pub context: Option<&'a [u8]>,
}

impl<'a> VlvResponse<'a> {
    /// Encodes the value.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        let mut w = Writer::new(buf);
        let seq = w.start(Tag::SEQUENCE);
        w.integer(Tag::INTEGER, i64::from(self.target_position));
        w.integer(Tag::INTEGER, i64::from(self.content_count));
        w.integer(Tag::ENUMERATED, i64::from(self.result.0));
        if let Some(context) = self.context {
            w.octets(Tag::OCTET_STRING, context);
        }
        w.end(seq);
    }

    /// Decodes a value.
    pub fn decode(value: Option<&'a [u8]>) -> Result<Self> {
        let mut r = sequence_reader(value, "the VLV response must be a SEQUENCE")?;
        let target_position = count(&mut r, "expected targetPosition")?;
        let content_count = count(&mut r, "expected contentCount")?;
        let result = r.integer(Tag::ENUMERATED, "expected virtualListViewResult")?;
        let context = r.optional(Tag::OCTET_STRING)?;
        r.finish("trailing bytes in the VLV response")?;
        Ok(VlvResponse {
            target_position,
            content_count,
            result: ResultCode(
                u32::try_from(result).map_err(|_| Error::Malformed("bad virtualListViewResult"))?,
            ),
            context,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_requests_round_trip_and_bad_ones_are_refused() {
        let keys = [
            SortKey {
                attr: b"sn",
                ordering_rule: None,
                reverse: false,
            },
            SortKey {
                attr: b"employeeNumber",
                ordering_rule: Some(b"integerOrderingMatch"),
                reverse: true,
            },
        ];
        let mut buf = Vec::new();
        encode_sort_request(&keys, &mut buf);
        assert_eq!(decode_sort_request(Some(&buf), 8).unwrap(), keys);
        assert_eq!(
            decode_sort_request(Some(&buf), 1).unwrap(),
            keys[..1],
            "over the bound: the first keys, for the caller to refuse"
        );
        assert!(decode_sort_request(None, 8).is_err(), "no value");
        assert!(
            decode_sort_request(Some(&[0x30, 0x00]), 8).is_err(),
            "no key"
        );
        // A key whose reverseOrder is not a BOOLEAN.
        let bad = [0x30, 0x08, 0x30, 0x06, 0x04, 0x02, b's', b'n', 0x81, 0x00];
        assert!(decode_sort_request(Some(&bad), 8).is_err());
        // Trailing bytes after the list.
        let mut trailing = buf.clone();
        trailing.push(0);
        assert!(decode_sort_request(Some(&trailing), 8).is_err());
    }

    #[test]
    fn sort_results_round_trip() {
        for result in [
            SortResult {
                code: ResultCode::SUCCESS,
                attr: None,
            },
            SortResult {
                code: ResultCode::INAPPROPRIATE_MATCHING,
                attr: Some(b"jpegPhoto"),
            },
        ] {
            let mut buf = Vec::new();
            result.encode(&mut buf);
            assert_eq!(SortResult::decode(Some(&buf)).unwrap(), result);
        }
    }

    #[test]
    fn vlv_requests_and_responses_round_trip() {
        for target in [
            VlvTarget::ByOffset {
                offset: 3,
                content_count: 0,
            },
            VlvTarget::GreaterOrEqual(b"jen"),
        ] {
            let request = VlvRequest {
                before: 1,
                after: 2,
                target,
                context: Some(b"ctx"),
            };
            let mut buf = Vec::new();
            request.encode(&mut buf);
            assert_eq!(VlvRequest::decode(Some(&buf)).unwrap(), request);
        }
        let response = VlvResponse {
            target_position: 7,
            content_count: 9,
            result: ResultCode::OFFSET_RANGE_ERROR,
            context: None,
        };
        let mut buf = Vec::new();
        response.encode(&mut buf);
        assert_eq!(VlvResponse::decode(Some(&buf)).unwrap(), response);
        // A negative count, and no target.
        assert!(
            VlvRequest::decode(Some(&[0x30, 0x06, 0x02, 0x01, 0xff, 0x02, 0x01, 0x00])).is_err()
        );
        assert!(
            VlvRequest::decode(Some(&[0x30, 0x06, 0x02, 0x01, 0x00, 0x02, 0x01, 0x00])).is_err()
        );
    }
}
