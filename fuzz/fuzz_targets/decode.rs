//! Decode arbitrary bytes as pipelined LDAP PDUs; whatever decodes must
//! re-encode canonically and decode to the same message.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = meridian_proto::fuzzing::check_decode_round_trip(data) {
        panic!("{e}");
    }
});
