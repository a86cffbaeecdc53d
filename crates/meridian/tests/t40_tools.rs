//! `meridian check` and `meridian reindex` on a real store: an index added
//! to the config is reported missing by check, built by reindex, and then
//! check passes.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::process::Command as Process;
use std::sync::Arc;

use meridian_config::StorageConfig;
use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_model::entry::Entry;
use meridian_store::{Command, Store, StoreOptions};
use support::{temp_dir, text};

fn meridian(args: &[&str], dir: &std::path::Path, config: &std::path::Path) -> (bool, String) {
    let out = Process::new(env!("CARGO_BIN_EXE_meridian"))
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .arg("--config")
        .arg(config)
        .output()
        .unwrap();
    (
        out.status.success(),
        format!("{}{}", text(&out.stdout), text(&out.stderr)),
    )
}

/// A data directory whose store holds the suffix and `people` persons
/// (uid=uN, sn S), written with the default indexes.
fn data_with_people(people: usize) -> std::path::PathBuf {
    let dir = temp_dir("tools");
    let schema = Arc::new(Schema::builtin().unwrap());
    {
        let store = Store::open(
            StoreOptions {
                path: dir.join("db"),
                storage: StorageConfig::default(),
                suffixes: vec![Dn::parse(b"dc=example,dc=com", &schema).unwrap()],
                groups: meridian_config::GroupsConfig::default(),
            },
            Arc::clone(&schema),
        )
        .unwrap();
        let add = |dn: &str, attrs: &[(&str, &[&str])]| {
            let e = Entry::from_text(dn, attrs, &schema).unwrap();
            store
                .execute_blocking(Command::Add {
                    entry: e,
                    prechecked: false,
                })
                .unwrap();
        };
        add(
            "dc=example,dc=com",
            &[
                ("objectClass", &["dcObject", "organization"]),
                ("dc", &["example"]),
                ("o", &["x"]),
            ],
        );
        for i in 0..people {
            let uid = format!("u{i}");
            add(
                &format!("uid={uid},dc=example,dc=com"),
                &[
                    ("objectClass", &["person", "uidObject"]),
                    ("uid", &[&uid]),
                    ("cn", &[&uid]),
                    ("sn", &["S"]),
                ],
            );
        }
    }
    dir
}

#[test]
fn check_finds_a_missing_index_and_reindex_builds_it() {
    let dir = data_with_people(5);
    let plain = dir.join("plain.toml");
    std::fs::write(&plain, "").unwrap();
    let (ok, out) = meridian(&["check"], &dir, &plain);
    assert!(ok, "{out}");
    assert!(out.contains("6 entries, indexes consistent"), "{out}");

    let with_sn = dir.join("sn.toml");
    std::fs::write(
        &with_sn,
        "[storage.indexes]\nobjectClass = [\"eq\"]\nuid = [\"eq\", \"sub\"]\ncn = [\"eq\", \"sub\"]\nmail = [\"eq\"]\nentryUUID = [\"eq\"]\nsn = [\"eq\", \"pres\"]\n",
    )
    .unwrap();
    let (ok, out) = meridian(&["check"], &dir, &with_sn);
    assert!(!ok, "{out}");
    assert!(
        out.contains("index key") && out.contains("missing"),
        "{out}"
    );
    let (ok, out) = meridian(&["reindex"], &dir, &with_sn);
    assert!(ok, "{out}");
    assert!(out.contains("indexes rebuilt over 6 entries"), "{out}");
    let (ok, out) = meridian(&["check"], &dir, &with_sn);
    assert!(ok, "{out}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// The config of `check_finds...`: the defaults and `sn` eq and pres.
const WITH_SN: &str = "[storage.indexes]\nobjectClass = [\"eq\"]\nuid = [\"eq\", \"sub\"]\ncn = [\"eq\", \"sub\"]\nmail = [\"eq\"]\nentryUUID = [\"eq\"]\nsn = [\"eq\", \"pres\"]\n";

#[test]
fn the_server_builds_an_added_index_while_it_serves() {
    let dir = data_with_people(700);
    let with_sn = dir.join("sn.toml");
    std::fs::write(&with_sn, WITH_SN).unwrap();
    // The build is a background job: a server stopped before it ends
    // leaves the index unbuilt, and the next start builds it again.
    let mut built = false;
    // Stopped servers are kept: dropping one removes the data directory.
    let mut stopped = Vec::new();
    for _ in 0..20 {
        let mut server =
            support::Server::start_with(WITH_SN, Some(support::ADMIN_PASSWORD), Some(dir.clone()));
        // Answered at once, by a scan or by the index.
        let (code, out) = support::tool(
            &server,
            "ldapsearch",
            &["-D", support::ADMIN_DN, "-w", support::ADMIN_PASSWORD],
            &["-LLL", "-b", "dc=example,dc=com", "(sn=S)", "1.1"],
            None,
        );
        assert_eq!(code, 0, "{out}");
        assert_eq!(out.matches("dn: uid=").count(), 700, "{out}");
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(server.terminate().success());
        stopped.push(server);
        let (ok, out) = meridian(&["check"], &dir, &with_sn);
        if ok {
            built = true;
            break;
        }
        assert!(out.contains("missing"), "{out}");
    }
    assert!(built, "the sn index was never built online");
}

#[test]
fn serve_logs_its_effective_configuration_with_the_data_directory_made_absolute() {
    use std::io::{BufRead, BufReader};
    let cwd = temp_dir("relative-data-dir");
    let mut child = Process::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir", "here"])
        .current_dir(&cwd)
        .env("MERIDIAN_ADMIN_PASSWORD", support::ADMIN_PASSWORD)
        // The configuration's lines are at debug (a start is one line at
        // info).
        .env("RUST_LOG", "info,meridian::config=debug")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let absolute = cwd.join("here").display().to_string();
    let mut seen = Vec::new();
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        let done = line.contains("meridian listening");
        seen.push(line);
        if done {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let log = seen.join("\n");
    assert!(log.contains(&format!("data_dir={absolute}")), "{log}");
    assert!(log.contains(&format!("data_dir = \"{absolute}\"")), "{log}");
    assert!(
        log.contains("[storage]") && log.contains("durability = \"durable\""),
        "{log}"
    );
    assert!(cwd.join("here").is_dir());
    std::fs::remove_dir_all(cwd).unwrap();
}
