//! The fuzz target's property on seeded random inputs, so every `cargo test`
//! fuzzes a little even where `cargo fuzz` (nightly only) is unavailable.
//! Inputs are sample PDUs mutated (bit flips, byte changes, insertions,
//! deletions, truncation, spliced PDUs) and plain random bytes.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use meridian_proto::fuzzing::check_decode_round_trip;
use meridian_proto::{DecodeLimits, LdapMessage};

use meridian_testing::rng;
use rng::Rng;

fn mutate(rng: &mut Rng, input: &mut Vec<u8>, corpus: &[Vec<u8>]) {
    for _ in 0..=rng.below(4) {
        let len = input.len();
        match rng.below(7) {
            0 if len > 0 => {
                let i = rng.below(len);
                input[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                input[i] = [0x00, 0x7f, 0x80, 0x81, 0x84, 0xff, 0x30, 0x04][rng.below(8)];
            }
            2 => {
                let i = rng.below(len + 1);
                input.insert(i, rng.next() as u8);
            }
            3 if len > 0 => {
                input.remove(rng.below(len));
            }
            4 => input.truncate(rng.below(len + 1)),
            5 => input.extend_from_slice(&corpus[rng.below(corpus.len())]),
            _ => {}
        }
    }
}

/// PDUs captured from real clients (`scripts/capture-corpus.py`): ldapsearch,
/// ldapmodify, ldapwhoami, ldapdelete, ldapcompare, ldappasswd, Python ldap3.
fn captured() -> Vec<(String, Vec<u8>)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/decode");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "ber"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
fn pdus_captured_from_real_clients_decode_completely() {
    let captured = captured();
    assert!(captured.len() >= 10, "corpus missing");
    for (name, bytes) in captured {
        let mut rest = &bytes[..];
        let mut count = 0;
        while !rest.is_empty() {
            let (_, used) = LdapMessage::decode_prefix(rest, &DecodeLimits::default())
                .unwrap_or_else(|e| panic!("{name}, PDU {count}: {e}"));
            rest = &rest[used..];
            count += 1;
        }
        assert!(count > 0, "{name} is empty");
        check_decode_round_trip(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn seeded_random_inputs_keep_the_round_trip_property() {
    let mut corpus: Vec<Vec<u8>> = support::samples().into_iter().map(|(_, b)| b).collect();
    corpus.extend(captured().into_iter().map(|(_, b)| b));
    let iterations: usize = std::env::var("MERIDIAN_FUZZ_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for i in 0..iterations {
        let mut input = if rng.below(10) == 0 {
            (0..rng.below(64)).map(|_| rng.next() as u8).collect()
        } else {
            corpus[rng.below(corpus.len())].clone()
        };
        mutate(&mut rng, &mut input, &corpus);
        if let Err(e) = check_decode_round_trip(&input) {
            panic!("iteration {i}: {e}\ninput: {input:02x?}");
        }
    }
}

#[test]
fn the_corpus_itself_passes() {
    for (name, bytes) in support::samples() {
        check_decode_round_trip(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

use meridian_testing::fuzz_loop;

#[test]
fn filter_strings_parse_print_and_parse_again() {
    fuzz_loop::run(
        "filter_str",
        40_000,
        meridian_proto::fuzzing::check_filter_string,
    );
}

#[test]
fn dn_strings_parse_print_and_parse_again() {
    fuzz_loop::run("dn", 40_000, meridian_proto::fuzzing::check_dn_string);
}
