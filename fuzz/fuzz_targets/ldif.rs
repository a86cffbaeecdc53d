//! `cargo +nightly fuzz run ldif`: the LDIF reader on arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    meridian_ldif::fuzzing::check_reader(data);
});
