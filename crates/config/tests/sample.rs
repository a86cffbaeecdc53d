//! `contrib/meridian.toml`, the sample configuration shipped for
//! operators, stays true: it names every key the server has, and with
//! its "# key = value" lines uncommented it is exactly the default
//! configuration (so no default in it is stale).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::Path;

use meridian_config::Config;

fn sample() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib/meridian.toml");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The sample with its default lines ("# key = value") uncommented.
fn uncommented(text: &str) -> String {
    text.lines()
        .map(|line| match line.strip_prefix("# ") {
            Some(rest) if is_assignment(rest) => rest,
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_assignment(line: &str) -> bool {
    line.split_once(" = ").is_some_and(|(key, _)| {
        !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// `section.key` for every assignment of a TOML text, tables by their
/// headers.
fn keys(text: &str) -> BTreeSet<String> {
    let mut section = String::new();
    let mut keys = BTreeSet::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = header.trim_matches(['[', ']']).to_owned();
        } else if is_assignment(line) {
            let key = line.split_once(" = ").unwrap().0;
            keys.insert(format!("{section}.{key}"));
        }
    }
    keys
}

#[test]
fn the_sample_configuration_is_the_default_one() {
    let text = uncommented(&sample());
    let parsed = Config::from_toml(&text, Path::new("contrib/meridian.toml"))
        .unwrap_or_else(|e| panic!("the sample, uncommented, does not load: {e}"));
    assert_eq!(parsed, Config::default());
}

#[test]
fn the_sample_configuration_names_every_key() {
    let named = keys(&uncommented(&sample()));
    let defaults = toml::to_string(&Config::default()).unwrap();
    let missing: Vec<String> = keys(&defaults)
        .into_iter()
        .filter(|k| !named.contains(k) && k != ".access")
        .collect();
    assert!(
        missing.is_empty(),
        "contrib/meridian.toml lacks {missing:?}"
    );
    // And the keys that are unset by default appear as examples.
    let text = sample();
    for example in [
        "#tls_certificate_file = ",
        "#tls_key_file = ",
        "#tls_ca_file = ",
        "#[[access]]",
    ] {
        assert!(text.contains(example), "no {example:?} in the sample");
    }
}
