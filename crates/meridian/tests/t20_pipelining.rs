//! Pipelining with our own client: thousands of requests in flight on one
//! connection, Queue Length bundles, out-of-limit backpressure.

// Tests time out their waits: they read the clock directly.
#![allow(clippy::disallowed_methods)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::collections::HashSet;
use std::io::Write as _;
use std::time::{Duration, Instant};

use meridian_proto::controls::{QueueLength, oid};
use meridian_proto::*;
use support::*;

fn root_dse_search(id: i32, controls: &[Control<'_>]) -> Vec<u8> {
    let mut buf = Vec::new();
    LdapMessage {
        message_id: id,
        op: ProtocolOp::SearchRequest(SearchRequest {
            base: b"",
            scope: Scope::Base,
            deref: DerefAliases::Never,
            size_limit: 0,
            time_limit: 0,
            types_only: false,
            filter: Filter::Present(b"objectClass"),
            attributes: Seq::from_items(&[b"vendorName".as_slice()]),
        }),
        controls: Seq::from_items(controls),
    }
    .encode(&mut buf);
    buf
}

/// Reads until every id in `expected` has its SearchResultDone.
fn collect_done(client: &mut Client, count: usize) -> HashSet<i32> {
    let mut done = HashSet::new();
    let mut entries = 0;
    client.read_until(|msg| {
        match &msg.op {
            ProtocolOp::SearchResultEntry(_) => entries += 1,
            ProtocolOp::SearchResultDone(r) => {
                assert_eq!(r.code, ResultCode::SUCCESS);
                assert!(
                    done.insert(msg.message_id),
                    "duplicate answer {}",
                    msg.message_id
                );
            }
            other => panic!("unexpected {other:?}"),
        }
        done.len() == count
    });
    assert_eq!(entries, count);
    done
}

#[test]
fn ten_thousand_pipelined_requests_on_one_connection() {
    let server = Server::start("");
    let mut client = Client::connect(server.addr);
    let all: Vec<u8> = (1..=10_000)
        .flat_map(|id| root_dse_search(id, &[]))
        .collect();
    // Write from another thread: the server answers while we send.
    let mut writer = client.stream.try_clone().unwrap();
    let sender = std::thread::spawn(move || writer.write_all(&all).unwrap());
    let done = collect_done(&mut client, 10_000);
    sender.join().unwrap();
    assert_eq!(done, (1..=10_000).collect());
}

#[test]
fn queue_length_bundles_are_answered_whole() {
    let server = Server::start("[server]\nqueue_length_flush_ms = 2000\n");
    let mut client = Client::connect(server.addr);
    let mut value = Vec::new();
    QueueLength { count: 100 }.encode(&mut value);
    let control = [Control {
        oid: oid::QUEUE_LENGTH,
        critical: true,
        value: Some(&value),
    }];
    for bundle in 0..5 {
        let first = bundle * 100 + 1;
        let mut bytes = root_dse_search(first, &control);
        for id in first + 1..first + 100 {
            bytes.extend(root_dse_search(id, &[]));
        }
        client.send(&bytes);
        let done = collect_done(&mut client, 100);
        assert_eq!(done, (first..first + 100).collect());
    }

    // While the bundle is incomplete nothing is sent; the last request
    // releases all of it.
    let mut bytes = root_dse_search(501, &control);
    for id in 502..600 {
        bytes.extend(root_dse_search(id, &[]));
    }
    client.send(&bytes);
    client
        .stream
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut probe = [0u8; 1];
    let early = std::io::Read::read(&mut client.stream, &mut probe);
    assert!(
        early.is_err(),
        "responses left before the bundle was complete"
    );
    client
        .stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    client.send(&root_dse_search(600, &[]));
    assert_eq!(collect_done(&mut client, 100), (501..=600).collect());

    // A count that never completes is released by the timer, not stuck:
    // the server was told 100 and gets 3.
    let started = Instant::now();
    let mut bytes = root_dse_search(1001, &control);
    bytes.extend(root_dse_search(1002, &[]));
    bytes.extend(root_dse_search(1003, &[]));
    client.send(&bytes);
    collect_done(&mut client, 3);
    assert!(started.elapsed() < Duration::from_secs(15));
}

#[test]
fn a_client_that_never_reads_holds_memory_flat() {
    let server = Server::start("[server]\nmax_outstanding_per_connection = 64\n");
    let mut client = Client::connect(server.addr);
    let baseline = server.rss_kib();
    // 64 MiB of requests; the server must stop reading long before.
    let batch: Vec<u8> = (1..=1000).flat_map(|id| root_dse_search(id, &[])).collect();
    client
        .stream
        .set_write_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut written = 0usize;
    while written < 64 << 20 {
        match client.stream.write(&batch) {
            Ok(n) => written += n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                break;
            }
            Err(e) => panic!("write failed: {e}"),
        }
    }
    let grown = server.rss_kib().saturating_sub(baseline);
    eprintln!("accepted {written} bytes before the server stopped reading; RSS grew {grown} KiB");
    assert!(
        written < 32 << 20,
        "server kept reading: {written} bytes accepted"
    );
    assert!(grown < 32 * 1024, "server grew by {grown} KiB");

    // The server is still serving other clients meanwhile.
    assert!(serves(&server));
}
