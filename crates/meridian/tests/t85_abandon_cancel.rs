//! Abandon and Cancel (RFC 3909) of a search still streaming its results:
//! an abandoned search ends without a response, a canceled one with
//! `canceled` followed by the Cancel's success; Cancel of nothing answers
//! noSuchOperation.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::fmt::Write as _;
use std::process::Command;

use meridian_proto::extended::{encode_cancel, oid as extended_oid};
use meridian_proto::{Filter, LdapMessage, ProtocolOp, ResultCode, Scope, SearchRequest, Seq};
use support::{ADMIN_PASSWORD, Client, Server, temp_dir};

/// Entries in the big server: 32 MB of results, more than the socket
/// buffers of both ends hold, so a client that does not read stops the
/// search part way.
const ENTRIES: usize = 16_000;

/// A server holding enough entries that a search of all of them streams,
/// loaded with `meridian import`.
fn big_server() -> Server {
    Server::start_with("", Some(ADMIN_PASSWORD), Some(big_data()))
}

/// The data directory of [`big_server`].
fn big_data() -> std::path::PathBuf {
    let data = temp_dir("cancel");
    let mut ldif = String::from(
        "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: x\n\n",
    );
    let filler = "x".repeat(2000);
    for i in 0..ENTRIES {
        writeln!(
            ldif,
            "dn: uid=u{i},dc=example,dc=com\nobjectClass: account\nuid: u{i}\ndescription: {filler}\n"
        )
        .unwrap();
    }
    let file = data.join("big.ldif");
    std::fs::write(&file, ldif).unwrap();
    support::import(&file, &data);
    data
}

fn bound_client(server: &Server) -> Client {
    Client::admin(server.addr)
}

fn search_everything(client: &mut Client, id: i32) {
    search_under(client, id, b"dc=example,dc=com");
}

fn search_under(client: &mut Client, id: i32, base: &[u8]) {
    client.send_message(&LdapMessage {
        message_id: id,
        op: ProtocolOp::SearchRequest(SearchRequest {
            base,
            scope: Scope::Subtree,
            deref: meridian_proto::DerefAliases::Never,
            size_limit: 0,
            time_limit: 0,
            types_only: false,
            filter: Filter::Present(b"objectClass"),
            attributes: Seq::empty(),
        }),
        controls: Seq::empty(),
    });
}

fn cancel(client: &mut Client, id: i32, target: i32) {
    let mut value = Vec::new();
    encode_cancel(&mut value, target);
    client.send_message(&LdapMessage {
        message_id: id,
        op: ProtocolOp::ExtendedRequest(meridian_proto::ExtendedRequest {
            name: extended_oid::CANCEL,
            value: Some(&value),
        }),
        controls: Seq::empty(),
    });
}

/// Reads until the response to `id` (an ExtendedResponse): the number of
/// entries of search 2 seen, its SearchResultDone code if any, the
/// extended response's code, and the order the two ended in.
fn read_until_extended(
    client: &mut Client,
    id: i32,
) -> (usize, Option<ResultCode>, ResultCode, bool) {
    let (mut entries, mut done, mut ext) = (0, None, None);
    let mut done_first = false;
    client.read_until(|m| {
        match &m.op {
            ProtocolOp::SearchResultEntry(_) if m.message_id == 2 => entries += 1,
            ProtocolOp::SearchResultDone(r) if m.message_id == 2 => {
                done = Some(r.code);
                done_first = ext.is_none();
            }
            ProtocolOp::ExtendedResponse(r) if m.message_id == id => ext = Some(r.result.code),
            _ => {}
        }
        ext.is_some()
    });
    (entries, done, ext.unwrap(), done_first)
}

#[test]
fn a_streaming_search_is_canceled_then_the_cancel_answers() {
    let server = big_server();
    let mut client = bound_client(&server);
    // The client reads nothing yet: the search stops at the outbound
    // limit, still running, when the Cancel arrives.
    search_everything(&mut client, 2);
    std::thread::sleep(std::time::Duration::from_millis(300));
    cancel(&mut client, 3, 2);
    let (entries, done, ext, done_first) = read_until_extended(&mut client, 3);
    assert_eq!(done, Some(ResultCode::CANCELED));
    assert_eq!(ext, ResultCode::SUCCESS);
    assert!(done_first, "the Cancel answered before the canceled search");
    assert!(entries > 0 && entries <= ENTRIES, "{entries}");

    // Cancel of something finished, or never sent.
    cancel(&mut client, 4, 2);
    let (_, _, ext, _) = read_until_extended(&mut client, 4);
    assert_eq!(ext, ResultCode::NO_SUCH_OPERATION);
    cancel(&mut client, 5, 99);
    let (_, _, ext, _) = read_until_extended(&mut client, 5);
    assert_eq!(ext, ResultCode::NO_SUCH_OPERATION);
}

#[test]
fn an_abandoned_search_ends_without_a_response() {
    let server = big_server();
    let mut client = bound_client(&server);
    search_everything(&mut client, 2);
    std::thread::sleep(std::time::Duration::from_millis(300));
    client.send_message(&LdapMessage {
        message_id: 3,
        op: ProtocolOp::AbandonRequest(2),
        controls: Seq::empty(),
    });
    // A WhoAmI after it: its answer comes, and no SearchResultDone for 2.
    client.send_message(&LdapMessage {
        message_id: 4,
        op: ProtocolOp::ExtendedRequest(meridian_proto::ExtendedRequest {
            name: extended_oid::WHO_AM_I,
            value: None,
        }),
        controls: Seq::empty(),
    });
    let (entries, done, ext, _) = read_until_extended(&mut client, 4);
    assert_eq!(ext, ResultCode::SUCCESS);
    assert_eq!(done, None, "an abandoned search answered");
    assert!(entries <= ENTRIES, "{entries}");
    // The connection goes on: a search after it completes. (Entries of
    // the abandoned search already on their way may still arrive; they
    // carry its message ID, and no SearchResultDone of its comes.)
    search_everything(&mut client, 5);
    let mut all = 0;
    client.read_until(|m| match (&m.op, m.message_id) {
        (ProtocolOp::SearchResultEntry(_), 5) => {
            all += 1;
            false
        }
        (ProtocolOp::SearchResultDone(_), 2) => panic!("the abandoned search answered"),
        (ProtocolOp::SearchResultDone(r), 5) => {
            assert_eq!(r.code, ResultCode::SUCCESS);
            true
        }
        _ => false,
    });
    assert_eq!(all, ENTRIES + 1);
}

#[test]
fn a_streamed_search_gets_its_access_log_line() {
    let data = big_data();
    let log = data.join("server.log");
    let mut server = Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .env("MERIDIAN_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(server.stdout.take().unwrap()));
    let addr: std::net::SocketAddr = loop {
        let line = lines.next().unwrap().unwrap();
        if let Some(addr) = line.strip_prefix("meridian listening on ") {
            break addr.parse().unwrap();
        }
    };
    let mut client = Client::admin(addr);
    search_everything(&mut client, 2);
    client.read_until(|m| matches!(m.op, ProtocolOp::SearchResultDone(_)));
    // A base DN that would forge a line of its own if logged as it came.
    let forged = "2026-11-27T00:00:00.000000Z  INFO meridian::access: conn=99 msgid=1 op=\"DEL\"";
    search_under(
        &mut client,
        3,
        format!("cn=x\n{forged},dc=example,dc=com").as_bytes(),
    );
    client.read_until(|m| matches!(m.op, ProtocolOp::SearchResultDone(_)));
    // WhoAmI: its line names the extended operation's OID.
    client.send_message(&LdapMessage {
        message_id: 4,
        op: ProtocolOp::ExtendedRequest(meridian_proto::ExtendedRequest {
            name: b"1.3.6.1.4.1.4203.1.11.3",
            value: None,
        }),
        controls: Seq::empty(),
    });
    client.read_until(|m| matches!(m.op, ProtocolOp::ExtendedResponse(_)));
    drop(client);
    support::signal(server.id(), "TERM");
    server.wait().unwrap();
    let log = std::fs::read_to_string(&log).unwrap();
    let line = log
        .lines()
        .find(|l| l.contains("meridian::access") && l.contains("msgid=2"))
        .unwrap_or_else(|| panic!("no access line for the streamed search:\n{log}"));
    assert!(line.contains("SRCH") && line.contains("result=0"), "{line}");
    // Issue 29: the entries it returned, and the client's address on the
    // connection's first and last lines.
    assert!(
        line.contains(&format!("nentries={}", ENTRIES + 1)),
        "{line}"
    );
    // Issue 44, medium 10: what operators grep slapd's lines for: the
    // search's scope, filter and attributes, the bind's method.
    assert!(
        line.contains("scope=2 filter=\"(objectClass=*)\" attrs=\"\""),
        "{line}"
    );
    let bind = log
        .lines()
        .find(|l| l.contains("meridian::access") && l.contains("op=\"BIND\""))
        .unwrap_or_else(|| panic!("no BIND line:\n{log}"));
    assert!(bind.contains("method=\"simple\""), "{bind}");
    assert!(
        log.lines().any(|l| l.contains("msgid=4")
            && l.contains("op=\"EXT\"")
            && l.contains("oid=\"1.3.6.1.4.1.4203.1.11.3\"")),
        "no EXT line with its OID:\n{log}"
    );
    let connect = log
        .lines()
        .find(|l| l.contains("meridian::access") && l.contains("CONNECT"))
        .unwrap_or_else(|| panic!("no CONNECT line:\n{log}"));
    assert!(connect.contains("from=127.0.0.1:"), "{connect}");
    let close = log
        .lines()
        .find(|l| l.contains("meridian::access") && l.contains("CLOSE"))
        .unwrap_or_else(|| panic!("no CLOSE line:\n{log}"));
    assert!(close.contains("from=127.0.0.1:"), "{close}");
    assert!(
        !log.lines().any(|l| l.starts_with(forged)),
        "a DN started a line:\n{log}"
    );
    assert!(
        log.lines()
            .any(|l| l.contains("msgid=3") && l.contains("dn=cn=x\\0a2026-11-27")),
        "the DN's newline is written as \\0a:\n{log}"
    );
    std::fs::remove_dir_all(data).unwrap();
}
