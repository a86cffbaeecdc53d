//! Decoding a pipelined base-object SearchRequest and encoding a
//! SearchResultEntry into a reused buffer allocate nothing. Counted with a
//! counting global allocator (deterministic, unlike a timing).

#![allow(unsafe_code, clippy::unwrap_used, clippy::indexing_slicing)]

#[path = "../benches/common.rs"]
mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use meridian_proto::{DecodeLimits, Filter, LdapMessage, ProtocolOp};

struct Counting;

thread_local! {
    // Per thread, so tests running in parallel do not count each other.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator, only counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
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

fn allocations(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

#[test]
fn decoding_pipelined_searches_allocates_nothing() {
    let input = common::pipelined_searches(100);
    let limits = DecodeLimits::default();
    let count = allocations(|| {
        let mut rest = &input[..];
        let mut seen = 0;
        while !rest.is_empty() {
            let (msg, used) = LdapMessage::decode_prefix(rest, &limits).unwrap();
            let ProtocolOp::SearchRequest(search) = msg.op else {
                panic!()
            };
            assert!(matches!(search.filter, Filter::Present(b"objectClass")));
            assert!(search.attributes.iter().next().is_none());
            rest = &rest[used..];
            seen += 1;
        }
        assert_eq!(seen, 100);
    });
    assert_eq!(count, 0);
}

#[test]
fn encoding_entries_into_a_reused_buffer_allocates_nothing() {
    let mut buf = Vec::with_capacity(4096);
    common::encode_entry(&mut buf, 1);
    let count = allocations(|| {
        for id in 0..100 {
            buf.clear();
            common::encode_entry(&mut buf, id);
        }
    });
    assert_eq!(count, 0);
    let msg = LdapMessage::decode(&buf, &DecodeLimits::default()).unwrap();
    let ProtocolOp::SearchResultEntry(entry) = msg.op else {
        panic!()
    };
    assert_eq!(entry.attributes.len(), 10);
}
