//! `meridian bench` and `meridian gen`: the load generator that measures
//! any LDAP server, and the test data it loads.
//!
//! * [`template`]: value templates (`uid=user{key}`, `{alpha:8}`…);
//! * [`pdu`]: requests encoded once, re-rendered with the message ID and
//!   the variable parts patched in;
//! * [`ops`], [`scenario`]: the TOML scenario and its operations;
//!   [`overrides`]: what a command line or a job form changes in one, and
//!   sweeps;
//! * [`keys`]: key distributions (uniform, sequential, Zipf, seed 000's
//!   pre-drawn array);
//! * [`session`], [`wire`], [`tls`]: the pipelined client, plain or TLS;
//! * [`stats`], [`run`]: what a run measures; [`live`]: what it shows
//!   each second to someone watching (the console);
//! * [`report`]: text, JSON and HTML with SVG charts;
//! * [`capacity`]: seed 003's capacity model;
//! * [`generate`]: entries from templates and the seed models, as LDIF or BER;
//! * [`canned`]: a server answering every request from a canned response,
//!   to measure the client's own ceiling.

// A load generator's work is measuring time, and it writes no
// directory data: it reads the clock directly.
#![allow(clippy::disallowed_methods)]

pub mod canned;
pub mod capacity;
pub mod followers;
pub mod generate;
pub mod keys;
pub mod live;
pub mod ops;
pub mod overrides;
pub mod pdu;
pub mod procstat;
pub mod report;
pub mod rng;
pub mod run;
pub mod scenario;
pub mod session;
pub mod stats;
pub mod template;
pub mod tls;
pub mod wire;
