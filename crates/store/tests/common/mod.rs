//! Helpers shared by the store's integration tests (each test file is its
//! own crate and uses some of them).

#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;

use meridian_model::Schema;
use meridian_model::entry::Entry;

/// The naming context of every test store.
pub(crate) const SUFFIX: &str = "dc=example,dc=com";

/// An entry from a DN and `(description, values)` pairs.
pub(crate) fn entry(schema: &Schema, dn: &str, attrs: &[(&str, &[&str])]) -> Entry {
    Entry::from_text(dn, attrs, schema).unwrap()
}

/// The suffix entry, `dc=example,dc=com`.
pub(crate) fn suffix_entry(schema: &Schema) -> Entry {
    entry(
        schema,
        SUFFIX,
        &[
            ("objectClass", &["dcObject", "organization"]),
            ("dc", &["example"]),
            ("o", &["Example"]),
        ],
    )
}

/// Copies the files (not the directories) of `from` into `to`.
pub(crate) fn copy_files(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for item in std::fs::read_dir(from).unwrap() {
        let item = item.unwrap();
        if item.path().is_file() {
            std::fs::copy(item.path(), to.join(item.file_name())).unwrap();
        }
    }
}
