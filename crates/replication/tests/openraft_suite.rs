//! openraft's own storage test suite on our log store and state machine:
//! membership from log and state machine, initial state after restarts,
//! votes, reads, purges, truncations, applies and a snapshot built on
//! one state machine and installed on another.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::PathBuf;
use std::sync::Arc;

use meridian_config::StorageConfig;
use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_replication::types::Meridian;
use meridian_replication::{LogStore, StateMachine, Storage};
use meridian_store::{Store, StoreOptions};
use openraft::StorageError;
use openraft::testing::log::{StoreBuilder, Suite};

/// Removes a test's directory when the suite drops it.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Builder;

impl StoreBuilder<Meridian, LogStore, StateMachine, TempDir> for Builder {
    async fn build(&self) -> Result<(TempDir, LogStore, StateMachine), StorageError<Meridian>> {
        let dir = support::temp_root();
        let schema = Arc::new(Schema::builtin().unwrap());
        let (store, proposals) = Store::open_replicated(
            StoreOptions {
                path: dir.join("db"),
                storage: StorageConfig::default(),
                suffixes: vec![Dn::parse(b"dc=example,dc=com", &schema).unwrap()],
                groups: meridian_config::GroupsConfig::default(),
            },
            schema,
        )
        .unwrap();
        // Nothing proposes in the suite; the queue may close.
        drop(proposals);
        let storage = Storage::open(&dir.join("raft"), store, 1, false).unwrap();
        Ok((TempDir(dir), storage.log, storage.state_machine))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openraft_storage_suite() {
    Suite::test_all(Builder).await.unwrap();
}
