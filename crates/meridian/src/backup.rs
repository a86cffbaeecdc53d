//! `meridian backup`: a copy of one naming context's database, compacted,
//! from one read transaction, so a consistent one whether or not a server
//! is running on it. The copy is an LMDB `data.mdb`: restoring is putting
//! it in the place of a stopped server's `db/data.mdb` (docs/operations.md).

use std::path::PathBuf;

use clap::Args;

use crate::setup::CommonArgs;

/// Flags of `meridian backup`.
#[derive(Debug, Args)]
pub(crate) struct BackupArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The file to write (it must not exist): the naming context's
    /// database, compacted.
    #[arg(short = 'o', long)]
    output: PathBuf,
}

pub(crate) fn run(args: BackupArgs) -> anyhow::Result<()> {
    let setup = args.common.load(|_| {})?;
    if args.output.exists() {
        anyhow::bail!(
            "{} exists; a backup is written to a new file",
            args.output.display()
        );
    }
    let store = setup.open_store_read_only()?;
    if let Some(what) = store.snapshot()?.incomplete_load()? {
        eprintln!("warning: the database holds an incomplete load ({what})");
    }
    store.copy_to(&args.output)?;
    let bytes = std::fs::metadata(&args.output)
        .map(|m| m.len())
        .unwrap_or(0);
    println!(
        "backed up {} ({} entries) to {} ({bytes} bytes)",
        setup.suffix.original(),
        store.snapshot()?.len()?,
        args.output.display()
    );
    Ok(())
}
