//! What every subcommand that touches the directory shares: the config
//! file and the flags that override it, the schema, and the store.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Args;
use meridian_config::Config;
use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_store::{Store, StoreOptions};

/// Flags shared by every subcommand that opens the directory. Each overrides the
/// config key it names, so a throwaway setup needs no file at all.
#[derive(Debug, Args)]
pub(crate) struct CommonArgs {
    /// TOML config file (every key has a default; see docs/configuration.md).
    #[arg(long, short = 'c')]
    config: Option<PathBuf>,
    /// Data directory (`directory.data_dir`).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Naming context (`directory.suffix`).
    #[arg(long)]
    suffix: Option<String>,
    /// Extra schema file, loaded after `directory.schema_files`; repeatable.
    #[arg(long = "schema", value_name = "FILE")]
    schema: Vec<PathBuf>,
}

/// The loaded configuration and schema.
pub(crate) struct Setup {
    pub(crate) config: Config,
    pub(crate) schema: Arc<Schema>,
    pub(crate) suffix: Dn,
}

impl CommonArgs {
    /// Reads the config, applies the flags (and `extra`, for flags of one
    /// subcommand), validates, and loads the schema.
    pub(crate) fn load(&self, extra: impl FnOnce(&mut Config)) -> anyhow::Result<Setup> {
        let mut config = match &self.config {
            Some(path) => Config::load(path)?,
            None => Config::default(),
        };
        if let Some(dir) = &self.data_dir {
            config.directory.data_dir.clone_from(dir);
        }
        if let Some(suffix) = &self.suffix {
            config.directory.suffix.clone_from(suffix);
        }
        config
            .directory
            .schema_files
            .extend(self.schema.iter().cloned());
        extra(&mut config);
        config.validate()?;
        let mut schema = Schema::builtin().context("built-in schema")?;
        for file in &config.directory.schema_files {
            schema.load_file(file).context("schema")?;
        }
        // Schema-aware check of the suffix (the config layer only checks
        // its syntax): every attribute type must be known.
        let suffix = Dn::parse(config.directory.suffix.as_bytes(), &schema)
            .map_err(|e| anyhow::anyhow!("config key `directory.suffix`: {e}"))?;
        Ok(Setup {
            config,
            schema: Arc::new(schema),
            suffix,
        })
    }
}

impl Setup {
    /// Where the store's files live.
    pub(crate) fn store_path(&self) -> PathBuf {
        self.config.directory.data_dir.join("db")
    }

    /// The administrator's DN (`directory.admin_dn`), checked against
    /// the schema.
    pub(crate) fn admin_dn(&self) -> anyhow::Result<Dn> {
        Dn::parse(self.config.directory.admin_dn.as_bytes(), &self.schema)
            .map_err(|e| anyhow::anyhow!("config key `directory.admin_dn`: {e}"))
    }

    /// The directory's limits and password cost from the config (serve
    /// and import alike: an import hashes clear-text passwords and gives
    /// dynamic entries their TTL as the server would).
    pub(crate) fn directory_limits(&self) -> meridian_directory::Limits {
        let d = &self.config.directory;
        meridian_directory::Limits {
            size_limit: d.size_limit,
            time_limit: std::time::Duration::from_secs(d.time_limit_secs),
            dynamic: meridian_directory::dynamic::DynamicTtl {
                default_secs: d.dynamic_default_ttl_secs,
                min_secs: d.dynamic_min_ttl_secs,
                max_secs: d.dynamic_max_ttl_secs,
            },
            password_hash: self.password_hash_cost(),
        }
    }

    /// The cost of new `{ARGON2}` hashes (`directory.password_hash_*`).
    pub(crate) fn password_hash_cost(&self) -> meridian_directory::password::HashCost {
        meridian_directory::password::HashCost {
            memory_kib: self.config.directory.password_hash_memory_kib,
            iterations: self.config.directory.password_hash_iterations,
        }
    }

    fn store_options(&self) -> StoreOptions {
        StoreOptions {
            path: self.store_path(),
            storage: self.config.storage.clone(),
            suffixes: vec![self.suffix.clone()],
        }
    }

    /// Opens the store for reading only (beside a running server).
    pub(crate) fn open_store_read_only(&self) -> anyhow::Result<Store> {
        Store::open_read_only(self.store_options(), Arc::clone(&self.schema))
            .with_context(|| format!("opening the store in {}", self.store_path().display()))
    }

    /// Fails if the database holds a load that did not complete.
    pub(crate) fn refuse_incomplete(&self, store: &Store) -> anyhow::Result<()> {
        if let Some(what) = store.snapshot()?.incomplete_load()? {
            anyhow::bail!(
                "the database in {} holds an incomplete load ({what}); it is not served until                  `meridian import --replace` loads it anew or `meridian repair` accepts what it holds",
                self.store_path().display()
            );
        }
        Ok(())
    }

    /// Opens the store.
    pub(crate) fn open_store(&self) -> anyhow::Result<Store> {
        Store::open(self.store_options(), Arc::clone(&self.schema))
            .with_context(|| format!("opening the store in {}", self.store_path().display()))
    }
}
