//! LDAPMessage and every protocolOp of RFC 4511, both directions.

use meridian_ber::{Error, Reader, Result, Tag, Writer, frame};

use crate::controls::Control;
use crate::filter::{Ava, Filter};
use crate::limits::{DecodeLimits, Depth};
use crate::result::ResultCode;
use crate::seq::{Element, Seq};

/// protocolOp tags, `[APPLICATION n]`.
pub mod tags {
    use meridian_ber::Tag;
    /// BindRequest.
    pub const BIND_REQUEST: Tag = Tag::application(0, true);
    /// BindResponse.
    pub const BIND_RESPONSE: Tag = Tag::application(1, true);
    /// UnbindRequest (primitive NULL).
    pub const UNBIND_REQUEST: Tag = Tag::application(2, false);
    /// SearchRequest.
    pub const SEARCH_REQUEST: Tag = Tag::application(3, true);
    /// SearchResultEntry.
    pub const SEARCH_RESULT_ENTRY: Tag = Tag::application(4, true);
    /// SearchResultDone.
    pub const SEARCH_RESULT_DONE: Tag = Tag::application(5, true);
    /// ModifyRequest.
    pub const MODIFY_REQUEST: Tag = Tag::application(6, true);
    /// ModifyResponse.
    pub const MODIFY_RESPONSE: Tag = Tag::application(7, true);
    /// AddRequest.
    pub const ADD_REQUEST: Tag = Tag::application(8, true);
    /// AddResponse.
    pub const ADD_RESPONSE: Tag = Tag::application(9, true);
    /// DelRequest (primitive LDAPDN).
    pub const DEL_REQUEST: Tag = Tag::application(10, false);
    /// DelResponse.
    pub const DEL_RESPONSE: Tag = Tag::application(11, true);
    /// ModifyDNRequest.
    pub const MODIFY_DN_REQUEST: Tag = Tag::application(12, true);
    /// ModifyDNResponse.
    pub const MODIFY_DN_RESPONSE: Tag = Tag::application(13, true);
    /// CompareRequest.
    pub const COMPARE_REQUEST: Tag = Tag::application(14, true);
    /// CompareResponse.
    pub const COMPARE_RESPONSE: Tag = Tag::application(15, true);
    /// AbandonRequest (primitive MessageID).
    pub const ABANDON_REQUEST: Tag = Tag::application(16, false);
    /// SearchResultReference.
    pub const SEARCH_RESULT_REFERENCE: Tag = Tag::application(19, true);
    /// ExtendedRequest.
    pub const EXTENDED_REQUEST: Tag = Tag::application(23, true);
    /// ExtendedResponse.
    pub const EXTENDED_RESPONSE: Tag = Tag::application(24, true);
    /// IntermediateResponse.
    pub const INTERMEDIATE_RESPONSE: Tag = Tag::application(25, true);
}

const CONTROLS: Tag = Tag::context(0, true);
const REFERRAL: Tag = Tag::context(3, true);
/// Largest MessageID (`maxInt`, RFC 4511 section 4.1.1).
pub const MAX_INT: i64 = i32::MAX as i64;

/// One LDAPMessage.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LdapMessage<'a> {
    /// MessageID, 0 to maxInt; 0 is reserved for unsolicited notifications.
    pub message_id: i32,
    /// The operation.
    pub op: ProtocolOp<'a>,
    /// Controls; empty when absent.
    pub controls: Seq<'a, Control<'a>>,
}

/// The protocolOp CHOICE.
#[derive(Debug, Clone, Copy, PartialEq)]
#[allow(missing_docs)] // variant names are the RFC's
pub enum ProtocolOp<'a> {
    BindRequest(BindRequest<'a>),
    BindResponse(BindResponse<'a>),
    UnbindRequest,
    SearchRequest(SearchRequest<'a>),
    SearchResultEntry(SearchResultEntry<'a>),
    SearchResultDone(LdapResult<'a>),
    SearchResultReference(Seq<'a, &'a [u8]>),
    ModifyRequest(ModifyRequest<'a>),
    ModifyResponse(LdapResult<'a>),
    AddRequest(AddRequest<'a>),
    AddResponse(LdapResult<'a>),
    DelRequest(&'a [u8]),
    DelResponse(LdapResult<'a>),
    ModifyDnRequest(ModifyDnRequest<'a>),
    ModifyDnResponse(LdapResult<'a>),
    CompareRequest(CompareRequest<'a>),
    CompareResponse(LdapResult<'a>),
    AbandonRequest(i32),
    ExtendedRequest(ExtendedRequest<'a>),
    ExtendedResponse(ExtendedResponse<'a>),
    IntermediateResponse(IntermediateResponse<'a>),
}

/// LDAPResult, the common part of most responses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LdapResult<'a> {
    /// resultCode.
    pub code: ResultCode,
    /// matchedDN.
    pub matched_dn: &'a [u8],
    /// diagnosticMessage.
    pub message: &'a [u8],
    /// referral `[3]`, present only with code `referral`.
    pub referral: Option<Seq<'a, &'a [u8]>>,
}

impl<'a> LdapResult<'a> {
    /// A result with no matchedDN and no referral.
    pub const fn new(code: ResultCode, message: &'a [u8]) -> Self {
        LdapResult {
            code,
            matched_dn: b"",
            message,
            referral: None,
        }
    }

    /// `success` with an empty message.
    pub const fn success() -> Self {
        Self::new(ResultCode::SUCCESS, b"")
    }
}

/// BindRequest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BindRequest<'a> {
    /// version, 1 to 127; only 3 is served.
    pub version: u8,
    /// name (an LDAPDN, empty for anonymous).
    pub name: &'a [u8],
    /// authentication.
    pub auth: Authentication<'a>,
}

/// AuthenticationChoice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authentication<'a> {
    /// `simple [0]`: the password.
    Simple(&'a [u8]),
    /// `sasl [3]`.
    Sasl {
        /// mechanism.
        mechanism: &'a [u8],
        /// credentials, OPTIONAL.
        credentials: Option<&'a [u8]>,
    },
}

/// BindResponse.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BindResponse<'a> {
    /// The result.
    pub result: LdapResult<'a>,
    /// `serverSaslCreds [7]`.
    pub server_sasl_creds: Option<&'a [u8]>,
}

/// Search scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// baseObject (0).
    Base = 0,
    /// singleLevel (1).
    OneLevel = 1,
    /// wholeSubtree (2).
    Subtree = 2,
    /// subordinateSubtree (3, draft-sermersheim-ldap-subordinate-scope).
    Subordinate = 3,
}

/// derefAliases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DerefAliases {
    /// neverDerefAliases (0).
    Never = 0,
    /// derefInSearching (1).
    InSearching = 1,
    /// derefFindingBaseObj (2).
    FindingBase = 2,
    /// derefAlways (3).
    Always = 3,
}

/// SearchRequest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchRequest<'a> {
    /// baseObject.
    pub base: &'a [u8],
    /// scope.
    pub scope: Scope,
    /// derefAliases.
    pub deref: DerefAliases,
    /// sizeLimit (0 = no client limit).
    pub size_limit: i32,
    /// timeLimit in seconds (0 = no client limit).
    pub time_limit: i32,
    /// typesOnly.
    pub types_only: bool,
    /// filter.
    pub filter: Filter<'a>,
    /// attributes (AttributeSelection).
    pub attributes: Seq<'a, &'a [u8]>,
}

/// PartialAttribute (and Attribute, which only adds "at least one value").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PartialAttribute<'a> {
    /// type (AttributeDescription).
    pub ty: &'a [u8],
    /// vals.
    pub values: Seq<'a, &'a [u8]>,
}

/// SearchResultEntry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchResultEntry<'a> {
    /// objectName.
    pub dn: &'a [u8],
    /// attributes.
    pub attributes: Seq<'a, PartialAttribute<'a>>,
}

/// ModifyRequest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModifyRequest<'a> {
    /// object.
    pub dn: &'a [u8],
    /// changes, applied in order.
    pub changes: Seq<'a, Change<'a>>,
}

/// One change of a ModifyRequest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change<'a> {
    /// operation.
    pub operation: ModifyOperation,
    /// modification.
    pub modification: PartialAttribute<'a>,
}

/// Change operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModifyOperation {
    /// add (0).
    Add = 0,
    /// delete (1).
    Delete = 1,
    /// replace (2).
    Replace = 2,
    /// increment (3, RFC 4525).
    Increment = 3,
}

/// AddRequest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AddRequest<'a> {
    /// entry.
    pub dn: &'a [u8],
    /// attributes.
    pub attributes: Seq<'a, PartialAttribute<'a>>,
}

/// ModifyDNRequest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModifyDnRequest<'a> {
    /// entry.
    pub dn: &'a [u8],
    /// newrdn.
    pub new_rdn: &'a [u8],
    /// deleteoldrdn.
    pub delete_old_rdn: bool,
    /// newSuperior `[0]`.
    pub new_superior: Option<&'a [u8]>,
}

/// CompareRequest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompareRequest<'a> {
    /// entry.
    pub dn: &'a [u8],
    /// ava.
    pub ava: Ava<'a>,
}

/// ExtendedRequest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtendedRequest<'a> {
    /// requestName `[0]`.
    pub name: &'a [u8],
    /// requestValue `[1]`.
    pub value: Option<&'a [u8]>,
}

/// ExtendedResponse.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExtendedResponse<'a> {
    /// The result.
    pub result: LdapResult<'a>,
    /// responseName `[10]`.
    pub name: Option<&'a [u8]>,
    /// responseValue `[11]`.
    pub value: Option<&'a [u8]>,
}

/// IntermediateResponse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntermediateResponse<'a> {
    /// responseName `[0]`.
    pub name: Option<&'a [u8]>,
    /// responseValue `[1]`.
    pub value: Option<&'a [u8]>,
}

// ---------------------------------------------------------------------------
// Decoding

impl<'a> LdapMessage<'a> {
    /// Decodes one complete LDAPMessage; `pdu` must be exactly one PDU as
    /// delimited by [`meridian_ber::frame::pdu_length`].
    pub fn decode(pdu: &'a [u8], limits: &DecodeLimits) -> Result<Self> {
        if pdu.len() > limits.max_pdu_bytes {
            return Err(Error::TooLarge {
                length: pdu.len() as u64,
                max: limits.max_pdu_bytes,
            });
        }
        let depth = Depth::new(limits.max_depth);
        let mut outer = Reader::new(pdu);
        let body = outer.expect(Tag::SEQUENCE, "an LDAPMessage must be a SEQUENCE")?;
        outer.finish("bytes after the LDAPMessage")?;
        let mut r = Reader::new(body);
        let message_id = r.integer(Tag::INTEGER, "expected messageID")?;
        let message_id = i32::try_from(message_id)
            .ok()
            .filter(|id| *id >= 0)
            .ok_or(Error::Malformed("messageID out of range 0..maxInt"))?;
        let op_tlv = r.read()?;
        let op = ProtocolOp::decode(op_tlv.tag, op_tlv.contents, depth.descend()?)?;
        let controls = match r.optional(CONTROLS)? {
            Some(c) => Seq::decode_contents(c, depth.descend()?)?,
            None => Seq::empty(),
        };
        r.finish("unexpected bytes after controls")?;
        Ok(LdapMessage {
            message_id,
            op,
            controls,
        })
    }

    /// Splits the first PDU off `buf` and decodes it. Returns the message
    /// and the number of bytes it used; `Incomplete` when more bytes are
    /// needed.
    pub fn decode_prefix(buf: &'a [u8], limits: &DecodeLimits) -> Result<(Self, usize)> {
        let len = frame::pdu_length(buf, limits.max_pdu_bytes)?;
        let pdu = buf.get(..len).ok_or(Error::Incomplete { needed: len })?;
        Ok((Self::decode(pdu, limits)?, len))
    }
}

fn enumerated(r: &mut Reader<'_>, what: &'static str) -> Result<i64> {
    r.integer(Tag::ENUMERATED, what)
}

fn non_negative_i32(value: i64, what: &'static str) -> Result<i32> {
    i32::try_from(value)
        .ok()
        .filter(|v| *v >= 0)
        .ok_or(Error::Malformed(what))
}

impl<'a> ProtocolOp<'a> {
    fn decode(tag: Tag, c: &'a [u8], depth: Depth) -> Result<Self> {
        use tags::*;
        Ok(match tag {
            BIND_REQUEST => ProtocolOp::BindRequest(BindRequest::decode(c)?),
            BIND_RESPONSE => {
                let mut r = Reader::new(c);
                let result = LdapResult::decode_fields(&mut r, depth)?;
                let server_sasl_creds = r.optional(Tag::context(7, false))?;
                r.finish("trailing bytes in BindResponse")?;
                ProtocolOp::BindResponse(BindResponse {
                    result,
                    server_sasl_creds,
                })
            }
            UNBIND_REQUEST => {
                if !c.is_empty() {
                    return Err(Error::Malformed("UnbindRequest must be empty"));
                }
                ProtocolOp::UnbindRequest
            }
            SEARCH_REQUEST => ProtocolOp::SearchRequest(SearchRequest::decode(c, depth)?),
            SEARCH_RESULT_ENTRY => {
                let mut r = Reader::new(c);
                let dn = r.expect(Tag::OCTET_STRING, "expected objectName")?;
                let attrs = r.expect(Tag::SEQUENCE, "expected attributes")?;
                r.finish("trailing bytes in SearchResultEntry")?;
                ProtocolOp::SearchResultEntry(SearchResultEntry {
                    dn,
                    attributes: Seq::decode_contents(attrs, depth.descend()?)?,
                })
            }
            SEARCH_RESULT_DONE => ProtocolOp::SearchResultDone(LdapResult::decode(c, depth)?),
            SEARCH_RESULT_REFERENCE => {
                let uris = Seq::decode_contents(c, depth)?;
                if uris.is_empty() {
                    return Err(Error::Malformed("SearchResultReference without URIs"));
                }
                ProtocolOp::SearchResultReference(uris)
            }
            MODIFY_REQUEST => {
                let mut r = Reader::new(c);
                let dn = r.expect(Tag::OCTET_STRING, "expected object")?;
                let changes = r.expect(Tag::SEQUENCE, "expected changes")?;
                r.finish("trailing bytes in ModifyRequest")?;
                ProtocolOp::ModifyRequest(ModifyRequest {
                    dn,
                    changes: Seq::decode_contents(changes, depth.descend()?)?,
                })
            }
            MODIFY_RESPONSE => ProtocolOp::ModifyResponse(LdapResult::decode(c, depth)?),
            ADD_REQUEST => {
                let mut r = Reader::new(c);
                let dn = r.expect(Tag::OCTET_STRING, "expected entry")?;
                let attrs = r.expect(Tag::SEQUENCE, "expected attributes")?;
                r.finish("trailing bytes in AddRequest")?;
                ProtocolOp::AddRequest(AddRequest {
                    dn,
                    attributes: Seq::decode_contents(attrs, depth.descend()?)?,
                })
            }
            ADD_RESPONSE => ProtocolOp::AddResponse(LdapResult::decode(c, depth)?),
            DEL_REQUEST => ProtocolOp::DelRequest(c),
            DEL_RESPONSE => ProtocolOp::DelResponse(LdapResult::decode(c, depth)?),
            MODIFY_DN_REQUEST => {
                let mut r = Reader::new(c);
                let dn = r.expect(Tag::OCTET_STRING, "expected entry")?;
                let new_rdn = r.expect(Tag::OCTET_STRING, "expected newrdn")?;
                let delete_old_rdn = r.boolean(Tag::BOOLEAN, "expected deleteoldrdn")?;
                let new_superior = r.optional(Tag::context(0, false))?;
                r.finish("trailing bytes in ModifyDNRequest")?;
                ProtocolOp::ModifyDnRequest(ModifyDnRequest {
                    dn,
                    new_rdn,
                    delete_old_rdn,
                    new_superior,
                })
            }
            MODIFY_DN_RESPONSE => ProtocolOp::ModifyDnResponse(LdapResult::decode(c, depth)?),
            COMPARE_REQUEST => {
                let mut r = Reader::new(c);
                let dn = r.expect(Tag::OCTET_STRING, "expected entry")?;
                let ava = Ava::decode_contents(r.expect(Tag::SEQUENCE, "expected ava")?)?;
                r.finish("trailing bytes in CompareRequest")?;
                ProtocolOp::CompareRequest(CompareRequest { dn, ava })
            }
            COMPARE_RESPONSE => ProtocolOp::CompareResponse(LdapResult::decode(c, depth)?),
            ABANDON_REQUEST => {
                let id = meridian_ber::decode_integer(c)?;
                ProtocolOp::AbandonRequest(non_negative_i32(id, "abandon messageID out of range")?)
            }
            EXTENDED_REQUEST => {
                let mut r = Reader::new(c);
                let name = r.expect(Tag::context(0, false), "expected requestName")?;
                let value = r.optional(Tag::context(1, false))?;
                r.finish("trailing bytes in ExtendedRequest")?;
                ProtocolOp::ExtendedRequest(ExtendedRequest { name, value })
            }
            EXTENDED_RESPONSE => {
                let mut r = Reader::new(c);
                let result = LdapResult::decode_fields(&mut r, depth)?;
                let name = r.optional(Tag::context(10, false))?;
                let value = r.optional(Tag::context(11, false))?;
                r.finish("trailing bytes in ExtendedResponse")?;
                ProtocolOp::ExtendedResponse(ExtendedResponse {
                    result,
                    name,
                    value,
                })
            }
            INTERMEDIATE_RESPONSE => {
                let mut r = Reader::new(c);
                let name = r.optional(Tag::context(0, false))?;
                let value = r.optional(Tag::context(1, false))?;
                r.finish("trailing bytes in IntermediateResponse")?;
                ProtocolOp::IntermediateResponse(IntermediateResponse { name, value })
            }
            _ => return Err(Error::Malformed("unknown protocolOp")),
        })
    }

    /// The `[APPLICATION n]` tag of this operation.
    pub fn tag(&self) -> Tag {
        use tags::*;
        match self {
            ProtocolOp::BindRequest(_) => BIND_REQUEST,
            ProtocolOp::BindResponse(_) => BIND_RESPONSE,
            ProtocolOp::UnbindRequest => UNBIND_REQUEST,
            ProtocolOp::SearchRequest(_) => SEARCH_REQUEST,
            ProtocolOp::SearchResultEntry(_) => SEARCH_RESULT_ENTRY,
            ProtocolOp::SearchResultDone(_) => SEARCH_RESULT_DONE,
            ProtocolOp::SearchResultReference(_) => SEARCH_RESULT_REFERENCE,
            ProtocolOp::ModifyRequest(_) => MODIFY_REQUEST,
            ProtocolOp::ModifyResponse(_) => MODIFY_RESPONSE,
            ProtocolOp::AddRequest(_) => ADD_REQUEST,
            ProtocolOp::AddResponse(_) => ADD_RESPONSE,
            ProtocolOp::DelRequest(_) => DEL_REQUEST,
            ProtocolOp::DelResponse(_) => DEL_RESPONSE,
            ProtocolOp::ModifyDnRequest(_) => MODIFY_DN_REQUEST,
            ProtocolOp::ModifyDnResponse(_) => MODIFY_DN_RESPONSE,
            ProtocolOp::CompareRequest(_) => COMPARE_REQUEST,
            ProtocolOp::CompareResponse(_) => COMPARE_RESPONSE,
            ProtocolOp::AbandonRequest(_) => ABANDON_REQUEST,
            ProtocolOp::ExtendedRequest(_) => EXTENDED_REQUEST,
            ProtocolOp::ExtendedResponse(_) => EXTENDED_RESPONSE,
            ProtocolOp::IntermediateResponse(_) => INTERMEDIATE_RESPONSE,
        }
    }

    /// A short name for logs (`BIND`, `SRCH`, ... as slapd's access log).
    pub fn name(&self) -> &'static str {
        match self {
            ProtocolOp::BindRequest(_) => "BIND",
            ProtocolOp::UnbindRequest => "UNBIND",
            ProtocolOp::SearchRequest(_) => "SRCH",
            ProtocolOp::ModifyRequest(_) => "MOD",
            ProtocolOp::AddRequest(_) => "ADD",
            ProtocolOp::DelRequest(_) => "DEL",
            ProtocolOp::ModifyDnRequest(_) => "MODRDN",
            ProtocolOp::CompareRequest(_) => "CMP",
            ProtocolOp::AbandonRequest(_) => "ABANDON",
            ProtocolOp::ExtendedRequest(_) => "EXT",
            _ => "RESPONSE",
        }
    }
}

impl<'a> BindRequest<'a> {
    fn decode(c: &'a [u8]) -> Result<Self> {
        let mut r = Reader::new(c);
        let version = r.integer(Tag::INTEGER, "expected version")?;
        let version = u8::try_from(version)
            .ok()
            .filter(|v| (1..=127).contains(v))
            .ok_or(Error::Malformed("bind version out of range 1..127"))?;
        let name = r.expect(Tag::OCTET_STRING, "expected bind name")?;
        let tlv = r.read()?;
        let auth = match tlv.tag {
            t if t == Tag::context(0, false) => Authentication::Simple(tlv.contents),
            t if t == Tag::context(3, true) => {
                let mut s = Reader::new(tlv.contents);
                let mechanism = s.expect(Tag::OCTET_STRING, "expected SASL mechanism")?;
                let credentials = s.optional(Tag::OCTET_STRING)?;
                s.finish("trailing bytes in SaslCredentials")?;
                Authentication::Sasl {
                    mechanism,
                    credentials,
                }
            }
            _ => return Err(Error::Malformed("unknown authentication choice")),
        };
        r.finish("trailing bytes in BindRequest")?;
        Ok(BindRequest {
            version,
            name,
            auth,
        })
    }
}

impl<'a> SearchRequest<'a> {
    fn decode(c: &'a [u8], depth: Depth) -> Result<Self> {
        let mut r = Reader::new(c);
        let base = r.expect(Tag::OCTET_STRING, "expected baseObject")?;
        let scope = match enumerated(&mut r, "expected scope")? {
            0 => Scope::Base,
            1 => Scope::OneLevel,
            2 => Scope::Subtree,
            3 => Scope::Subordinate,
            _ => return Err(Error::Malformed("unknown search scope")),
        };
        let deref = match enumerated(&mut r, "expected derefAliases")? {
            0 => DerefAliases::Never,
            1 => DerefAliases::InSearching,
            2 => DerefAliases::FindingBase,
            3 => DerefAliases::Always,
            _ => return Err(Error::Malformed("unknown derefAliases value")),
        };
        let size_limit = non_negative_i32(
            r.integer(Tag::INTEGER, "expected sizeLimit")?,
            "sizeLimit out of range",
        )?;
        let time_limit = non_negative_i32(
            r.integer(Tag::INTEGER, "expected timeLimit")?,
            "timeLimit out of range",
        )?;
        let types_only = r.boolean(Tag::BOOLEAN, "expected typesOnly")?;
        let filter = Filter::decode_checked(&mut r, depth)?;
        let attributes =
            Seq::decode_contents(r.expect(Tag::SEQUENCE, "expected attributes")?, depth)?;
        r.finish("trailing bytes in SearchRequest")?;
        Ok(SearchRequest {
            base,
            scope,
            deref,
            size_limit,
            time_limit,
            types_only,
            filter,
            attributes,
        })
    }
}

impl<'a> LdapResult<'a> {
    fn decode(c: &'a [u8], depth: Depth) -> Result<Self> {
        let mut r = Reader::new(c);
        let result = Self::decode_fields(&mut r, depth)?;
        r.finish("trailing bytes in LDAPResult")?;
        Ok(result)
    }

    fn decode_fields(r: &mut Reader<'a>, depth: Depth) -> Result<Self> {
        let code = enumerated(r, "expected resultCode")?;
        let code = u32::try_from(code).map_err(|_| Error::Malformed("negative resultCode"))?;
        let matched_dn = r.expect(Tag::OCTET_STRING, "expected matchedDN")?;
        let message = r.expect(Tag::OCTET_STRING, "expected diagnosticMessage")?;
        let referral = match r.optional(REFERRAL)? {
            Some(c) => Some(Seq::decode_contents(c, depth)?),
            None => None,
        };
        Ok(LdapResult {
            code: ResultCode(code),
            matched_dn,
            message,
            referral,
        })
    }

    fn encode_fields(&self, w: &mut Writer<'_>) {
        w.integer(Tag::ENUMERATED, i64::from(self.code.0));
        w.octets(Tag::OCTET_STRING, self.matched_dn);
        w.octets(Tag::OCTET_STRING, self.message);
        if let Some(referral) = &self.referral {
            let m = w.start(REFERRAL);
            referral.encode_elements(w);
            w.end(m);
        }
    }
}

impl<'a> Element<'a> for PartialAttribute<'a> {
    fn decode(reader: &mut Reader<'a>) -> Result<Self> {
        let c = reader.expect(Tag::SEQUENCE, "expected PartialAttribute")?;
        let mut r = Reader::new(c);
        let ty = r.expect(Tag::OCTET_STRING, "expected attribute type")?;
        let values = r.expect(Tag::SET, "expected attribute values SET")?;
        r.finish("trailing bytes in PartialAttribute")?;
        Ok(PartialAttribute {
            ty,
            values: Seq::from_encoded_unchecked(values),
        })
    }

    fn validate(&self, depth: Depth) -> Result<()> {
        self.values.validate_all(depth.descend()?)
    }

    fn encode(&self, w: &mut Writer<'_>) {
        let m = w.start(Tag::SEQUENCE);
        w.octets(Tag::OCTET_STRING, self.ty);
        let set = w.start(Tag::SET);
        self.values.encode_elements(w);
        w.end(set);
        w.end(m);
    }
}

impl<'a> Element<'a> for Change<'a> {
    fn decode(reader: &mut Reader<'a>) -> Result<Self> {
        let c = reader.expect(Tag::SEQUENCE, "expected change")?;
        let mut r = Reader::new(c);
        let operation = match enumerated(&mut r, "expected change operation")? {
            0 => ModifyOperation::Add,
            1 => ModifyOperation::Delete,
            2 => ModifyOperation::Replace,
            3 => ModifyOperation::Increment,
            _ => return Err(Error::Malformed("unknown modify operation")),
        };
        let modification = PartialAttribute::decode(&mut r)?;
        r.finish("trailing bytes in change")?;
        Ok(Change {
            operation,
            modification,
        })
    }

    fn validate(&self, depth: Depth) -> Result<()> {
        self.modification.validate(depth.descend()?)
    }

    fn encode(&self, w: &mut Writer<'_>) {
        let m = w.start(Tag::SEQUENCE);
        w.integer(Tag::ENUMERATED, self.operation as i64);
        self.modification.encode(w);
        w.end(m);
    }
}

// ---------------------------------------------------------------------------
// Encoding

impl LdapMessage<'_> {
    /// Appends the encoded message to `buf`.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        let mut w = Writer::new(buf);
        let m = w.start(Tag::SEQUENCE);
        w.integer(Tag::INTEGER, i64::from(self.message_id));
        self.op.encode(&mut w);
        if !self.controls.is_empty() {
            let c = w.start(CONTROLS);
            self.controls.encode_elements(&mut w);
            w.end(c);
        }
        w.end(m);
    }
}

impl ProtocolOp<'_> {
    /// Appends the protocolOp (tag included).
    pub fn encode(&self, w: &mut Writer<'_>) {
        let tag = self.tag();
        match self {
            ProtocolOp::UnbindRequest => w.null(tag),
            ProtocolOp::DelRequest(dn) => w.octets(tag, dn),
            ProtocolOp::AbandonRequest(id) => w.integer(tag, i64::from(*id)),
            ProtocolOp::SearchResultReference(uris) => {
                let m = w.start(tag);
                uris.encode_elements(w);
                w.end(m);
            }
            _ => {
                let m = w.start(tag);
                self.encode_body(w);
                w.end(m);
            }
        }
    }

    fn encode_body(&self, w: &mut Writer<'_>) {
        match self {
            ProtocolOp::BindRequest(b) => {
                w.integer(Tag::INTEGER, i64::from(b.version));
                w.octets(Tag::OCTET_STRING, b.name);
                match b.auth {
                    Authentication::Simple(password) => w.octets(Tag::context(0, false), password),
                    Authentication::Sasl {
                        mechanism,
                        credentials,
                    } => {
                        let m = w.start(Tag::context(3, true));
                        w.octets(Tag::OCTET_STRING, mechanism);
                        if let Some(creds) = credentials {
                            w.octets(Tag::OCTET_STRING, creds);
                        }
                        w.end(m);
                    }
                }
            }
            ProtocolOp::BindResponse(b) => {
                b.result.encode_fields(w);
                if let Some(creds) = b.server_sasl_creds {
                    w.octets(Tag::context(7, false), creds);
                }
            }
            ProtocolOp::SearchRequest(s) => {
                w.octets(Tag::OCTET_STRING, s.base);
                w.integer(Tag::ENUMERATED, s.scope as i64);
                w.integer(Tag::ENUMERATED, s.deref as i64);
                w.integer(Tag::INTEGER, i64::from(s.size_limit));
                w.integer(Tag::INTEGER, i64::from(s.time_limit));
                w.boolean(Tag::BOOLEAN, s.types_only);
                s.filter.encode(w);
                let m = w.start(Tag::SEQUENCE);
                s.attributes.encode_elements(w);
                w.end(m);
            }
            ProtocolOp::SearchResultEntry(e) => {
                w.octets(Tag::OCTET_STRING, e.dn);
                let m = w.start(Tag::SEQUENCE);
                e.attributes.encode_elements(w);
                w.end(m);
            }
            ProtocolOp::ModifyRequest(m) => {
                w.octets(Tag::OCTET_STRING, m.dn);
                let s = w.start(Tag::SEQUENCE);
                m.changes.encode_elements(w);
                w.end(s);
            }
            ProtocolOp::AddRequest(a) => {
                w.octets(Tag::OCTET_STRING, a.dn);
                let s = w.start(Tag::SEQUENCE);
                a.attributes.encode_elements(w);
                w.end(s);
            }
            ProtocolOp::ModifyDnRequest(m) => {
                w.octets(Tag::OCTET_STRING, m.dn);
                w.octets(Tag::OCTET_STRING, m.new_rdn);
                w.boolean(Tag::BOOLEAN, m.delete_old_rdn);
                if let Some(sup) = m.new_superior {
                    w.octets(Tag::context(0, false), sup);
                }
            }
            ProtocolOp::CompareRequest(c) => {
                w.octets(Tag::OCTET_STRING, c.dn);
                c.ava.encode(w, Tag::SEQUENCE);
            }
            ProtocolOp::ExtendedRequest(x) => {
                w.octets(Tag::context(0, false), x.name);
                if let Some(v) = x.value {
                    w.octets(Tag::context(1, false), v);
                }
            }
            ProtocolOp::ExtendedResponse(x) => {
                x.result.encode_fields(w);
                if let Some(n) = x.name {
                    w.octets(Tag::context(10, false), n);
                }
                if let Some(v) = x.value {
                    w.octets(Tag::context(11, false), v);
                }
            }
            ProtocolOp::IntermediateResponse(x) => {
                if let Some(n) = x.name {
                    w.octets(Tag::context(0, false), n);
                }
                if let Some(v) = x.value {
                    w.octets(Tag::context(1, false), v);
                }
            }
            ProtocolOp::SearchResultDone(r)
            | ProtocolOp::ModifyResponse(r)
            | ProtocolOp::AddResponse(r)
            | ProtocolOp::DelResponse(r)
            | ProtocolOp::ModifyDnResponse(r)
            | ProtocolOp::CompareResponse(r) => r.encode_fields(w),
            // Primitive forms are written by `encode`.
            ProtocolOp::UnbindRequest
            | ProtocolOp::DelRequest(_)
            | ProtocolOp::AbandonRequest(_)
            | ProtocolOp::SearchResultReference(_) => {}
        }
    }
}

/// Appends a response that is only an LDAPResult (for example a
/// SearchResultDone or a ModifyResponse), with no controls. `op_tag` is one
/// of the `*_RESPONSE`/`SEARCH_RESULT_DONE` tags of [`tags`].
pub fn encode_result(buf: &mut Vec<u8>, message_id: i32, op_tag: Tag, result: &LdapResult<'_>) {
    let mut w = Writer::new(buf);
    let m = w.start(Tag::SEQUENCE);
    w.integer(Tag::INTEGER, i64::from(message_id));
    let op = w.start(op_tag);
    result.encode_fields(&mut w);
    w.end(op);
    w.end(m);
}

/// Appends a simple BindRequest (LDAPv3) for `name` with `password`: the
/// first request of most client sessions.
pub fn encode_simple_bind(buf: &mut Vec<u8>, message_id: i32, name: &[u8], password: &[u8]) {
    LdapMessage {
        message_id,
        op: ProtocolOp::BindRequest(BindRequest {
            version: 3,
            name,
            auth: Authentication::Simple(password),
        }),
        controls: Seq::empty(),
    }
    .encode(buf);
}

/// Appends an AddRequest for `dn` with `attributes` (type and values),
/// written straight from the caller's own layout: loaders and generators
/// hold owned values, and building the borrowed [`PartialAttribute`]
/// lists an [`LdapMessage`] needs would cost two vectors per entry.
pub fn encode_add<'v, A, V>(buf: &mut Vec<u8>, message_id: i32, dn: &[u8], attributes: A)
where
    A: IntoIterator<Item = (&'v [u8], V)>,
    V: IntoIterator<Item = &'v [u8]>,
{
    let mut w = Writer::new(buf);
    let m = w.start(Tag::SEQUENCE);
    w.integer(Tag::INTEGER, i64::from(message_id));
    let op = w.start(tags::ADD_REQUEST);
    w.octets(Tag::OCTET_STRING, dn);
    let list = w.start(Tag::SEQUENCE);
    for (ty, values) in attributes {
        let attribute = w.start(Tag::SEQUENCE);
        w.octets(Tag::OCTET_STRING, ty);
        let set = w.start(Tag::SET);
        for value in values {
            w.octets(Tag::OCTET_STRING, value);
        }
        w.end(set);
        w.end(attribute);
    }
    w.end(list);
    w.end(op);
    w.end(m);
}

/// The OID of the Notice of Disconnection (RFC 4511 section 4.4.1).
pub const NOTICE_OF_DISCONNECTION_OID: &[u8] = b"1.3.6.1.4.1.1466.20036";

/// Appends a Notice of Disconnection: an unsolicited ExtendedResponse with
/// messageID 0 telling the client why the server is closing the session.
pub fn encode_notice_of_disconnection(buf: &mut Vec<u8>, code: ResultCode, message: &[u8]) {
    LdapMessage {
        message_id: 0,
        op: ProtocolOp::ExtendedResponse(ExtendedResponse {
            result: LdapResult::new(code, message),
            name: Some(NOTICE_OF_DISCONNECTION_OID),
            value: None,
        }),
        controls: Seq::empty(),
    }
    .encode(buf);
}
