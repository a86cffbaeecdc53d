//! Meridian's storage layer.
//!
//! One LMDB environment (through `heed`) per store, five databases (see
//! `docs/design/storage.md` for the layout and invariants):
//! `id2entry`, `dn2id`, `children`, `index` and `meta`. All writes go
//! through one writer thread ([`writer`]) that applies every waiting
//! [`Command`] in one transaction and commits once: group commit. A
//! command's reply is sent only after the commit is durable (unless the
//! durability is `relaxed`). Reads take short snapshots from any thread
//! ([`Snapshot`]); no read transaction outlives the call that made it.

mod apply;
mod check;
pub mod codec;
mod columns;
mod command;
mod copy;
pub mod digest;
mod dn_ids;
mod error;
pub mod feed;
pub mod index;
mod integrity;
mod journal;
pub mod keys;
mod lock;
mod map_file;
mod names;
mod online_build;
mod plan;
pub mod private;
mod read;
pub mod replicated;
mod sorted_puts;
mod submissions;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard};

use heed::types::Bytes;
use heed::{Database, Env, EnvFlags, EnvOpenOptions, WithoutTls};
use meridian_config::{Backend, Durability, StorageConfig};
use meridian_model::Schema;
use meridian_model::dn::Dn;
use tokio::sync::{mpsc, oneshot};

use crate::submissions::Submissions;

pub use command::{Command, Effect, Operational, OperationalAttribute};
pub use error::StoreError;
pub use keys::EntryId;
pub use lock::WriterLock;
pub use read::{
    Found, FoundRecord, RawItem, SearchFilter, SearchReport, Snapshot, StoredAttribute,
};

/// The databases of one environment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dbs {
    pub(crate) meta: Database<Bytes, Bytes>,
    pub(crate) id2entry: Database<Bytes, Bytes>,
    pub(crate) dn2id: Database<Bytes, Bytes>,
    pub(crate) children: Database<Bytes, Bytes>,
    pub(crate) index: Database<Bytes, Bytes>,
}

/// A job for the writer: a command and where to send its result.
pub(crate) struct Job {
    pub(crate) command: Command,
    pub(crate) reply: oneshot::Sender<Answer>,
    /// When it was submitted: a cluster's proposer counts its client's
    /// wait (`cluster.write_timeout_ms`) from here, so a write queued
    /// behind a batch that waited does not wait its whole time again.
    pub(crate) submitted: std::time::Instant,
}

impl Job {
    pub(crate) fn new(command: Command, reply: oneshot::Sender<Answer>) -> Job {
        // A time-out's start, never stored nor applied.
        #[allow(clippy::disallowed_methods)]
        let submitted = std::time::Instant::now();
        Job {
            command,
            reply,
            submitted,
        }
    }
}

/// What the writer thread is given: a client's job, or the commands of
/// replicated log entries (`replicated.rs`).
pub(crate) enum Work {
    Client(Job),
    Replicated(ReplicatedJob),
    /// Replace the database with a snapshot's copy (`replicated.rs`).
    Install(replicated::InstallJob),
    /// Grow the map until this many bytes are free past its last page
    /// (`copy.rs`: before a copy pins the pages commits would reuse).
    MakeRoom(u64, std::sync::mpsc::SyncSender<Result<(), StoreError>>),
}

/// Commands of committed log entries, applied in one transaction that
/// records `marker` ([`Store::apply_replicated`]).
pub(crate) struct ReplicatedJob {
    pub(crate) commands: Vec<Command>,
    pub(crate) marker: Vec<u8>,
    pub(crate) reply: oneshot::Sender<Result<replicated::Applied, StoreError>>,
}

/// What a job's submitter receives: the result, and the command itself,
/// to be freed by the thread that waits for it, which is mostly the one
/// that made it. Freed on the journal thread instead, a command's DN and
/// values (allocated on a worker) were cold memory there, and the
/// worker's allocator then took back each block another thread had
/// freed: together a tenth of the server's time under a stream of
/// modifies (perf).
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) result: Result<Effect, StoreError>,
    /// `None` when the command was applied elsewhere and freed there (a
    /// replicated leader applies its own proposals' commands).
    pub(crate) spent: Option<Command>,
}

/// What the writer measures, for the metrics endpoint.
#[derive(Debug)]
pub struct WriterStats {
    /// Commands in each committed write transaction.
    pub batch_commands: meridian_metrics::Histogram,
    /// Each write transaction, from its first command applied to its
    /// commit made durable (the fsyncs included).
    pub transaction_seconds: meridian_metrics::Histogram,
    /// Searches (one level or subtree, counted at their first step in
    /// this store) whose candidates came from an index.
    pub searches_indexed: meridian_metrics::Counter,
    /// Those whose candidates came from scan columns (`columns.rs`).
    pub searches_columns: meridian_metrics::Counter,
    /// Those that walked their scope, entry by entry.
    pub searches_scanned: meridian_metrics::Counter,
}

impl Default for WriterStats {
    fn default() -> Self {
        WriterStats {
            batch_commands: meridian_metrics::Histogram::new(meridian_metrics::SIZES),
            transaction_seconds: meridian_metrics::Histogram::new(meridian_metrics::SECONDS),
            searches_indexed: meridian_metrics::Counter::new(),
            searches_columns: meridian_metrics::Counter::new(),
            searches_scanned: meridian_metrics::Counter::new(),
        }
    }
}

pub(crate) struct Inner {
    pub(crate) env: Env<WithoutTls>,
    pub(crate) dbs: Dbs,
    pub(crate) schema: Arc<Schema>,
    pub(crate) indexes: index::Indexes,
    pub(crate) suffixes: Vec<Dn>,
    /// `[groups]`, resolved (`integrity.rs`).
    pub(crate) integrity: integrity::Integrity,
    pub(crate) max_batch: usize,
    /// Entry IDs of DNs modified before (`apply/modify/dn_ids.rs`): the writer's
    /// alone, taken for each transaction it tries.
    pub(crate) dn_ids: Mutex<apply::DnIds>,
    /// The same for readers (`dn_ids.rs`): base searches and entry reads
    /// by DN.
    pub(crate) read_dn_ids: dn_ids::SharedDnIds,
    /// Scan columns and the writer's touch log (`columns.rs`).
    pub(crate) columns: columns::Columns,
    /// What each commit changed, for followers (`feed.rs`).
    pub(crate) feed: feed::Feed,
    /// Readers hold it shared while their transaction lives; the writer
    /// takes it exclusively to grow the map (LMDB allows a resize only
    /// when this process has no transaction open).
    pub(crate) resize: RwLock<()>,
    /// Set after an I/O failure other than a full disk: writes are refused
    /// from then on, reads go on (as redb does after `PreviousIo`).
    pub(crate) refused: Mutex<Option<String>>,
    /// Writes are being refused for a full disk (logged when this
    /// changes, not per refusal).
    pub(crate) disk_full: std::sync::atomic::AtomicBool,
    /// Commits done, for observability and tests.
    pub(crate) commits: AtomicU64,
    /// Commands per commit and the time of each write transaction.
    pub(crate) stats: WriterStats,
    /// Attribute names by number as of the last commit (`names.rs`);
    /// replaced, never changed in place, when a commit adds names.
    names: RwLock<Arc<names::NameTable>>,
    /// The directory to remove when a memory store closes.
    memory_dir: Option<PathBuf>,
    /// With a writable map: the data file, allocated before the map may
    /// grow into it.
    pub(crate) map_file: Option<map_file::MapFile>,
    /// Held while the store is open for writing (`lock.rs`).
    _writer_lock: Option<lock::WriterLock>,
    /// The writer's queue, for work that threads other than the
    /// writer's ask of it (room in the map before a copy, `copy.rs`).
    /// Weak, so that the writer still stops when the last store goes;
    /// unset until the writer runs, and in a read-only store.
    pub(crate) writer_queue: std::sync::OnceLock<mpsc::WeakSender<Work>>,
}

/// Options of [`Store::open`].
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Where the environment lives (for `mdb`).
    pub path: PathBuf,
    /// Storage settings.
    pub storage: StorageConfig,
    /// Naming contexts: entries that may be added without a parent.
    pub suffixes: Vec<Dn>,
    /// What applying keeps true between entries (`[groups]`): memberOf,
    /// references that follow their entry, unique values.
    pub groups: meridian_config::GroupsConfig,
}

/// A submitted command's result, once committed.
#[derive(Debug)]
pub struct Submitted(oneshot::Receiver<Answer>);

impl Submitted {
    /// Waits for the commit.
    pub async fn wait(self) -> Result<Effect, StoreError> {
        Self::result_of(self.0.await)
    }

    /// [`Submitted::wait`] for threads outside an async runtime.
    pub fn wait_blocking(self) -> Result<Effect, StoreError> {
        Self::result_of(self.0.blocking_recv())
    }

    /// The result; the spent command is freed here, on this thread.
    fn result_of(answer: Result<Answer, oneshot::error::RecvError>) -> Result<Effect, StoreError> {
        let Answer { result, spent } = answer.map_err(|_| StoreError::Closed)?;
        drop(spent);
        result
    }
}

/// What a store is opened for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Reads and writes, as a server does.
    Serve,
    /// Reads only, beside a process that may write ([`Store::open_read_only`]).
    ReadOnly,
    /// An offline bulk load ([`Store::open_for_bulk_load`]).
    BulkLoad,
}

/// A store: cheap to clone, shared by all connections. When the last
/// clone is dropped, the writer finishes the commands already queued and
/// its thread is joined, so the environment is closed when drop returns.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
    // Declared before `writer`: the channels must close before the join.
    /// Where clients' commands go: the writer thread, or in a cluster
    /// the replication layer ([`Store::open_replicated`]).
    sender: Submissions,
    /// The writer thread's queue (the same channel as `sender` unless
    /// replicated).
    writer: mpsc::Sender<Work>,
    // Held only for its Drop, which joins the writer thread.
    _writer: Arc<WriterThread>,
    // Held only for its Drop, which stops the scan column maker.
    _column_maker: Arc<ColumnMaker>,
}

struct WriterThread(Mutex<Option<std::thread::JoinHandle<()>>>);

/// The scan column maker (`columns.rs`), stopped and joined when the
/// last clone of the store is dropped, so that its snapshot is closed
/// before the environment is.
struct ColumnMaker {
    inner: Arc<Inner>,
    handle: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Drop for ColumnMaker {
    fn drop(&mut self) {
        self.inner.columns.stop();
        let handle = self
            .handle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }
}

impl Drop for WriterThread {
    fn drop(&mut self) {
        let handle = self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

fn memory_dir() -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let base = Path::new("/dev/shm");
    let base = if base.is_dir() {
        base.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    base.join(format!(
        "meridian-memory-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Allocates on disk the map LMDB just made for a writable map, before
/// anything is written through it. Where the disk has not that much
/// room, the map starts from the data (always allocated: every page of
/// it was written once) and takes what room there is; on a full disk,
/// writes are refused until it can grow.
fn allocate_map(env: &Env<WithoutTls>, data_file: &Path) -> Result<map_file::MapFile, StoreError> {
    let file = map_file::MapFile::open(data_file)?;
    let size = env.info().map_size as u64;
    if let Err(e) = file.allocate_to(size) {
        // SAFETY: no transaction of this environment is open yet: it was
        // opened just now, and is not yet shared.
        #[allow(unsafe_code)]
        unsafe { env.resize(page_size()) }?;
        let data = env.info().map_size as u64;
        tracing::warn!(
            "cannot allocate {size} bytes for {} ({e}): the map starts from the data's {data}",
            data_file.display()
        );
        match file.grow_from(data) {
            Ok(next) => {
                // SAFETY: as above, no transaction is open yet.
                #[allow(unsafe_code)]
                unsafe { env.resize(usize::try_from(next).unwrap_or(usize::MAX)) }?;
            }
            // Writes ask again as they need room (and the writer logs a
            // full disk once).
            Err(e) if e.errno() == Some(libc::ENOSPC) => {}
            Err(e) => tracing::error!("{e}"),
        }
    }
    Ok(file)
}

/// The system's page size (a map size must be a multiple of it).
fn page_size() -> usize {
    // SAFETY: sysconf reads no memory of ours.
    #[allow(unsafe_code)]
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096)
}

/// Opens the databases of a writable environment, creating those missing.
fn create_databases(env: &Env<WithoutTls>) -> Result<Dbs, StoreError> {
    let mut wtxn = env.write_txn()?;
    let dbs = Dbs {
        meta: env.create_database(&mut wtxn, Some("meta"))?,
        id2entry: env.create_database(&mut wtxn, Some("id2entry"))?,
        dn2id: env.create_database(&mut wtxn, Some("dn2id"))?,
        children: env.create_database(&mut wtxn, Some("children"))?,
        index: env.create_database(&mut wtxn, Some("index"))?,
    };
    wtxn.commit()?;
    Ok(dbs)
}

/// Starts the writer thread on `queue`, with the journal it appends to
/// (or the one deferred until the disk has room).
fn start_writer(
    inner: &Arc<Inner>,
    queue: mpsc::Receiver<Work>,
    journal: Option<journal::Journal>,
    deferred: Option<journal::Deferred>,
) -> Result<std::thread::JoinHandle<()>, StoreError> {
    let thread_inner = Arc::clone(inner);
    std::thread::Builder::new()
        .name("meridian-writer".into())
        .spawn(move || writer::run(&thread_inner, queue, journal, deferred))
        .map_err(|e| StoreError::io("start", "the writer thread", &e))
}

/// Starts the thread that makes scan columns, when they are enabled.
fn start_column_maker(
    inner: &Arc<Inner>,
) -> Result<Option<std::thread::JoinHandle<()>>, StoreError> {
    if !inner.columns.enabled() {
        return Ok(None);
    }
    let (requests, received) = std::sync::mpsc::sync_channel(columns::REQUESTS_QUEUED);
    inner.columns.start(requests);
    let thread_inner = Arc::clone(inner);
    let handle = std::thread::Builder::new()
        .name("meridian-columns".into())
        .spawn(move || columns::run_maker(&thread_inner, &received))
        .map_err(|e| StoreError::io("start", "the scan column thread", &e))?;
    Ok(Some(handle))
}

impl Store {
    /// Opens (creating if needed) a store and starts its writer thread.
    pub fn open(options: StoreOptions, schema: Arc<Schema>) -> Result<Store, StoreError> {
        Store::open_mode(options, schema, Mode::Serve)
    }

    /// Opens a store for an offline bulk load (`meridian import`): as
    /// [`Store::open`], but without a writable map even where commits are
    /// not synced, so LMDB `pwrite`s each page at commit. A load writes
    /// mostly new pages, and the first touch of a new page of a writable
    /// map faults and has the kernel zero it before LMDB fills it
    /// (`filemap_fault`, `zero_user_segments`: 12 % of an import's CPU,
    /// perf): 1,000,000 users loaded in 2.3-2.6 s instead of 2.9-3.4 s
    /// (`docs/BENCHMARKS.md`).
    pub fn open_for_bulk_load(
        options: StoreOptions,
        schema: Arc<Schema>,
    ) -> Result<Store, StoreError> {
        Store::open_mode(options, schema, Mode::BulkLoad)
    }

    /// Opens a store whose writes are ordered by a replicated log: what
    /// clients submit goes to the returned [`replicated::Proposals`], not
    /// to the writer, and only [`Store::apply_replicated`] writes.
    ///
    /// Its commits are not synced: the replicated log is the durability
    /// point, and the database is state derived from it. A process crash
    /// loses nothing (every commit is in the page cache); after a machine
    /// crash the database cannot be trusted, so it is discarded at the
    /// next open and the replication layer rebuilds it from its last
    /// snapshot and the log (`replicated.rs`, the `running` marker).
    pub fn open_replicated(
        mut options: StoreOptions,
        schema: Arc<Schema>,
    ) -> Result<(Store, replicated::Proposals), StoreError> {
        if options.storage.durability == Durability::Journal {
            return Err(StoreError::Config(
                "storage.durability = \"journal\" is not available in a cluster: the replicated log is the journal"
                    .into(),
            ));
        }
        options.storage.durability = Durability::Relaxed;
        let queue_depth = options.storage.queue_depth;
        if options.storage.backend == Backend::Mdb {
            private::create_dir(&options.path)
                .map_err(|e| StoreError::io("create", options.path.display(), &e))?;
            replicated::Running::begin(&options.path)?.mark()?;
        }
        let mut store = Store::open_mode(options, schema, Mode::Serve)?;
        let (sender, receiver) = mpsc::channel(queue_depth);
        store.sender = Submissions::Proposals(sender);
        Ok((store, replicated::Proposals::new(receiver)))
    }

    /// Opens an existing store for reading only, with no writer thread:
    /// for tools (`meridian export`) that may run beside a server using
    /// the same files (LMDB's lock file keeps the two consistent). Every
    /// write answers [`StoreError::Closed`].
    pub fn open_read_only(options: StoreOptions, schema: Arc<Schema>) -> Result<Store, StoreError> {
        Store::open_mode(options, schema, Mode::ReadOnly)
    }

    fn open_mode(
        options: StoreOptions,
        schema: Arc<Schema>,
        mode: Mode,
    ) -> Result<Store, StoreError> {
        let read_only = mode == Mode::ReadOnly;
        let st = &options.storage;
        let indexes = index::Indexes::new(&st.indexes, &schema).map_err(StoreError::Config)?;
        let integrity = integrity::Integrity::new(&options.groups, &schema)?;
        if !read_only {
            integrity.warn_unindexed(&indexes, &schema);
        }
        let (path, memory) = match st.backend {
            Backend::Mdb => (options.path.clone(), None),
            Backend::Memory => {
                let dir = memory_dir();
                (dir.clone(), Some(dir))
            }
        };
        if read_only && !path.join("data.mdb").is_file() {
            return Err(StoreError::Config(format!(
                "no database in {}",
                path.display()
            )));
        }
        private::create_dir(&path).map_err(|e| StoreError::io("create", path.display(), &e))?;
        let writes_files = !read_only && st.backend == Backend::Mdb;
        let journaling = writes_files && st.durability == Durability::Journal;
        // One writer per database, in every durability (`lock.rs`); a
        // reader beside a running server must not touch its journal.
        let writer_lock = if writes_files {
            Some(lock::WriterLock::acquire(&path, "the database")?)
        } else {
            None
        };
        let previous = if writes_files {
            journal::prepare(&path)?
        } else {
            journal::Previous::NoJournal
        };
        let mut flags = EnvFlags::empty();
        if read_only {
            flags |= EnvFlags::READ_ONLY;
        }
        let no_sync = st.durability != Durability::Durable || st.backend == Backend::Memory;
        if no_sync {
            flags |= EnvFlags::NO_SYNC;
        }
        // Where commits are not synced, pages are changed in the map
        // itself (`map_file.rs`); the map is then the file, allocated as
        // it grows, not `map_size_bytes`.
        let data_file = path.join("data.mdb");
        let writable_map =
            !read_only && mode != Mode::BulkLoad && no_sync && map_file::supported(&path);
        let map_size = if writable_map {
            flags |= EnvFlags::WRITE_MAP;
            map_file::initial_size(&data_file)
        } else {
            st.map_size_bytes
        };
        let map_size = usize::try_from(map_size).unwrap_or(usize::MAX);
        let mut open = EnvOpenOptions::new().read_txn_without_tls();
        open.map_size(map_size).max_dbs(8).max_readers(1024);
        // SAFETY: heed requires that the environment is opened once per
        // process and its files are not modified by anything else while
        // it is mapped. Meridian opens each data directory once (the
        // server holds the store for its lifetime) and LMDB's own lock
        // file keeps other processes consistent.
        #[allow(unsafe_code)]
        let env = unsafe {
            open.flags(flags);
            open.open(&path)
        }?;
        let map_file = if writable_map {
            Some(allocate_map(&env, &data_file)?)
        } else {
            None
        };
        let dbs = if read_only {
            open_databases(&env, &path)?
        } else {
            create_databases(&env)?
        };
        if st.durability == Durability::Relaxed
            && st.backend == Backend::Mdb
            && !replicated::Running::is_replicated(&path)
        {
            tracing::warn!(
                "storage.durability = relaxed: commits are not fsync'd; a machine crash can lose acknowledged writes"
            );
        }
        let name_table = {
            let rtxn = env.read_txn()?;
            names::NameTable::load(&rtxn, &dbs, &schema)?
        };
        let inner = Arc::new(Inner {
            env,
            dbs,
            schema,
            indexes,
            suffixes: options.suffixes,
            integrity,
            max_batch: st.max_batch,
            dn_ids: Mutex::new(apply::DnIds::new(st.dn_cache_entries)),
            read_dn_ids: dn_ids::SharedDnIds::new(st.dn_cache_entries),
            // A read-only store does not see the writes of the process
            // that has the database open for writing: no columns.
            columns: columns::Columns::new(if read_only { 0 } else { st.scan_columns_bytes }),
            feed: feed::Feed::new(st.change_feed_batches, st.sync_session_log),
            resize: RwLock::new(()),
            refused: Mutex::new(None),
            disk_full: std::sync::atomic::AtomicBool::new(false),
            commits: AtomicU64::new(0),
            stats: WriterStats::default(),
            names: RwLock::new(Arc::new(name_table)),
            memory_dir: memory,
            map_file,
            _writer_lock: writer_lock,
            writer_queue: std::sync::OnceLock::new(),
        });
        let (journal, deferred) = if read_only {
            settle_index_record(&inner, false)?;
            (None, None)
        } else {
            match recover(&inner, previous, journaling, st.journal_checkpoint_bytes)? {
                None => (None, None),
                Some(Ok(journal)) => (Some(journal), None),
                Some(Err(deferred)) => (None, Some(deferred)),
            }
        };
        let (sender, receiver) = mpsc::channel(st.queue_depth);
        let handle = if read_only {
            // No writer: the closed channel refuses every command.
            drop(receiver);
            None
        } else {
            let _ = inner.writer_queue.set(sender.downgrade());
            Some(start_writer(&inner, receiver, journal, deferred)?)
        };
        let column_maker = start_column_maker(&inner)?;
        Ok(Store {
            _column_maker: Arc::new(ColumnMaker {
                inner: Arc::clone(&inner),
                handle: Mutex::new(column_maker),
            }),
            inner,
            writer: sender.clone(),
            sender: Submissions::Writer(sender),
            _writer: Arc::new(WriterThread(Mutex::new(handle))),
        })
    }

    /// Flushes every commit to disk (fsync), whatever the durability
    /// setting: a bulk load commits `relaxed` and syncs once at the end.
    pub fn sync(&self) -> Result<(), StoreError> {
        let _map = self.inner.hold_map();
        self.inner.env.force_sync()?;
        Ok(())
    }

    /// Ends a bulk load: syncs, then drops the database file's pages from
    /// the kernel's page cache. A load writes long runs of pages at once,
    /// and the kernel caches such writes in large folios (up to 256 KiB
    /// each here); a durable commit later rewrites single 4 KiB pages, and
    /// each `pwrite` into a large folio walks all of the folio's blocks
    /// (`ext4_block_write_begin` was 15 % of the writer's samples under
    /// synchronous modifies, and the same data without those folios in
    /// the cache took about a fifth more modifies a second:
    /// `docs/BENCHMARKS.md`). The
    /// server reads the pages back as it needs them, in the kernel's
    /// readahead-sized folios. Only the sync can fail: the pages are
    /// dropped as advice, and a file system that ignores it costs speed,
    /// not data.
    pub fn finish_bulk_load(&self) -> Result<(), StoreError> {
        self.sync()?;
        let data = self.inner.env.path().join("data.mdb");
        let dropped =
            std::fs::File::open(&data).and_then(|file| map_file::drop_cached_pages(&file));
        if let Err(e) = dropped {
            tracing::warn!(path = %data.display(), error = %e, "could not drop the loaded database's cached pages");
        }
        Ok(())
    }

    /// Executes a command; resolves once it is committed (durably, unless
    /// relaxed).
    pub async fn execute(&self, command: Command) -> Result<Effect, StoreError> {
        self.submit(command).await?.wait().await
    }

    /// Queues a command and returns at once with a handle to its result:
    /// commands submitted one after another reach the writer in that
    /// order (a connection's pipelined writes keep their order).
    pub async fn submit(&self, command: Command) -> Result<Submitted, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.sender.send(Job::new(command, reply)).await?;
        Ok(Submitted(rx))
    }

    /// [`Store::execute`] for threads outside an async runtime.
    pub fn execute_blocking(&self, command: Command) -> Result<Effect, StoreError> {
        self.submit_blocking(command)?.wait_blocking()
    }

    /// [`Store::submit`] for threads outside an async runtime: queues
    /// the command and returns at once, so the caller can prepare the
    /// next one while the writer applies this one.
    pub fn submit_blocking(&self, command: Command) -> Result<Submitted, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.sender.blocking_send(Job::new(command, reply))?;
        Ok(Submitted(rx))
    }

    /// A consistent read snapshot. Keep it short: it pins LMDB pages and
    /// delays map growth.
    pub fn snapshot(&self) -> Result<Snapshot<'_>, StoreError> {
        Snapshot::new(&self.inner)
    }

    /// Benchmark ceiling for a batch of modifies: in one write
    /// transaction on the calling thread, looks up each DN and writes its
    /// record back unchanged (LMDB copies the page all the same), then
    /// commits with the store's durability. Raw LMDB cost of the batch,
    /// without decoding, applying or checking anything. LMDB's writer
    /// lock serialises it with the writer thread.
    #[doc(hidden)]
    pub fn raw_rewrite(&self, dns: &[Dn]) -> Result<(), StoreError> {
        let _no_resize = self
            .inner
            .resize
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let dbs = &self.inner.dbs;
        let mut txn = self.inner.env.write_txn()?;
        let mut record = Vec::new();
        for dn in dns {
            let Some(id) = apply::tree::lookup(&txn, dbs, dn)? else {
                continue;
            };
            let key = keys::id_key(id);
            record.clear();
            record.extend_from_slice(dbs.id2entry.get(&txn, &key)?.unwrap_or_default());
            dbs.id2entry.put(&mut txn, &key, &record)?;
        }
        txn.commit()?;
        Ok(())
    }

    /// The naming contexts this store holds.
    pub fn suffixes(&self) -> &[Dn] {
        &self.inner.suffixes
    }

    /// The schema the store checks entries against.
    pub fn schema(&self) -> &Arc<Schema> {
        &self.inner.schema
    }

    /// Write transactions committed since the store was opened.
    pub fn commits(&self) -> u64 {
        self.inner.commits.load(Ordering::Relaxed)
    }

    /// Follows the commits from now on: what each changed (`feed.rs`).
    /// A receiver that falls `storage.change_feed_batches` behind is
    /// told it lagged.
    pub fn follow(&self) -> tokio::sync::broadcast::Receiver<Arc<feed::Committed>> {
        self.inner.feed.subscribe()
    }

    /// The commits the feed keeps for a follower that has not read them
    /// (`storage.change_feed_batches`).
    pub fn feed_capacity(&self) -> usize {
        self.inner.feed.capacity()
    }

    /// The deletes that a follower which has seen every change up to the
    /// CSN `since` may have missed, or `None` if the session log cannot
    /// tell (`storage.sync_session_log`).
    pub fn deleted_since(&self, since: &[u8]) -> Option<Vec<feed::DeletedEntry>> {
        self.inner.feed.deleted_since(since)
    }

    /// The highest entryCSN per server ID of every change committed:
    /// the first call reads every entry's entryCSN (once per start, and
    /// after a snapshot is installed); later ones are answered from the
    /// feed. Call it after [`Store::follow`] and before the snapshot a
    /// follower reads, so no commit falls between.
    pub fn context_csns(&self) -> Result<feed::ContextCsns, StoreError> {
        if let Some(known) = self.inner.feed.high_water() {
            return Ok(known);
        }
        let mut stored = feed::ContextCsns::new();
        if let Some(csn_type) = self.inner.schema.entry_csn_attr() {
            self.snapshot()?.each_first_value(csn_type, &mut |csn| {
                feed::merge_csn(&mut stored, csn);
            })?;
        }
        Ok(self.inner.feed.seed(&stored))
    }

    /// What the writer measures: commands per commit, the time of each
    /// write transaction, whether writes are refused.
    pub fn stats(&self) -> &WriterStats {
        &self.inner.stats
    }

    /// Waits (up to ten seconds) until every scan column asked for is
    /// made or given up: columns are made on a thread of their own, and
    /// tests want the search after to find them.
    #[doc(hidden)]
    pub fn wait_for_scan_columns(&self) {
        for _ in 0..10_000 {
            if !self.inner.columns.pending() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Memory the scan columns hold (`storage.scan_columns_bytes` bounds it).
    pub fn scan_columns_bytes(&self) -> u64 {
        self.inner.columns.held_bytes()
    }

    /// Whether writes are being refused (after an I/O failure, or while
    /// the disk is full): what a health check asks.
    pub fn refuses_writes(&self) -> bool {
        self.inner.disk_full.load(Ordering::Relaxed)
            || self
                .inner
                .refused
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .is_some()
    }

    /// Bytes on disk: the database file, and its journal's files (with
    /// `durability = "journal"`; 0 otherwise). For the metrics endpoint.
    pub fn disk_bytes(&self) -> (u64, u64) {
        let path = self.inner.env.path();
        let data = std::fs::metadata(path.join("data.mdb")).map_or(0, |m| m.len());
        let journal = std::fs::read_dir(journal::dir_of(path)).map_or(0, |files| {
            files
                .filter_map(|f| f.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        });
        (data, journal)
    }

    /// Bytes of the map in use: up to the last page written.
    pub fn map_used_bytes(&self) -> u64 {
        self.inner.map_use().used
    }

    /// The current map size in bytes.
    pub fn map_size(&self) -> usize {
        let _map = self.inner.hold_map();
        self.inner.env.info().map_size
    }

    /// Drops this handle; if it is the last one, waits for the writer to
    /// finish the queued commands and stop (see the type's doc).
    pub fn close(self) {
        drop(self);
    }
}

/// Replays what the journal holds beyond the database (after a crash),
/// then starts journaling (journal mode; deferred when the disk has no
/// room for it, `Err` inside) or, after a switch to another durability,
/// syncs the database and removes the journal.
fn recover(
    inner: &Arc<Inner>,
    previous: journal::Previous,
    journaling: bool,
    checkpoint_bytes: u64,
) -> Result<Option<Result<journal::Journal, journal::Deferred>>, StoreError> {
    let applied = {
        let rtxn = inner.env.read_txn()?;
        match inner.dbs.meta.get(&rtxn, journal::APPLIED_SEQ)? {
            Some(bytes) => keys::id_from(bytes).ok_or_else(|| {
                StoreError::corrupt("the journal sequence number is not a number")
            })?,
            None => 0,
        }
    };
    let mut replayed = journal::Replayed {
        last: applied,
        covered: None,
    };
    if previous != journal::Previous::NoJournal {
        replayed = journal::replay_pending(
            inner.env.path(),
            applied,
            previous,
            &inner.schema,
            |seq, commands| writer::replay(inner, seq, &commands),
        )?;
        if replayed.last > applied {
            tracing::info!(
                records = replayed.last - applied,
                ?previous,
                "journal replayed"
            );
        }
        if !journaling {
            inner.env.force_sync()?;
            journal::remove(inner.env.path())?;
        }
    }
    let record_changed = settle_index_record(inner, true)?;
    if !journaling {
        return Ok(None);
    }
    // A new base only when a machine crash could not rebuild the
    // database from the files there are: no journal or no base yet, or
    // LMDB holds a batch whose append failed (it is in no journal file),
    // or the index record just written (no journal record holds it).
    let base_needed = replayed.covered.is_none_or(|covered| applied > covered) || record_changed;
    journal::Deferred::start_or_defer(inner, replayed.last, checkpoint_bytes, base_needed).map(Some)
}

/// Learns which configured indexes the database holds
/// ([`index::Indexes::settle`]) and, if `writable`, stores the record
/// when it changed (a new database, an index added to or dropped from
/// the config): true then. Indexes not built are named in the log.
pub(crate) fn settle_index_record(inner: &Inner, writable: bool) -> Result<bool, StoreError> {
    let found = {
        let rtxn = inner.env.read_txn()?;
        inner
            .dbs
            .meta
            .get(&rtxn, index::BUILT_KEY)?
            .map(<[u8]>::to_vec)
    };
    let record = inner.indexes.settle(found.as_deref());
    let unbuilt = inner.indexes.unbuilt_names(&inner.schema);
    if !unbuilt.is_empty() {
        tracing::warn!(
            indexes = %unbuilt.join(", "),
            "configured indexes are not built: searches do not use them until they are (`meridian serve` builds them while it serves, `meridian reindex` offline)"
        );
    }
    if !writable || found.as_deref() == Some(record.as_slice()) {
        return Ok(false);
    }
    let mut wtxn = inner.env.write_txn()?;
    inner.dbs.meta.put(&mut wtxn, index::BUILT_KEY, &record)?;
    wtxn.commit()?;
    Ok(true)
}

/// Opens the five databases of an existing environment without writing.
fn open_databases(env: &Env<WithoutTls>, path: &Path) -> Result<Dbs, StoreError> {
    let rtxn = env.read_txn()?;
    let open = |name: &str| -> Result<Database<Bytes, Bytes>, StoreError> {
        env.open_database(&rtxn, Some(name))?.ok_or_else(|| {
            StoreError::Config(format!(
                "{} is not a Meridian database (no `{name}` table)",
                path.display()
            ))
        })
    };
    let dbs = Dbs {
        meta: open("meta")?,
        id2entry: open("id2entry")?,
        dn2id: open("dn2id")?,
        children: open("children")?,
        index: open("index")?,
    };
    rtxn.commit()?;
    Ok(dbs)
}

/// What [`Inner::map_use`] returns.
pub(crate) struct MapUse {
    /// The map's size in bytes.
    pub(crate) size: u64,
    /// Bytes up to the last page written.
    pub(crate) used: u64,
}

impl Inner {
    /// Keeps the map where it is while the guard lives: anything that
    /// reads through the map (a read transaction, a sync, the environment's
    /// info, all of which read LMDB's meta pages in the map) must hold it,
    /// or a resize on the writer thread (`munmap`, `mmap`) pulls the pages
    /// from under it. A sync during a bulk load did, and crashed.
    pub(crate) fn hold_map(&self) -> RwLockReadGuard<'_, ()> {
        self.resize.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The map's size, and the bytes of it in use (up to the last page
    /// written).
    pub(crate) fn map_use(&self) -> MapUse {
        let _map = self.hold_map();
        let info = self.env.info();
        let pages = u64::try_from(info.last_page_number).unwrap_or(u64::MAX);
        MapUse {
            size: u64::try_from(info.map_size).unwrap_or(u64::MAX),
            used: pages
                .saturating_add(1)
                .saturating_mul(u64::from(self.env.stat().page_size)),
        }
    }

    /// The attribute names as of the last commit.
    pub(crate) fn name_table(&self) -> Arc<names::NameTable> {
        Arc::clone(&self.names.read().unwrap_or_else(PoisonError::into_inner))
    }

    pub(crate) fn publish_names(&self, table: Arc<names::NameTable>) {
        *self.names.write().unwrap_or_else(PoisonError::into_inner) = table;
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(dir) = &self.memory_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
