//! What every subcommand that touches the directory shares: the config
//! file and the flags that override it, the schema, and the store.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Args;
use meridian_config::Config;
use meridian_directory::password::{CryptMethods, HashBounds};
use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_store::{Store, StoreOptions, WriterLock};

/// Flags shared by every subcommand that opens the directory. Each overrides the
/// config key it names, so a throwaway setup needs no file at all.
#[derive(Debug, Clone, Args)]
pub(crate) struct CommonArgs {
    /// TOML config file (every key has a default; see docs/configuration.md).
    #[arg(long, short = 'c')]
    config: Option<PathBuf>,
    /// Data directory (`directory.data_dir`).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Naming context: one of the configured ones (`directory.suffix`,
    /// `directory.additional_suffixes`) selects it for the subcommands that
    /// work on one; any other replaces `directory.suffix`.
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
    /// The naming context a one-context subcommand (import, export,
    /// check, reindex) works on.
    pub(crate) suffix: Dn,
    /// Every naming context, `directory.suffix` first.
    suffixes: Vec<Dn>,
    /// `security.password_*`, checked.
    password_bounds: HashBounds,
}

impl CommonArgs {
    /// The flags with another config file (`meridian verify` loads each
    /// node's own).
    pub(crate) fn with_config(&self, config: PathBuf) -> CommonArgs {
        CommonArgs {
            config: Some(config),
            data_dir: None,
            suffix: self.suffix.clone(),
            schema: self.schema.clone(),
        }
    }

    /// The flags with another data directory.
    pub(crate) fn with_data_dir(&self, dir: PathBuf) -> CommonArgs {
        CommonArgs {
            config: self.config.clone(),
            data_dir: Some(dir),
            suffix: self.suffix.clone(),
            schema: self.schema.clone(),
        }
    }

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
        // `--suffix` naming a configured context selects it; any other
        // replaces the first (as it did before there were several).
        let same = |a: &str, b: &str| {
            meridian_proto::dn::SyntacticDn::parse(a)
                .ok()
                .zip(meridian_proto::dn::SyntacticDn::parse(b).ok())
                .is_some_and(|(a, b)| a.to_string().eq_ignore_ascii_case(&b.to_string()))
        };
        let mut selected = 0;
        if let Some(suffix) = &self.suffix {
            match config
                .directory
                .additional_suffixes
                .iter()
                .position(|s| same(s, suffix))
            {
                Some(i) => selected = i + 1,
                None if same(&config.directory.suffix, suffix) => {}
                None => config.directory.suffix.clone_from(suffix),
            }
        }
        config
            .directory
            .schema_files
            .extend(self.schema.iter().cloned());
        extra(&mut config);
        // Relative to where the command was started, resolved once, so
        // the log and every later use name the same place.
        if config.directory.data_dir.is_relative() {
            config.directory.data_dir = std::path::absolute(&config.directory.data_dir)
                .context("resolving directory.data_dir")?;
        }
        config.validate()?;
        let mut schema = Schema::builtin().context("built-in schema")?;
        for file in &config.directory.schema_files {
            schema.load_file(file).context("schema")?;
        }
        // Schema-aware check of the suffixes (the config layer only
        // checks their syntax): every attribute type must be known.
        let suffix = Dn::parse(config.directory.suffix.as_bytes(), &schema)
            .map_err(|e| anyhow::anyhow!("config key `directory.suffix`: {e}"))?;
        let mut suffixes = vec![suffix];
        for text in &config.directory.additional_suffixes {
            let dn = Dn::parse(text.as_bytes(), &schema)
                .map_err(|e| anyhow::anyhow!("config key `directory.additional_suffixes`: {e}"))?;
            // A context inside another's tree is glued below it (slapd's
            // subordinate databases); the same suffix twice is a mistake.
            if let Some(other) = suffixes.iter().find(|s| dn.same_entry(s)) {
                anyhow::bail!(
                    "config key `directory.additional_suffixes`: {:?} names the naming context {:?} again",
                    dn.original(),
                    other.original()
                );
            }
            suffixes.push(dn);
        }
        let suffix = suffixes
            .get(selected)
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("no naming context {selected}"))?;
        Ok(Setup {
            password_bounds: Setup::password_bounds_of(&config)?,
            config,
            schema: Arc::new(schema),
            suffix,
            suffixes,
        })
    }
}

impl Setup {
    /// Where the selected naming context's files live.
    pub(crate) fn store_path(&self) -> PathBuf {
        self.store_path_of(&self.suffix)
    }

    /// Where the files of the naming context `suffix` live: `db` for the
    /// first, `contexts/<name>` for the others, where the name is the
    /// normalised DN with every byte but `a-z`, `0-9` and `=,.-` written
    /// as `_` and two hex digits: one name per DN, so `o=Müller` and
    /// `o=Möller` (or two DNs differing in case where case matters) never
    /// share a database. A database made before, under the older name
    /// (each such character a bare `_`, upper case folded), is used where
    /// it exists and no other context claims that name.
    fn store_path_of(&self, suffix: &Dn) -> PathBuf {
        let data = &self.config.directory.data_dir;
        if self.is_first(suffix) {
            return data.join("db");
        }
        let contexts = data.join("contexts");
        let path = contexts.join(context_dir_name(suffix));
        let legacy = contexts.join(legacy_context_dir_name(suffix));
        let legacy_shared = self
            .suffixes
            .iter()
            .skip(1)
            .filter(|other| legacy_context_dir_name(other) == legacy_context_dir_name(suffix))
            .count()
            > 1;
        if !path.exists() && legacy.exists() && !legacy_shared {
            return legacy;
        }
        path
    }

    /// The administrator's DN (`directory.admin_dn`), checked against
    /// the schema.
    pub(crate) fn admin_dn(&self) -> anyhow::Result<Dn> {
        Dn::parse(self.config.directory.admin_dn.as_bytes(), &self.schema)
            .map_err(|e| anyhow::anyhow!("config key `directory.admin_dn`: {e}"))
    }

    /// The bounds on a stored password hash's cost (`security.password_max_*`).
    pub(crate) fn password_bounds(&self) -> HashBounds {
        self.password_bounds
    }

    /// The directory's limits and password cost from the config (serve
    /// and import alike: an import hashes clear-text passwords and gives
    /// dynamic entries their TTL as the server would).
    pub(crate) fn directory_limits(&self) -> meridian_directory::Limits {
        let d = &self.config.directory;
        meridian_directory::Limits {
            size_limit: d.size_limit,
            time_limit: std::time::Duration::from_secs(d.time_limit_secs),
            lookthrough_limit: match d.lookthrough_limit {
                0 => u64::MAX,
                n => n,
            },
            max_filter_items: d.max_filter_items,
            search_step_time: meridian_directory::Limits::default().search_step_time,
            max_modify_changes: d.max_modify_changes,
            max_dn_rdns: d.max_dn_rdns,
            sort_max_keys: d.sort_max_keys,
            sort_memory_bytes: d.sort_memory_bytes,
            dynamic: meridian_directory::dynamic::DynamicTtl {
                default_secs: d.dynamic_default_ttl_secs,
                min_secs: d.dynamic_min_ttl_secs,
                max_secs: d.dynamic_max_ttl_secs,
            },
            password_hash: self.password_hash_cost(),
            rehash_on_bind: self.config.directory.rehash_on_bind,
            password_bounds: self.password_bounds,
            password_policy: self.password_policy(),
            max_nested_groups: self.config.groups.max_nested_groups,
            dynamic_groups: self.dynamic_groups(),
        }
    }

    /// `[groups] dynamic_*`, or `None` when off.
    fn dynamic_groups(&self) -> Option<meridian_directory::DynamicGroups> {
        let g = &self.config.groups;
        g.dynamic_groups.then(|| meridian_directory::DynamicGroups {
            class: g.dynamic_group_class.clone(),
            url_attribute: g.dynamic_url_attribute.clone(),
            member_attribute: g.dynamic_member_attribute.clone(),
            member_of_attribute: g.memberof_attribute.clone(),
            max_members: g.max_dynamic_members,
        })
    }

    /// The default password policy (`[password_policy]`).
    fn password_policy(&self) -> meridian_directory::policy::PasswordPolicy {
        let p = &self.config.password_policy;
        let secs = std::time::Duration::from_secs;
        meridian_directory::policy::PasswordPolicy {
            min_length: p.min_length,
            min_classes: p.min_classes,
            allow_hashed: false,
            lockout_failures: p.lockout_failures,
            lockout: secs(p.lockout_secs),
            failure_window: secs(p.failure_window_secs),
            max_age: secs(p.max_age_secs),
            expire_warning: secs(p.expire_warning_secs),
            grace_logins: p.grace_logins,
            min_age: secs(p.min_age_secs),
            history: p.history,
            safe_modify: p.safe_modify,
            allow_user_change: p.allow_user_change,
            must_change: p.must_change,
        }
    }

    /// The bounds on stored password hashes (`security.password_*`).
    fn password_bounds_of(config: &Config) -> anyhow::Result<HashBounds> {
        let s = &config.security;
        let crypt_methods =
            CryptMethods::from_prefixes(s.password_crypt_methods.iter().map(String::as_str))
                .map_err(|e| {
                    anyhow::anyhow!(
                        "config key `security.password_crypt_methods`: {e}; known: {}",
                        CryptMethods::known().collect::<Vec<_>>().join(" ")
                    )
                })?;
        Ok(HashBounds {
            max_memory_kib: s.password_max_memory_kib,
            max_iterations: s.password_max_iterations,
            max_lanes: s.password_max_lanes,
            max_pbkdf2_rounds: s.password_max_pbkdf2_rounds,
            max_crypt_sha_rounds: s.password_max_crypt_sha_rounds,
            max_bcrypt_cost: s.password_max_bcrypt_cost,
            crypt_methods,
            max_values: s.max_password_values,
        })
    }

    /// The cost of new `{ARGON2}` hashes (`directory.password_hash_*`).
    pub(crate) fn password_hash_cost(&self) -> meridian_directory::password::HashCost {
        meridian_directory::password::HashCost {
            memory_kib: self.config.directory.password_hash_memory_kib,
            iterations: self.config.directory.password_hash_iterations,
        }
    }

    fn store_options(&self) -> StoreOptions {
        self.store_options_of(&self.suffix)
    }

    fn store_options_of(&self, suffix: &Dn) -> StoreOptions {
        StoreOptions {
            path: self.store_path_of(suffix),
            storage: self.config.storage.clone(),
            suffixes: vec![suffix.clone()],
            groups: self.config.groups.clone(),
        }
    }

    /// Opens every naming context's store, `directory.suffix`'s first,
    /// refusing any that holds an incomplete load (what `serve` runs on).
    pub(crate) fn open_all_stores(&self) -> anyhow::Result<Vec<Store>> {
        self.suffixes
            .iter()
            .map(|suffix| {
                let options = self.store_options_of(suffix);
                let path = options.path.clone();
                let store = Store::open(options, Arc::clone(&self.schema))
                    .with_context(|| format!("opening the store in {}", path.display()))?;
                self.refuse_incomplete_at(&store, &path)?;
                Ok(store)
            })
            .collect()
    }

    /// Opens every naming context's store for a cluster node, the first
    /// first: each is a partition whose writes go through its own
    /// replicated log (`crate::cluster`).
    pub(crate) fn open_replicated_stores(
        &self,
    ) -> anyhow::Result<Vec<(Store, meridian_store::replicated::Proposals)>> {
        self.suffixes
            .iter()
            .map(|suffix| {
                let options = self.store_options_of(suffix);
                let path = options.path.clone();
                let (store, proposals) = Store::open_replicated(options, Arc::clone(&self.schema))
                    .with_context(|| format!("opening the store in {}", path.display()))?;
                self.refuse_incomplete_at(&store, &path)?;
                Ok((store, proposals))
            })
            .collect()
    }

    /// Every naming context, `directory.suffix` first: in a cluster, the
    /// partitions, each its own Raft group numbered by its place here.
    pub(crate) fn suffixes(&self) -> &[Dn] {
        &self.suffixes
    }

    /// Whether `suffix` is the first naming context (`directory.suffix`),
    /// whose files keep the names a single context always had.
    fn is_first(&self, suffix: &Dn) -> bool {
        self.suffixes
            .first()
            .is_none_or(|first| first.same_entry(suffix))
    }

    /// Where the Raft log and snapshots of the partition `suffix` live:
    /// `raft` for the first naming context (where a cluster of one
    /// partition always kept them), `raft-contexts/<name>` for the others,
    /// named as their databases are.
    pub(crate) fn raft_dir_of(&self, suffix: &Dn) -> PathBuf {
        let data = &self.config.directory.data_dir;
        if self.is_first(suffix) {
            return data.join("raft");
        }
        data.join("raft-contexts").join(context_dir_name(suffix))
    }

    /// Opens the selected naming context's store for reading only
    /// (beside a running server).
    pub(crate) fn open_store_read_only(&self) -> anyhow::Result<Store> {
        self.open_store_read_only_of(&self.suffix)
    }

    /// Opens the store of the naming context `suffix` for reading only.
    pub(crate) fn open_store_read_only_of(&self, suffix: &Dn) -> anyhow::Result<Store> {
        Store::open_read_only(self.store_options_of(suffix), Arc::clone(&self.schema)).with_context(
            || {
                format!(
                    "opening the store in {}",
                    self.store_path_of(suffix).display()
                )
            },
        )
    }

    /// Fails if the database at `path` holds a load that did not complete.
    fn refuse_incomplete_at(&self, store: &Store, path: &std::path::Path) -> anyhow::Result<()> {
        if let Some(what) = store.snapshot()?.incomplete_load()? {
            anyhow::bail!(
                "the database in {} holds an incomplete load ({what}); it is not served until                  `meridian import --replace` loads it anew or `meridian repair` accepts what it holds",
                path.display()
            );
        }
        Ok(())
    }

    /// Takes the data directory's writer lock (creating the directory),
    /// which every subcommand that writes holds until it exits: `serve`,
    /// `import` (offline), `reindex`, `repair`. Each store takes its own
    /// lock too when opened for writing; this one also covers what lives
    /// beside the stores (`admin.secret`, naming contexts not yet made).
    pub(crate) fn lock_data_dir(&self) -> anyhow::Result<WriterLock> {
        let dir = &self.config.directory.data_dir;
        meridian_store::private::create_dir(dir)
            .with_context(|| format!("creating {}", dir.display()))?;
        Ok(WriterLock::acquire(dir, "the data directory")?)
    }

    /// Opens the store for an offline bulk load (`meridian import`).
    pub(crate) fn open_store_for_bulk_load(&self) -> anyhow::Result<Store> {
        Store::open_for_bulk_load(self.store_options(), Arc::clone(&self.schema))
            .with_context(|| format!("opening the store in {}", self.store_path().display()))
    }

    /// Opens the store.
    pub(crate) fn open_store(&self) -> anyhow::Result<Store> {
        Store::open(self.store_options(), Arc::clone(&self.schema))
            .with_context(|| format!("opening the store in {}", self.store_path().display()))
    }
}

/// The folder of an additional naming context: its normalised DN, each
/// byte outside `a-z 0-9 = , . -` as `_` and two hex digits (injective).
fn context_dir_name(suffix: &Dn) -> String {
    use std::fmt::Write as _;
    let mut name = String::new();
    for b in suffix.normalized().bytes() {
        if b.is_ascii_lowercase() || b.is_ascii_digit() || b"=,.-".contains(&b) {
            name.push(char::from(b));
        } else {
            let _ = write!(name, "_{b:02x}");
        }
    }
    name
}

/// The name earlier versions gave that folder (not one per DN).
fn legacy_context_dir_name(suffix: &Dn) -> String {
    suffix
        .normalized()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "=,.-".contains(c) {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_folders_are_one_per_dn() {
        let schema = Schema::builtin().unwrap();
        let dn = |t: &str| Dn::parse(t.as_bytes(), &schema).unwrap();
        let names: Vec<String> = [
            "o=Müller",
            "o=Möller",
            "o=M_ller",
            "o=other",
            "dc=corp,dc=net",
        ]
        .iter()
        .map(|t| context_dir_name(&dn(t)))
        .collect();
        let unique: std::collections::BTreeSet<&String> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        // Plain names keep the spelling earlier versions gave them.
        assert_eq!(context_dir_name(&dn("o=other")), "o=other");
        assert_eq!(context_dir_name(&dn("dc=corp,dc=net")), "dc=corp,dc=net");
        assert_eq!(
            legacy_context_dir_name(&dn("o=Müller")),
            legacy_context_dir_name(&dn("o=Möller"))
        );
    }
}
