//! The client against the in-process canned-response server: open-loop
//! pacing sends what the rate says (never more; fewer only if the machine
//! stalls for a large part of the run), warm-up operations are not
//! counted, a count stops the run at exactly that many measured
//! operations, and a background operation gets its own rate.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use meridian_bench::canned::{self, CannedStats};
use meridian_bench::run::{self, Options, RunResult};
use meridian_bench::scenario::Scenario;

/// Starts a canned-response server; returns its URL and its counters.
fn canned_server() -> (String, Arc<CannedStats>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let stats = Arc::new(CannedStats::default());
    let counters = Arc::clone(&stats);
    std::thread::spawn(move || {
        canned::serve(&listener, &Arc::new(AtomicBool::new(false)), &counters)
    });
    (format!("ldap://{address}"), stats)
}

fn run_counted(scenario: &str) -> (RunResult, Arc<CannedStats>) {
    let (url, stats) = canned_server();
    let text = format!("[target]\nurl = \"{url}\"\n{scenario}");
    let scenario = Scenario::parse(&text, "test").unwrap();
    (
        run::run(
            &scenario,
            "test",
            Options {
                quiet: true,
                live: None,
            },
        )
        .unwrap(),
        stats,
    )
}

fn run(scenario: &str) -> RunResult {
    run_counted(scenario).0
}

const SEARCH: &str = "[[operation]]\nkind = \"search\"\ndn = \"uid=u{key},dc=x\"\n";

#[test]
fn a_fixed_rate_sends_what_the_rate_says() {
    let result = run(&format!(
        "[load]\nsessions = 4\nrate = 400\nduration_secs = 1\n{SEARCH}"
    ));
    let count = result.total.count;
    // 400 scheduled in the second (one more per session at most, for the
    // phase); a stalled machine sends late, not less, unless it stalls
    // past the end.
    assert!(
        (200..=404).contains(&count),
        "{count} operations at 400/s for 1 s"
    );
    assert_eq!(result.total.errors, 0);
    assert_eq!(result.mode, "rate");
}

#[test]
fn a_count_stops_at_exactly_that_many_measured_operations() {
    let result = run(&format!(
        "[load]\nsessions = 3\ndepth = 50\ncount = 5000\nduration_secs = 0\nwarmup_secs = 0.2\n{SEARCH}"
    ));
    assert_eq!(result.total.count, 5000);
    assert_eq!(
        result.total.entries, 5000,
        "the canned server sends one entry per search"
    );
}

#[test]
fn background_operations_run_at_their_own_rate() {
    let result = run(&format!(
        "[load]\nsessions = 2\ndepth = 10\nduration_secs = 1\n{SEARCH}\
         [[operation]]\nkind = \"modify\"\nrate = 50\ndn = \"uid=u{{key}},dc=x\"\n\
         changes = [{{ type = \"replace\", attribute = \"carLicense\", values = [\"{{unique}}\"] }}]\n"
    ));
    let modifies = result.operations[1].count;
    assert!(
        (25..=51).contains(&modifies),
        "{modifies} background modifies at 50/s for 1 s"
    );
    assert!(
        result.operations[0].count > 10 * modifies,
        "the closed loop runs beside it"
    );
}

#[test]
fn connection_per_operation_opens_a_connection_each_time() {
    let (result, server) = run_counted(&format!(
        "[load]\nsessions = 2\nconnection_per_operation = true\ncount = 40\nduration_secs = 0\n{SEARCH}"
    ));
    assert_eq!(result.total.count, 40);
    assert_eq!(result.total.errors, 0);
    // The probe connection of the run, then one per operation.
    assert_eq!(server.connections.load(Ordering::Relaxed), 1 + 40);
}

#[test]
fn a_request_without_an_answer_times_out_and_is_abandoned() {
    // A server that reads everything and answers nothing.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let received = Arc::new(std::sync::Mutex::new(Vec::new()));
    {
        let received = Arc::clone(&received);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let received = Arc::clone(&received);
                std::thread::spawn(move || {
                    use std::io::Read;
                    let mut stream = stream.unwrap();
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = stream.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        received.lock().unwrap().extend_from_slice(&buf[..n]);
                    }
                });
            }
        });
    }
    let text = format!(
        "[target]\nurl = \"ldap://{address}\"\n[load]\ndepth = 5\nduration_secs = 1\n\
         timeout_secs = 0.2\ndrain_secs = 0.5\n{SEARCH}"
    );
    let scenario = Scenario::parse(&text, "test").unwrap();
    let result = run::run(
        &scenario,
        "test",
        Options {
            quiet: true,
            live: None,
        },
    )
    .unwrap();
    let timeouts = result.total.codes.get("timeout").copied().unwrap_or(0);
    assert!(timeouts >= 10, "{:?}", result.total.codes);
    assert_eq!(result.total.codes.len(), 1, "{:?}", result.total.codes);
    // Give the reader thread a moment for the last bytes.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let bytes = received.lock().unwrap().clone();
    let mut rest = &bytes[..];
    let mut abandons = 0;
    while !rest.is_empty() {
        let (message, used) =
            meridian_proto::LdapMessage::decode_prefix(rest, &Default::default()).unwrap();
        if let meridian_proto::ProtocolOp::AbandonRequest(_) = message.op {
            abandons += 1;
        }
        rest = &rest[used..];
    }
    assert_eq!(
        abandons, timeouts,
        "one AbandonRequest per timed-out request"
    );
}
