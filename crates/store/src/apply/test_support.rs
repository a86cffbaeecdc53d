//! What the tests of applying commands share: stores to apply them to,
//! and failures injected after a command's writes.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use meridian_config::StorageConfig;
use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_model::entry::Entry;

use crate::{Command, Effect, Store, StoreError, StoreOptions};

/// The DNs (as written) whose modify or add fails once all its writes
/// are done, as an engine failure in the middle of a command would.
/// One list for the tests running in parallel: each adds and removes
/// its own DN (see [`failing_after_writing`]), and names DNs no other
/// test writes (`uid=u…-TAG`, one set per caller, `uid=add…`, `uid=mix…`).
static FAIL_AFTER_WRITING: Mutex<Vec<String>> = Mutex::new(Vec::new());

pub(super) fn fail_after_writing(written: &str) -> Result<(), StoreError> {
    let failing = FAIL_AFTER_WRITING
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if failing.iter().any(|dn| dn == written) {
        return Err(StoreError::Engine("injected failure after writing".into()));
    }
    Ok(())
}

/// `result` is the failure [`fail_after_writing`] injected.
pub(super) fn assert_injected(result: &Result<Effect, StoreError>) {
    assert!(
        matches!(result, Err(StoreError::Engine(m)) if m.contains("injected")),
        "{result:?}"
    );
}

/// Makes writes of `dn` fail after writing until the guard is dropped.
pub(super) fn failing_after_writing(dn: String) -> impl Drop {
    struct Injected(String);
    impl Drop for Injected {
        fn drop(&mut self) {
            FAIL_AFTER_WRITING
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .retain(|dn| *dn != self.0);
        }
    }
    FAIL_AFTER_WRITING
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(dn.clone());
    Injected(dn)
}

pub(super) fn entry(schema: &Schema, dn: &str, attrs: &[(&str, &str)]) -> Entry {
    Entry::new(
        Dn::parse(dn.as_bytes(), schema).unwrap(),
        attrs.iter().map(|(n, v)| (n.as_bytes(), [v.as_bytes()])),
        schema,
    )
    .unwrap()
}

pub(super) const SUFFIX: &str = "dc=example,dc=com";

/// A store in a fresh directory named after `tag`, holding the
/// suffix entry.
pub(super) fn open_with_suffix(tag: &str, storage: StorageConfig) -> (Arc<Schema>, PathBuf, Store) {
    let schema = Arc::new(Schema::builtin().unwrap());
    let dir = std::env::temp_dir().join(format!("meridian-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = Store::open(
        StoreOptions {
            path: dir.clone(),
            storage,
            suffixes: vec![Dn::parse(SUFFIX.as_bytes(), &schema).unwrap()],
            groups: meridian_config::GroupsConfig::default(),
        },
        Arc::clone(&schema),
    )
    .unwrap();
    let base = entry(
        &schema,
        SUFFIX,
        &[
            ("objectClass", "organization"),
            ("objectClass", "dcObject"),
            ("dc", "example"),
            ("o", "x"),
        ],
    );
    store
        .execute_blocking(Command::Add {
            entry: base,
            prechecked: false,
        })
        .unwrap();
    (schema, dir, store)
}

/// Submits `commands` at once and waits for them all. While the
/// writer syncs one batch the rest wait and go into the next batches
/// together, which the test needs and this checks.
pub(super) fn run_together(
    store: &Store,
    commands: Vec<Command>,
) -> Vec<Result<Effect, StoreError>> {
    let count = commands.len() as u64;
    let commits_before = store.commits();
    let submitted: Vec<_> = commands
        .into_iter()
        .map(|command| store.submit_blocking(command).unwrap())
        .collect();
    let results = submitted.into_iter().map(|s| s.wait_blocking()).collect();
    assert!(
        store.commits() - commits_before < count,
        "the commands shared batches"
    );
    results
}

/// Runs `f` in a write transaction of `store` with a writer's
/// context, then commits what it left there.
pub(super) fn in_writer_transaction(
    store: &Store,
    f: impl FnOnce(&mut heed::RwTxn<'_>, &super::Context<'_>),
) {
    let inner = &store.inner;
    let attempt = super::Attempt::new(inner, super::DnIds::new(16));
    let ctx = attempt.context(inner);
    let mut txn = inner.env.write_txn().unwrap();
    f(&mut txn, &ctx);
    txn.commit().unwrap();
}
