//! The `meridian` command: `meridian serve` today; import, export, gen and
//! bench join it as their issues land.

mod serve;

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("meridian: {e:#}");
            ExitCode::FAILURE
        }
    }
}
