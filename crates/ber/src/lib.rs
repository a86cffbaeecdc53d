//! Sans-IO BER for LDAP.
//!
//! LDAP (RFC 4511 section 5.1) uses a restricted subset of X.690 BER: only
//! definite lengths, primitive OCTET STRINGs, and tag numbers below 31. This
//! crate implements exactly that subset, in three small pieces:
//!
//! * [`frame`]: tells whether a buffer holds a whole PDU yet, checking the
//!   size limit *before* waiting for (or allocating) the bytes;
//! * [`Reader`]: walks a complete PDU, handing out borrowed slices of the
//!   input (nothing is copied, nothing allocated);
//! * [`Writer`]: appends TLVs to one reusable `Vec<u8>`, back-patching
//!   lengths when a constructed value is closed.
//!
//! The crate knows nothing about LDAP messages; `meridian-proto` does.

mod error;
pub mod frame;
mod reader;
mod tag;
mod writer;

pub use error::{Error, Result};
pub use reader::{Reader, Tlv, decode_boolean, decode_integer};
pub use tag::Tag;
pub use writer::{Mark, Writer};
