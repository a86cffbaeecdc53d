//! The metrics endpoint (`--metrics`, `server.metrics_listen`): what the
//! server did shows in `/metrics` in the Prometheus text format, with the
//! access log's operations and result codes; `/healthz` and `/readyz`
//! answer; bad requests get HTTP errors, never a hang.

// The test times out its wait for the count: it reads the clock directly.
#![allow(clippy::disallowed_methods)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use support::*;

/// One HTTP exchange: the status line and the body.
fn http(addr: SocketAddr, request: &[u8]) -> (String, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream.write_all(request).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    let answer = text(&answer);
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    (
        head.lines().next().unwrap_or("").to_owned(),
        body.to_owned(),
    )
}

fn get(addr: SocketAddr, path: &str) -> (String, String) {
    http(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
    )
}

/// The value of the sample `name{labels}` (exactly as written).
fn sample(page: &str, series: &str) -> f64 {
    page.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {series} in:\n{page}"))
        .parse()
        .unwrap()
}

#[test]
fn metrics_show_what_the_server_did() {
    let server = Server::start_with_args("", &["--metrics", "127.0.0.1:0"]);
    let metrics: SocketAddr = server
        .stdout_lines
        .iter()
        .find_map(|l| l.strip_prefix("meridian metrics on http://"))
        .and_then(|l| l.strip_suffix("/metrics"))
        .expect("the metrics address on stdout")
        .parse()
        .unwrap();
    let ldif = "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: x\n\n\
                dn: cn=a,dc=example,dc=com\nobjectClass: device\ncn: a\n";
    let (rc, out) = admin_tool(&server, "ldapadd", &[], Some(ldif));
    assert_eq!(rc, 0, "{out}");
    for _ in 0..3 {
        let (rc, out) = admin_tool(
            &server,
            "ldapsearch",
            &["-LLL", "-b", "dc=example,dc=com", "(objectClass=*)", "1.1"],
            None,
        );
        assert_eq!(rc, 0, "{out}");
    }
    let (rc, out) = admin_tool(
        &server,
        "ldapsearch",
        &[
            "-LLL",
            "-b",
            "dc=example,dc=com",
            "(objectClass=device)",
            "1.1",
        ],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    // An unindexed type: the second search asks for its scan column,
    // made on a thread of its own; a search after that reads it, and
    // finds the entry all the same.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    for searches in 1.. {
        let (rc, out) = admin_tool(
            &server,
            "ldapsearch",
            &["-LLL", "-b", "dc=example,dc=com", "(o=x)", "1.1"],
            None,
        );
        assert_eq!(rc, 0, "{out}");
        assert!(out.contains("dn: dc=example,dc=com"), "{out}");
        let (_, page) = get(metrics, "/metrics");
        let read_columns = "meridian_searches_total{suffix=\"dc=example,dc=com\",plan=\"columns\"}";
        if sample(&page, read_columns) >= 1.0 {
            assert!(searches >= 3, "a column read by search {searches}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no search read a column:\n{page}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let (rc, _) = tool(
        &server,
        "ldapwhoami",
        &["-D", ADMIN_DN, "-w", "wrong"],
        &[],
        None,
    );
    assert_eq!(rc, 49);

    // A response counts as outstanding until its writer has returned
    // from the write, which can be after the client has read it and
    // exited: wait (bounded) for the count to come back to zero, as it
    // must once every connection is gone.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let (status, page) = loop {
        let (status, page) = get(metrics, "/metrics");
        if sample(&page, "meridian_operations_outstanding") == 0.0
            || std::time::Instant::now() > deadline
        {
            break (status, page);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status, "HTTP/1.1 200 OK", "{page}");
    assert!(
        page.contains("# TYPE meridian_operations_total counter"),
        "{page}"
    );
    assert!(sample(&page, "meridian_operations_total{op=\"SRCH\",result=\"0\"}") >= 3.0);
    // Issue 44, medium 11: the process's own figures, as every client
    // library names them, and the build.
    assert!(
        sample(&page, "process_resident_memory_bytes") > 1e6,
        "{page}"
    );
    assert!(sample(&page, "process_open_fds") >= 3.0, "{page}");
    assert!(sample(&page, "process_max_fds") >= sample(&page, "process_open_fds"));
    assert!(sample(&page, "process_cpu_seconds_total") > 0.0, "{page}");
    assert!(
        sample(&page, "process_start_time_seconds") > 1.7e9,
        "{page}"
    );
    assert_eq!(
        sample(
            &page,
            &format!(
                "meridian_build_info{{version=\"{}\"}}",
                env!("CARGO_PKG_VERSION")
            )
        ),
        1.0
    );
    assert!(sample(&page, "meridian_operations_total{op=\"ADD\",result=\"0\"}") >= 2.0);
    assert!(
        sample(
            &page,
            "meridian_operations_total{op=\"BIND\",result=\"49\"}"
        ) >= 1.0
    );
    assert!(sample(&page, "meridian_failed_binds_total") >= 1.0);
    assert!(sample(&page, "meridian_search_entries_total") >= 6.0);
    assert!(
        sample(
            &page,
            "meridian_operation_duration_seconds_count{op=\"SRCH\"}"
        ) >= 3.0
    );
    assert!(
        sample(
            &page,
            "meridian_operation_duration_seconds_bucket{op=\"SRCH\",le=\"+Inf\"}"
        ) >= 3.0
    );
    assert!(sample(&page, "meridian_connections_total") >= 5.0);
    // Every operation answered and its connection gone: nothing left over.
    assert_eq!(sample(&page, "meridian_operations_outstanding"), 0.0);
    assert!(sample(&page, "meridian_received_bytes_total") > 0.0);
    assert!(sample(&page, "meridian_sent_bytes_total") > 0.0);
    let suffix = "{suffix=\"dc=example,dc=com\"}";
    assert!(sample(&page, &format!("meridian_write_transactions_total{suffix}")) >= 1.0);
    assert!(sample(&page, &format!("meridian_entries{suffix}")) >= 2.0);
    assert_eq!(
        sample(&page, &format!("meridian_writes_refused{suffix}")),
        0.0
    );
    assert!(sample(&page, &format!("meridian_database_file_bytes{suffix}")) > 0.0);
    assert!(sample(&page, &format!("meridian_database_map_used_bytes{suffix}")) > 0.0);
    assert_eq!(
        sample(&page, &format!("meridian_journal_bytes{suffix}")),
        0.0
    );
    assert!(
        sample(
            &page,
            "meridian_write_batch_commands_count{suffix=\"dc=example,dc=com\"}"
        ) >= 1.0
    );

    // (objectClass=*) walks the tree; (objectClass=device) uses the
    // objectClass index (searched below, before the page was read).
    assert!(
        sample(
            &page,
            "meridian_searches_total{suffix=\"dc=example,dc=com\",plan=\"scan\"}"
        ) >= 3.0
    );
    assert!(
        sample(
            &page,
            "meridian_searches_total{suffix=\"dc=example,dc=com\",plan=\"index\"}"
        ) >= 1.0
    );
    assert!(
        sample(
            &page,
            "meridian_searches_total{suffix=\"dc=example,dc=com\",plan=\"columns\"}"
        ) >= 1.0
    );
    assert!(sample(&page, &format!("meridian_scan_columns_bytes{suffix}")) > 0.0);
    // The text format: each family announced once, its samples together.
    let mut families: Vec<&str> = page
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    let count = families.len();
    families.dedup();
    assert_eq!(families.len(), count, "a family announced twice:\n{page}");

    assert_eq!(
        get(metrics, "/healthz"),
        ("HTTP/1.1 200 OK".into(), "ok\n".into())
    );
    assert_eq!(get(metrics, "/readyz").0, "HTTP/1.1 200 OK");
    assert_eq!(get(metrics, "/nothing").0, "HTTP/1.1 404 Not Found");
    assert_eq!(
        http(metrics, b"POST /metrics HTTP/1.1\r\n\r\n").0,
        "HTTP/1.1 405 Method Not Allowed"
    );
    // A head that never ends is cut off at its bound, not read forever.
    let mut endless = b"GET /metrics HTTP/1.1\r\n".to_vec();
    endless.extend(std::iter::repeat_n(b'x', 16 * 1024));
    assert_eq!(
        http(metrics, &endless).0,
        "HTTP/1.1 431 Request Header Fields Too Large"
    );
    // And the LDAP side is unaffected.
    let (rc, out) = admin_tool(&server, "ldapwhoami", &[], None);
    assert_eq!(rc, 0, "{out}");
}

/// cn=Monitor: the same figures as entries, in slapd's back-monitor
/// layout and types, for the administrator only.
#[test]
fn cn_monitor_shows_the_figures_to_the_administrator() {
    let server = Server::start("");
    let ldif = "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: x\n";
    let (rc, out) = admin_tool(&server, "ldapadd", &[], Some(ldif));
    assert_eq!(rc, 0, "{out}");
    for _ in 0..3 {
        let (rc, out) = admin_tool(
            &server,
            "ldapsearch",
            &["-LLL", "-b", "dc=example,dc=com", "1.1"],
            None,
        );
        assert_eq!(rc, 0, "{out}");
    }
    let monitor = |args: &[&str]| {
        let mut all = vec!["-LLL", "-o", "ldif-wrap=no"];
        all.extend_from_slice(args);
        admin_tool(&server, "ldapsearch", &all, None)
    };
    // The containers a slapd script reads.
    let (rc, out) = monitor(&["-b", "cn=Monitor", "-s", "one", "(objectClass=*)", "1.1"]);
    assert_eq!(rc, 0, "{out}");
    for container in [
        "Connections",
        "Operations",
        "Statistics",
        "Databases",
        "Time",
    ] {
        assert!(
            out.contains(&format!("dn: cn={container},cn=Monitor")),
            "{out}"
        );
    }
    // Operations: the counters are operational, asked for by name or +.
    let (rc, out) = monitor(&[
        "-b",
        "cn=Search,cn=Operations,cn=Monitor",
        "-s",
        "base",
        "(objectClass=monitorOperation)",
        "monitorOpCompleted",
        "monitorOpInitiated",
    ]);
    assert_eq!(rc, 0, "{out}");
    let completed: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("monitorOpCompleted: "))
        .unwrap_or_else(|| panic!("{out}"))
        .parse()
        .unwrap();
    assert!(completed >= 3, "{out}");
    // Issue 44, medium 11: each client above unbound; an Unbind has no
    // response and was never counted completed.
    let (rc, out) = monitor(&[
        "-b",
        "cn=Unbind,cn=Operations,cn=Monitor",
        "-s",
        "base",
        "monitorOpCompleted",
    ]);
    assert_eq!(rc, 0, "{out}");
    let unbinds: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("monitorOpCompleted: "))
        .unwrap_or_else(|| panic!("{out}"))
        .parse()
        .unwrap();
    assert!(unbinds >= 3, "{out}");
    // cn=Start is when the server started, before this first read of
    // cn=Monitor's times, not the moment of that read.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let (rc, out) = monitor(&["-b", "cn=Time,cn=Monitor", "-s", "one", "monitorTimestamp"]);
    assert_eq!(rc, 0, "{out}");
    let stamp = |cn: &str| -> String {
        let mut lines = out
            .lines()
            .skip_while(|l| !l.starts_with(&format!("dn: cn={cn},")));
        lines
            .find_map(|l| l.strip_prefix("monitorTimestamp: "))
            .unwrap_or_else(|| panic!("no {cn} in {out}"))
            .to_owned()
    };
    // Generalized times of one form order as text.
    assert!(stamp("Start") < stamp("Current"), "{out}");
    // A filter on a counter, over the subtree.
    let (rc, out) = monitor(&["-b", "cn=Monitor", "(monitorCounter>=1)", "monitorCounter"]);
    assert_eq!(rc, 0, "{out}");
    assert!(
        out.contains("dn: cn=Total,cn=Connections,cn=Monitor"),
        "{out}"
    );
    let (rc, out) = monitor(&[
        "-b",
        "cn=Databases,cn=Monitor",
        "-s",
        "one",
        "namingContexts",
    ]);
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("namingContexts: dc=example,dc=com"), "{out}");
    // The root DSE says where it is, as slapd's does.
    let (rc, out) = monitor(&["-b", "", "-s", "base", "monitorContext"]);
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("monitorContext: cn=Monitor"), "{out}");
    // Anyone else finds nothing there.
    let (rc, out) = tool(
        &server,
        "ldapsearch",
        &[],
        &["-LLL", "-b", "cn=Monitor", "-s", "base"],
        None,
    );
    assert_eq!(rc, 32, "{out}");
    let (rc, _) = monitor(&["-b", "cn=Nothing,cn=Monitor", "-s", "base"]);
    assert_eq!(rc, 32);
}

/// An operator opens cn=Monitor to a monitoring account with a rule
/// naming it; a catch-all rule does not open it.
#[test]
fn cn_monitor_opens_to_whom_a_rule_naming_it_grants_read() {
    let server = Server::start(
        "[[access]]\nto = \"*\"\nattrs = [\"userPassword\"]\nby = [ { who = \"anonymous\", grant = \"auth\" } ]\n\
         [[access]]\nto = \"subtree:cn=Monitor\"\n\
         by = [ { who = \"dn:uid=ops,dc=example,dc=com\", grant = \"read\" } ]\n\
         [[access]]\nto = \"*\"\nby = [ { who = \"users\", grant = \"read\" } ]\n",
    );
    let ldif = "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: x\n\n\
                dn: uid=ops,dc=example,dc=com\nobjectClass: account\nobjectClass: simpleSecurityObject\nuid: ops\nuserPassword: ops-pw\n\n\
                dn: uid=other,dc=example,dc=com\nobjectClass: account\nobjectClass: simpleSecurityObject\nuid: other\nuserPassword: other-pw\n";
    let (rc, out) = admin_tool(&server, "ldapadd", &[], Some(ldif));
    assert_eq!(rc, 0, "{out}");
    let read_as = |uid: &str| {
        let dn = format!("uid={uid},dc=example,dc=com");
        let password = format!("{uid}-pw");
        tool(
            &server,
            "ldapsearch",
            &["-D", &dn, "-w", &password],
            &["-LLL", "-b", "cn=Monitor", "-s", "one", "1.1"],
            None,
        )
    };
    let (rc, out) = read_as("ops");
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("dn: cn=Operations,cn=Monitor"), "{out}");
    let (rc, out) = read_as("other");
    assert_eq!(rc, 32, "{out}");
}
