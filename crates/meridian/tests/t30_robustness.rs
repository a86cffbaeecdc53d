//! Hostile input: each case gets a Notice of Disconnection (protocolError)
//! or a closed socket, and the server goes on serving new connections.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::io::Write as _;
use std::time::Duration;

use meridian_proto::*;
use support::*;

/// Reads what the server sends until it closes; returns the result code of
/// a Notice of Disconnection if one came.
fn notice_then_close(client: &mut Client) -> Option<ResultCode> {
    let mut notice = None;
    while let Some(pdu) = client.read_pdu() {
        let msg = LdapMessage::decode(&pdu, &DecodeLimits::default()).unwrap();
        match msg.op {
            ProtocolOp::ExtendedResponse(r)
                if msg.message_id == 0 && r.name == Some(message::NOTICE_OF_DISCONNECTION_OID) =>
            {
                notice = Some(r.result.code);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    notice
}

fn still_serving(server: &Server) {
    assert!(
        serves(server),
        "the server no longer serves new connections"
    );
}

fn nested_not_filter(depth: usize) -> Vec<u8> {
    // (!(!(...(objectClass=*)...))) built from the inside out.
    let mut filter = vec![0x87, 11];
    filter.extend_from_slice(b"objectClass");
    for _ in 0..depth {
        let mut outer = vec![0xa2];
        push_length(&mut outer, filter.len());
        outer.extend(filter);
        filter = outer;
    }
    let mut body = vec![
        0x04, 0x00, 0x0a, 0x01, 0x00, 0x0a, 0x01, 0x00, 0x02, 0x01, 0x00, 0x02, 0x01, 0x00, 0x01,
        0x01, 0x00,
    ];
    body.extend(filter);
    body.extend([0x30, 0x00]);
    let mut op = vec![0x63];
    push_length(&mut op, body.len());
    op.extend(body);
    let mut msg_body = vec![0x02, 0x01, 0x01];
    msg_body.extend(op);
    let mut pdu = vec![0x30];
    push_length(&mut pdu, msg_body.len());
    pdu.extend(msg_body);
    pdu
}

fn push_length(out: &mut Vec<u8>, len: usize) {
    if len < 128 {
        out.push(len as u8);
    } else {
        out.extend([0x82, (len >> 8) as u8, len as u8]);
    }
}

#[test]
fn hostile_inputs_get_protocol_error_and_the_server_survives() {
    let server = Server::start("");
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("garbage", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        (
            "random bytes",
            (0..200u32)
                .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
                .collect(),
        ),
        (
            "length 2^31",
            vec![0x30, 0x84, 0x80, 0x00, 0x00, 0x00, 0x02, 0x01, 0x01],
        ),
        (
            "indefinite length",
            vec![0x30, 0x80, 0x02, 0x01, 0x01, 0x42, 0x00, 0x00, 0x00],
        ),
        ("200 nested filters", nested_not_filter(200)),
        (
            "message id 0",
            vec![0x30, 0x05, 0x02, 0x01, 0x00, 0x42, 0x00],
        ),
        (
            "response PDU from a client",
            vec![
                0x30, 0x0c, 0x02, 0x01, 0x01, 0x65, 0x07, 0x0a, 0x01, 0x00, 0x04, 0x00, 0x04, 0x00,
            ],
        ),
        (
            "unknown operation",
            vec![0x30, 0x05, 0x02, 0x01, 0x01, 0x7f, 0x00],
        ),
    ];
    for (name, bytes) in cases {
        let mut client = Client::connect(server.addr);
        client.send(&bytes);
        let notice = notice_then_close(&mut client);
        assert_eq!(notice, Some(ResultCode::PROTOCOL_ERROR), "{name}");
        still_serving(&server);
    }
    // A nesting within the limit is a normal search.
    let mut client = Client::connect(server.addr);
    client.send(&nested_not_filter(20));
    let pdu = client.read_pdu().unwrap();
    let msg = LdapMessage::decode(&pdu, &DecodeLimits::default()).unwrap();
    assert!(matches!(
        msg.op,
        ProtocolOp::SearchResultEntry(_) | ProtocolOp::SearchResultDone(_)
    ));
}

#[test]
fn truncated_pdus_wait_then_close_cleanly() {
    let server = Server::start("");
    let mut whole = Vec::new();
    LdapMessage {
        message_id: 1,
        op: ProtocolOp::DelRequest(b"cn=x,dc=example,dc=com"),
        controls: Seq::empty(),
    }
    .encode(&mut whole);
    for cut in [1, 2, whole.len() / 2, whole.len() - 1] {
        let mut client = Client::connect(server.addr);
        client.send(&whole[..cut]);
        client.stream.shutdown(std::net::Shutdown::Write).unwrap();
        assert_eq!(notice_then_close(&mut client), None, "cut at {cut}");
    }
    // A PDU split across writes is reassembled.
    let mut client = Client::connect(server.addr);
    for byte in &whole {
        client.stream.write_all(std::slice::from_ref(byte)).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    let pdu = client.read_pdu().unwrap();
    let msg = LdapMessage::decode(&pdu, &DecodeLimits::default()).unwrap();
    // Anonymous may not see the entry: noSuchObject, as if it were missing.
    assert!(
        matches!(msg.op, ProtocolOp::DelResponse(r) if r.code == ResultCode::NO_SUCH_OBJECT),
        "{msg:?}"
    );
    still_serving(&server);
}

#[test]
fn the_pdu_size_limit_is_configurable() {
    let server = Server::start("[server]\nmax_pdu_bytes = 1024\n");
    let mut client = Client::connect(server.addr);
    let big = vec![b'x'; 2000];
    let mut bytes = Vec::new();
    LdapMessage {
        message_id: 1,
        op: ProtocolOp::DelRequest(&big),
        controls: Seq::empty(),
    }
    .encode(&mut bytes);
    client.send(&bytes[..16]);
    assert_eq!(
        notice_then_close(&mut client),
        Some(ResultCode::PROTOCOL_ERROR)
    );
    still_serving(&server);
}

#[test]
fn connections_over_the_limit_are_told_busy() {
    let server = Server::start("[server]\nmax_connections = 2\n");
    let mut held: Vec<Client> = (0..2).map(|_| Client::connect(server.addr)).collect();
    // Both are accepted and counted once each has been answered.
    for (i, c) in held.iter_mut().enumerate() {
        let mut buf = Vec::new();
        LdapMessage {
            message_id: 1 + i as i32,
            op: ProtocolOp::ExtendedRequest(ExtendedRequest {
                name: extended::oid::WHO_AM_I,
                value: None,
            }),
            controls: Seq::empty(),
        }
        .encode(&mut buf);
        c.send(&buf);
        assert!(c.read_pdu().is_some(), "connection {i} was not served");
    }
    let mut third = Client::connect(server.addr);
    assert_eq!(notice_then_close(&mut third), Some(ResultCode::BUSY));
    drop(held);
    // The server counts a connection out once it has seen it close: a
    // new one is served from then on. (The clock bounds the wait only.)
    #[allow(clippy::disallowed_methods)]
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !serves(&server) {
        #[allow(clippy::disallowed_methods)]
        let now = std::time::Instant::now();
        assert!(
            now < deadline,
            "no connection served after the held ones closed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn idle_connections_are_closed() {
    let server = Server::start("[server]\nidle_timeout_secs = 1\n");
    let mut client = Client::connect(server.addr);
    assert_eq!(notice_then_close(&mut client), None);
}

#[test]
fn sigterm_flushes_answers_and_says_goodbye() {
    let mut server = Server::start("");
    let mut client = Client::connect(server.addr);
    let mut bytes = Vec::new();
    for id in 1..=50 {
        LdapMessage {
            message_id: id,
            op: ProtocolOp::DelRequest(b"cn=x"),
            controls: Seq::empty(),
        }
        .encode(&mut bytes);
    }
    client.send(&bytes);
    let mut answered = 0;
    client.read_until(|msg| {
        answered += matches!(msg.op, ProtocolOp::DelResponse(_)) as usize;
        answered == 50
    });
    let status = server.terminate();
    assert!(status.success(), "{status:?}");
    assert_eq!(
        notice_then_close(&mut client),
        Some(ResultCode::UNAVAILABLE)
    );
}
