//! `meridian import`: an offline bulk load.
//!
//! One reader thread per input cuts records ([`input`]); workers (one per
//! CPU) parse and schema-check them and stamp operational attributes
//! ([`parse`]); this thread batches the entries into `AddMany` commands
//! for the store's writer, which applies each batch in one transaction,
//! indexes included. Commits are not fsync'd during the load: the
//! database is marked incomplete first (durably), synced once at the end,
//! and only then marked complete, so a load that stops or crashes is
//! never mistaken for a whole one. A server refuses an incomplete
//! database until a new load (`--replace`) or `meridian repair`.

mod input;
mod online;
mod parse;
mod progress;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, SyncSender, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use meridian_config::Durability;
use meridian_directory::Directory;
use meridian_directory::clock::{Clock, SystemClock};
use meridian_model::entry::Entry;
use meridian_store::keys::dn_key;
use meridian_store::{Command, Effect, Store, StoreError};

use crate::setup::{CommonArgs, Setup};
use input::{Chunk, Origin, Refused};
use parse::{Checker, Parsed};
use progress::Progress;

/// Flags of `meridian import`.
#[derive(Debug, Args)]
pub(crate) struct ImportArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// An input: an LDIF file or a stream of BER-encoded AddRequests (a
    /// file, a FIFO, or `-` for standard input). Repeat to read several
    /// in parallel.
    #[arg(short = 'i', long = "input", required = true, value_name = "PATH")]
    inputs: Vec<PathBuf>,
    /// Skip records that cannot be loaded and list them at the end
    /// (default: stop at the first). The exit status is still non-zero
    /// when any was refused.
    #[arg(long)]
    continue_on_error: bool,
    /// Add to the entries already in the database (default: it must be
    /// empty).
    #[arg(long, conflicts_with = "replace")]
    append: bool,
    /// Discard whatever the database holds (a complete or an incomplete
    /// load) and load anew.
    #[arg(long)]
    replace: bool,
    /// Parsing and checking threads (default: one per CPU).
    #[arg(long)]
    threads: Option<usize>,
    /// Entries per write transaction.
    #[arg(long, default_value_t = 5000)]
    batch: usize,
    /// Largest record (LDIF text or PDU), and largest file a `:<` URL may
    /// name, in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    max_record_bytes: usize,
    /// Send the entries as AddRequests to a running server at
    /// ldap://HOST:PORT or ldaps://HOST:PORT instead of writing a database.
    #[arg(long, value_name = "URL", conflicts_with_all = ["append", "replace"])]
    online: Option<String>,
    /// With --online: bind as this DN first.
    #[arg(short = 'D', long, requires = "online")]
    bind_dn: Option<String>,
    /// With --online: the bind password (or set MERIDIAN_BIND_PASSWORD).
    #[arg(short = 'w', long, requires = "bind_dn")]
    password: Option<String>,
    /// Most entries held in memory waiting for a parent not loaded yet;
    /// past it the load stops (load parents first, or raise it).
    #[arg(long, default_value_t = 1_000_000)]
    max_waiting: usize,
    /// With --online: requests in flight at once.
    #[arg(long, default_value_t = 512, requires = "online")]
    window: usize,
    /// With an ldaps:// URL: the CA certificates (PEM) the server's
    /// certificate must be signed by.
    #[arg(long, value_name = "FILE", requires = "online")]
    tls_ca_file: Option<std::path::PathBuf>,
    /// With an ldaps:// URL: accept any certificate (tests only).
    #[arg(long, requires = "online")]
    tls_insecure: bool,
}

/// Runs the import; an error means the load did not complete.
pub(crate) fn run(args: ImportArgs) -> anyhow::Result<()> {
    let ldif_limits = meridian_ldif::Limits {
        max_record_bytes: args.max_record_bytes,
        allow_file_urls: true,
    };
    if let Some(url) = &args.online {
        let target = online::Target {
            url: url.clone(),
            bind_dn: args.bind_dn.clone(),
            password: args
                .password
                .clone()
                .or_else(|| std::env::var("MERIDIAN_BIND_PASSWORD").ok()),
            window: args.window,
            tls_ca_file: args.tls_ca_file.clone(),
            tls_insecure: args.tls_insecure,
        };
        return online::run(&target, &args.inputs, ldif_limits, args.continue_on_error);
    }
    crate::keep_freed_memory();
    let setup = args.common.load(|config| {
        // The load is synced once at the end (see the module doc).
        config.storage.durability = Durability::Relaxed;
    })?;
    let _data_dir_lock = setup.lock_data_dir()?;
    let (store, held_before) = prepare_database(&setup, args.append, args.replace)?;
    let names: Vec<String> = args
        .inputs
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    store.execute_blocking(Command::SetLoadState(Some(format!(
        "import of {} started at {}",
        names.join(", "),
        meridian_directory::clock::generalized_time(SystemClock.now()).0
    ))))?;
    store.sync()?;

    let directory = Arc::new(
        Directory::new(
            store.clone(),
            setup.admin_dn()?,
            Arc::new(SystemClock),
            setup.directory_limits(),
        )
        .with_server_id(setup.config.directory.server_id),
    );
    let checker = Arc::new(Checker {
        directory,
        suffix: setup.suffix.clone(),
        limits: ldif_limits,
    });
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, std::num::NonZero::get));
    let loaded = load(&store, &checker, &args, threads.max(1));
    store.sync()?;
    let report = loaded.with_context(|| {
        format!(
            "the load stopped; the database in {} is marked incomplete and will not be served",
            setup.store_path().display()
        )
    })?;
    report.print();
    let refused = report.refused.len();
    // An append to entries that were there before keeps them served.
    let appended = args.append && held_before > 0;
    if refused > 0 && !args.continue_on_error && !appended {
        anyhow::bail!(
            "the load stopped; the database in {} is marked incomplete and will not be served: \
             fix the input and import again with --replace, or run `meridian repair` to keep what was loaded",
            setup.store_path().display()
        );
    }
    // Every batch is one transaction, so what was written is whole
    // entries with their parents: a load that ran to its end with
    // refusals, or an append stopped by a refused record (the database
    // was whole before it, and is whole now), leaves a database that may
    // be served. Only a load that did not end (killed, crashed) stays
    // marked incomplete.
    store.execute_blocking(Command::SetLoadState(None))?;
    store.finish_bulk_load()?;
    store.close();
    if refused > 0 {
        let stopped = if args.continue_on_error {
            "every other record was loaded".to_owned()
        } else {
            format!(
                "the append stopped at the first; the {} entries written by then stay, and the database is served as it is",
                report.added
            )
        };
        anyhow::bail!("{refused} record(s) refused (listed above); {stopped}");
    }
    Ok(())
}

/// Opens the store, emptied first with `replace`; refuses a database
/// that holds entries unless told what to do with them. Also returns how
/// many entries it holds (0 after `replace`).
fn prepare_database(setup: &Setup, append: bool, replace: bool) -> anyhow::Result<(Store, u64)> {
    let store = setup.open_store_for_bulk_load()?;
    let (entries, incomplete) = {
        let snapshot = store.snapshot()?;
        (snapshot.len()?, snapshot.incomplete_load()?)
    };
    let path = setup.store_path();
    if replace && (entries > 0 || incomplete.is_some()) {
        store.close();
        for file in ["data.mdb", "lock.mdb"] {
            let file = path.join(file);
            if file.exists() {
                std::fs::remove_file(&file)
                    .with_context(|| format!("removing {}", file.display()))?;
            }
        }
        eprintln!("discarded the {entries} entries in {}", path.display());
        return Ok((setup.open_store_for_bulk_load()?, 0));
    }
    if let Some(what) = incomplete {
        anyhow::bail!(
            "the database in {} holds an incomplete load ({what}): import with --replace to start over, \
             or run `meridian repair` to keep it",
            path.display()
        );
    }
    if entries > 0 && !append {
        anyhow::bail!(
            "the database in {} already holds {entries} entries: use --append to add to them or --replace to discard them",
            path.display()
        );
    }
    Ok((store, entries))
}

/// What the load did.
struct Report {
    added: u64,
    refused: Vec<Refused>,
    progress: Progress,
}

impl Report {
    fn print(&self) {
        for refused in &self.refused {
            eprintln!("refused: {refused}");
        }
        self.progress.finish(self.added, self.refused.len());
    }
}

/// Entries waiting for their parent, by the parent's `dn2id` key.
type Orphans = HashMap<Vec<u8>, Vec<Parsed>>;

fn load(
    store: &Store,
    checker: &Arc<Checker>,
    args: &ImportArgs,
    threads: usize,
) -> anyhow::Result<Report> {
    let (chunk_tx, chunk_rx) = sync_channel::<Chunk>(threads * 4);
    // Room for two batches of parsed entries: the loader waits for the
    // writer's previous batch while the workers go on parsing (with a
    // few chunks of room they stopped, and the writer then waited for
    // them).
    let parsed_room = threads * 4 + (2 * args.batch.max(1)).div_ceil(input::CHUNK);
    let (parsed_tx, parsed_rx) = sync_channel::<Vec<Result<Parsed, Refused>>>(parsed_room);
    let chunk_rx = Mutex::new(chunk_rx);
    let limits = checker.limits;
    let stop = AtomicBool::new(false);

    // Readers are not joined: one may sit in a read of a FIFO whose
    // writer never closes it, and a load that stopped must still end.
    // They finish when their input does, or when the channel is gone.
    for path in &args.inputs {
        let (path, out) = (path.clone(), chunk_tx.clone());
        std::thread::Builder::new()
            .name("import-read".into())
            .spawn(move || input::read_input(&path, limits, &out))?;
    }
    drop(chunk_tx);
    std::thread::scope(|scope| {
        let mut freers = Vec::with_capacity(threads);
        for worker in 0..threads {
            let (rx, tx, flag) = (&chunk_rx, parsed_tx.clone(), &stop);
            let (free_tx, free_rx) = std::sync::mpsc::channel();
            freers.push(free_tx);
            let spawned = std::thread::Builder::new()
                .name("import-parse".into())
                .spawn_scoped(scope, move || {
                    let worker = Worker {
                        index: worker,
                        checker,
                        chunks: rx,
                        out: tx,
                        to_free: &free_rx,
                        stop: flag,
                    };
                    worker.run();
                });
            if let Err(e) = spawned {
                // The workers already started must not wait forever.
                stop.store(true, Ordering::Release);
                return Err(e.into());
            }
        }
        drop(parsed_tx);
        let (loaded_tx, loaded_rx) = std::sync::mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("import-flush".into())
            .spawn_scoped(scope, move || flush_while_loading(store, &loaded_rx))?;
        let result = Loader::new(store, args, freers).run(&parsed_rx);
        drop(loaded_tx);
        // Stopping early: workers see the flag (or the closed channel).
        stop.store(true, Ordering::Release);
        drop(parsed_rx);
        result
    })
}

/// Writes what the load has committed so far to disk now and then, until
/// `loaded` closes. Commits are not synced during a load, and the kernel
/// starts writing dirty pages back only past a share of all memory, so
/// otherwise the whole database waited for the final sync (0.22 s of a
/// 4 s load of 1M entries) instead of going out while the CPUs parse.
/// Errors are left to the final sync, which reports them.
fn flush_while_loading(store: &Store, loaded: &Receiver<()>) {
    while let Err(RecvTimeoutError::Timeout) = loaded.recv_timeout(Duration::from_millis(250)) {
        let _ = store.sync();
    }
}

/// A parsing thread.
struct Worker<'a> {
    index: usize,
    checker: &'a Checker,
    chunks: &'a Mutex<Receiver<Chunk>>,
    /// Owned: dropped when the input is done, so the loader sees the
    /// end of the parsed entries.
    out: SyncSender<Vec<Result<Parsed, Refused>>>,
    /// Written entries this worker built, sent back to be freed here.
    to_free: &'a Receiver<Vec<Entry>>,
    stop: &'a AtomicBool,
}

impl Worker<'_> {
    fn run(self) {
        let mut recent = parse::Recent::default();
        loop {
            // Entries are freed by the thread that allocated them: freed
            // by the loader, mimalloc's cross-thread frees and page
            // reclaiming were a tenth of a load's CPU.
            while let Ok(written) = self.to_free.try_recv() {
                drop(written);
            }
            // Hold the lock only to take a chunk, not while parsing it;
            // wake now and then to notice a stopped load.
            let chunk = self
                .chunks
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .recv_timeout(Duration::from_millis(100));
            let chunk = match chunk {
                Ok(chunk) => chunk,
                Err(RecvTimeoutError::Timeout) if !self.stop.load(Ordering::Acquire) => continue,
                Err(RecvTimeoutError::Disconnected) => {
                    // All read and parsed; the last batches are still
                    // being written. Free them here as they come back,
                    // until the loader is done and drops its end (which
                    // it does once every worker's `out` is gone).
                    drop(self.out);
                    while let Ok(written) = self.to_free.recv() {
                        drop(written);
                    }
                    return;
                }
                Err(RecvTimeoutError::Timeout) => return,
            };
            let results = match chunk {
                Chunk::Records { input, records } => {
                    let mut results = Vec::with_capacity(records.len());
                    results.extend(records.into_iter().filter_map(|raw| {
                        self.checker.check(self.index, &mut recent, &input, raw)
                    }));
                    results
                }
                Chunk::Failed { origin, message } => vec![Err(Refused { origin, message })],
            };
            if self.out.send(results).is_err() {
                return;
            }
        }
    }
}

/// A batch submitted to the writer, not yet booked.
struct InFlight {
    entries: Arc<Vec<Entry>>,
    origins: Vec<Origin>,
    /// The worker that built each entry.
    workers: Vec<usize>,
    result: meridian_store::Submitted,
}

/// Batches entries into `AddMany` commands and keeps the books: what was
/// added, what was refused, which entries wait for a parent.
struct Loader<'a> {
    store: &'a Store,
    batch_size: usize,
    continue_on_error: bool,
    batch: Vec<Parsed>,
    /// The batch the writer is applying.
    in_flight: Option<InFlight>,
    /// The last batch settled (see [`Loader::settle`]).
    written: Option<(Arc<Vec<Entry>>, Vec<usize>)>,
    /// To each worker, the written entries it built, to free.
    freers: Vec<Sender<Vec<Entry>>>,
    orphans: Orphans,
    /// Entries in `orphans`, and the most allowed (`--max-waiting`).
    waiting: usize,
    max_waiting: usize,
    report: Report,
}

impl<'a> Loader<'a> {
    fn new(store: &'a Store, args: &ImportArgs, freers: Vec<Sender<Vec<Entry>>>) -> Loader<'a> {
        Loader {
            store,
            batch_size: args.batch.max(1),
            continue_on_error: args.continue_on_error,
            batch: Self::empty_batch(args.batch.max(1)),
            in_flight: None,
            written: None,
            freers,
            orphans: HashMap::new(),
            waiting: 0,
            max_waiting: args.max_waiting,
            report: Report {
                added: 0,
                refused: Vec::new(),
                progress: Progress::start(),
            },
        }
    }

    /// Room for a batch: it is flushed once a chunk of workers' results
    /// has taken it to `batch_size` or past.
    fn empty_batch(batch_size: usize) -> Vec<Parsed> {
        Vec::with_capacity(batch_size + input::CHUNK)
    }

    /// True once the load must stop (an error without --continue-on-error).
    fn stopped(&self) -> bool {
        !self.continue_on_error && !self.report.refused.is_empty()
    }

    fn run(mut self, parsed: &Receiver<Vec<Result<Parsed, Refused>>>) -> anyhow::Result<Report> {
        while let Ok(results) = parsed.recv() {
            for result in results {
                match result {
                    Ok(entry) => self.batch.push(entry),
                    Err(refused) => {
                        self.report.refused.push(refused);
                        if self.stopped() {
                            // The first error ends the load: later records
                            // (already parsed by other workers) are not
                            // reported.
                            return Ok(self.report);
                        }
                    }
                }
            }
            if self.batch.len() >= self.batch_size {
                self.flush()?;
                if self.stopped() {
                    return Ok(self.report);
                }
            }
            self.report.progress.tick(self.report.added);
        }
        // Settling may free orphans into a new batch.
        loop {
            self.settle_all()?;
            if self.batch.is_empty() || self.stopped() {
                break;
            }
            self.flush()?;
        }
        if !self.stopped() {
            self.refuse_orphans();
        }
        Ok(self.report)
    }

    /// Submits the batch, then settles the one before it while the
    /// writer works on this one.
    fn flush(&mut self) -> anyhow::Result<()> {
        // The next batch gets its full room now: taken empty, it grew
        // by doubling, moving every entry parsed so far each time.
        let batch = std::mem::replace(&mut self.batch, Self::empty_batch(self.batch_size));
        let mut origins = Vec::with_capacity(batch.len());
        let mut entries = Vec::with_capacity(batch.len());
        let mut workers = Vec::with_capacity(batch.len());
        for parsed in batch {
            origins.push(parsed.origin);
            entries.push(parsed.entry);
            workers.push(parsed.worker);
        }
        let entries: Arc<Vec<Entry>> = Arc::new(entries);
        let result = self.store.submit_blocking(Command::AddMany {
            entries: Arc::clone(&entries),
            // The workers ran Directory::prepare_import.
            prechecked: true,
        })?;
        let submitted = InFlight {
            entries,
            origins,
            workers,
            result,
        };
        if let Some(previous) = self.in_flight.replace(submitted) {
            self.settle(previous)?;
        }
        Ok(())
    }

    /// Waits for the batch in flight, if any.
    fn settle_all(&mut self) -> anyhow::Result<()> {
        match self.in_flight.take() {
            Some(last) => self.settle(last),
            None => Ok(()),
        }
    }

    /// Books a written batch: refused entries are reported, entries
    /// refused for want of a parent wait for it, and orphans whose parent
    /// this batch added join the next batch.
    fn settle(&mut self, done: InFlight) -> anyhow::Result<()> {
        let outcome = done.result.wait_blocking()?;
        let Effect::AddedMany { added, failed } = outcome else {
            anyhow::bail!("the store answered {outcome:?} to a bulk add");
        };
        let entries = &done.entries;
        self.report.added += added;
        let mut failed_at = vec![false; entries.len()];
        for (position, error) in failed {
            let (Some(entry), Some(origin)) = (entries.get(position), done.origins.get(position))
            else {
                continue;
            };
            if let Some(flag) = failed_at.get_mut(position) {
                *flag = true;
            }
            match (&error, entry.dn.parent()) {
                // Inside the naming context (the workers checked), so
                // the parent is missing: wait for it.
                (StoreError::NoSuchObject { .. }, Some(parent)) => {
                    if self.waiting >= self.max_waiting {
                        anyhow::bail!(
                            "{origin}: more than {} entries wait for parents not loaded yet \
                             (--max-waiting); load the parents first, or raise the limit",
                            self.max_waiting
                        );
                    }
                    self.waiting += 1;
                    self.orphans
                        .entry(dn_key(&parent))
                        .or_default()
                        .push(Parsed {
                            origin: origin.clone(),
                            entry: entry.clone(),
                            // Cloned here: no worker's allocation.
                            worker: usize::MAX,
                        });
                }
                _ => self.report.refused.push(Refused {
                    origin: origin.clone(),
                    message: format!("{}: {error} ({})", entry.dn.original(), error.code()),
                }),
            }
        }
        if !self.orphans.is_empty() {
            for (entry, failed) in entries.iter().zip(&failed_at) {
                if !failed && let Some(children) = self.orphans.remove(&dn_key(&entry.dn)) {
                    self.waiting -= children.len();
                    self.batch.extend(children);
                }
            }
        }
        // Kept until the next settle: by then the writer has surely let
        // go of it, and its entries go back to the workers that built
        // them (not freed on the writer, which every load waits for).
        if let Some(previous) = self.written.replace((done.entries, done.workers)) {
            self.free(previous);
        }
        Ok(())
    }

    /// Sends written entries back to the workers that built them, to be
    /// freed where they were allocated. Whatever cannot go back (a
    /// worker gone, the writer still holding the batch) is freed here.
    fn free(&self, (entries, workers): (Arc<Vec<Entry>>, Vec<usize>)) {
        let Ok(entries) = Arc::try_unwrap(entries) else {
            return;
        };
        let mut by_worker: Vec<Vec<Entry>> = self.freers.iter().map(|_| Vec::new()).collect();
        for (entry, worker) in entries.into_iter().zip(workers) {
            if let Some(list) = by_worker.get_mut(worker) {
                list.push(entry);
            }
        }
        for (list, freer) in by_worker.into_iter().zip(&self.freers) {
            if !list.is_empty() {
                // A worker that has ended leaves the list to be freed here.
                let _ = freer.send(list);
            }
        }
    }

    /// Entries whose parent never came.
    fn refuse_orphans(&mut self) {
        let mut orphans: Vec<Parsed> = self.orphans.drain().flat_map(|(_, v)| v).collect();
        orphans.sort_by_key(|p| p.origin.to_string());
        for orphan in orphans {
            let parent = orphan
                .entry
                .dn
                .parent()
                .map(|p| p.original().to_owned())
                .unwrap_or_default();
            self.report.refused.push(Refused {
                message: format!(
                    "{}: its parent {parent} is neither in the database nor in the load",
                    orphan.entry.dn.original()
                ),
                origin: orphan.origin,
            });
        }
    }
}
