//! LDAPv3 messages (RFC 4511) on top of `meridian-ber`.
//!
//! * Decoding ([`LdapMessage::decode`]) validates a whole PDU against
//!   [`DecodeLimits`] up front, then hands out borrowed views: strings are
//!   slices of the input, lists ([`Seq`]) stay encoded and decode one element
//!   at a time. Decoding a typical request allocates nothing.
//! * Encoding ([`LdapMessage::encode`]) appends to one caller-owned
//!   `Vec<u8>`; the same types describe requests and responses, decoded or
//!   built by hand.
//! * Filters and DNs also have their string forms ([`filter_str`], [`dn`]).
//!
//! Errors are `meridian_ber::Error`: `Incomplete` (read more) versus
//! anything else (the peer gets protocolError).

pub mod controls;
pub mod dn;
pub mod extended;
pub mod filter;
pub mod filter_str;
#[doc(hidden)]
pub mod fuzzing;
mod limits;
pub mod message;
mod result;
mod seq;
pub mod sorting;
pub mod sync;

pub use controls::Control;
pub use filter::{Ava, Filter, MatchingRuleAssertion, Substring, SubstringFilter};
pub use limits::{DecodeLimits, Depth};
pub use meridian_ber::{Error as DecodeError, Result as DecodeResult};
pub use message::{
    AddRequest, Authentication, BindRequest, BindResponse, Change, CompareRequest, DerefAliases,
    ExtendedRequest, ExtendedResponse, IntermediateResponse, LdapMessage, LdapResult,
    ModifyDnRequest, ModifyOperation, ModifyRequest, PartialAttribute, ProtocolOp, Scope,
    SearchRequest, SearchResultEntry,
};
pub use result::ResultCode;
pub use seq::{Element, Seq, SeqIter};
