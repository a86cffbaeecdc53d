//! The server killed with SIGKILL in the middle of a stream of adds: after
//! a restart every add it acknowledged is there, with `durability =
//! "durable"` and with `"journal"`. In journal mode a second run also
//! plays a machine crash before the restart (the marker of another boot,
//! `data.mdb` overwritten): the server rebuilds the database from its
//! base copy and the journal.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use meridian_testing::slapd;

use std::collections::BTreeSet;
use std::io::Write;

use meridian_proto::{DecodeLimits, LdapMessage, ProtocolOp, ResultCode};
use slapd::encode_add;
use support::*;

const SUFFIX_LDIF: &str = "dn: dc=example,dc=com
objectClass: dcObject
objectClass: organization
dc: example
o: Example
";

/// Message IDs of the adds: `uid=k<n>` has ID `FIRST_ID + n`.
const FIRST_ID: i32 = 10;

fn uid_of(id: i32) -> String {
    format!("k{}", id - FIRST_ID)
}

/// Streams adds on one connection, kills the server once `before_kill`
/// of them are acknowledged, and returns the uids acknowledged (also
/// those whose answers were still in the socket when the server died).
fn stream_adds_and_kill(server: &Server, before_kill: usize) -> BTreeSet<String> {
    let mut client = Client::admin(server.addr);
    let mut sender = client.stream.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        for id in FIRST_ID.. {
            let uid = uid_of(id);
            let mut bytes = Vec::new();
            encode_add(
                &mut bytes,
                id,
                &format!("uid={uid},dc=example,dc=com"),
                &[("objectClass", &["account"]), ("uid", &[&uid])],
            );
            // Fails once the server is gone.
            if sender.write_all(&bytes).is_err() {
                return;
            }
        }
    });
    let mut acknowledged = BTreeSet::new();
    let mut killed = false;
    while let Some(pdu) = client.read_pdu() {
        let message = LdapMessage::decode(&pdu, &DecodeLimits::default()).unwrap();
        match &message.op {
            ProtocolOp::AddResponse(r) => {
                assert_eq!(r.code, ResultCode::SUCCESS, "{message:?}");
                acknowledged.insert(uid_of(message.message_id));
            }
            other => panic!("unexpected {other:?}"),
        }
        if !killed && acknowledged.len() >= before_kill {
            signal(server.pid(), "KILL");
            killed = true;
        }
    }
    assert!(killed, "the server closed the connection by itself");
    writer.join().unwrap();
    acknowledged
}

fn stored_uids(server: &Server) -> BTreeSet<String> {
    let (code, out) = admin_tool(
        server,
        "ldapsearch",
        &[
            "-LLL",
            "-b",
            "dc=example,dc=com",
            "(objectClass=account)",
            "uid",
        ],
        None,
    );
    assert_eq!(code, 0, "{out}");
    out.lines()
        .filter_map(|l| l.strip_prefix("uid: "))
        .map(str::to_owned)
        .collect()
}

fn killed_mid_load(config: &str, machine_crash: bool) {
    let first = Server::start(config);
    let (code, out) = admin_tool(&first, "ldapadd", &[], Some(SUFFIX_LDIF));
    assert_eq!(code, 0, "{out}");
    if config.contains("journal") {
        // One writer per database: a tool that writes is refused while the
        // server runs; `check` only reads, and runs beside it.
        let tool = |name: &str| {
            std::process::Command::new(env!("CARGO_BIN_EXE_meridian"))
                .args([name, "--config"])
                .arg(first.data_dir.join("test-config.toml"))
                .arg("--data-dir")
                .arg(&first.data_dir)
                .output()
                .unwrap()
        };
        let reindex = tool("reindex");
        assert!(!reindex.status.success());
        assert!(
            text(&reindex.stderr).contains("open for writing by process"),
            "{}",
            text(&reindex.stderr)
        );
        let check = tool("check");
        assert!(check.status.success(), "{}", text(&check.stderr));
    }
    let acknowledged = stream_adds_and_kill(&first, 3000);
    let db = first.data_dir.join("db");
    if machine_crash {
        std::fs::write(db.join("journal/running"), "another boot").unwrap();
        let len = std::fs::metadata(db.join("data.mdb")).unwrap().len();
        std::fs::write(db.join("data.mdb"), vec![0x5a; len as usize]).unwrap();
    }
    // `first` stays alive until the end: dropping it removes the data.
    let second = Server::start_with(config, Some(ADMIN_PASSWORD), Some(first.data_dir.clone()));
    let stored = stored_uids(&second);
    let lost: Vec<&String> = acknowledged.difference(&stored).collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged adds lost, first {:?}",
        lost.len(),
        acknowledged.len(),
        lost.first()
    );
    // Adds after the restart land too.
    let (code, out) = admin_tool(
        &second,
        "ldapadd",
        &[],
        Some("dn: uid=after,dc=example,dc=com\nobjectClass: account\nuid: after\n"),
    );
    assert_eq!(code, 0, "{out}");
    drop(second);
    drop(first);
}

#[test]
fn durable_keeps_every_acknowledged_add_through_sigkill() {
    killed_mid_load("", false);
}

#[test]
fn journal_keeps_every_acknowledged_add_through_sigkill() {
    killed_mid_load("[storage]\ndurability = \"journal\"\n", false);
}

#[test]
fn journal_keeps_every_acknowledged_add_through_a_machine_crash() {
    killed_mid_load(
        "[storage]\ndurability = \"journal\"\njournal_checkpoint_bytes = 65536\n",
        true,
    );
}
