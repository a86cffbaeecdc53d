//! Meridian's data model: what a valid entry is and whether a filter
//! matches it. Pure functions over values; no I/O.
//!
//! * [`schema`]: RFC 4512 schema, loaded from OpenLDAP `.schema` files or
//!   LDIF subschema entries, with the standard schemas built in.
//! * [`syntax`] and [`rules`]: RFC 4517 syntaxes and matching rules, with
//!   RFC 4518 string preparation ([`prep`]); every rule reduces values to
//!   keys that the store can index.
//! * [`dn`]: schema-aware DN normalisation.

pub mod dn;
pub mod entry;
mod error;
pub mod filter;
pub mod fuzzing;
pub mod modify;
pub mod prep;
pub mod rules;
pub mod schema;
pub mod selection;
pub mod subschema;
pub mod syntax;
pub mod time;

pub use error::ModelError;
pub use schema::Schema;
