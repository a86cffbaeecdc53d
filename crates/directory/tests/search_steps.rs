//! A search cut into many short steps (each with its own snapshot,
//! resuming after the last entry it examined) returns exactly what one
//! uninterrupted step returns: every match once, in entry-ID order,
//! paged or not, whether the matches are dense or sparse.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use meridian_directory::clock::SystemClock;
use meridian_directory::{
    Directory, Identity, Limits, PageRequest, SearchControls, SearchCursor, SearchDone, Step,
};
use meridian_model::dn::Dn;
use meridian_proto::{Depth, DerefAliases, Filter, ResultCode, Scope, SearchRequest, Seq};
use support::{ADMIN_DN, add};

/// No attributes (`1.1`): the tests look at DNs only.
static NO_ATTRIBUTES: [&[u8]; 1] = [b"1.1"];

/// A subtree search of `base` for the filter encoded in `filter_ber`.
fn subtree_search<'a>(
    base: &'a [u8],
    deref: DerefAliases,
    filter_ber: &'a [u8],
) -> SearchRequest<'a> {
    SearchRequest {
        base,
        scope: Scope::Subtree,
        deref,
        size_limit: 0,
        time_limit: 0,
        types_only: false,
        filter: Filter::from_ber(filter_ber, Depth::new(32)).unwrap(),
        attributes: Seq::from_items(&NO_ATTRIBUTES),
    }
}

/// Runs a search to its end in steps; the DNs returned, the result code,
/// how many steps it took and the paging cookie.
fn run(
    d: &Directory,
    who: &Identity,
    filter: &str,
    page: Option<(i32, Vec<u8>)>,
) -> (Vec<String>, ResultCode, usize, Option<Vec<u8>>) {
    let filter_ber = meridian_proto::filter_str::parse(filter, 32).unwrap();
    let req = subtree_search(b"dc=example,dc=com", DerefAliases::Never, &filter_ber);
    let mut cursor = SearchCursor::new();
    let mut dns = Vec::new();
    let mut steps = 0;
    loop {
        steps += 1;
        assert!(steps < 100_000, "{filter}: the search makes no progress");
        let mut buf = Vec::new();
        let controls = SearchControls {
            page: page.as_ref().map(|(size, cookie)| PageRequest {
                size: *size,
                cookie,
            }),
            ..SearchControls::default()
        };
        let step = d.search_step(who, &req, 2, &mut buf, controls, &mut cursor, 1 << 20);
        dns.extend(support::entry_dns(&buf));
        match step {
            Step::More => continue,
            Step::Done(done) => {
                return (
                    dns,
                    done.outcome.code,
                    steps,
                    done.page.map(|(_, cookie)| cookie),
                );
            }
        }
    }
}

async fn directory(step_time: Duration) -> (Directory, Identity) {
    let limits = Limits {
        search_step_time: step_time,
        ..Limits::default()
    };
    let (d, schema) = support::directory(Arc::new(SystemClock), limits);
    let admin = d.identity_for(Dn::parse(ADMIN_DN.as_bytes(), &schema).unwrap());
    let base: &[(&str, &[&str])] = &[("objectClass", &["domain"]), ("dc", &["example"])];
    assert_eq!(
        add(&d, &admin, "dc=example,dc=com", base).await,
        ResultCode::SUCCESS
    );
    for i in 0..2_000 {
        // `description` is not indexed: every search below scans.
        let kind = if i % 97 == 0 { "rare" } else { "common" };
        let dn = format!("cn=e{i},dc=example,dc=com");
        let name = format!("e{i}");
        let attrs: &[(&str, &[&str])] = &[
            ("objectClass", &["device"]),
            ("cn", &[&name]),
            ("description", &[kind]),
        ];
        assert_eq!(add(&d, &admin, &dn, attrs).await, ResultCode::SUCCESS);
    }
    (d, admin)
}

#[tokio::test]
async fn a_search_cut_into_steps_returns_what_one_step_returns() {
    let (whole, admin) = directory(Duration::from_secs(3600)).await;
    let (cut, admin_cut) = directory(Duration::ZERO).await;
    for filter in [
        "(description=rare)",
        "(description=common)",
        "(description=none)",
    ] {
        let (expected, code, steps, _) = run(&whole, &admin, filter, None);
        assert_eq!((code, steps), (ResultCode::SUCCESS, 1), "{filter}");
        let (got, code, steps, _) = run(&cut, &admin_cut, filter, None);
        assert_eq!(code, ResultCode::SUCCESS, "{filter}");
        assert_eq!(got, expected, "{filter}");
        // 2,001 entries examined 64 at a time between looks at the clock.
        assert!(steps >= 2_001 / 64, "{filter}: {steps} steps");
    }
    // Paged: the pages of a stepped search are the pages of a whole one.
    for filter in ["(description=rare)", "(description=common)"] {
        let (mut all_whole, mut all_cut) = (Vec::new(), Vec::new());
        for (d, who, all) in [
            (&whole, &admin, &mut all_whole),
            (&cut, &admin_cut, &mut all_cut),
        ] {
            let mut cookie = Vec::new();
            loop {
                let (dns, code, _, next) = run(d, who, filter, Some((7, cookie)));
                assert_eq!(code, ResultCode::SUCCESS);
                all.extend(dns);
                match next {
                    Some(c) if !c.is_empty() => cookie = c,
                    _ => break,
                }
            }
        }
        assert_eq!(all_cut, all_whole, "{filter}");
        let (expected, ..) = run(&whole, &admin, filter, None);
        assert_eq!(all_whole, expected, "{filter}");
    }
}

/// An entry's attributes, as `support::add` takes them.
type Attrs<'a> = &'a [(&'a str, &'a [&'a str])];

/// A search that follows aliases merges several scopes and cannot be cut
/// into steps; the lookthrough limit still stops it.
#[tokio::test]
async fn a_search_through_aliases_is_bound_by_the_lookthrough_limit() {
    let limits = Limits {
        lookthrough_limit: 100,
        ..Limits::default()
    };
    let (d, schema) = support::directory(Arc::new(SystemClock), limits);
    let admin = d.identity_for(Dn::parse(ADMIN_DN.as_bytes(), &schema).unwrap());
    let entries: &[(&str, Attrs<'_>)] = &[
        (
            "dc=example,dc=com",
            &[("objectClass", &["domain"]), ("dc", &["example"])],
        ),
        (
            "ou=a,dc=example,dc=com",
            &[("objectClass", &["organizationalUnit"]), ("ou", &["a"])],
        ),
        (
            "ou=b,dc=example,dc=com",
            &[("objectClass", &["organizationalUnit"]), ("ou", &["b"])],
        ),
        (
            "ou=to-b,ou=a,dc=example,dc=com",
            &[
                ("objectClass", &["alias", "extensibleObject"]),
                ("ou", &["to-b"]),
                ("aliasedObjectName", &["ou=b,dc=example,dc=com"]),
            ],
        ),
    ];
    for (dn, attrs) in entries {
        assert_eq!(
            add(&d, &admin, dn, attrs).await,
            ResultCode::SUCCESS,
            "{dn}"
        );
    }
    for i in 0..300 {
        let (dn, cn) = (format!("cn=e{i},ou=b,dc=example,dc=com"), format!("e{i}"));
        let attrs: &[(&str, &[&str])] = &[("objectClass", &["device"]), ("cn", &[&cn])];
        assert_eq!(add(&d, &admin, &dn, attrs).await, ResultCode::SUCCESS);
    }
    let user = d.identity_for(Dn::parse(b"cn=e1,ou=b,dc=example,dc=com", &schema).unwrap());
    let filter_ber = meridian_proto::filter_str::parse("(description=none)", 32).unwrap();
    let req = subtree_search(b"ou=a,dc=example,dc=com", DerefAliases::Always, &filter_ber);
    let mut cursor = SearchCursor::new();
    let mut buf = Vec::new();
    let controls = SearchControls::default();
    match d.search_step(&user, &req, 2, &mut buf, controls, &mut cursor, 1 << 20) {
        Step::Done(SearchDone { outcome, .. }) => {
            assert_eq!(
                outcome.code,
                ResultCode::ADMIN_LIMIT_EXCEEDED,
                "{outcome:?}"
            );
        }
        Step::More => panic!("a merged search does not step"),
    }
}
