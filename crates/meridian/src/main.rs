//! The `meridian` command: `meridian serve` today; import, export, gen and
//! bench join it as their issues land.

mod serve;
mod setup;
mod tools;

use std::process::ExitCode;

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Check(args) => tools::check(args),
        Command::Reindex(args) => tools::reindex(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("meridian: {e:#}");
            ExitCode::FAILURE
        }
    }
}
