//! The schema loader and schema-aware DN parsing on seeded mutations of
//! the corpora in `fuzz/corpus/schema` and `fuzz/corpus/dn` (the same
//! properties as the `cargo fuzz` targets `schema` and `dn`), so every
//! `cargo test` fuzzes them a little.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use meridian_testing::fuzz_loop;

use meridian_model::Schema;
use meridian_model::fuzzing::{check_dn_normalisation, check_schema_text};

#[test]
fn schema_text_loads_or_is_refused_with_a_line() {
    let base = Schema::builtin().unwrap();
    // Each input clones the built-in schema: fewer, dearer iterations.
    fuzz_loop::run("schema", 1_500, |data| check_schema_text(&base, data));
}

#[test]
fn dns_normalise_to_a_fixed_point() {
    let schema = Schema::builtin().unwrap();
    fuzz_loop::run("dn", 30_000, |data| check_dn_normalisation(&schema, data));
}
