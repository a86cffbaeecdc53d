//! Extended operations (RFC 4511 section 4.12) Meridian knows, with their
//! request and response values.

use meridian_ber::{Error, Reader, Result, Tag, Writer};

/// Extended operation OIDs.
pub mod oid {
    /// StartTLS (RFC 4511 section 4.14).
    pub const START_TLS: &[u8] = b"1.3.6.1.4.1.1466.20037";
    /// Who am I? (RFC 4532).
    pub const WHO_AM_I: &[u8] = b"1.3.6.1.4.1.4203.1.11.3";
    /// Password Modify (RFC 3062).
    pub const PASSWORD_MODIFY: &[u8] = b"1.3.6.1.4.1.4203.1.11.1";
    /// Cancel (RFC 3909).
    pub const CANCEL: &[u8] = b"1.3.6.1.1.8";
    /// Refresh (RFC 2589).
    pub const REFRESH: &[u8] = b"1.3.6.1.4.1.1466.101.119.1";
    /// Start Transaction (RFC 5805 section 2.2).
    pub const START_TRANSACTION: &[u8] = b"1.3.6.1.1.21.1";
    /// End Transaction (RFC 5805 section 2.3).
    pub const END_TRANSACTION: &[u8] = b"1.3.6.1.1.21.3";
    /// Aborted Transaction notice (RFC 5805 section 2.4): an unsolicited
    /// notification whose value is the transaction's identifier.
    pub const ABORTED_TRANSACTION: &[u8] = b"1.3.6.1.1.21.4";
    /// Meridian's cluster administration: the request value is a command
    /// in text (`status`, `add-learner ID PEER LDAP-URL`, `promote ID`,
    /// `remove ID`, `transfer-leader ID`), the response value the answer
    /// in text. Under Meridian's arc (`system.schema`).
    pub const CLUSTER_ADMIN: &[u8] = b"2.25.241941608197083682915838068312096323903.5.1";
}

fn value_sequence<'a>(value: Option<&'a [u8]>, what: &'static str) -> Result<Reader<'a>> {
    let value = value.ok_or(Error::Malformed(what))?;
    let mut outer = Reader::new(value);
    let body = outer.expect(Tag::SEQUENCE, what)?;
    outer.finish(what)?;
    Ok(Reader::new(body))
}

/// Password Modify request value (RFC 3062); every field is optional.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PasswordModifyRequest<'a> {
    /// `userIdentity [0]`.
    pub user: Option<&'a [u8]>,
    /// `oldPasswd [1]`.
    pub old_password: Option<&'a [u8]>,
    /// `newPasswd [2]`.
    pub new_password: Option<&'a [u8]>,
}

impl<'a> PasswordModifyRequest<'a> {
    /// Decodes the request value; an absent value means "all defaults".
    pub fn decode(value: Option<&'a [u8]>) -> Result<Self> {
        if value.is_none() {
            return Ok(Self::default());
        }
        let mut r = value_sequence(value, "password modify value must be a SEQUENCE")?;
        let user = r.optional(Tag::context(0, false))?;
        let old_password = r.optional(Tag::context(1, false))?;
        let new_password = r.optional(Tag::context(2, false))?;
        r.finish("trailing bytes in password modify request")?;
        Ok(PasswordModifyRequest {
            user,
            old_password,
            new_password,
        })
    }

    /// Encodes the request value.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        let mut w = Writer::new(buf);
        let m = w.start(Tag::SEQUENCE);
        for (n, field) in [self.user, self.old_password, self.new_password]
            .into_iter()
            .enumerate()
        {
            if let Some(v) = field {
                w.octets(Tag::context(n as u8, false), v);
            }
        }
        w.end(m);
    }
}

/// Password Modify response value: the generated password, if any.
pub fn encode_password_modify_response(buf: &mut Vec<u8>, generated: &[u8]) {
    let mut w = Writer::new(buf);
    let m = w.start(Tag::SEQUENCE);
    w.octets(Tag::context(0, false), generated);
    w.end(m);
}

/// Decodes a Password Modify response value.
pub fn decode_password_modify_response(value: Option<&[u8]>) -> Result<Option<&[u8]>> {
    if value.is_none() {
        return Ok(None);
    }
    let mut r = value_sequence(value, "password modify response must be a SEQUENCE")?;
    let generated = r.optional(Tag::context(0, false))?;
    r.finish("trailing bytes in password modify response")?;
    Ok(generated)
}

/// Cancel request value (RFC 3909): the messageID to cancel.
pub fn decode_cancel(value: Option<&[u8]>) -> Result<i32> {
    let mut r = value_sequence(value, "cancel value must be a SEQUENCE")?;
    let id = r.integer(Tag::INTEGER, "expected cancelID")?;
    r.finish("trailing bytes in cancel request")?;
    i32::try_from(id)
        .ok()
        .filter(|id| *id >= 0)
        .ok_or(Error::Malformed("cancelID out of range"))
}

/// Encodes a Cancel request value.
pub fn encode_cancel(buf: &mut Vec<u8>, message_id: i32) {
    let mut w = Writer::new(buf);
    let m = w.start(Tag::SEQUENCE);
    w.integer(Tag::INTEGER, i64::from(message_id));
    w.end(m);
}

/// End Transaction request value (RFC 5805 section 2.3):
/// `SEQUENCE { commit BOOLEAN DEFAULT TRUE, identifier OCTET STRING }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndTransactionRequest<'a> {
    /// Commit (TRUE) or abort (FALSE).
    pub commit: bool,
    /// The identifier Start Transaction gave.
    pub identifier: &'a [u8],
}

impl<'a> EndTransactionRequest<'a> {
    /// Decodes the request value, which must be present.
    pub fn decode(value: Option<&'a [u8]>) -> Result<Self> {
        let mut r = value_sequence(value, "End Transaction value must be a SEQUENCE")?;
        let commit = match r.peek_tag() {
            Some(Tag::BOOLEAN) => r.boolean(Tag::BOOLEAN, "expected commit")?,
            _ => true,
        };
        let identifier = r.expect(Tag::OCTET_STRING, "expected the transaction identifier")?;
        r.finish("trailing bytes in End Transaction request")?;
        Ok(EndTransactionRequest { commit, identifier })
    }

    /// Encodes the request value (commit left out when TRUE, its
    /// default, as DER has it).
    pub fn encode(&self, buf: &mut Vec<u8>) {
        let mut w = Writer::new(buf);
        let m = w.start(Tag::SEQUENCE);
        if !self.commit {
            w.boolean(Tag::BOOLEAN, false);
        }
        w.octets(Tag::OCTET_STRING, self.identifier);
        w.end(m);
    }
}

/// End Transaction response value naming the update that failed the
/// transaction (RFC 5805 section 2.3: `txnEndRes`, its `messageID`; no
/// `updatesControls`, as no update of a transaction may ask for one).
pub fn encode_end_transaction_failure(buf: &mut Vec<u8>, message_id: i32) {
    let mut w = Writer::new(buf);
    let m = w.start(Tag::SEQUENCE);
    w.integer(Tag::INTEGER, i64::from(message_id));
    w.end(m);
}

/// The failed update's message ID in an End Transaction response value,
/// if it names one.
pub fn decode_end_transaction_response(value: &[u8]) -> Result<Option<i32>> {
    let mut r = value_sequence(Some(value), "End Transaction response must be a SEQUENCE")?;
    let id = match r.peek_tag() {
        Some(Tag::INTEGER) => Some(
            i32::try_from(r.integer(Tag::INTEGER, "expected messageID")?)
                .map_err(|_| Error::Malformed("messageID out of range"))?,
        ),
        _ => None,
    };
    // `updatesControls` may follow; Meridian sends none.
    Ok(id)
}

/// Refresh request value (RFC 2589).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefreshRequest<'a> {
    /// `entryName [0]`.
    pub dn: &'a [u8],
    /// `requestTtl [1]`, seconds.
    pub ttl_secs: u32,
}

impl<'a> RefreshRequest<'a> {
    /// Decodes the request value.
    pub fn decode(value: Option<&'a [u8]>) -> Result<Self> {
        let mut r = value_sequence(value, "refresh value must be a SEQUENCE")?;
        let dn = r.expect(Tag::context(0, false), "expected entryName")?;
        let ttl = r.integer(Tag::context(1, false), "expected requestTtl")?;
        r.finish("trailing bytes in refresh request")?;
        let ttl_secs =
            u32::try_from(ttl).map_err(|_| Error::Malformed("requestTtl out of range"))?;
        Ok(RefreshRequest { dn, ttl_secs })
    }

    /// Encodes the request value.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        let mut w = Writer::new(buf);
        let m = w.start(Tag::SEQUENCE);
        w.octets(Tag::context(0, false), self.dn);
        w.integer(Tag::context(1, false), i64::from(self.ttl_secs));
        w.end(m);
    }
}

/// Encodes a Refresh response value (`responseTtl [1]`).
pub fn encode_refresh_response(buf: &mut Vec<u8>, ttl_secs: u32) {
    let mut w = Writer::new(buf);
    let m = w.start(Tag::SEQUENCE);
    w.integer(Tag::context(1, false), i64::from(ttl_secs));
    w.end(m);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_modify_round_trip() {
        let req = PasswordModifyRequest {
            user: Some(b"uid=a,dc=x"),
            old_password: None,
            new_password: Some(b"secret"),
        };
        let mut buf = Vec::new();
        req.encode(&mut buf);
        assert_eq!(PasswordModifyRequest::decode(Some(&buf)).unwrap(), req);
        assert_eq!(
            PasswordModifyRequest::decode(None).unwrap(),
            PasswordModifyRequest::default()
        );
    }

    #[test]
    fn cancel_and_refresh_round_trip() {
        let mut buf = Vec::new();
        encode_cancel(&mut buf, 42);
        assert_eq!(decode_cancel(Some(&buf)).unwrap(), 42);
        let req = RefreshRequest {
            dn: b"cn=x",
            ttl_secs: 300,
        };
        buf.clear();
        req.encode(&mut buf);
        assert_eq!(RefreshRequest::decode(Some(&buf)).unwrap(), req);
    }
}
