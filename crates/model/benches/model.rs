//! Model micro-benchmarks: DN normalisation and filter evaluation.
//! Results and commands: `docs/BENCHMARKS.md`.

#![allow(missing_docs, clippy::unwrap_used)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_model::entry::Entry;
use meridian_model::filter::CompiledFilter;
use meridian_proto::{Depth, Filter, filter_str};

fn entry(schema: &Schema) -> Entry {
    let dn = Dn::parse(b"uid=user.12345,ou=People,dc=example,dc=com", schema).unwrap();
    let attrs: [(&str, &[&str]); 10] = [
        (
            "objectClass",
            &["top", "person", "organizationalPerson", "inetOrgPerson"],
        ),
        ("uid", &["user.12345"]),
        ("cn", &["Aaren Atp"]),
        ("sn", &["Atp"]),
        ("givenName", &["Aaren"]),
        ("mail", &["user.12345@example.com"]),
        ("telephoneNumber", &["+1 685 622 6202"]),
        ("employeeNumber", &["12345"]),
        ("carLicense", &["ABCD1234"]),
        ("description", &["This is the description for Aaren Atp."]),
    ];
    Entry::new(
        dn,
        attrs
            .iter()
            .map(|(n, vs)| (n.as_bytes(), vs.iter().map(|v| v.as_bytes()))),
        schema,
    )
    .unwrap()
}

fn bench(c: &mut Criterion) {
    let schema = Schema::builtin().unwrap();
    c.bench_function("normalize_dn_4_rdns", |b| {
        b.iter(|| {
            Dn::parse(
                black_box(b"uid=User.12345,ou=People,dc=Example,dc=COM"),
                &schema,
            )
            .unwrap()
        })
    });
    let e = entry(&schema);
    let ber = filter_str::parse(
        "(&(objectClass=inetOrgPerson)(uid=USER.12345)(mail=*@example.com))",
        32,
    )
    .unwrap();
    let filter = Filter::from_ber(&ber, Depth::new(32)).unwrap();
    let compiled = CompiledFilter::compile(&filter, &schema);
    assert!(compiled.matches(&e, &schema));
    c.bench_function("evaluate_and3_on_10_attribute_entry", |b| {
        b.iter(|| compiled.matches(black_box(&e), &schema))
    });
    c.bench_function("compile_and3_filter", |b| {
        b.iter(|| CompiledFilter::compile(black_box(&filter), &schema))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
