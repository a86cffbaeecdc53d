//! Test support shared by the workspace's tests (a dev-dependency only):
//! [`rng`], a deterministic random source; [`fuzz_loop`], a seeded loop
//! of text mutations over the corpora in `fuzz/corpus/`; [`slapd`],
//! Debian's slapd on a private port as the reference server.

pub mod fuzz_loop;
pub mod rng;
pub mod slapd;
