//! `meridian export`: the directory as LDIF, from one read transaction
//! (a consistent snapshot), in DN order (parents first, siblings by
//! normalised RDN), so exporting the same data twice gives the same
//! bytes whatever order it was loaded in. It opens the database
//! read-only, so it can run beside a server using it.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use meridian_model::dn::Dn;
use meridian_store::codec::StoredPart;

use crate::setup::CommonArgs;

/// Flags of `meridian export`.
#[derive(Debug, Args)]
pub(crate) struct ExportArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Write here instead of standard output.
    #[arg(short = 'o', long)]
    output: Option<PathBuf>,
    /// Export only this entry and its subtree (default: everything).
    #[arg(long)]
    base: Option<String>,
    /// Leave out operational attributes (entryUUID, timestamps,
    /// creatorsName, ...); by default they are written, as slapcat does,
    /// so an import of the export restores them.
    #[arg(long)]
    no_operational: bool,
}

pub(crate) fn run(args: ExportArgs) -> anyhow::Result<()> {
    let setup = args.common.load(|_| {})?;
    let store = setup.open_store_read_only()?;
    let schema = store.schema().clone();
    let base = match &args.base {
        Some(text) => {
            Some(Dn::parse(text.as_bytes(), &schema).map_err(|e| anyhow::anyhow!("--base: {e}"))?)
        }
        None => None,
    };
    let snapshot = store.snapshot()?;
    if let Some(what) = snapshot.incomplete_load()? {
        eprintln!("warning: exporting an incomplete load ({what})");
    }
    let mut out: Box<dyn Write> = match &args.output {
        Some(path) => {
            // Entries and password hashes: 0600, whatever the umask.
            Box::new(
                meridian_store::private::create_file(path)
                    .with_context(|| format!("creating {}", path.display()))?,
            )
        }
        None => Box::new(std::io::stdout().lock()),
    };
    let mut out = BufWriter::with_capacity(1 << 20, &mut out);
    let mut buf = Vec::with_capacity(64 << 10);
    meridian_ldif::write::version(&mut buf);
    let mut written = 0u64;
    let ids = match &base {
        Some(base) => {
            if snapshot.id(base)?.is_none() {
                anyhow::bail!("--base: there is no entry {}", base.original());
            }
            snapshot.ids_in_dn_order_under(base)?
        }
        None => snapshot.ids_in_dn_order()?,
    };
    // Written from the stored records as they are: no entry is built.
    let keep = |attr: Option<meridian_model::schema::AttrId>| {
        !args.no_operational
            || attr
                .and_then(|a| schema.attr(a))
                .is_none_or(|t| !t.usage.is_operational())
    };
    for id in ids {
        snapshot.visit_stored(id, &mut |part| match part {
            StoredPart::Dn(dn) => meridian_ldif::write::attr_value(&mut buf, "dn", dn),
            StoredPart::Value { name, attr, value } if keep(attr) => {
                meridian_ldif::write::attr_value(&mut buf, name, value);
            }
            StoredPart::Value { .. } => {}
        })?;
        buf.push(b'\n');
        written += 1;
        if buf.len() >= 32 << 10 {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)?;
    out.flush()?;
    eprintln!("exported {written} entries");
    Ok(())
}
