//! `cargo +nightly fuzz run dn`: DN parsing, as text (RFC 4514) and
//! normalised against the built-in schema.
#![no_main]

use std::sync::OnceLock;

use meridian_model::Schema;

fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| Schema::builtin().expect("the built-in schema loads"))
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(e) = meridian_proto::fuzzing::check_dn_string(data) {
        panic!("{e}");
    }
    if let Err(e) = meridian_model::fuzzing::check_dn_normalisation(schema(), data) {
        panic!("{e}");
    }
});
