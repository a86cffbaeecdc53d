//! Content synchronization (RFC 4533) with Meridian as the provider: a
//! real OpenLDAP consumer (Debian's slapd with a `syncrepl` stanza, in
//! refreshAndPersist and in refreshOnly mode) follows Meridian through
//! adds, modifies, renames, moves, deletes and password changes, a
//! SIGKILL and restart of Meridian, a restart of the consumer, and in a
//! cluster the kill of the leader it follows; after each, both hold the
//! same entries with the same entryUUIDs, entryCSNs, timestamps and
//! password hashes. And the protocol as OpenLDAP's `ldapsearch -E sync`
//! sees it: the delete phase from the session log for a recent cookie,
//! the present phase for one from before a restart.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::disallowed_methods
)]

mod support;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use meridian_testing::slapd::{Extra, Slapd};
use support::cluster::{Cluster, url};
use support::*;

const TOP: &str = "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\n\
dn: ou=People,dc=example,dc=com\nobjectClass: organizationalUnit\nou: People\n\n\
dn: ou=Teams,dc=example,dc=com\nobjectClass: organizationalUnit\nou: Teams\n";

/// What both sides must agree on: the content, and what a copy keeps
/// of the original (its identity, its change number, its history).
const COMPARED: &[&str] = &[
    "*",
    "entryUUID",
    "entryCSN",
    "createTimestamp",
    "modifyTimestamp",
    "creatorsName",
    "modifiersName",
];

/// A slapd consumer of `provider` in `mode` (`refreshAndPersist`, or
/// `refreshOnly` polling every second), its database empty at start. It
/// loads ppolicy for the schema of `pwdChangedTime`, which Meridian
/// writes and the consumer copies.
fn consumer(tag: &str, provider: &str, mode: &str) -> Slapd {
    let interval = if mode == "refreshOnly" {
        " interval=00:00:00:01"
    } else {
        ""
    };
    let database = format!(
        "syncrepl rid=001 provider={provider} type={mode}{interval} retry=\"1 +\" \
         searchbase=\"dc=example,dc=com\" bindmethod=simple binddn=\"{ADMIN_DN}\" \
         credentials={ADMIN_PASSWORD} attrs=\"*,+\"\n"
    );
    Slapd::start_with(
        tag,
        "",
        &Extra {
            global: "moduleload ppolicy\n",
            database: &database,
            ..Extra::default()
        },
    )
}

/// Waits until `slapd` holds what `ours` does; panics with both views
/// if it does not within a minute.
fn converged(ours: &str, slapd: &Slapd, when: &str) {
    let theirs = format!("ldap://127.0.0.1:{}", slapd.port);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let want = entries_view(ours, &OUR_BIND, COMPARED);
        let have = try_view(&theirs);
        if have.as_deref() == Some(want.as_str()) {
            return;
        }
        if Instant::now() > deadline {
            panic!(
                "the consumer did not converge {when}\n--- Meridian:\n{want}\n--- slapd:\n{}",
                have.unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// [`entries_view`] of slapd, `None` while it holds nothing yet.
fn try_view(url: &str) -> Option<String> {
    let mut args = vec!["-LLL", "-o", "ldif-wrap=no", "-b", "dc=example,dc=com"];
    args.extend_from_slice(COMPARED);
    let (code, _) = tool_at(url, "ldapsearch", &SLAPD_BIND, &args, None);
    (code == 0).then(|| entries_view(url, &SLAPD_BIND, COMPARED))
}

/// One round of writes at `url`, named by `round`: adds, modifies, a
/// rename, a move of a subtree, deletes, a password change.
fn writes(url: &str, round: &str) {
    let people = "ou=People,dc=example,dc=com";
    let mut adds = format!(
        "dn: ou={round},ou=Teams,dc=example,dc=com\nchangetype: add\nobjectClass: organizationalUnit\nou: {round}\n\n"
    );
    for i in 0..12 {
        adds.push_str(&format!(
            "dn: uid={round}-{i},{people}\nchangetype: add\nobjectClass: inetOrgPerson\nuid: {round}-{i}\n\
             cn: Person {i}\nsn: {round}\nuserPassword: secret-{i}\n\n"
        ));
    }
    adds.push_str(&format!(
        "dn: cn=lead,ou={round},ou=Teams,dc=example,dc=com\nchangetype: add\nobjectClass: organizationalRole\ncn: lead\n\n"
    ));
    let changes = format!(
        "{adds}\
         dn: uid={round}-1,{people}\nchangetype: modify\nreplace: sn\nsn: changed\n-\nadd: mail\nmail: one@example.com\n\n\
         dn: uid={round}-2,{people}\nchangetype: modify\nadd: description\ndescription: a\ndescription: b\n\n\
         dn: uid={round}-2,{people}\nchangetype: modify\ndelete: description\ndescription: a\n\n\
         dn: uid={round}-3,{people}\nchangetype: modrdn\nnewrdn: uid={round}-3x\ndeleteoldrdn: 1\n\n\
         dn: ou={round},ou=Teams,dc=example,dc=com\nchangetype: modrdn\nnewrdn: ou={round}\ndeleteoldrdn: 0\nnewsuperior: {people}\n\n\
         dn: uid={round}-4,{people}\nchangetype: delete\n\n\
         dn: uid={round}-5,{people}\nchangetype: delete\n\n"
    );
    let (code, out) = tool_at(url, "ldapmodify", &OUR_BIND, &[], Some(&changes));
    assert_eq!(code, 0, "round {round}: {out}");
    let user = format!("uid={round}-6,{people}");
    let (code, out) = tool_at(
        url,
        "ldappasswd",
        &OUR_BIND,
        &["-s", "new-secret", &user],
        None,
    );
    assert_eq!(code, 0, "round {round}: {out}");
}

#[test]
fn slapd_follows_meridian_in_both_modes_through_restarts_of_either() {
    let socket = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut server = Server::start_on("", &socket);
    let ours = server.url();
    let (code, out) = admin_tool(&server, "ldapadd", &[], Some(TOP));
    assert_eq!(code, 0, "{out}");
    writes(&ours, "before");
    let mut persist = consumer("persist", &ours, "refreshAndPersist");
    let polling = consumer("polling", &ours, "refreshOnly");
    converged(
        &ours,
        &persist,
        "after the first refresh (refreshAndPersist)",
    );
    converged(&ours, &polling, "after the first refresh (refreshOnly)");

    writes(&ours, "live");
    converged(&ours, &persist, "after live changes (refreshAndPersist)");
    converged(&ours, &polling, "after live changes (refreshOnly)");

    // Meridian killed and restarted at the same address: the consumers
    // come back with their cookies (the session log is gone with the
    // process: the present phase tells them what went).
    server.restart_on(&socket);
    writes(&ours, "restarted");
    let (code, out) = tool_at(
        &ours,
        "ldapdelete",
        &OUR_BIND,
        &["uid=live-0,ou=People,dc=example,dc=com"],
        None,
    );
    assert_eq!(code, 0, "{out}");
    converged(
        &ours,
        &persist,
        "after Meridian's restart (refreshAndPersist)",
    );
    converged(&ours, &polling, "after Meridian's restart (refreshOnly)");

    // The consumer killed; changes meanwhile; back with its cookie.
    persist.restart();
    writes(&ours, "consumer-down");
    converged(&ours, &persist, "after the consumer's restart");
    converged(&ours, &polling, "at the end (refreshOnly)");
}

/// `ldapsearch -E sync=ro[/cookie]` at `url`: its output.
fn sync_search(url: &str, cookie: Option<&str>) -> String {
    let control = match cookie {
        Some(cookie) => format!("sync=ro/{cookie}"),
        None => "sync=ro".to_owned(),
    };
    let (code, out) = tool_at(
        url,
        "ldapsearch",
        &OUR_BIND,
        &["-E", &control, "-b", "dc=example,dc=com", "1.1"],
        None,
    );
    assert_eq!(code, 0, "{out}");
    out
}

/// The cookie a sync search's SyncDone control carries.
fn cookie_of(output: &str) -> String {
    output
        .lines()
        .find_map(|l| l.strip_prefix("# cookie: "))
        .unwrap_or_else(|| panic!("no cookie in:\n{output}"))
        .to_owned()
}

#[test]
fn a_recent_cookie_gets_the_delete_phase_and_an_old_one_the_present_phase() {
    let socket = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut server = Server::start_on("", &socket);
    let ours = server.url();
    let (code, out) = admin_tool(&server, "ldapadd", &[], Some(TOP));
    assert_eq!(code, 0, "{out}");
    // An entry counts as unchanged for a cookie, and a cookie as covered
    // by the session log, once clear of the margin kept for writes
    // committed out of their CSNs' order.
    let margin = Duration::from_secs(meridian_directory::follow::REORDER_MARGIN_SECS as u64 + 1);
    writes(&ours, "first");
    std::thread::sleep(margin);
    writes(&ours, "second");
    let before_restart = cookie_of(&sync_search(&ours, None));
    server.restart_on(&socket);
    writes(&ours, "third");
    std::thread::sleep(margin);
    writes(&ours, "fourth");
    let recent = cookie_of(&sync_search(&ours, None));
    let uuid = {
        let (code, out) = tool_at(
            &ours,
            "ldapsearch",
            &OUR_BIND,
            &[
                "-LLL",
                "-b",
                "uid=fourth-7,ou=People,dc=example,dc=com",
                "-s",
                "base",
                "entryUUID",
            ],
            None,
        );
        assert_eq!(code, 0, "{out}");
        out.lines()
            .find_map(|l| l.strip_prefix("entryUUID: "))
            .unwrap()
            .to_owned()
    };
    let (code, out) = tool_at(
        &ours,
        "ldapdelete",
        &OUR_BIND,
        &["uid=fourth-7,ou=People,dc=example,dc=com"],
        None,
    );
    assert_eq!(code, 0, "{out}");
    let (code, out) = tool_at(
        &ours,
        "ldapmodify",
        &OUR_BIND,
        &[],
        Some(
            "dn: uid=fourth-8,ou=People,dc=example,dc=com\nchangetype: modify\nreplace: sn\nsn: after\n",
        ),
    );
    assert_eq!(code, 0, "{out}");

    // The delete phase: the changed entry as an add, the deleted one by
    // its UUID, and no unchanged entry at all.
    let delta = sync_search(&ours, Some(&recent));
    assert!(delta.contains("refreshDeletes=1"), "{delta}");
    assert!(delta.contains(&uuid), "the deleted entry's UUID: {delta}");
    assert!(delta.contains("uid=fourth-8,ou=People"), "{delta}");
    assert!(
        !delta.contains("uid=first-0,ou=People"),
        "an unchanged entry: {delta}"
    );
    assert!(!delta.contains("present"), "{delta}");

    // A cookie from before the restart: the log cannot say what went
    // since, so every entry is told, the unchanged as present.
    let full = sync_search(&ours, Some(&before_restart));
    assert!(full.contains("refreshDeletes=0"), "{full}");
    assert!(full.contains("uid=first-0,ou=People"), "{full}");
    assert!(full.contains("present"), "{full}");
    assert!(!full.contains(&uuid), "{full}");

    // A malformed cookie is the client's error.
    let (code, out) = tool_at(
        &ours,
        "ldapsearch",
        &OUR_BIND,
        &["-E", "sync=ro/rid=12345", "-b", "dc=example,dc=com", "1.1"],
        None,
    );
    assert_eq!(code, 2, "protocolError: {out}");
}

#[test]
fn slapd_follows_a_cluster_node_through_the_kill_of_the_leader() {
    let mut cluster = Cluster::start(3, "");
    let leader = cluster.leader(Duration::from_secs(20));
    let at_leader = url(&cluster, leader);
    let (code, out) = tool_at(&at_leader, "ldapadd", &OUR_BIND, &[], Some(TOP));
    assert_eq!(code, 0, "{out}");
    writes(&at_leader, "start");
    // The consumer follows the leader, whose kill it then rides out.
    let persist = consumer("cluster", &at_leader, "refreshAndPersist");
    converged(&at_leader, &persist, "at the first refresh from the leader");
    cluster.kill(leader);
    let next = cluster.leader(Duration::from_secs(30));
    let at_next = url(&cluster, next);
    writes(&at_next, "failover");
    // The old leader back, a follower now, at the same address: the
    // consumer resumes there with a cookie that names CSNs of two nodes.
    cluster.start_node(leader);
    let (code, out) = tool_at(
        &at_next,
        "ldapmodify",
        &OUR_BIND,
        &[],
        Some(
            "dn: uid=start-0,ou=People,dc=example,dc=com\nchangetype: modify\nreplace: sn\nsn: after-failover\n",
        ),
    );
    assert_eq!(code, 0, "{out}");
    let identical = cluster.await_identical(Duration::from_secs(60));
    assert!(!identical.is_empty());
    converged(&at_leader, &persist, "after the leader's kill");
    converged(&at_next, &persist, "against the new leader");
}

/// A persistent search (every change type, with notifications) of the
/// whole tree, as message `id`.
fn persistent_search(client: &mut Client, id: i32) {
    use meridian_proto::sync::{PersistentSearch, change_type, oid};
    use meridian_proto::{Control, DerefAliases, Filter, LdapMessage, ProtocolOp, Scope};
    use meridian_proto::{SearchRequest, Seq};
    let mut value = Vec::new();
    PersistentSearch {
        change_types: change_type::ALL,
        changes_only: true,
        return_ecs: true,
    }
    .encode(&mut value);
    let controls = [Control {
        oid: oid::PERSISTENT_SEARCH,
        critical: true,
        value: Some(&value),
    }];
    let everything: [&[u8]; 1] = [b"*"];
    client.send_message(&LdapMessage {
        message_id: id,
        op: ProtocolOp::SearchRequest(SearchRequest {
            base: b"dc=example,dc=com",
            scope: Scope::Subtree,
            deref: DerefAliases::Never,
            size_limit: 0,
            time_limit: 0,
            types_only: false,
            filter: Filter::Present(b"objectClass"),
            attributes: Seq::from_items(&everything),
        }),
        controls: Seq::from_items(&controls),
    });
}

#[test]
fn a_persistent_search_whose_client_reads_nothing_is_dropped_with_memory_bounded() {
    let server = Server::start("[storage]\nchange_feed_batches = 8\n");
    let (code, out) = admin_tool(&server, "ldapadd", &[], Some(TOP));
    assert_eq!(code, 0, "{out}");
    let mut idle = Client::bound(server.addr, ADMIN_DN, ADMIN_PASSWORD);
    persistent_search(&mut idle, 7);
    // A reader that keeps up, beside it, for the contrast.
    let mut keeping_up = Client::bound(server.addr, ADMIN_DN, ADMIN_PASSWORD);
    persistent_search(&mut keeping_up, 9);
    std::thread::sleep(Duration::from_millis(300));
    let before = server.rss_kib();
    // About 40 MB of changes, one commit each, while `idle` reads nothing.
    let description = "x".repeat(8000);
    let counted = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            // A wait past a minute fails the test instead of hanging it.
            let patience = Some(Duration::from_secs(60));
            keeping_up.stream.set_read_timeout(patience).unwrap();
            let mut seen = 0u64;
            while seen < 5000 {
                let Some(pdu) = keeping_up.read_pdu() else {
                    break;
                };
                let limits = meridian_proto::DecodeLimits::default();
                match meridian_proto::LdapMessage::decode(&pdu, &limits)
                    .unwrap()
                    .op
                {
                    meridian_proto::ProtocolOp::SearchResultEntry(_) => seen += 1,
                    other => panic!("the reading client's search ended: {other:?}"),
                }
            }
            seen
        });
        for batch in 0..10 {
            let ldif: String = (0..500)
                .map(|i| {
                    format!(
                        "dn: cn=n{batch}-{i},ou=People,dc=example,dc=com\nobjectClass: person\ncn: n{batch}-{i}\nsn: S\ndescription: {description}\n\n"
                    )
                })
                .collect();
            let (code, out) = admin_tool(&server, "ldapadd", &[], Some(&ldif));
            assert_eq!(code, 0, "{out}");
        }
        reader.join().unwrap()
    });
    assert!(
        counted >= 5000,
        "the reading client saw {counted} of 5000 adds"
    );
    let after = server.rss_kib();
    // The server kept nothing for the client that does not read beyond
    // its outbound buffer and the feed's eight commits.
    assert!(
        after < before + 96 * 1024,
        "resident memory grew from {before} KiB to {after} KiB"
    );
    // Its search was ended: what it finally reads ends with
    // adminLimitExceeded, after a bounded part of the changes.
    let mut entries = 0;
    let code = loop {
        let pdu = idle.read_pdu().expect("the connection stays open");
        let message =
            meridian_proto::LdapMessage::decode(&pdu, &meridian_proto::DecodeLimits::default())
                .unwrap();
        match message.op {
            meridian_proto::ProtocolOp::SearchResultEntry(_) => entries += 1,
            meridian_proto::ProtocolOp::SearchResultDone(done) => break done.code,
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(code, meridian_proto::ResultCode::ADMIN_LIMIT_EXCEEDED);
    assert!(entries < 5000, "{entries} changes were kept for it");
    assert!(serves(&server));
}

/// `meridian` with `command` (`migrate --follow`, `verify --against`)
/// from the slapd at `provider` to `ours`, the passwords in `dir`.
fn migration(
    command: [&str; 2],
    provider: &str,
    ours: &str,
    dir: &std::path::Path,
) -> std::process::Command {
    let mut meridian = std::process::Command::new(env!("CARGO_BIN_EXE_meridian"));
    meridian
        .args(command)
        .args([provider, "--bind-dn", ADMIN_DN, "--bind-password-file"])
        .arg(dir.join("theirs"))
        .args([
            "--base",
            "dc=example,dc=com",
            "--into",
            ours,
            "--into-password-file",
        ])
        .arg(dir.join("ours"));
    meridian
}

/// A follower process, killed when dropped (a failing test must not
/// leave it running).
struct Follower(std::process::Child);

impl Follower {
    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `meridian migrate --follow` of the slapd at `provider` into `ours`,
/// as a child process writing its log to `dir/follow.log`.
fn follower(provider: &str, ours: &str, dir: &std::path::Path) -> Follower {
    let log = std::fs::File::create(dir.join("follow.log")).unwrap();
    Follower(
        migration(["migrate", "--follow"], provider, ours, dir)
            .arg("--state")
            .arg(dir.join("cookie"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    )
}

/// `meridian verify --against`: its exit code and output.
fn verify_against(provider: &str, ours: &str, dir: &std::path::Path) -> (i32, String) {
    let out = migration(["verify", "--against"], provider, ours, dir)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!("{}{}", text(&out.stdout), text(&out.stderr)),
    )
}

/// Waits until `verify --against` says identical.
fn verified(provider: &str, ours: &str, dir: &std::path::Path, when: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (code, out) = verify_against(provider, ours, dir);
        if code == 0 {
            assert!(out.contains("identical"), "{out}");
            return;
        }
        assert!(
            Instant::now() < deadline,
            "Meridian did not converge with slapd {when}:\n{out}\n--- the follower's log:\n{}",
            std::fs::read_to_string(dir.join("follow.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn meridian_follows_slapd_through_restarts_of_both_and_verify_agrees() {
    let people: String = (0..30)
        .map(|i| {
            format!(
                "dn: uid=old-{i},ou=People,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: old-{i}\n\
                 cn: Old {i}\nsn: O\nuserPassword: {{SSHA}}9ky4rYD6AlrHmrJHhszpFDBWiGQc7kqz\n\n"
            )
        })
        .collect();
    let mut slapd = Slapd::start_with(
        "provider",
        &format!("{TOP}\n{people}"),
        &Extra {
            global: "moduleload syncprov\n",
            database: "index entryUUID,entryCSN eq\noverlay syncprov\nsyncprov-sessionlog 1000\n",
            ..Extra::default()
        },
    );
    let provider = format!("ldap://127.0.0.1:{}", slapd.port);
    let socket = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut server = Server::start_on("", &socket);
    let ours = server.url();
    let dir = temp_dir("follow");
    std::fs::write(dir.join("theirs"), "secret\n").unwrap();
    std::fs::write(dir.join("ours"), format!("{ADMIN_PASSWORD}\n")).unwrap();
    let mut follow = follower(&provider, &ours, &dir);
    verified(&provider, &ours, &dir, "after the first refresh");

    // A write load on slapd while each side is restarted in turn.
    let load = |round: &str| {
        let mut changes = String::new();
        for i in 0..10 {
            changes.push_str(&format!(
                "dn: uid={round}-{i},ou=People,dc=example,dc=com\nchangetype: add\nobjectClass: inetOrgPerson\n\
                 uid: {round}-{i}\ncn: {round} {i}\nsn: N\n\n"
            ));
        }
        changes.push_str(&format!(
            "dn: uid={round}-1,ou=People,dc=example,dc=com\nchangetype: modify\nreplace: sn\nsn: changed\n\n\
             dn: uid={round}-2,ou=People,dc=example,dc=com\nchangetype: modrdn\nnewrdn: uid={round}-2x\ndeleteoldrdn: 1\n\n\
             dn: uid={round}-3,ou=People,dc=example,dc=com\nchangetype: delete\n\n"
        ));
        let (code, out) = tool_at(&provider, "ldapmodify", &SLAPD_BIND, &[], Some(&changes));
        assert_eq!(code, 0, "round {round} at slapd: {out}");
    };
    load("live");
    verified(&provider, &ours, &dir, "after live changes");

    // The follower killed; changes meanwhile; back with its cookie.
    follow.kill();
    load("follower-down");
    let (code, out) = tool_at(
        &provider,
        "ldapdelete",
        &SLAPD_BIND,
        &["uid=old-0,ou=People,dc=example,dc=com"],
        None,
    );
    assert_eq!(code, 0, "{out}");
    follow = follower(&provider, &ours, &dir);
    verified(&provider, &ours, &dir, "after the follower's restart");

    // Meridian killed and restarted under it, while slapd is written.
    std::thread::scope(|s| {
        let writing = s.spawn(|| {
            for round in ["during-1", "during-2", "during-3"] {
                load(round);
            }
        });
        server.restart_on(&socket);
        writing.join().unwrap();
    });
    load("meridian-restarted");
    verified(&provider, &ours, &dir, "after Meridian's restart");

    // slapd killed and restarted under it.
    slapd.restart();
    load("slapd-restarted");
    verified(&provider, &ours, &dir, "after slapd's restart");

    // A difference planted in Meridian is found and named.
    let (code, out) = tool_at(
        &ours,
        "ldapmodify",
        &OUR_BIND,
        &[],
        Some(
            "dn: uid=old-5,ou=People,dc=example,dc=com\nchangetype: modify\nreplace: cn\ncn: planted\n",
        ),
    );
    assert_eq!(code, 0, "{out}");
    follow.kill();
    let (code, out) = verify_against(&provider, &ours, &dir);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("differs: uid=old-5,ou=People,dc=example,dc=com: cn (values)"),
        "{out}"
    );
    assert!(out.contains("1 entries differ"), "{out}");
}
