//! `cargo +nightly fuzz run schema`: the schema loader (OpenLDAP
//! `.schema` text and LDIF subschema entries) over the built-in schema.
#![no_main]

use std::sync::OnceLock;

use meridian_model::Schema;

fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| Schema::builtin().expect("the built-in schema loads"))
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(e) = meridian_model::fuzzing::check_schema_text(schema(), data) {
        panic!("{e}");
    }
});
