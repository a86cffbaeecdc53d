//! The `meridian` command: serve, the integrity tools (check, reindex,
//! repair), bulk import and export, backup, and the toolkit (gen, bench).

mod backup;
mod bench;
mod cluster;
mod console;
mod export;
mod import;
mod ldap_client;
mod logging;
mod migrate;
mod notify;
mod privileges;
mod serve;
mod setup;
mod tools;
mod verify;
mod verify_against;

use std::process::ExitCode;

/// mimalloc instead of glibc's malloc: an import spent 40 % of its CPU in
/// glibc's allocator (perf), much of it in arena locks taken when one
/// thread frees what another allocated, which is how a pipeline of
/// readers, workers and the store's writer passes entries along.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Makes mimalloc keep the memory it frees instead of handing it back to
/// the system a moment later. A bulk load frees and allocates a batch's
/// worth of entries over and over; handed back, every reuse faulted the
/// pages in again and the kernel zeroed them (`clear_page_erms`: 15,000
/// page faults and about 5 % of the CPU of a 1M-entry import). The
/// server keeps the default: its memory use rises and falls.
pub(crate) fn keep_freed_memory() {
    use std::ffi::{c_int, c_long};
    // `mi_option_purge_delay` in mimalloc's `mi_option_t` (the same in
    // its v2 and v3) and its defaults there (10 and 1,000 ms). The
    // `mimalloc` crate exposes no option setter; an enum that differed
    // would not show a default, and is then left alone (as is a delay
    // the user set through MIMALLOC_PURGE_DELAY).
    const PURGE_DELAY: c_int = 15;
    const DEFAULT_DELAYS_MS: [c_long; 2] = [10, 1000];
    const NEVER: c_long = -1;
    #[allow(unsafe_code)]
    unsafe extern "C" {
        fn mi_option_get(option: c_int) -> c_long;
        fn mi_option_set(option: c_int, value: c_long);
    }
    // SAFETY: both functions are part of the mimalloc library linked as
    // the global allocator, take plain integers, and may be called at
    // any time from any thread.
    #[allow(unsafe_code)]
    unsafe {
        if DEFAULT_DELAYS_MS.contains(&mi_option_get(PURGE_DELAY)) {
            mi_option_set(PURGE_DELAY, NEVER);
        }
    }
}

/// Turns transparent huge pages off for this process (the server's).
/// mimalloc asks for them (`madvise` mode), and then the memory of many
/// small per-connection allocations is counted, and kept, in 2 MiB
/// pieces: 600 idle connections grew the resident set by 44 KiB each,
/// against 4 KiB each without (measured, release build). The server's
/// heap is small and its data lives in LMDB's file mapping, which never
/// used huge pages.
pub(crate) fn no_huge_pages() {
    // SAFETY: prctl with PR_SET_THP_DISABLE takes plain integers and
    // changes only this process's memory policy.
    #[allow(unsafe_code)]
    let refused = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) } != 0;
    if refused {
        tracing::debug!("PR_SET_THP_DISABLE refused; huge pages stay as the system sets them");
    }
}

use clap::{Parser, Subcommand};

/// Meridian: a high-throughput LDAPv3 directory server.
#[derive(Debug, Parser)]
#[command(name = "meridian", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start the LDAP server (defaults: 127.0.0.1:3389, dc=example,dc=com).
    Serve(serve::ServeArgs),
    /// Check a database: every entry has its index keys and every key its entry.
    Check(tools::CheckArgs),
    /// Rebuild every index from the entries (after adding an index to the config).
    Reindex(tools::ReindexArgs),
    /// Load entries from LDIF or BER files and FIFOs, in parallel (server stopped).
    Import(import::ImportArgs),
    /// Write the directory as LDIF (from a stopped or a running server's database).
    Export(export::ExportArgs),
    /// Copy a naming context's database, compacted (beside a running server too).
    Backup(backup::BackupArgs),
    /// Accept what an incomplete load left: check, reindex, mark complete.
    Repair(tools::RepairArgs),
    /// Generate test entries from a template or a seed model, as LDIF or BER.
    Gen(bench::GenArgs),
    /// Measure an LDAP server (any server) with a scenario file.
    Bench(bench::BenchArgs),
    /// Replication: `cluster local` starts a cluster on loopback.
    Cluster(cluster::ClusterArgs),
    /// Compare the replicas of a cluster by digests; name any differing DN.
    Verify(verify::VerifyArgs),
    /// Write a Meridian configuration from OpenLDAP's slapd.conf or slapd.d.
    Migrate(migrate::MigrateArgs),
    /// A web console: load jobs run, watched and compared; a server or cluster watched.
    Console(console::ConsoleArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Check(args) => tools::check(args),
        Command::Reindex(args) => tools::reindex(args),
        Command::Import(args) => import::run(args),
        Command::Export(args) => export::run(args),
        Command::Backup(args) => backup::run(args),
        Command::Repair(args) => tools::repair(args),
        Command::Gen(args) => bench::generate(args),
        Command::Bench(args) => bench::run(args),
        Command::Cluster(args) => cluster::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Migrate(args) => migrate::run(args),
        Command::Console(args) => console::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("meridian: {e:#}");
            ExitCode::FAILURE
        }
    }
}
