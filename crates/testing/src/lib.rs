//! Test support shared by the workspace's tests (a dev-dependency only):
//! [`rng`], a deterministic random source; [`fuzz_loop`], a seeded loop
//! of text mutations over the corpora in `fuzz/corpus/`; [`slapd`],
//! Debian's slapd on a private port as the reference server; [`history`],
//! a linearizability checker for registers with one writer each;
//! [`linearizable`], the general one for registers many clients write
//! at once; [`root`],
//! what tests that need root (a tmpfs for a full disk) share.

// Test support waits for servers and times them out: it writes no data.
#![allow(clippy::disallowed_methods)]

pub mod fuzz_loop;
pub mod history;
pub mod linearizable;
pub mod rng;
pub mod root;
pub mod slapd;
