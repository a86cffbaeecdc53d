//! Controls (RFC 4511 section 4.1.11) and typed values for the ones
//! Meridian knows.
//!
//! A [`Control`] is kept as `(OID, criticality, raw value)`; the typed
//! decoders below are applied by whoever acts on a control, so an unknown
//! control costs nothing to carry.

use meridian_ber::{Error, Reader, Result, Tag, Writer};

use crate::filter::Filter;
use crate::limits::Depth;
use crate::message::SearchResultEntry;
use crate::seq::{Element, Seq};

/// One control.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Control<'a> {
    /// controlType (an LDAPOID).
    pub oid: &'a [u8],
    /// criticality, DEFAULT FALSE.
    pub critical: bool,
    /// controlValue.
    pub value: Option<&'a [u8]>,
}

impl<'a> Element<'a> for Control<'a> {
    fn decode(reader: &mut Reader<'a>) -> Result<Self> {
        let c = reader.expect(Tag::SEQUENCE, "expected Control")?;
        let mut r = Reader::new(c);
        let oid = r.expect(Tag::OCTET_STRING, "expected controlType")?;
        let critical = match r.optional(Tag::BOOLEAN)? {
            Some(b) => meridian_ber::decode_boolean(b)?,
            None => false,
        };
        let value = r.optional(Tag::OCTET_STRING)?;
        r.finish("trailing bytes in Control")?;
        Ok(Control {
            oid,
            critical,
            value,
        })
    }

    fn encode(&self, w: &mut Writer<'_>) {
        let m = w.start(Tag::SEQUENCE);
        w.octets(Tag::OCTET_STRING, self.oid);
        if self.critical {
            w.boolean(Tag::BOOLEAN, true);
        }
        if let Some(v) = self.value {
            w.octets(Tag::OCTET_STRING, v);
        }
        w.end(m);
    }
}

/// Control OIDs.
pub mod oid {
    /// Meridian's private OID arc: a UUID-derived OID under `2.25`
    /// (ITU-T X.667), which needs no registration and cannot collide.
    /// Sub-arcs: `.1` controls, `.2` extended operations, `.3` features.
    pub const MERIDIAN_ARC: &str = "2.25.241941608197083682915838068312096323903";
    /// LDAP Queue Length control (draft-hollstein-queuelength-control; the
    /// draft's own OID is not available to us, see `docs/queue-length.md`).
    pub const QUEUE_LENGTH: &[u8] = b"2.25.241941608197083682915838068312096323903.1.1";
    /// Paged results (RFC 2696).
    pub const PAGED_RESULTS: &[u8] = b"1.2.840.113556.1.4.319";
    /// Assertion (RFC 4528).
    pub const ASSERTION: &[u8] = b"1.3.6.1.1.12";
    /// Pre-read (RFC 4527).
    pub const PRE_READ: &[u8] = b"1.3.6.1.1.13.1";
    /// Post-read (RFC 4527).
    pub const POST_READ: &[u8] = b"1.3.6.1.1.13.2";
    /// Subtree delete (draft-armijo-ldap-treedelete).
    pub const SUBTREE_DELETE: &[u8] = b"1.2.840.113556.1.4.805";
    /// ManageDsaIT (RFC 3296).
    pub const MANAGE_DSA_IT: &[u8] = b"2.16.840.1.113730.3.4.2";
    /// Proxied authorization v2 (RFC 4370).
    pub const PROXIED_AUTHZ_V2: &[u8] = b"2.16.840.1.113730.3.4.18";
    /// Permissive modify (Active Directory, also in OpenLDAP).
    pub const PERMISSIVE_MODIFY: &[u8] = b"1.2.840.113556.1.4.1413";
    /// Server-side sort request (RFC 2891).
    pub const SORT_REQUEST: &[u8] = b"1.2.840.113556.1.4.473";
    /// Server-side sort response (RFC 2891).
    pub const SORT_RESPONSE: &[u8] = b"1.2.840.113556.1.4.474";
    /// Virtual list view request (draft-ietf-ldapext-ldapv3-vlv-09).
    pub const VLV_REQUEST: &[u8] = b"2.16.840.1.113730.3.4.9";
    /// Virtual list view response (draft-ietf-ldapext-ldapv3-vlv-09).
    pub const VLV_RESPONSE: &[u8] = b"2.16.840.1.113730.3.4.10";
    /// Password policy, request and response
    /// (draft-behera-ldap-password-policy).
    pub const PASSWORD_POLICY: &[u8] = b"1.3.6.1.4.1.42.2.27.8.5.1";
    /// Transaction specification (RFC 5805 section 2.1): the update
    /// belongs to the transaction whose identifier is the value.
    pub const TRANSACTION_SPECIFICATION: &[u8] = b"1.3.6.1.1.21.2";
    /// Relax Rules (OpenLDAP's, draft-zeilenga-ldap-relax): the
    /// administrator may write what only the server writes otherwise.
    pub const RELAX_RULES: &[u8] = b"1.3.6.1.4.1.4203.666.5.12";
    /// Matched values (RFC 3876): only the values a filter matches.
    pub const MATCHED_VALUES: &[u8] = b"1.2.826.0.1.3344810.2.3";
}

/// Why the password policy refused or qualified an operation
/// (draft-behera-ldap-password-policy-11, section 6.2, the response's
/// `error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyError {
    /// passwordExpired (0): a bind with an expired password.
    PasswordExpired = 0,
    /// accountLocked (1): a bind to a locked entry.
    AccountLocked = 1,
    /// changeAfterReset (2): the password was reset by someone else and
    /// must be changed before anything but a password change is done.
    ChangeAfterReset = 2,
    /// passwordModNotAllowed (3): users may not change their password.
    PasswordModNotAllowed = 3,
    /// mustSupplyOldPassword (4).
    MustSupplyOldPassword = 4,
    /// insufficientPasswordQuality (5).
    InsufficientPasswordQuality = 5,
    /// passwordTooShort (6).
    PasswordTooShort = 6,
    /// passwordTooYoung (7): changed again before the minimum age.
    PasswordTooYoung = 7,
    /// passwordInHistory (8).
    PasswordInHistory = 8,
}

/// The warning of a password policy response control.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyWarning {
    /// timeBeforeExpiration: seconds until the password expires.
    TimeBeforeExpiration(u32),
    /// graceAuthNsRemaining: binds left with the expired password.
    GraceAuthNsRemaining(u32),
}

/// The value of a password policy response control.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PolicyResponse {
    /// The warning, if any.
    pub warning: Option<PolicyWarning>,
    /// The error, if any.
    pub error: Option<PolicyError>,
}

impl PolicyResponse {
    /// A response with only `error`.
    pub fn error(error: PolicyError) -> Self {
        PolicyResponse {
            warning: None,
            error: Some(error),
        }
    }

    /// `PasswordPolicyResponseValue ::= SEQUENCE { warning [0] CHOICE {
    /// timeBeforeExpiration [0] INTEGER, graceAuthNsRemaining [1]
    /// INTEGER } OPTIONAL, error [1] ENUMERATED OPTIONAL }`: the
    /// CHOICE's tag is explicit, the rest implicit.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        let mut w = Writer::new(buf);
        let seq = w.start(Tag::SEQUENCE);
        if let Some(warning) = self.warning {
            let (choice, value) = match warning {
                PolicyWarning::TimeBeforeExpiration(secs) => (0, secs),
                PolicyWarning::GraceAuthNsRemaining(left) => (1, left),
            };
            let outer = w.start(Tag::context(0, true));
            w.integer(Tag::context(choice, false), i64::from(value));
            w.end(outer);
        }
        if let Some(error) = self.error {
            w.integer(Tag::context(1, false), error as i64);
        }
        w.end(seq);
    }
}

pub(crate) fn sequence_reader<'a>(
    value: Option<&'a [u8]>,
    what: &'static str,
) -> Result<Reader<'a>> {
    let value = value.ok_or(Error::Malformed(what))?;
    let mut outer = Reader::new(value);
    let body = outer.expect(Tag::SEQUENCE, what)?;
    outer.finish(what)?;
    Ok(Reader::new(body))
}

/// Queue Length control value: `QueueLength ::= INTEGER (1..maxInt)`, the
/// number of operations (counting the one carrying the control) whose
/// responses the client wants sent together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueLength {
    /// Number of operations in the bundle.
    pub count: u32,
}

impl QueueLength {
    /// Decodes the control value.
    pub fn decode(value: Option<&[u8]>) -> Result<Self> {
        let value = value.ok_or(Error::Malformed("queue length control needs a value"))?;
        let mut r = Reader::new(value);
        let count = r.integer(Tag::INTEGER, "queue length must be an INTEGER")?;
        r.finish("trailing bytes in queue length")?;
        let count = u32::try_from(count)
            .ok()
            .filter(|c| *c >= 1 && i64::from(*c) <= crate::message::MAX_INT)
            .ok_or(Error::Malformed("queue length out of range 1..maxInt"))?;
        Ok(QueueLength { count })
    }

    /// Encodes the control value.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        Writer::new(buf).integer(Tag::INTEGER, i64::from(self.count));
    }
}

/// Paged results control value (RFC 2696), request and response alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PagedResults<'a> {
    /// Page size (request) or estimated total (response).
    pub size: i32,
    /// Opaque cookie, empty on the first request and the last response.
    pub cookie: &'a [u8],
}

impl<'a> PagedResults<'a> {
    /// Decodes the control value.
    pub fn decode(value: Option<&'a [u8]>) -> Result<Self> {
        let mut r = sequence_reader(value, "paged results value must be a SEQUENCE")?;
        let size = r.integer(Tag::INTEGER, "expected page size")?;
        let size = i32::try_from(size).map_err(|_| Error::Malformed("page size out of range"))?;
        let cookie = r.expect(Tag::OCTET_STRING, "expected cookie")?;
        r.finish("trailing bytes in paged results value")?;
        Ok(PagedResults { size, cookie })
    }

    /// Encodes the control value.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        let mut w = Writer::new(buf);
        let m = w.start(Tag::SEQUENCE);
        w.integer(Tag::INTEGER, i64::from(self.size));
        w.octets(Tag::OCTET_STRING, self.cookie);
        w.end(m);
    }
}

/// Assertion control value (RFC 4528): a filter.
pub fn decode_assertion<'a>(value: Option<&'a [u8]>, depth: Depth) -> Result<Filter<'a>> {
    Filter::from_ber(
        value.ok_or(Error::Malformed("assertion control needs a filter"))?,
        depth,
    )
}

/// Matched values control value (RFC 3876): `ValuesReturnFilter ::=
/// SEQUENCE OF SimpleFilterItem`, each a filter item without `and`, `or`
/// or `not` (the extensible item has no dnAttributes). At least one.
pub fn decode_values_return_filter<'a>(
    value: Option<&'a [u8]>,
    depth: Depth,
) -> Result<Vec<Filter<'a>>> {
    let value = value.ok_or(Error::Malformed(
        "the matched values control needs a ValuesReturnFilter",
    ))?;
    let mut outer = Reader::new(value);
    let items = outer.expect(
        Tag::SEQUENCE,
        "expected ValuesReturnFilter, a SEQUENCE OF SimpleFilterItem",
    )?;
    outer.finish("trailing bytes after the ValuesReturnFilter")?;
    let mut reader = Reader::new(items);
    let mut filters = Vec::new();
    while !reader.is_empty() {
        let item = Filter::decode_checked(&mut reader, depth)?;
        if matches!(item, Filter::And(_) | Filter::Or(_) | Filter::Not(_)) {
            return Err(Error::Malformed(
                "a ValuesReturnFilter holds simple items only: no and, or, not",
            ));
        }
        filters.push(item);
    }
    if filters.is_empty() {
        return Err(Error::Malformed(
            "a ValuesReturnFilter holds at least one item",
        ));
    }
    Ok(filters)
}

/// Pre-read and post-read request value (RFC 4527): an AttributeSelection.
pub fn decode_read_entry_request<'a>(
    value: Option<&'a [u8]>,
    depth: Depth,
) -> Result<Seq<'a, &'a [u8]>> {
    let value = value.ok_or(Error::Malformed("read entry control needs a value"))?;
    let mut r = Reader::new(value);
    let attrs = r.expect(Tag::SEQUENCE, "expected AttributeSelection")?;
    r.finish("trailing bytes in read entry control")?;
    Seq::decode_contents(attrs, depth)
}

/// Pre-read and post-read response value (RFC 4527): a SearchResultEntry.
pub fn decode_read_entry_response<'a>(
    value: Option<&'a [u8]>,
    depth: Depth,
) -> Result<SearchResultEntry<'a>> {
    let value = value.ok_or(Error::Malformed("read entry response needs a value"))?;
    let mut r = Reader::new(value);
    let c = r.expect(
        crate::message::tags::SEARCH_RESULT_ENTRY,
        "expected SearchResultEntry",
    )?;
    r.finish("trailing bytes in read entry response")?;
    let mut e = Reader::new(c);
    let dn = e.expect(Tag::OCTET_STRING, "expected objectName")?;
    let attrs = e.expect(Tag::SEQUENCE, "expected attributes")?;
    e.finish("trailing bytes in read entry response")?;
    Ok(SearchResultEntry {
        dn,
        attributes: Seq::decode_contents(attrs, depth.descend()?)?,
    })
}

/// Proxied authorization v2 value (RFC 4370): the authzId, *not* BER
/// encoded (`dn:...`, `u:...`, or empty for anonymous).
pub fn decode_proxied_authz(value: Option<&[u8]>) -> Result<&[u8]> {
    value.ok_or(Error::Malformed("proxied authorization needs a value"))
}

/// Controls that must not carry a value (subtree delete, ManageDsaIT,
/// permissive modify).
pub fn expect_no_value(value: Option<&[u8]>) -> Result<()> {
    match value {
        None => Ok(()),
        Some(_) => Err(Error::Malformed("this control takes no value")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_response_encodes_its_warning_choice_and_error() {
        let encode = |response: PolicyResponse| {
            let mut out = Vec::new();
            response.encode(&mut out);
            out
        };
        // warning [0] { timeBeforeExpiration [0] 300 }
        let expiry = PolicyResponse {
            warning: Some(PolicyWarning::TimeBeforeExpiration(300)),
            error: None,
        };
        assert_eq!(
            encode(expiry),
            [0x30, 0x06, 0xa0, 0x04, 0x80, 0x02, 0x01, 0x2c]
        );
        // warning [0] { graceAuthNsRemaining [1] 2 }, error [1] 2
        let grace = PolicyResponse {
            warning: Some(PolicyWarning::GraceAuthNsRemaining(2)),
            error: Some(PolicyError::ChangeAfterReset),
        };
        assert_eq!(
            encode(grace),
            [0x30, 0x08, 0xa0, 0x03, 0x81, 0x01, 0x02, 0x81, 0x01, 0x02]
        );
        // slapd's mustSupplyOldPassword, byte for byte (MAOBAQQ=).
        assert_eq!(
            encode(PolicyResponse::error(PolicyError::MustSupplyOldPassword)),
            [0x30, 0x03, 0x81, 0x01, 0x04]
        );
    }

    #[test]
    fn paged_results_round_trip() {
        let mut buf = Vec::new();
        PagedResults {
            size: 500,
            cookie: b"abc",
        }
        .encode(&mut buf);
        assert_eq!(
            PagedResults::decode(Some(&buf)).unwrap(),
            PagedResults {
                size: 500,
                cookie: b"abc"
            }
        );
    }

    #[test]
    fn queue_length_round_trip_and_range() {
        let mut buf = Vec::new();
        QueueLength { count: 1000 }.encode(&mut buf);
        assert_eq!(QueueLength::decode(Some(&buf)).unwrap().count, 1000);
        assert!(QueueLength::decode(Some(&[0x02, 0x01, 0x00])).is_err());
        assert!(QueueLength::decode(None).is_err());
    }

    #[test]
    fn meridian_arc_prefixes_our_oids() {
        assert!(oid::QUEUE_LENGTH.starts_with(oid::MERIDIAN_ARC.as_bytes()));
    }
}
