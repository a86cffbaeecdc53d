//! A seeded fuzz loop for tests: inputs from a corpus folder, mutated with the edits that
//! break text parsers (special characters, escapes, truncations, splices,
//! bytes that are not UTF-8), checked by a property. Deterministic: a
//! failure names its iteration, and reproduces from it.
#![allow(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]

use crate::rng::Rng;

/// Every file of `fuzz/corpus/<name>`, in name order.
pub fn corpus(name: &str) -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(name);
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// Bytes that mean something to LDAP's text forms.
const SPECIAL: &[u8] = b"()&|!=~<>*:\\,;+#\" \t\n.0123456789abcdefABCDEF'${}\x00\xc3\xff\x80";

fn mutate(rng: &mut Rng, input: &mut Vec<u8>, corpus: &[Vec<u8>]) {
    for _ in 0..=rng.below(4) {
        let len = input.len();
        match rng.below(8) {
            0 if len > 0 => {
                let i = rng.below(len);
                input[i] = SPECIAL[rng.below(SPECIAL.len())];
            }
            1 => {
                let i = rng.below(len + 1);
                input.insert(i, SPECIAL[rng.below(SPECIAL.len())]);
            }
            2 if len > 0 => {
                input.remove(rng.below(len));
            }
            3 => input.truncate(rng.below(len + 1)),
            4 if !corpus.is_empty() => {
                // A piece of another input, spliced in.
                let other = &corpus[rng.below(corpus.len())];
                let from = rng.below(other.len() + 1);
                let to = from + rng.below(other.len() - from + 1);
                let at = rng.below(len + 1);
                input.splice(at..at, other[from..to].iter().copied());
            }
            5 if len > 0 => {
                // A run repeated: deep nesting, long values.
                let from = rng.below(len);
                let to = (from + 1 + rng.below(8)).min(len);
                let piece = input[from..to].to_vec();
                for _ in 0..rng.below(40) {
                    input.splice(from..from, piece.iter().copied());
                }
            }
            6 if len > 0 => {
                let i = rng.below(len);
                input[i] ^= 1 << rng.below(8);
            }
            _ => {}
        }
    }
}

/// Checks `property` on every corpus input, then on `iterations`
/// mutations of them (and some random bytes). Panics naming the first
/// input that breaks it.
pub fn run(name: &str, iterations: u64, mut property: impl FnMut(&[u8]) -> Result<(), String>) {
    let corpus = corpus(name);
    assert!(!corpus.is_empty(), "fuzz/corpus/{name} is empty");
    for (i, input) in corpus.iter().enumerate() {
        if let Err(e) = property(input) {
            panic!("{name} corpus input {i}: {e}");
        }
    }
    let iterations = std::env::var("MERIDIAN_FUZZ_ITERATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(iterations);
    let mut rng = Rng(0x5eed_0000 ^ name.len() as u64 ^ 0x9e37_79b9_7f4a_7c15);
    for iteration in 0..iterations {
        let mut input = if rng.below(16) == 0 {
            (0..rng.below(64)).map(|_| rng.next() as u8).collect()
        } else {
            corpus[rng.below(corpus.len())].clone()
        };
        mutate(&mut rng, &mut input, &corpus);
        if let Err(e) = property(&input) {
            panic!(
                "{name} iteration {iteration}, input {:?}: {e}",
                String::from_utf8_lossy(&input)
            );
        }
    }
}
