//! `meridian check` and `meridian reindex`: integrity tools over the store.

use clap::Args;
use meridian_store::{Command, Outcome};

use crate::setup::CommonArgs;

/// Flags of `meridian check`.
#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    #[command(flatten)]
    common: CommonArgs,
}

/// Flags of `meridian reindex`.
#[derive(Debug, Args)]
pub(crate) struct ReindexArgs {
    #[command(flatten)]
    common: CommonArgs,
}

/// Scans the store; prints every inconsistency. Fails if there is one.
pub(crate) fn check(args: CheckArgs) -> anyhow::Result<()> {
    let setup = args.common.load(|_| {})?;
    let store = setup.open_store()?;
    let snapshot = store.snapshot()?;
    let entries = snapshot.len()?;
    let problems = snapshot.check()?;
    for p in &problems {
        println!("{p}");
    }
    if problems.is_empty() {
        println!("{entries} entries, indexes consistent");
        Ok(())
    } else {
        anyhow::bail!(
            "{} inconsistencies in {entries} entries (run `meridian reindex` for index ones)",
            problems.len()
        )
    }
}

/// Rebuilds every index from the entries and the configured indexes.
pub(crate) fn reindex(args: ReindexArgs) -> anyhow::Result<()> {
    let setup = args.common.load(|_| {})?;
    let store = setup.open_store()?;
    match store.execute_blocking(Command::RebuildIndexes)? {
        Outcome::Reindexed(n) => println!("indexes rebuilt over {n} entries"),
        other => anyhow::bail!("unexpected outcome {other:?}"),
    }
    store.close();
    Ok(())
}
