//! `cargo +nightly fuzz run filter_str`: the RFC 4515 filter parser.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(e) = meridian_proto::fuzzing::check_filter_string(data) {
        panic!("{e}");
    }
});
