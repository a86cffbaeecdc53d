//! Snapshots: a compacted copy of the store's database, which says by
//! its own replication marker exactly which log entries it holds.
//!
//! Files in `<data_dir>/raft/snapshots/`:
//!
//! ```text
//! current              the current snapshot's meta (a frame as in log_store.rs)
//! snapshot-<T>-<I>.mdb the database copy holding the log through term T, index I
//! building.mdb         a copy being made
//! receiving-<n>.mdb    a copy arriving from the leader
//! ```
//!
//! A new replica (or one too far behind, whose missing entries are
//! purged) receives the leader's current snapshot in chunks and installs
//! it in one store transaction ([`meridian_store::Store::install_copy`]).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::{fs, io};

use meridian_store::Store;
use openraft::RaftSnapshotBuilder;
use serde::{Deserialize, Serialize};

use crate::marker::Marker;
use crate::store_io::store_failed;
use crate::types::Meridian;

type SnapshotMeta = openraft::alias::SnapshotMetaOf<Meridian>;
type Snapshot = openraft::alias::SnapshotOf<Meridian, SnapshotFile>;

/// A snapshot's data as openraft handles it: the file of a database copy.
#[derive(Debug, Clone)]
pub struct SnapshotFile {
    /// Where the copy is.
    pub path: PathBuf,
}

/// What `current` holds.
#[derive(Serialize, Deserialize)]
struct Current {
    meta: SnapshotMeta,
    file: String,
}

/// The snapshot directory.
pub(crate) struct Snapshots {
    dir: PathBuf,
    /// The current snapshot; held while it is replaced.
    current: Mutex<Option<(SnapshotMeta, PathBuf)>>,
}

fn invalid(what: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

impl Snapshots {
    pub(crate) fn open(dir: &Path) -> io::Result<Snapshots> {
        meridian_store::private::create_dir(dir)?;
        let current = match fs::read(dir.join("current")) {
            Ok(bytes) => {
                let current: Current = postcard::from_bytes(&bytes).map_err(|e| {
                    invalid(format!("{}/current does not decode: {e}", dir.display()))
                })?;
                Some((current.meta, dir.join(current.file)))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        // Leftovers of a copy or a transfer cut short.
        for entry in fs::read_dir(dir)? {
            let path = entry?.path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            let keep = current.as_ref().is_some_and(|(_, file)| *file == path);
            if !keep && name != "current" && name.ends_with(".mdb") {
                fs::remove_file(&path)?;
            }
        }
        Ok(Snapshots {
            dir: dir.to_path_buf(),
            current: Mutex::new(current),
        })
    }

    /// Where a transfer's chunks are written.
    pub(crate) fn receiving_path(&self, transfer: u64) -> PathBuf {
        self.dir.join(format!("receiving-{transfer:016x}.mdb"))
    }

    pub(crate) fn current(&self) -> io::Result<Option<Snapshot>> {
        Ok(self.lock().as_ref().map(|(meta, path)| Snapshot {
            meta: meta.clone(),
            snapshot: SnapshotFile { path: path.clone() },
        }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(SnapshotMeta, PathBuf)>> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes the copy at `file` the current snapshot with `meta`: moved
    /// into place, `current` replaced durably, the old copy removed.
    fn make_current(&self, meta: &SnapshotMeta, file: &Path) -> io::Result<PathBuf> {
        let name = match &meta.last_log_id {
            Some(id) => format!("snapshot-{}-{}.mdb", id.leader_id.term, id.index),
            None => "snapshot-0-0.mdb".to_owned(),
        };
        let path = self.dir.join(&name);
        let mut current = self.lock();
        if file.parent() == Some(self.dir.as_path()) {
            if file != path {
                fs::rename(file, &path)?;
            }
        } else {
            // Another node's file (an in-process test hands one over):
            // copied, never taken from its owner.
            fs::copy(file, &path)?;
            fs::File::open(&path)?.sync_all()?;
        }
        let bytes = postcard::to_stdvec(&Current {
            meta: meta.clone(),
            file: name,
        })
        .map_err(io::Error::other)?;
        meridian_store::private::replace_file(&self.dir.join("current"), &bytes)?;
        if let Some((_, old)) = current.replace((meta.clone(), path.clone()))
            && old != path
        {
            let _ = fs::remove_file(old);
        }
        Ok(path)
    }

    /// Installs a snapshot received from the leader; the marker it holds.
    pub(crate) async fn install(
        &self,
        store: &Store,
        meta: &SnapshotMeta,
        snapshot: SnapshotFile,
    ) -> io::Result<Marker> {
        tracing::info!(
            last = ?meta.last_log_id,
            file = %snapshot.path.display(),
            "installing a snapshot from the leader"
        );
        let marker = store
            .install_copy(snapshot.path.clone())
            .await
            .map_err(store_failed("installing a snapshot"))?;
        let marker = Marker::decode(marker.as_deref())?;
        if marker.applied != meta.last_log_id {
            return Err(invalid(format!(
                "the snapshot holds log entries through {:?}, its meta says {:?}",
                marker.applied, meta.last_log_id
            )));
        }
        self.make_current(meta, &snapshot.path)?;
        tracing::info!(last = ?meta.last_log_id, "snapshot installed");
        Ok(marker)
    }
}

/// Builds a snapshot: a copy of the store as it is when the build runs.
pub struct SnapshotBuilder {
    store: Store,
    snapshots: std::sync::Arc<Snapshots>,
}

impl SnapshotBuilder {
    pub(crate) fn new(store: Store, snapshots: std::sync::Arc<Snapshots>) -> SnapshotBuilder {
        SnapshotBuilder { store, snapshots }
    }
}

impl RaftSnapshotBuilder<Meridian> for SnapshotBuilder {
    type SnapshotData = SnapshotFile;

    async fn build_snapshot(&mut self) -> Result<Snapshot, io::Error> {
        let store = self.store.clone();
        let snapshots = std::sync::Arc::clone(&self.snapshots);
        tokio::task::spawn_blocking(move || {
            let building = snapshots.dir.join("building.mdb");
            let _ = fs::remove_file(&building);
            let marker = store
                .copy_for_snapshot(&building)
                .map_err(store_failed("copying the database for a snapshot"))?;
            let marker = Marker::decode(marker.as_deref())?;
            let meta = SnapshotMeta {
                last_log_id: marker.applied,
                last_membership: marker.membership,
            };
            let path = snapshots.make_current(&meta, &building)?;
            tracing::info!(last = ?meta.last_log_id, "snapshot built");
            Ok(Snapshot {
                meta,
                snapshot: SnapshotFile { path },
            })
        })
        .await
        .map_err(|e| io::Error::other(format!("the snapshot task failed: {e}")))?
    }
}
