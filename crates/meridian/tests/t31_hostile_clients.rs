//! The hostile-client suite (issue "Robustness"): each attack a client
//! with no privilege (or only its own password) could make, against the
//! real server on 127.0.0.1. Each case asserts that the attack gets its
//! documented answer, that a well-formed request on another connection is
//! answered promptly meanwhile, and that the server's memory stays within
//! a set bound. Every loop is bounded in time.

// Tests time out their waits: they read the clock directly.
#![allow(clippy::disallowed_methods)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::time::{Duration, Instant};

use support::*;

const BASE: &str = "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: x\n\n";

/// A root DSE read on a new connection answers within `within`.
fn answers_promptly(server: &Server, within: Duration) {
    let started = Instant::now();
    let (rc, out) = tool(
        server,
        "ldapsearch",
        &[],
        &["-s", "base", "-b", "", "vendorName"],
        None,
    );
    let took = started.elapsed();
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("vendorName: Meridian"), "{out}");
    assert!(took < within, "a root DSE read took {took:?}");
}

/// The argon2 value of the issue: 4 TB of memory for every bind to it.
const ARGON2_4TB: &str =
    "{ARGON2}$argon2id$v=19$m=4000000000,t=1,p=1$c29tZXNhbHQ$aGFzaGhhc2hoYXNoaGFzaA";

#[test]
fn a_user_cannot_store_a_password_hash_that_would_exhaust_the_server() {
    let server = Server::start("");
    let ldif = format!(
        "{BASE}dn: uid=mallory,dc=example,dc=com\nobjectClass: account\nobjectClass: simpleSecurityObject\n\
         uid: mallory\nuserPassword: mallory-pw\n"
    );
    let (rc, out) = admin_tool(&server, "ldapadd", &[], Some(&ldif));
    assert_eq!(rc, 0, "{out}");
    let me = "uid=mallory,dc=example,dc=com";
    let as_mallory = ["-D", me, "-w", "mallory-pw"];
    for (value, names) in [
        (ARGON2_4TB, "password_max_memory_kib"),
        (
            "{ARGON2}$argon2id$v=19$m=64,t=100000,p=1$c29tZXNhbHQ$aGFzaGhhc2hoYXNoaGFzaA",
            "password_max_iterations",
        ),
        ("{PBKDF2-SHA256}2000000000$c2FsdA$aGFzaA", "rounds"),
        ("{CRYPT}$6$rounds=999999999$salt$hash", "rounds"),
        ("{CRYPT}$2b$31$abcdefghijklmnopqrstuu", "cost 31"),
        ("{CRYPT}$7$C6..../....SodiumChloride$x", "no method"),
        ("{NOSUCHSCHEME}abc", "unknown password scheme"),
    ] {
        let change =
            format!("dn: {me}\nchangetype: modify\nreplace: userPassword\nuserPassword: {value}\n");
        let (rc, out) = tool(&server, "ldapmodify", &as_mallory, &[], Some(&change));
        assert_eq!(
            rc, 19,
            "{value} must be refused (constraintViolation): {out}"
        );
        assert!(
            out.contains(names),
            "{value}: the message should name {names:?}: {out}"
        );
        // An add of an entry carrying it is refused alike.
        let add = format!(
            "dn: uid=m2,dc=example,dc=com\nobjectClass: account\nobjectClass: simpleSecurityObject\n\
             uid: m2\nuserPassword: {value}\n"
        );
        let (rc, out) = admin_tool(&server, "ldapadd", &[], Some(&add));
        assert_eq!(rc, 19, "{value} in an add: {out}");
    }
    // The password still works: nothing was written.
    let (rc, out) = whoami(&server, me, "mallory-pw");
    assert_eq!(rc, 0, "{out}");
    answers_promptly(&server, Duration::from_secs(2));
}

#[test]
fn a_stored_hash_over_the_bounds_is_never_computed_at_bind() {
    // Imported data (or data written before the bounds were lowered)
    // holds the 4 TB hash and one bounded by a tighter config.
    let data = temp_dir("overbound");
    let ldif = data.join("in.ldif");
    let cheap = meridian_directory::password::hash(
        b"cheap-pw",
        meridian_directory::password::HashCost {
            memory_kib: 4096,
            iterations: 1,
        },
    )
    .unwrap();
    std::fs::write(
        &ldif,
        format!(
            "{BASE}dn: uid=huge,dc=example,dc=com\nobjectClass: account\nobjectClass: simpleSecurityObject\n\
             uid: huge\nuserPassword: {ARGON2_4TB}\n\n\
             dn: uid=cheap,dc=example,dc=com\nobjectClass: account\nobjectClass: simpleSecurityObject\n\
             uid: cheap\nuserPassword: {}\n",
            String::from_utf8(cheap).unwrap()
        ),
    )
    .unwrap();
    import(&ldif, &data);
    std::fs::remove_file(&ldif).unwrap();
    let server = Server::start_with(
        "[directory]\npassword_hash_memory_kib = 1024\npassword_hash_iterations = 1\n\
         [security]\npassword_max_memory_kib = 2048\n",
        Some(ADMIN_PASSWORD),
        Some(data),
    );
    let rss_before = server.rss_kib();
    let started = Instant::now();
    for _ in 0..4 {
        let (rc, out) = whoami(&server, "uid=huge,dc=example,dc=com", "anything");
        assert_eq!(rc, 49, "{out}");
    }
    // 4 MiB of Argon2 is over this server's 2 MiB bound: refused too,
    // even with the right password.
    let (rc, out) = whoami(&server, "uid=cheap,dc=example,dc=com", "cheap-pw");
    assert_eq!(rc, 49, "{out}");
    assert!(started.elapsed() < Duration::from_secs(10));
    let grew = server.rss_kib().saturating_sub(rss_before);
    assert!(grew < 64 * 1024, "RSS grew by {grew} KiB");
    answers_promptly(&server, Duration::from_secs(2));
}

/// Runs `meridian ARGS --data-dir DIR` to its end: (success, stderr).
fn meridian_at(data: &std::path::Path, args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(args)
        .arg("--data-dir")
        .arg(data)
        .env("MERIDIAN_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    (
        out.status.success(),
        format!("{}{}", text(&out.stdout), text(&out.stderr)),
    )
}

#[test]
fn one_writer_per_data_directory_in_every_durability() {
    for durability in ["durable", "journal", "relaxed"] {
        let data = temp_dir("twowriters");
        let config = format!("[storage]\ndurability = \"{durability}\"\n");
        let server = Server::start_with(&config, Some(ADMIN_PASSWORD), Some(data.clone()));
        let (rc, out) = admin_tool(&server, "ldapadd", &[], Some(BASE));
        assert_eq!(rc, 0, "{out}");
        let pid = server.pid().to_string();
        let ldif = data.join("more.ldif");
        std::fs::write(
            &ldif,
            "dn: ou=late,dc=example,dc=com\nobjectClass: organizationalUnit\nou: late\n",
        )
        .unwrap();
        let ldif = ldif.to_str().unwrap();
        for args in [
            &["serve", "--listen", "127.0.0.1:0"][..],
            &["import", "--append", "-i", ldif],
            &["import", "--replace", "-i", ldif],
            &["reindex"],
            &["repair"],
        ] {
            let (ok, out) = meridian_at(&data, args);
            assert!(!ok, "{durability}: {args:?} ran beside the server: {out}");
            assert!(
                out.contains("open for writing by process") && out.contains(&pid),
                "{durability}: {args:?} should name the holder {pid}: {out}"
            );
        }
        // Read-only tools work beside it.
        let (ok, out) = meridian_at(&data, &["export"]);
        assert!(ok, "{durability}: export: {out}");
        assert!(out.contains("dn: dc=example,dc=com"), "{out}");
        let (ok, out) = meridian_at(&data, &["check"]);
        assert!(ok, "{durability}: check: {out}");
        // The server is untouched and still writes.
        let (rc, out) = admin_tool(
            &server,
            "ldapadd",
            &[],
            Some("dn: ou=after,dc=example,dc=com\nobjectClass: organizationalUnit\nou: after\n"),
        );
        assert_eq!(rc, 0, "{durability}: {out}");
        // Once it is gone, the lock is free (also after SIGKILL).
        let mut server = server;
        server.child.kill().unwrap();
        server.child.wait().unwrap();
        let (ok, out) = meridian_at(&data, &["import", "--append", "-i", ldif]);
        assert!(ok, "{durability}: after the server died: {out}");
        let (ok, out) = meridian_at(&data, &["check"]);
        assert!(ok, "{durability}: {out}");
    }
}

/// A server holding `n` seed 002 posixAccounts (unindexed `gecos`), and
/// one user who may bind (`uid=reader`, password `reader-pw`).
fn server_with_accounts(n: u64, config: &str) -> Server {
    let data = temp_dir("accounts");
    let file = data.join("seed.ldif");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["gen", "--model", "seed002", "-n", &n.to_string(), "-o"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    import(&file, &data);
    std::fs::remove_file(&file).unwrap();
    let server = Server::start_with(config, Some(ADMIN_PASSWORD), Some(data));
    let reader = "dn: uid=reader,dc=example,dc=com\nobjectClass: account\nobjectClass: simpleSecurityObject\n\
                  uid: reader\nuserPassword: reader-pw\n";
    let (rc, out) = admin_tool(&server, "ldapadd", &[], Some(reader));
    assert_eq!(rc, 0, "{out}");
    server
}

/// An OR of `items` substring assertions on gecos that match nothing.
fn costly_filter(items: usize) -> String {
    let mut filter = String::from("(|");
    for i in 0..items {
        filter.push_str(&format!("(gecos=*zq{i}x*)"));
    }
    filter.push(')');
    filter
}

#[test]
fn heavy_searches_neither_freeze_other_clients_nor_outlive_their_time_limit() {
    let server = server_with_accounts(20_000, "");
    let filter = costly_filter(2_000);
    // Two costly searches that match nothing, each with a 4 s time limit.
    let heavy: Vec<_> = (0..2)
        .map(|_| {
            let (url, filter) = (server.url(), filter.clone());
            std::thread::spawn(move || {
                let started = Instant::now();
                let (rc, out) = tool_at(
                    &url,
                    "ldapsearch",
                    &["-D", ADMIN_DN, "-w", ADMIN_PASSWORD],
                    &["-l", "4", "-b", "dc=example,dc=com", &filter, "dn"],
                    None,
                );
                (rc, out, started.elapsed())
            })
        })
        .collect();
    // Meanwhile every read on another connection is answered well before
    // the searches end: a frozen server would hold it for their 4 s. (The
    // bound leaves room for this shared 2-core machine running other
    // tests at the same time: 1 s was exceeded once under load.)
    std::thread::sleep(Duration::from_millis(300));
    let until = Instant::now() + Duration::from_secs(3);
    let mut reads = 0;
    while Instant::now() < until {
        answers_promptly(&server, Duration::from_millis(2500));
        reads += 1;
    }
    assert!(reads >= 1, "no read answered in 3 s");
    for search in heavy {
        let (rc, out, took) = search.join().unwrap();
        // timeLimitExceeded, though no entry ever matched: the limit
        // covers the scan, not only the entries sent.
        assert_eq!(rc, 3, "{out}");
        assert!(took < Duration::from_secs(10), "stopped after {took:?}");
    }
    answers_promptly(&server, Duration::from_millis(2500));
}

#[test]
fn the_entries_a_search_examines_count_against_its_limits() {
    let server = server_with_accounts(
        3_000,
        "[directory]\nlookthrough_limit = 1000\nmax_filter_items = 100\n",
    );
    let as_reader = ["-D", "uid=reader,dc=example,dc=com", "-w", "reader-pw"];
    // Unindexed and matching nothing: examined, never returned. The
    // second such search asks for a scan column of gecos; the searches
    // after it read the column's rows, each of which counts as examined
    // as the record it stands for would.
    for search in 0..4 {
        let (rc, out) = tool(
            &server,
            "ldapsearch",
            &as_reader,
            &["-b", "dc=example,dc=com", "(gecos=nobody)", "dn"],
            None,
        );
        assert_eq!(rc, 11, "adminLimitExceeded, search {search}: {out}");
        assert!(out.contains("the search examined 1000 entries"), "{out}");
        if search == 1 {
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    // An indexed search examines only its candidates.
    let (rc, out) = tool(
        &server,
        "ldapsearch",
        &as_reader,
        &["-b", "dc=example,dc=com", "(uid=user7)", "dn"],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("dn: uid=user7,"), "{out}");
    // The administrator is not bound by it.
    let (rc, out) = admin_tool(
        &server,
        "ldapsearch",
        &["-b", "dc=example,dc=com", "(gecos=nobody)", "dn"],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    // A filter of 101 filters (an OR of 100) is over max_filter_items.
    let (rc, out) = tool(
        &server,
        "ldapsearch",
        &as_reader,
        &["-b", "dc=example,dc=com", &costly_filter(100), "dn"],
        None,
    );
    assert_eq!(rc, 11, "adminLimitExceeded: {out}");
    assert!(out.contains("made of 101 filters"), "{out}");
    // Within it (and indexed, so within the lookthrough limit too).
    let mut indexed = String::from("(|");
    for i in 0..99 {
        indexed.push_str(&format!("(uid=user{i})"));
    }
    indexed.push(')');
    let (rc, out) = tool(
        &server,
        "ldapsearch",
        &as_reader,
        &["-b", "dc=example,dc=com", &indexed, "dn"],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    assert_eq!(out.matches("dn: uid=user").count(), 99, "{out}");
}

/// Reads until the server closes; the result code of a Notice of
/// Disconnection if one came, and how long it took.
fn until_closed(client: &mut Client) -> (Option<meridian_proto::ResultCode>, Duration, String) {
    let started = Instant::now();
    let mut notice = None;
    let mut message = String::new();
    while let Some(pdu) = client.read_pdu() {
        let msg =
            meridian_proto::LdapMessage::decode(&pdu, &meridian_proto::DecodeLimits::default())
                .unwrap();
        if let meridian_proto::ProtocolOp::ExtendedResponse(r) = msg.op
            && msg.message_id == 0
        {
            notice = Some(r.result.code);
            message = String::from_utf8_lossy(r.result.message).into_owned();
        }
    }
    (notice, started.elapsed(), message)
}

/// A connection to `to` from the loopback address `from`.
fn connect_from(from: &str, to: std::net::SocketAddr) -> std::net::TcpStream {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let local: std::net::SocketAddr = format!("{from}:0").parse().unwrap();
    socket.bind(&local.into()).unwrap();
    socket.connect(&to.into()).unwrap();
    socket.into()
}

/// The header of an LDAPMessage announcing `len` bytes of content.
fn pdu_header(len: usize) -> Vec<u8> {
    let mut header = vec![0x30, 0x84];
    header.extend_from_slice(&u32::try_from(len).unwrap().to_be_bytes());
    header
}

/// Issue 44, severe 5: a search or compare based at a missing DN of
/// 16,000 RDNs (a 64 KB anonymous request) cost 10 s, the time growing
/// with the square of the depth. A DN deeper than
/// `directory.max_dn_rdns` is invalidDNSyntax, as slapd refuses one.
#[test]
fn a_base_dn_of_thousands_of_rdns_is_refused_not_walked() {
    let server = Server::start("");
    let (rc, out) = admin_tool(&server, "ldapadd", &[], Some(BASE));
    assert_eq!(rc, 0, "{out}");
    let deep = |rdns: usize| {
        let mut dn = String::new();
        for n in 0..rdns {
            dn.push_str(&format!("l={},", n % 10));
        }
        dn.push_str("dc=example,dc=com");
        dn
    };
    // Within the bound: a missing entry, as before.
    let (rc, out) = admin_tool(
        &server,
        "ldapsearch",
        &["-s", "base", "-b", &deep(100)],
        None,
    );
    assert_eq!(rc, 32, "{out}");
    let base = deep(16_000);
    for _ in 0..4 {
        let (rc, out) = tool(
            &server,
            "ldapsearch",
            &[],
            &["-s", "base", "-b", &base],
            None,
        );
        assert_eq!(rc, 34, "{out}");
        assert!(
            out.contains("at most 128 RDNs (directory.max_dn_rdns)"),
            "{out}"
        );
        let (rc, out) = tool(&server, "ldapcompare", &[], &[&base, "ou:x"], None);
        assert_eq!(rc, 34, "{out}");
    }
    answers_promptly(&server, Duration::from_secs(2));
}

/// Issue 44, severe 3: anonymous, who may read nothing under the default
/// rules, was refused a search based at the suffix at once, but one
/// based at the root walked every context and evaluated its filter on
/// every entry (an OR of 4,000 substrings: 15.8 s of CPU for nothing).
/// A context whose top the caller may not search is now skipped, as it
/// is refused when the search is based there: the lookthrough limit,
/// which counts every entry examined, is never reached.
#[test]
fn a_search_of_the_whole_tree_skips_the_contexts_the_caller_may_not_search() {
    let server = server_with_accounts(300, "[directory]\nlookthrough_limit = 100\n");
    let search_all = |bind: &[&str]| {
        tool(
            &server,
            "ldapsearch",
            bind,
            &["-b", "", "-s", "sub", &costly_filter(50), "dn"],
            None,
        )
    };
    let (rc, out) = search_all(&[]);
    assert_eq!(rc, 0, "anonymous walks nothing: {out}");
    assert!(!out.contains("dn: uid="), "{out}");
    // A user the rules let search does walk it (and meets the limit).
    let as_reader = ["-D", "uid=reader,dc=example,dc=com", "-w", "reader-pw"];
    let (rc, out) = search_all(&as_reader);
    assert_eq!(rc, 11, "adminLimitExceeded: {out}");
    answers_promptly(&server, Duration::from_secs(2));
}

#[test]
fn big_pdus_before_a_bind_are_refused_at_once_and_cost_no_memory() {
    let server = Server::start("");
    let rss_before = server.rss_kib();
    // 300 connections each announcing a 4 MB request (the post-bind
    // maximum) and sending the first 64 KiB of it.
    let mut clients: Vec<Client> = (0..300)
        .map(|_| {
            let mut client = Client::connect(server.addr);
            client.send(&pdu_header(4 << 20));
            let _ = std::io::Write::write_all(&mut client.stream, &vec![0x04; 64 * 1024]);
            client
        })
        .collect();
    for client in &mut clients {
        let (notice, _, message) = until_closed(client);
        assert_eq!(
            notice,
            Some(meridian_proto::ResultCode::PROTOCOL_ERROR),
            "{message}"
        );
        assert!(message.contains("max_pdu_bytes_anonymous"), "{message}");
    }
    let grew = server.rss_kib().saturating_sub(rss_before);
    assert!(grew < 64 * 1024, "RSS grew by {grew} KiB");
    answers_promptly(&server, Duration::from_secs(1));
    // After a bind the configured maximum applies: a 300 KB add is fine.
    let mut admin = Client::admin(server.addr);
    let big = "x".repeat(300 * 1024);
    let ldif: [(&[u8], [&[u8]; 1]); 3] = [
        (b"objectClass", [b"organization"]),
        (b"o", [b"example"]),
        (b"description", [big.as_bytes()]),
    ];
    let mut bytes = Vec::new();
    meridian_proto::message::encode_add(
        &mut bytes,
        2,
        b"o=example,dc=example,dc=com",
        ldif.iter().map(|(t, v)| (*t, v.iter().copied())),
    );
    admin.send(&bytes);
    admin.read_until(|m| matches!(m.op, meridian_proto::ProtocolOp::AddResponse(_)));
}

/// Issue 44, medium 12: each PDU is bounded by its size limit, but many
/// clients each sending most of one and stalling held the sum (300 KB a
/// connection at the anonymous limit, 3 GB at the connection limit).
/// Unfinished requests are now bounded over all connections
/// (`server.max_partial_pdu_bytes`): past it, a connection holding more
/// than 64 KiB of one is closed with busy.
#[test]
fn unfinished_requests_are_bounded_over_all_connections() {
    use std::io::{Read, Write};
    let server = Server::start("[server]\nmax_partial_pdu_bytes = 1048576\n");
    // Twenty clients, each 100 KiB into a request of 200 KiB: ten fit.
    let mut streams: Vec<std::net::TcpStream> = (0..20)
        .map(|_| {
            let mut stream = std::net::TcpStream::connect(server.addr).unwrap();
            stream.write_all(&pdu_header(200 * 1024)).unwrap();
            let _ = stream.write_all(&vec![0x04; 100 * 1024]);
            stream
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1000));
    let (mut open, mut busy) = (0, 0);
    for stream in &mut streams {
        stream
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut bytes = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            match stream.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => bytes.extend_from_slice(&chunk[..n]),
                Err(_) => break,
            }
        }
        if bytes.is_empty() {
            open += 1;
            continue;
        }
        let message =
            meridian_proto::LdapMessage::decode(&bytes, &meridian_proto::DecodeLimits::default())
                .unwrap();
        match message.op {
            meridian_proto::ProtocolOp::ExtendedResponse(r) => {
                assert_eq!(r.result.code, meridian_proto::ResultCode::BUSY);
                let text = String::from_utf8_lossy(r.result.message);
                assert!(text.contains("server.max_partial_pdu_bytes"), "{text}");
                busy += 1;
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(open >= 8 && busy >= 8, "{open} open, {busy} closed busy");
    answers_promptly(&server, Duration::from_secs(2));
}

#[test]
fn idle_connections_cost_little_and_one_address_cannot_take_them_all() {
    let server = Server::start("[server]\nmax_connections_per_ip = 600\n");
    let rss_before = server.rss_kib();
    // From 127.0.0.2: the per-address limit leaves 127.0.0.1 free for
    // the well-formed reads below.
    let idle: Vec<std::net::TcpStream> = (0..600)
        .map(|_| connect_from("127.0.0.2", server.addr))
        .collect();
    // Let the server accept them all and park their readers.
    std::thread::sleep(Duration::from_millis(500));
    answers_promptly(&server, Duration::from_secs(2));
    let grew = server.rss_kib().saturating_sub(rss_before);
    // Each used to hold a 64 KiB input buffer: 38 MB for 600.
    assert!(grew < 12 * 1024, "600 idle connections took {grew} KiB");
    // The 601st from this address is told why and closed.
    let mut extra = Client::from_stream(connect_from("127.0.0.2", server.addr));
    let (notice, _, message) = until_closed(&mut extra);
    assert_eq!(notice, Some(meridian_proto::ResultCode::BUSY), "{message}");
    assert!(message.contains("max_connections_per_ip"), "{message}");
    drop(idle);
    std::thread::sleep(Duration::from_millis(300));
    answers_promptly(&server, Duration::from_secs(2));
}

#[test]
fn silent_and_trickling_clients_are_closed_by_their_time_outs() {
    let server = Server::start(
        "[server]\nidle_timeout_secs = 60\nfirst_request_timeout_secs = 1\npdu_timeout_secs = 2\n",
    );
    // Connects and says nothing.
    let mut silent = Client::connect(server.addr);
    let (notice, took, _) = until_closed(&mut silent);
    assert_eq!(notice, None);
    assert!(took < Duration::from_secs(5), "closed after {took:?}");
    // Sends a bind one byte every 200 ms: each byte resets no clock.
    let mut bind = Vec::new();
    meridian_proto::message::encode_simple_bind(&mut bind, 1, ADMIN_DN.as_bytes(), b"x");
    let mut slow = Client::connect(server.addr);
    let started = Instant::now();
    let mut sent = 0;
    for byte in &bind[..bind.len() - 1] {
        if std::io::Write::write_all(&mut slow.stream, &[*byte]).is_err() {
            break;
        }
        sent += 1;
        std::thread::sleep(Duration::from_millis(200));
        if started.elapsed() > Duration::from_secs(8) {
            break;
        }
    }
    let (_, _, _) = until_closed(&mut slow);
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(6),
        "a trickled PDU kept the connection {took:?}"
    );
    assert!(sent < bind.len() - 1, "the server read the whole trickle");
    // A client that sends its requests in time is not affected.
    answers_promptly(&server, Duration::from_secs(1));
}

#[test]
fn malformed_pdus_are_answered_and_closed_at_once() {
    let server = Server::start("");
    for bytes in [
        &[0x30, 0x03, 0x02, 0x01, 0x01][..],         // no protocolOp
        &[0x30, 0x05, 0x02, 0x01, 0x00, 0x42, 0x00], // messageID 0
        &[0x30, 0x05, 0x02, 0x01, 0x02, 0x61, 0x00], // a response from a client
        &[0x31, 0x00],                               // not a SEQUENCE
    ] {
        let mut client = Client::connect(server.addr);
        let started = Instant::now();
        client.send(bytes);
        let (notice, _, message) = until_closed(&mut client);
        let took = started.elapsed();
        assert_eq!(
            notice,
            Some(meridian_proto::ResultCode::PROTOCOL_ERROR),
            "{bytes:02x?}: {message}"
        );
        // RFC 4511 4.1.1: at once, not after the shutdown grace (10 s).
        assert!(
            took < Duration::from_secs(2),
            "{bytes:02x?}: closed after {took:?}"
        );
    }
    answers_promptly(&server, Duration::from_secs(1));
}

/// Every file below `dir` that is not 0600, and every folder not 0700.
fn too_open(dir: &std::path::Path, found: &mut Vec<String>) {
    use std::os::unix::fs::PermissionsExt as _;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        let mode = meta.permissions().mode() & 0o777;
        let path = entry.path();
        if meta.is_dir() {
            if mode != 0o700 {
                found.push(format!("{} {mode:o}", path.display()));
            }
            too_open(&path, found);
        } else if mode != 0o600 {
            found.push(format!("{} {mode:o}", path.display()));
        }
    }
}

#[test]
fn files_holding_entries_are_readable_by_the_server_alone() {
    use std::os::unix::fs::PermissionsExt as _;
    // Journal mode with tiny checkpoints: segments and base copies.
    let data = temp_dir("private").join("data");
    std::fs::create_dir(&data).unwrap();
    let server = Server::start_with(
        "[storage]\ndurability = \"journal\"\njournal_checkpoint_bytes = 4096\n",
        Some(ADMIN_PASSWORD),
        Some(data.clone()),
    );
    let mut ldif = String::from(BASE);
    // Each checkpoint copies and syncs the database: a few suffice.
    for i in 0..25 {
        ldif.push_str(&format!(
            "dn: uid=u{i},dc=example,dc=com\nobjectClass: account\nobjectClass: simpleSecurityObject\n\
             uid: u{i}\nuserPassword: secret-{i}\n\n"
        ));
    }
    let (rc, out) = admin_tool(&server, "ldapadd", &[], Some(&ldif));
    assert_eq!(rc, 0, "{out}");
    let export = data.parent().unwrap().join("export.ldif");
    let (ok, out) = meridian_at(&data, &["export", "-o", export.to_str().unwrap()]);
    assert!(ok, "{out}");
    assert_eq!(
        std::fs::metadata(&export).unwrap().permissions().mode() & 0o777,
        0o600,
        "the export holds password hashes"
    );
    let bases = std::fs::read_dir(data.join("db/journal"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("base-")
        })
        .count();
    assert!(bases > 0, "no checkpoint was made");
    let mut found = Vec::new();
    too_open(&data, &mut found);
    // The test's own config file is written by the test, not the server.
    found.retain(|f| !f.contains("test-config.toml"));
    assert!(found.is_empty(), "readable by others: {found:?}");
}

#[test]
fn a_client_that_never_reads_cannot_make_the_server_buffer_its_answers() {
    let server = Server::start("");
    // 2,000 pipelined reads of cn=Subschema (the server's own entry,
    // answered at once: about 100 KB each) from a client that reads
    // none of the answers.
    let rss_before = server.rss_kib();
    let mut greedy = Client::connect(server.addr);
    greedy.stream.set_nonblocking(true).unwrap();
    let filter = meridian_proto::filter_str::parse("(objectClass=*)", 8).unwrap();
    let all: [&[u8]; 2] = [b"*", b"+"];
    let mut requests = Vec::new();
    for id in 1..2001 {
        let search = meridian_proto::LdapMessage {
            message_id: id,
            op: meridian_proto::ProtocolOp::SearchRequest(meridian_proto::SearchRequest {
                base: b"cn=Subschema",
                scope: meridian_proto::Scope::Base,
                deref: meridian_proto::DerefAliases::Never,
                size_limit: 0,
                time_limit: 0,
                types_only: false,
                filter: meridian_proto::Filter::from_ber(&filter, meridian_proto::Depth::new(8))
                    .unwrap(),
                attributes: meridian_proto::Seq::from_items(&all),
            }),
            controls: meridian_proto::Seq::from_items(&[]),
        };
        search.encode(&mut requests);
    }
    // Send what the server takes; it stops reading once its buffer is full.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut sent = 0;
    while sent < requests.len() && Instant::now() < deadline {
        match std::io::Write::write(&mut greedy.stream, &requests[sent..]) {
            Ok(n) => sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("{e}"),
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let grew = server.rss_kib().saturating_sub(rss_before);
    // server.max_buffered_bytes is 8 MiB: the answers in our buffers
    // stay within a few times that (with no limit: 280 MB).
    assert!(grew < 48 * 1024, "RSS grew by {grew} KiB");
    answers_promptly(&server, Duration::from_secs(1));
}

#[test]
fn password_guessing_is_slowed_then_locked_out() {
    let server = Server::start(
        "[security]\nbind_delay_after_failures = 1\nbind_max_delay_ms = 300\n\
         bind_lockout_failures = 3\nbind_lockout_failures_per_ip = 8\nbind_lockout_secs = 2\n",
    );
    let mut ldif = String::from(BASE);
    for user in ["victim", "other"] {
        ldif.push_str(&format!(
            "dn: uid={user},dc=example,dc=com\nobjectClass: account\nobjectClass: simpleSecurityObject\n\
             uid: {user}\nuserPassword: {user}-pw\n\n"
        ));
    }
    let (rc, out) = admin_tool(&server, "ldapadd", &[], Some(&ldif));
    assert_eq!(rc, 0, "{out}");
    let victim = "uid=victim,dc=example,dc=com";
    // Wrong twice: the second answer comes late.
    assert_eq!(whoami(&server, victim, "guess-1").0, 49);
    let started = Instant::now();
    assert_eq!(whoami(&server, victim, "guess-2").0, 49);
    assert!(started.elapsed() >= Duration::from_millis(90), "not slowed");
    // The third locks the DN: even the right password fails now.
    assert_eq!(whoami(&server, victim, "guess-3").0, 49);
    assert_eq!(whoami(&server, victim, "victim-pw").0, 49);
    // Others are not affected.
    assert_eq!(
        whoami(&server, "uid=other,dc=example,dc=com", "other-pw").0,
        0
    );
    // The lockout ends.
    std::thread::sleep(Duration::from_millis(2_200));
    assert_eq!(whoami(&server, victim, "victim-pw").0, 0);
    // One address guessing across DNs (unknown ones too) is locked out,
    // for every DN; the administrator's DN is never locked by itself.
    for i in 0..8 {
        assert_eq!(
            whoami(&server, &format!("uid=nobody{i},dc=example,dc=com"), "x").0,
            49
        );
    }
    assert_eq!(
        whoami(&server, "uid=other,dc=example,dc=com", "other-pw").0,
        49
    );
    std::thread::sleep(Duration::from_millis(2_200));
    assert_eq!(
        whoami(&server, "uid=other,dc=example,dc=com", "other-pw").0,
        0
    );
    for _ in 0..4 {
        assert_eq!(whoami(&server, ADMIN_DN, "wrong").0, 49);
    }
    assert_eq!(whoami(&server, ADMIN_DN, ADMIN_PASSWORD).0, 0);
}
