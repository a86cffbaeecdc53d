//! The fuzz property on seeded mutations of the RFC 2849 examples and of
//! hand-made edge cases, so every `cargo test` fuzzes the reader a little.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use meridian_ldif::fuzzing::check_reader;

use meridian_testing::rng;
use rng::Rng;

const INTERESTING: &[u8] = b"\n\r :<#-=;.\0\xff\xc3";

/// Inputs `cargo fuzz` once failed on (`tests/regressions/`).
#[test]
fn past_fuzz_findings_pass() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/regressions");
    for file in std::fs::read_dir(dir).unwrap() {
        check_reader(&std::fs::read(file.unwrap().path()).unwrap());
    }
}

#[test]
fn mutated_inputs_never_break_the_reader() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/rfc2849");
    let mut corpus: Vec<Vec<u8>> = (1..=7)
        .map(|n| std::fs::read(format!("{dir}/example{n}.ldif")).unwrap())
        .collect();
    corpus.push(b"dn:: \ncn:: =\nsn: \n \n".to_vec());
    corpus.push(b"dn: cn=a\nchangetype: modify\nreplace: cn\ncn: b\n".to_vec());
    let mut rng = Rng(0x5eed_1d1f);
    for _ in 0..20_000 {
        let mut input = corpus[rng.below(corpus.len())].clone();
        for _ in 0..=rng.below(6) {
            let len = input.len();
            match rng.below(6) {
                0 if len > 0 => {
                    let i = rng.below(len);
                    input[i] = INTERESTING[rng.below(INTERESTING.len())];
                }
                1 => {
                    let i = rng.below(len + 1);
                    input.insert(i, INTERESTING[rng.below(INTERESTING.len())]);
                }
                2 if len > 0 => {
                    input.remove(rng.below(len));
                }
                3 => input.truncate(rng.below(len + 1)),
                4 if len > 0 => {
                    let i = rng.below(len);
                    input[i] ^= 1 << rng.below(8);
                }
                _ => {}
            }
        }
        check_reader(&input);
    }
}
