//! A search result encoded from the stored record in place
//! (`encode_record`) is byte for byte what the decoded entry gives
//! (`encode_entry`), for every selection of attributes, with types the
//! caller may not read left out, names as their creators spelled them,
//! options, operational attributes and values long enough for long-form
//! lengths.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::Arc;

use meridian_config::{Backend, StorageConfig};
use meridian_directory::encode::{Projection, encode_entry, encode_record};
use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_model::entry::Entry;
use meridian_model::filter::CompiledFilter;
use meridian_model::selection::Selection;
use meridian_proto::{Filter, Scope};
use meridian_store::{Command, SearchFilter, Store, StoreOptions};

fn store(schema: &Arc<Schema>) -> Store {
    Store::open(
        StoreOptions {
            path: std::env::temp_dir(),
            storage: StorageConfig {
                backend: Backend::Memory,
                ..StorageConfig::default()
            },
            suffixes: vec![Dn::parse(b"dc=example,dc=com", schema).unwrap()],
            groups: meridian_config::GroupsConfig::default(),
        },
        Arc::clone(schema),
    )
    .unwrap()
}

fn add(store: &Store, schema: &Schema, dn: &str, attrs: &[(&str, &[&[u8]])]) {
    let entry = Entry::new(
        Dn::parse(dn.as_bytes(), schema).unwrap(),
        attrs.iter().map(|(n, vs)| (n.as_bytes(), vs.to_vec())),
        schema,
    )
    .unwrap();
    store
        .execute_blocking(Command::Add {
            entry,
            prechecked: false,
        })
        .unwrap();
}

#[test]
fn a_record_encodes_as_its_entry_does() {
    let schema = Arc::new(Schema::builtin().unwrap());
    let store = store(&schema);
    add(
        &store,
        &schema,
        "dc=example,dc=com",
        &[("objectClass", &[b"domain"]), ("dc", &[b"example"])],
    );
    let long = vec![b'x'; 300];
    let many: Vec<Vec<u8>> = (0..40).map(|i| format!("value {i}").into_bytes()).collect();
    let many: Vec<&[u8]> = many.iter().map(Vec::as_slice).collect();
    add(
        &store,
        &schema,
        "UID=Jdoe,dc=example,dc=com",
        &[
            ("objectClass", &[b"top", b"person", b"inetOrgPerson"]),
            ("UID", &[b"Jdoe"]),
            ("CN", &[b"John Doe", b"Johnny"]),
            ("cn;Lang-DE", &[b"Johann"]),
            ("surname", &[b"Doe"]),
            ("description", &[&long]),
            ("mail", &many),
            ("userCertificate;binary", &[b"\x30\x03\x02\x01\x05"]),
            ("createTimestamp", &[b"20261122010203Z"]),
            ("creatorsName", &[b"cn=admin,dc=example,dc=com"]),
        ],
    );
    let selections: [&[&str]; 10] = [
        &[],
        &["*"],
        &["+"],
        &["*", "+"],
        &["cn"],
        &["name"],
        &["CN;lang-de", "MAIL"],
        &["1.1"],
        &["createTimestamp", "nosuchtype"],
        &["userCertificate", "uid", "description"],
    ];
    let present = Filter::Present(b"objectClass");
    let compiled = CompiledFilter::compile(&present, &schema);
    let filter = SearchFilter {
        written: &present,
        compiled: &compiled,
    };
    // Types the caller may not read, as access rules would hide them.
    let hidden = [
        schema.attribute_id("mail").unwrap(),
        schema.attribute_id("cn").unwrap(),
    ];
    let snapshot = store.snapshot().unwrap();
    let mut compared = 0;
    for dn in ["dc=example,dc=com", "uid=jdoe,dc=example,dc=com"] {
        let base = Dn::parse(dn.as_bytes(), &schema).unwrap();
        for names in selections {
            let selection = Selection::parse(names.iter().map(|n| n.as_bytes()), &schema);
            for (types_only, hide) in [(false, false), (true, false), (false, true)] {
                let visible = |attr| !hide || !hidden.contains(&attr);
                snapshot
                    .search_found(
                        &base,
                        Scope::Base,
                        filter,
                        None,
                        &mut |_| true,
                        |_, found| {
                            let record = found.record().expect("a record of the current format");
                            let mut from_record = Vec::new();
                            assert!(encode_record(
                                &mut from_record,
                                7,
                                &record,
                                &selection,
                                types_only,
                                &schema,
                                visible,
                            ));
                            let entry = found.entry()?;
                            let mut from_entry = Vec::new();
                            let projection = Projection {
                                selection: &selection,
                                types_only,
                                schema: &schema,
                                values: None,
                            };
                            encode_entry(
                                &mut from_entry,
                                7,
                                &entry,
                                projection,
                                |a| visible(a.desc.attr),
                                &[],
                            );
                            assert_eq!(
                                from_record, from_entry,
                                "{dn} {names:?} {types_only} {hide}"
                            );
                            compared += 1;
                            Ok(true)
                        },
                    )
                    .unwrap();
            }
        }
    }
    assert_eq!(compared, 2 * selections.len() * 3);
}
