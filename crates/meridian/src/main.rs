//! The `meridian` command: serve, the integrity tools (check, reindex,
//! repair), bulk import and export, and the toolkit (gen, bench).

mod bench;
mod export;
mod import;
mod serve;
mod setup;
mod tools;

use std::process::ExitCode;

/// mimalloc instead of glibc's malloc: an import spent 40 % of its CPU in
/// glibc's allocator (perf), much of it in arena locks taken when one
/// thread frees what another allocated, which is how a pipeline of
/// readers, workers and the store's writer passes entries along.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    /// Accept what an incomplete load left: check, reindex, mark complete.
    Repair(tools::RepairArgs),
    /// Generate test entries from a template or a seed model, as LDIF or BER.
    Gen(bench::GenArgs),
    /// Measure an LDAP server (any server) with a scenario file.
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Check(args) => tools::check(args),
        Command::Reindex(args) => tools::reindex(args),
        Command::Import(args) => import::run(args),
        Command::Export(args) => export::run(args),
        Command::Repair(args) => tools::repair(args),
        Command::Gen(args) => bench::generate(args),
        Command::Bench(args) => bench::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("meridian: {e:#}");
            ExitCode::FAILURE
        }
    }
}
