//! Sorted searches (RFC 2891) and virtual list views: the order, the
//! windows, sorted pages that resume after the last entry's keys, and the
//! memory bound, for searches cut into many steps as the server runs
//! them.

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
    ControlValue, Directory, Identity, Limits, PageRequest, SearchControls, SearchCursor,
    SearchDone, Step,
};
use meridian_model::dn::Dn;
use meridian_proto::sorting::{SortKey, VlvRequest, VlvTarget, encode_sort_request};
use meridian_proto::{Depth, DerefAliases, Filter, ResultCode, Scope, SearchRequest, Seq};
use support::{ADMIN_DN, add};

static NO_ATTRIBUTES: [&[u8]; 1] = [b"1.1"];

const ENTRIES: usize = 500;

/// The description of entry `i`: a permutation of the entries, and none
/// for every fiftieth.
fn description(i: usize) -> Option<String> {
    (i % 50 != 7).then(|| format!("D{:04}", (i * 7919) % ENTRIES))
}

async fn directory(limits: Limits) -> (Directory, Identity) {
    let (d, schema) = support::directory(Arc::new(SystemClock), limits);
    let admin = d.identity_for(Dn::parse(ADMIN_DN.as_bytes(), &schema).unwrap());
    let base: &[(&str, &[&str])] = &[("objectClass", &["domain"]), ("dc", &["example"])];
    assert_eq!(
        add(&d, &admin, "dc=example,dc=com", base).await,
        ResultCode::SUCCESS
    );
    for i in 0..ENTRIES {
        add_entry(&d, &admin, i, description(i).as_deref()).await;
    }
    (d, admin)
}

async fn add_entry(d: &Directory, admin: &Identity, i: usize, description: Option<&str>) {
    let dn = format!("cn=e{i},dc=example,dc=com");
    let name = format!("e{i}");
    let names = [name.as_str()];
    let mut attrs: Vec<(&str, &[&str])> = vec![("objectClass", &["device"]), ("cn", &names)];
    let value = [description.unwrap_or_default()];
    if description.is_some() {
        attrs.push(("description", &value));
    }
    assert_eq!(add(d, admin, &dn, &attrs).await, ResultCode::SUCCESS);
}

/// Runs a search of the devices to its end in steps of `budget` bytes:
/// the DNs in the order they came, the SearchResultDone and the steps.
fn run(
    d: &Directory,
    who: &Identity,
    size_limit: i32,
    controls: SearchControls<'_>,
    budget: usize,
) -> (Vec<String>, SearchDone, usize) {
    let filter_ber = meridian_proto::filter_str::parse("(objectClass=device)", 32).unwrap();
    let req = SearchRequest {
        base: b"dc=example,dc=com",
        scope: Scope::Subtree,
        deref: DerefAliases::Never,
        size_limit,
        time_limit: 0,
        types_only: false,
        filter: Filter::from_ber(&filter_ber, Depth::new(32)).unwrap(),
        attributes: Seq::from_items(&NO_ATTRIBUTES),
    };
    let mut cursor = SearchCursor::new();
    let mut dns = Vec::new();
    let mut steps = 0;
    loop {
        steps += 1;
        assert!(steps < 100_000, "the search makes no progress");
        let mut buf = Vec::new();
        let step = d.search_step(who, &req, 2, &mut buf, controls, &mut cursor, budget);
        dns.extend(support::entry_dns(&buf));
        match step {
            Step::More => continue,
            Step::Done(done) => return (dns, done, steps),
        }
    }
}

fn sort_value(reverse: bool) -> Vec<u8> {
    let mut value = Vec::new();
    encode_sort_request(
        &[SortKey {
            attr: b"description",
            ordering_rule: None,
            reverse,
        }],
        &mut value,
    );
    value
}

fn sorted(value: &[u8], critical: bool) -> SearchControls<'_> {
    SearchControls {
        sort: Some(ControlValue {
            critical,
            value: Some(value),
        }),
        ..SearchControls::default()
    }
}

/// The DNs in the order a sort by description gives: by description,
/// those without one last (first in reverse), ties in entry order.
fn expected(reverse: bool) -> Vec<String> {
    let mut with: Vec<(String, usize)> = (0..ENTRIES)
        .filter_map(|i| description(i).map(|d| (d, i)))
        .collect();
    with.sort();
    if reverse {
        with.reverse();
    }
    let mut dns: Vec<String> = with
        .into_iter()
        .map(|(_, i)| format!("cn=e{i},dc=example,dc=com"))
        .collect();
    let without = (0..ENTRIES)
        .filter(|i| description(*i).is_none())
        .map(|i| format!("cn=e{i},dc=example,dc=com"));
    if reverse {
        let mut all: Vec<String> = without.collect();
        all.extend(dns);
        all
    } else {
        dns.extend(without);
        dns
    }
}

#[tokio::test]
async fn a_sorted_search_cut_into_steps_sends_every_match_in_order() {
    let (d, admin) = directory(Limits {
        search_step_time: Duration::ZERO,
        ..Limits::default()
    })
    .await;
    for reverse in [false, true] {
        let value = sort_value(reverse);
        // Small steps: gathering and sending both span many.
        let (dns, done, steps) = run(&d, &admin, 0, sorted(&value, true), 2048);
        assert_eq!(done.outcome.code, ResultCode::SUCCESS, "{done:?}");
        assert_eq!(done.sort, Some((ResultCode::SUCCESS, None)));
        assert_eq!(dns, expected(reverse), "reverse: {reverse}");
        assert!(steps > 10, "{steps} steps");
        // The size limit takes the head of the sorted list.
        let (dns, done, _) = run(&d, &admin, 25, sorted(&value, true), 2048);
        assert_eq!(done.outcome.code, ResultCode::SIZE_LIMIT_EXCEEDED);
        assert_eq!(dns, expected(reverse)[..25]);
    }
}

#[tokio::test]
async fn sorted_pages_resume_after_the_last_entry_sent_whatever_changed() {
    let (d, admin) = directory(Limits::default()).await;
    let value = sort_value(false);
    let mut cookie = Vec::new();
    let mut seen = Vec::new();
    let mut pages = 0;
    let mut added = false;
    loop {
        let controls = SearchControls {
            page: Some(PageRequest {
                size: 40,
                cookie: &cookie,
            }),
            ..sorted(&value, true)
        };
        let (dns, done, _) = run(&d, &admin, 0, controls, 1 << 20);
        assert_eq!(done.outcome.code, ResultCode::SUCCESS, "{done:?}");
        seen.extend(dns);
        pages += 1;
        let (_, next) = done.page.unwrap();
        if next.is_empty() {
            break;
        }
        cookie = next;
        if !added {
            // After the first page: one entry that sorts before the
            // position reached (never sent), one after it (sent later).
            add_entry(&d, &admin, 10_000, Some("D0000 before")).await;
            add_entry(&d, &admin, 10_001, Some("D0499 after")).await;
            added = true;
        }
    }
    assert_eq!(pages, ENTRIES / 40 + 1);
    // The entry added after the position sorts right after the one that
    // holds D0499; the one added before it is never sent.
    let mut want = expected(false);
    let holder = (0..ENTRIES)
        .find(|i| description(*i).as_deref() == Some("D0499"))
        .unwrap();
    let after_holder = want
        .iter()
        .position(|dn| *dn == format!("cn=e{holder},dc=example,dc=com"))
        .unwrap()
        + 1;
    want.insert(after_holder, "cn=e10001,dc=example,dc=com".to_owned());
    assert_eq!(seen, want);
}

#[tokio::test]
async fn list_views_send_the_window_asked() {
    let (d, admin) = directory(Limits {
        search_step_time: Duration::ZERO,
        ..Limits::default()
    })
    .await;
    let value = sort_value(false);
    let all = expected(false);
    let window = |vlv: VlvRequest<'_>| {
        let mut vlv_value = Vec::new();
        vlv.encode(&mut vlv_value);
        let controls = SearchControls {
            vlv: Some(ControlValue {
                critical: true,
                value: Some(&vlv_value),
            }),
            ..sorted(&value, true)
        };
        let (dns, done, _) = run(&d, &admin, 0, controls, 2048);
        (dns, done)
    };
    let (dns, done) = window(VlvRequest {
        before: 2,
        after: 3,
        target: VlvTarget::ByOffset {
            offset: 100,
            content_count: 0,
        },
        context: None,
    });
    assert_eq!(done.outcome.code, ResultCode::SUCCESS);
    assert_eq!(dns, all[97..103]);
    let vlv = done.vlv.unwrap();
    assert_eq!((vlv.target_position, vlv.content_count), (100, 500));
    let (dns, done) = window(VlvRequest {
        before: 0,
        after: 1,
        target: VlvTarget::GreaterOrEqual(b"d0250"),
        context: None,
    });
    let first = all
        .iter()
        .position(|dn| {
            let i: usize = dn[4..dn.find(',').unwrap()].parse().unwrap();
            description(i).is_some_and(|d| d.as_str() >= "D0250")
        })
        .unwrap();
    assert_eq!(dns, all[first..first + 2]);
    assert_eq!(done.vlv.unwrap().target_position as usize, first + 1);
    let (dns, done) = window(VlvRequest {
        before: 0,
        after: 0,
        target: VlvTarget::ByOffset {
            offset: 501,
            content_count: 0,
        },
        context: None,
    });
    assert!(dns.is_empty());
    assert_eq!(done.outcome.code, ResultCode::VIRTUAL_LIST_VIEW_ERROR);
    assert_eq!(done.vlv.unwrap().result, ResultCode::OFFSET_RANGE_ERROR);
    // Without the sort control.
    let mut vlv_value = Vec::new();
    VlvRequest {
        before: 0,
        after: 0,
        target: VlvTarget::ByOffset {
            offset: 1,
            content_count: 0,
        },
        context: None,
    }
    .encode(&mut vlv_value);
    let controls = SearchControls {
        vlv: Some(ControlValue {
            critical: false,
            value: Some(&vlv_value),
        }),
        ..SearchControls::default()
    };
    let (dns, done, _) = run(&d, &admin, 0, controls, 2048);
    assert!(dns.is_empty());
    assert_eq!(done.outcome.code, ResultCode::VIRTUAL_LIST_VIEW_ERROR);
    assert_eq!(done.vlv.unwrap().result, ResultCode::SORT_CONTROL_MISSING);
}

#[tokio::test]
async fn a_sort_over_its_memory_is_refused_or_left_unsorted_by_criticality() {
    let (d, admin) = directory(Limits {
        search_step_time: Duration::ZERO,
        // Room for a few dozen keys: the sort of 500 cannot be held.
        sort_memory_bytes: 4096,
        ..Limits::default()
    })
    .await;
    let value = sort_value(false);
    let (dns, done, _) = run(&d, &admin, 0, sorted(&value, true), 2048);
    assert!(dns.is_empty());
    assert_eq!(
        done.outcome.code,
        ResultCode::UNAVAILABLE_CRITICAL_EXTENSION
    );
    assert_eq!(done.sort, Some((ResultCode::ADMIN_LIMIT_EXCEEDED, None)));
    assert!(
        done.outcome.message.contains("directory.sort_memory_bytes"),
        "{done:?}"
    );
    // Non-critical: every entry, unsorted (entry order), and why.
    let (dns, done, _) = run(&d, &admin, 0, sorted(&value, false), 2048);
    assert_eq!(done.outcome.code, ResultCode::SUCCESS);
    assert_eq!(done.sort, Some((ResultCode::ADMIN_LIMIT_EXCEEDED, None)));
    let in_entry_order: Vec<String> = (0..ENTRIES)
        .map(|i| format!("cn=e{i},dc=example,dc=com"))
        .collect();
    assert_eq!(dns, in_entry_order);
    // What the refused sorts held was given back: a small sort fits.
    let (_, done, _) = run(&d, &admin, 0, SearchControls::default(), 2048);
    assert_eq!(done.outcome.code, ResultCode::SUCCESS);
}
