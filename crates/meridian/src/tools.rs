//! `meridian check`, `meridian reindex` and `meridian repair`: integrity
//! tools over the store.

use clap::Args;
use meridian_store::{Command, Effect};

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

/// Flags of `meridian repair`.
#[derive(Debug, Args)]
pub(crate) struct RepairArgs {
    #[command(flatten)]
    common: CommonArgs,
}

/// Scans the store; prints every inconsistency. Fails if there is one,
/// or if the database holds an incomplete load.
pub(crate) fn check(args: CheckArgs) -> anyhow::Result<()> {
    let setup = args.common.load(|_| {})?;
    // Read-only: runs beside a server, and takes no writer lock.
    let store = setup.open_store_read_only()?;
    let snapshot = store.snapshot()?;
    let entries = snapshot.len()?;
    let mut problems = snapshot.check()?;
    if let Some(what) = snapshot.incomplete_load()? {
        problems.push(format!(
            "the database holds an incomplete load ({what}): `meridian import --replace` or `meridian repair`"
        ));
    }
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
    let _lock = setup.lock_data_dir()?;
    let store = setup.open_store()?;
    match store.execute_blocking(Command::RebuildIndexes)? {
        Effect::Reindexed(n) => println!("indexes rebuilt over {n} entries"),
        other => anyhow::bail!("unexpected outcome {other:?}"),
    }
    store.close();
    Ok(())
}

/// Accepts what an incomplete load left: rebuilds the indexes, checks
/// the result, and marks the database complete so it is served again.
/// (Every batch of a load is one transaction, so what is there is whole
/// entries with their parents; the rebuild is belt and braces.)
pub(crate) fn repair(args: RepairArgs) -> anyhow::Result<()> {
    let setup = args.common.load(|_| {})?;
    let _lock = setup.lock_data_dir()?;
    let store = setup.open_store()?;
    let Some(what) = store.snapshot()?.incomplete_load()? else {
        println!("nothing to repair: the database holds no incomplete load");
        return Ok(());
    };
    store.execute_blocking(Command::RebuildIndexes)?;
    let (entries, problems) = {
        let snapshot = store.snapshot()?;
        (snapshot.len()?, snapshot.check()?)
    };
    for p in &problems {
        println!("{p}");
    }
    if !problems.is_empty() {
        anyhow::bail!(
            "{} inconsistencies remain; the database stays marked incomplete",
            problems.len()
        );
    }
    store.execute_blocking(Command::SetLoadState(None))?;
    store.close();
    println!(
        "kept {entries} entries of the incomplete load ({what}); the database is marked complete"
    );
    Ok(())
}
