//! LDIF, the LDAP Data Interchange Format (RFC 2849).
//!
//! Reading is split in two so a loader can use every core: a
//! [`Splitter`] cuts a byte stream into the raw text of each record (cheap:
//! it looks only for blank lines), and [`parse_record`] turns one record's
//! text into a [`Record`] (unfolding, base64, URLs, change records) on
//! whatever thread holds it. [`RecordReader`] is the two together for callers
//! that do not need the split. [`write`] produces LDIF that this reader,
//! OpenLDAP's tools and 389 DS read back unchanged.
//!
//! Everything is bytes: values are binary-safe, and DNs and descriptions
//! are checked for syntax by the caller (the data model), not here.

pub mod base64;
mod error;
#[doc(hidden)]
pub mod fuzzing;
mod parse;
mod split;
mod text;
pub mod write;

pub use error::LdifError;
pub use parse::{AttrValue, Body, Control, ModOp, ModSpec, Record, parse_record};
pub use split::{RawRecord, RecordReader, Splitter};
pub use text::DescriptionText;

/// Bounds on what one input may ask of the reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest record, in bytes of LDIF text (folded as written) and,
    /// separately, largest value read from a `:<` file URL.
    pub max_record_bytes: usize,
    /// Whether `:<` values may name local files (`file://` URLs). Other
    /// URL schemes are always refused.
    pub allow_file_urls: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_record_bytes: 64 << 20,
            allow_file_urls: true,
        }
    }
}
