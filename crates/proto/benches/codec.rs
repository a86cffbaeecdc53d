//! Codec micro-benchmarks, ours beside `ldap3_proto` in the same run.
//! Results and commands: `docs/BENCHMARKS.md`.
//!
//! Allocation counts come from `tests/zero_alloc.rs` (a counting global
//! allocator); here a counting allocator also prints allocations per
//! message for both codecs before criterion starts.

#![allow(
    missing_docs,
    unsafe_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::BytesMut;
use criterion::{Criterion, Throughput, criterion_group};
use ldap3_proto::proto::{LdapMsg, LdapOp, LdapPartialAttribute, LdapSearchResultEntry};
use meridian_proto::{DecodeLimits, LdapMessage};
use tokio_util::codec::{Decoder, Encoder};

struct Counting;
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator, only counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above, that is from `System`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const PIPELINE: i32 = 1000;

fn decode_ours(input: &[u8], limits: &DecodeLimits) -> usize {
    let mut rest = input;
    let mut n = 0;
    while !rest.is_empty() {
        let (msg, used) = LdapMessage::decode_prefix(rest, limits).unwrap();
        black_box(&msg);
        rest = &rest[used..];
        n += 1;
    }
    n
}

fn decode_ldap3(input: &[u8]) -> usize {
    let mut codec = ldap3_proto::LdapCodec::new(Some(1 << 24), None);
    let mut buf = BytesMut::from(input);
    let mut n = 0;
    while let Some(msg) = codec.decode(&mut buf).unwrap() {
        black_box(&msg);
        n += 1;
    }
    n
}

fn ldap3_entry() -> LdapMsg {
    LdapMsg::new(
        7,
        LdapOp::SearchResultEntry(LdapSearchResultEntry {
            dn: String::from_utf8(common::ENTRY_DN.to_vec()).unwrap(),
            attributes: common::ENTRY
                .iter()
                .map(|(ty, vals)| LdapPartialAttribute {
                    atype: String::from_utf8(ty.to_vec()).unwrap(),
                    vals: vals.iter().map(|v| v.to_vec()).collect(),
                })
                .collect(),
        }),
    )
}

fn allocations_per(n: u64, f: impl FnOnce()) -> f64 {
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    f();
    (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / n as f64
}

fn report_allocations() {
    let input = common::pipelined_searches(PIPELINE);
    let limits = DecodeLimits::default();
    let ours = allocations_per(PIPELINE as u64, || {
        decode_ours(&input, &limits);
    });
    let theirs = allocations_per(PIPELINE as u64, || {
        decode_ldap3(&input);
    });
    eprintln!(
        "allocations per decoded base SearchRequest: meridian {ours:.2}, ldap3_proto {theirs:.2}"
    );
    let mut buf = Vec::with_capacity(4096);
    let ours = allocations_per(1000, || {
        for id in 0..1000 {
            buf.clear();
            common::encode_entry(&mut buf, id);
        }
    });
    let mut codec = ldap3_proto::LdapCodec::default();
    let mut out = BytesMut::with_capacity(1 << 20);
    let theirs = allocations_per(1000, || {
        for _ in 0..1000 {
            out.clear();
            codec.encode(ldap3_entry(), &mut out).unwrap();
        }
    });
    eprintln!(
        "allocations per encoded 10-attribute SearchResultEntry: meridian {ours:.2}, ldap3_proto {theirs:.2} (message construction included)"
    );
}

fn bench_decode(c: &mut Criterion) {
    let input = common::pipelined_searches(PIPELINE);
    let limits = DecodeLimits::default();
    let mut group = c.benchmark_group("decode_pipelined_base_search");
    group.throughput(Throughput::Elements(PIPELINE as u64));
    group.bench_function("meridian", |b| {
        b.iter(|| decode_ours(black_box(&input), &limits))
    });
    group.bench_function("ldap3_proto", |b| {
        b.iter(|| decode_ldap3(black_box(&input)))
    });
    group.finish();
}

fn bench_encode(c: &mut Criterion) {
    let mut group = c.benchmark_group("encode_search_result_entry_10_attrs");
    group.throughput(Throughput::Elements(1));
    let mut buf = Vec::with_capacity(4096);
    group.bench_function("meridian", |b| {
        b.iter(|| {
            buf.clear();
            common::encode_entry(&mut buf, black_box(7));
            black_box(&buf);
        })
    });
    let mut codec = ldap3_proto::LdapCodec::default();
    let mut out = BytesMut::with_capacity(1 << 20);
    let msg = ldap3_entry();
    group.bench_function("ldap3_proto", |b| {
        b.iter(|| {
            out.clear();
            // ldap3_proto's encoder consumes the message, so a clone is part
            // of what a server using it pays per entry.
            codec.encode(black_box(msg.clone()), &mut out).unwrap();
            black_box(&out);
        })
    });
    group.finish();
}

criterion_group!(benches, bench_decode, bench_encode);

fn main() {
    report_allocations();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
