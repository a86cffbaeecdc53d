//! The property every fuzz input must satisfy, shared by the `cargo fuzz`
//! target (`fuzz/fuzz_targets/ldif.rs`) and the seeded loop under
//! `cargo test` (`tests/fuzz_smoke.rs`): reading never panics, every
//! error names a line inside the input, and whatever was read writes out
//! as LDIF that reads back the same.

use std::io::Cursor;

use crate::{Limits, RecordReader, write};

/// Checks the property on one input; panics (for the fuzzer) on a breach.
#[allow(clippy::panic)]
pub fn check_reader(input: &[u8]) {
    let limits = Limits {
        max_record_bytes: 1 << 16,
        // A fuzzer must not read the machine's files.
        allow_file_urls: false,
    };
    let lines = input.iter().filter(|b| **b == b'\n').count() as u64 + 1;
    for item in RecordReader::new(Cursor::new(input), "fuzz", limits) {
        let record = match item {
            Ok(record) => record,
            Err(e) => {
                if e.line == 0 || e.line > lines {
                    panic!("error outside the input ({lines} lines): {e}");
                }
                return;
            }
        };
        let Some(attrs) = record.entry_attributes() else {
            continue;
        };
        // LDIF cannot tell an entry whose first attribute is named
        // `changetype` or `control` from a change record; no schema has
        // such attributes, so the writer does not try.
        if attrs.first().is_some_and(|a| {
            a.description.eq_ignore_ascii_case("changetype")
                || a.description.eq_ignore_ascii_case("control")
        }) {
            continue;
        }
        let mut out = Vec::new();
        write::entry(
            &mut out,
            &record.dn,
            attrs
                .iter()
                .map(|a| (a.description.as_str(), a.value.as_slice())),
        );
        let again: Vec<_> = RecordReader::new(Cursor::new(&out), "rewritten", limits).collect();
        match again.as_slice() {
            [Ok(back)] if back.dn == record.dn && back.entry_attributes() == Some(attrs) => {}
            other => panic!(
                "{record:?} wrote {:?} which read back as {other:?}",
                String::from_utf8_lossy(&out)
            ),
        }
    }
}
