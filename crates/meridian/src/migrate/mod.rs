//! `meridian migrate`: an OpenLDAP server's configuration, `slapd.conf`
//! or `slapd.d` (cn=config), written as a Meridian configuration:
//! suffixes, the administrator's DN, indexes, schema files (the built-in
//! ones recognised and left out, the others referenced), limits, TLS
//! files, and access rules translated where they mean the same. Every
//! directive it could not translate is listed with where it is and why;
//! the data follows with `slapcat | meridian import` (docs/operations.md).

mod acl;
pub(crate) mod follow;
mod read;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;

use read::{Database, Directive, SlapdConfig};

/// Flags of `meridian migrate`.
#[derive(Debug, Args)]
pub(crate) struct MigrateArgs {
    /// The OpenLDAP configuration: a slapd.conf file or a slapd.d folder.
    #[arg(long, value_name = "PATH", required_unless_present = "follow")]
    from: Option<PathBuf>,
    /// Instead: follow a running OpenLDAP server (with the syncprov
    /// overlay) by content synchronization, copying its entries into the
    /// Meridian at `--into` and then its changes as they come.
    #[arg(long, value_name = "URL", conflicts_with = "from")]
    follow: Option<String>,
    /// `--follow`: the DN to bind to the OpenLDAP server as (one that may
    /// read everything, userPassword included: its rootdn).
    #[arg(long, value_name = "DN", requires = "follow")]
    bind_dn: Option<String>,
    /// `--follow`: a file whose first line is that DN's password.
    #[arg(long, value_name = "FILE", requires = "follow")]
    bind_password_file: Option<PathBuf>,
    /// `--follow`: the subtree to copy (the OpenLDAP database's suffix).
    #[arg(long, value_name = "DN", requires = "follow")]
    base: Option<String>,
    /// `--follow`: the Meridian to copy into (a server, or any node of a
    /// cluster).
    #[arg(long, value_name = "URL", requires = "follow")]
    into: Option<String>,
    /// `--follow`: Meridian's administrator DN (`directory.admin_dn`).
    #[arg(long, value_name = "DN", default_value = "cn=admin,dc=example,dc=com")]
    into_bind_dn: String,
    /// `--follow`: a file whose first line is Meridian's administrator
    /// password.
    #[arg(long, value_name = "FILE", requires = "follow")]
    into_password_file: Option<PathBuf>,
    /// `--follow`: the CA file for `ldaps://` URLs.
    #[arg(long, value_name = "FILE")]
    tls_ca_file: Option<PathBuf>,
    /// `--follow`: where the synchronization cookie is kept between runs
    /// (a restart resumes from it).
    #[arg(long, value_name = "FILE", default_value = "meridian-follow.cookie")]
    state: PathBuf,
    /// `--follow`: one refresh, then exit (refreshOnly), instead of
    /// following until stopped.
    #[arg(long, requires = "follow")]
    once: bool,
    /// Write the Meridian configuration here (it must not exist) instead
    /// of to standard output.
    #[arg(short = 'o', long)]
    output: Option<PathBuf>,
    /// Write the configuration even though some access rules could not be
    /// translated (they are listed; without this flag nothing is written,
    /// since a server without them may let people read what slapd hid).
    #[arg(long)]
    drop_untranslated_access: bool,
}

pub(crate) fn run(args: MigrateArgs) -> anyhow::Result<()> {
    if let Some(url) = &args.follow {
        return follow::run(&following(&args, url)?);
    }
    let Some(from) = &args.from else {
        anyhow::bail!("give --from (a slapd.conf or slapd.d) or --follow (a running server)");
    };
    let slapd = if from.is_dir() {
        read::slapd_d(from)?
    } else {
        read::slapd_conf(from)?
    };
    let migration = translate(&slapd);
    if !migration.dropped_access.is_empty() {
        let listed: Vec<String> = migration
            .dropped_access
            .iter()
            .map(|rule| format!("  {rule}"))
            .collect();
        let listed = listed.join("\n");
        if !args.drop_untranslated_access {
            anyhow::bail!(
                "{} access rule(s) could not be translated, and a server without them may show what slapd hid:\n{listed}\nwrite them as [[access]] rules by hand (docs/configuration.md) after migrating with --drop-untranslated-access; nothing was written",
                migration.dropped_access.len()
            );
        }
        eprintln!(
            "DROPPED {} access rule(s) (--drop-untranslated-access); add them as [[access]] rules by hand:\n{listed}",
            migration.dropped_access.len()
        );
    }
    // What it wrote must load: the same check `serve` makes.
    meridian_config::Config::from_toml(&migration.toml, Path::new("(migrated)")).map_err(|e| {
        anyhow::anyhow!("the translated configuration does not load ({e}); please report this")
    })?;
    match &args.output {
        Some(path) => {
            if path.exists() {
                anyhow::bail!(
                    "{} exists; the configuration is written to a new file",
                    path.display()
                );
            }
            std::fs::write(path, &migration.toml)
                .with_context(|| format!("writing {}", path.display()))?;
            eprintln!("wrote {}", path.display());
        }
        None => print!("{}", migration.toml),
    }
    if migration.notes.is_empty() {
        eprintln!("every directive was translated");
    } else {
        eprintln!(
            "{} directive(s) were not translated or need your attention:",
            migration.notes.len()
        );
        for note in &migration.notes {
            eprintln!("  {note}");
        }
    }
    Ok(())
}

/// What `--follow` needs, from the flags.
fn following(args: &MigrateArgs, url: &str) -> anyhow::Result<follow::Following> {
    let need = |what: Option<&PathBuf>, flag: &str| -> anyhow::Result<String> {
        let path = what.ok_or_else(|| anyhow::anyhow!("--follow needs {flag}"))?;
        crate::ldap_client::password_from(path)
    };
    let endpoint = |url: &str, dn: &str, password: String| crate::ldap_client::Endpoint {
        url: url.to_owned(),
        bind_dn: dn.to_owned(),
        password,
        tls_ca_file: args.tls_ca_file.clone(),
    };
    let source_dn = args
        .bind_dn
        .as_deref()
        .ok_or_else(|| anyhow::anyhow!("--follow needs --bind-dn"))?;
    let into = args
        .into
        .as_deref()
        .ok_or_else(|| anyhow::anyhow!("--follow needs --into (the Meridian to copy into)"))?;
    Ok(follow::Following {
        source: endpoint(
            url,
            source_dn,
            need(args.bind_password_file.as_ref(), "--bind-password-file")?,
        ),
        target: endpoint(
            into,
            &args.into_bind_dn,
            need(args.into_password_file.as_ref(), "--into-password-file")?,
        ),
        base: args
            .base
            .clone()
            .ok_or_else(|| anyhow::anyhow!("--follow needs --base (the subtree to copy)"))?,
        state: args.state.clone(),
        once: args.once,
    })
}

/// The configuration written, and what did not translate.
pub(crate) struct Migration {
    pub(crate) toml: String,
    pub(crate) notes: Vec<String>,
    /// Access rules that could not be translated, with where each is and
    /// why: `run` writes nothing while there are any, unless told.
    pub(crate) dropped_access: Vec<String>,
}

impl Translation {
    /// An access rule that did not translate: dropped (and the migration
    /// refused unless told), or only noted when all it does is grant to
    /// identities that cannot exist in Meridian, local root over `ldapi://`
    /// (Debian's `by dn.exact=gidNumber=0+uidNumber=0,cn=peercred,...
    /// manage by * break`): leaving it out takes no right away from anyone.
    fn drop_access(&mut self, d: &Directive, why: &str) {
        let clauses: Vec<&[String]> = d
            .args
            .split(|word| word.eq_ignore_ascii_case("by"))
            .skip(1)
            .collect();
        let harmless = !clauses.is_empty()
            && clauses.iter().all(|clause| {
                let who = clause
                    .first()
                    .map(|w| w.to_ascii_lowercase())
                    .unwrap_or_default();
                let local_root = who.contains("cn=peercred,cn=external,cn=auth");
                let passes_on = who == "*" && clause.get(1).is_some_and(|w| w == "break");
                local_root || passes_on
            });
        if harmless {
            self.note(
                &d.origin,
                format!(
                    "access not translated ({why}); it grants only to local root over ldapi://, which Meridian does not serve"
                ),
            );
        } else {
            self.dropped_access.push(format!("{}: {why}", d.origin));
        }
    }
}

/// Directives slapd takes as global wherever they stand (a `TLS*` or
/// `serverID` line after a `database` line still configures the server).
fn global_only(name: &str) -> bool {
    name == "serverid" || name.starts_with("tls")
}

/// Whether slapd's `security` factors ask for TLS (`ssf`, `transport`,
/// `tls`, `simple_bind` above 0, `update_*` alike): Meridian's
/// counterpart is `security.require_tls`.
fn security_needs_tls(args: &[String]) -> bool {
    args.iter().any(|factor| {
        factor
            .split_once('=')
            .is_some_and(|(_, strength)| strength.parse::<u32>().is_ok_and(|n| n > 0))
    })
}

/// Schema files Meridian has built in, by the name slapd knows them.
const BUILT_IN_SCHEMA: &[&str] = &["core", "cosine", "inetorgperson", "nis"];

/// Directives that need no counterpart: where slapd keeps its own files
/// and threads, which modules it loads.
const NOT_NEEDED: &[&str] = &[
    "pidfile",
    "argsfile",
    "modulepath",
    "moduleload",
    "threads",
    "toolthreads",
    "tool-threads",
    "loglevel",
    "directory",
    "checkpoint",
    "lastmod",
    "dbnosync",
    "envflags",
    "mode",
    "objectclass",
    "cn",
    "database",
    "dbdirectory",
    "monitoring",
    "overlay",
];

fn translate(slapd: &SlapdConfig) -> Migration {
    let mut translation = Translation::default();
    translation.schema(slapd);
    // The naming contexts: the mdb (or hdb, bdb) databases.
    let data: Vec<&Database> = slapd
        .databases
        .iter()
        .filter(|d| matches!(d.kind.as_str(), "mdb" | "hdb" | "bdb"))
        .collect();
    let frontend: Vec<&Directive> = slapd
        .databases
        .iter()
        .filter(|d| d.kind == "frontend")
        .flat_map(|d| d.directives.iter())
        .chain(slapd.global.iter())
        .chain(
            data.iter()
                .flat_map(|d| d.directives.iter())
                .filter(|d| global_only(&d.name)),
        )
        .collect();
    translation.other_databases(slapd);
    translation.naming_contexts(&data);
    let first_rootdn = data.first().and_then(|d| d.first("rootdn"));
    for (i, db) in data.iter().enumerate() {
        translation.database(i, db, first_rootdn);
    }
    // Global and frontend directives.
    for d in &frontend {
        translation.frontend(d);
    }
    translation.into_migration()
}

/// The configuration being written, section by section, and what the
/// operator must be told.
#[derive(Default)]
struct Translation {
    notes: Vec<String>,
    directory: String,
    server: String,
    security: String,
    storage: String,
    /// `[groups]` from the memberof, refint and unique overlays.
    groups: Groups,
    indexes: Vec<(String, Vec<String>)>,
    rules: Vec<String>,
    dropped_access: Vec<String>,
    require_tls: bool,
    schema_files: Vec<String>,
}

impl Translation {
    fn note(&mut self, origin: &str, what: String) {
        self.notes.push(format!("{origin}: {what}"));
    }

    /// The schema files that are not built in.
    fn schema(&mut self, slapd: &SlapdConfig) {
        for (path, origin) in &slapd.schema {
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            // slapd.d names them cn={0}core.ldif.
            let bare = stem
                .rsplit('}')
                .next()
                .unwrap_or(&stem)
                .to_ascii_lowercase();
            if !BUILT_IN_SCHEMA.contains(&bare.as_str()) {
                self.schema_files.push(path.display().to_string());
                let _ = origin;
            }
        }
    }

    /// Databases that are not naming contexts: noted.
    fn other_databases(&mut self, slapd: &SlapdConfig) {
        for db in &slapd.databases {
            if !matches!(
                db.kind.as_str(),
                "mdb" | "hdb" | "bdb" | "frontend" | "config"
            ) {
                self.note(
                    &db.origin,
                    format!(
                        "database {}: not translated (Meridian serves its naming contexts from LMDB; \
                         cn=Monitor is built in)",
                        db.kind
                    ),
                );
            }
        }
    }

    /// The suffixes and the administrator.
    fn naming_contexts(&mut self, data: &[&Database]) {
        let suffix_of = |db: &Database| db.first("suffix").map(str::to_owned);
        match data.first().and_then(|db| suffix_of(db)) {
            Some(suffix) => {
                let _ = writeln!(self.directory, "suffix = {}", acl::quote(&suffix));
            }
            None => self.note(
                "(configuration)",
                "no mdb database with a suffix: the default suffix is kept".to_owned(),
            ),
        }
        let more: Vec<String> = data
            .iter()
            .skip(1)
            .filter_map(|db| suffix_of(db))
            .map(|s| acl::quote(&s))
            .collect();
        if !more.is_empty() {
            let _ = writeln!(
                self.directory,
                "additional_suffixes = [{}]",
                more.join(", ")
            );
        }
        if let Some(rootdn) = data.iter().find_map(|db| db.first("rootdn")) {
            let _ = writeln!(self.directory, "admin_dn = {}", acl::quote(rootdn));
        }
    }

    /// The `i`th naming context's own directives and overlays.
    fn database(&mut self, i: usize, db: &Database, first_rootdn: Option<&str>) {
        if i > 0
            && let (Some(theirs), Some(first)) = (db.first("rootdn"), first_rootdn)
            && !theirs.eq_ignore_ascii_case(first)
        {
            self.note(
                &db.origin,
                format!(
                    "rootdn {theirs}: Meridian has one administrator, {first}; give this one rights with an [[access]] rule"
                ),
            );
        }
        for d in &db.directives {
            match d.name.as_str() {
                "suffix" | "rootdn" | "subordinate" => {}
                "rootpw" if i == 0 => self.rootpw(d),
                "rootpw" => self.note(
                    &d.origin,
                    "rootpw of a further database: Meridian has one administrator".to_owned(),
                ),
                "index" => self.index(d),
                "sizelimit" => self.limit(d, "size_limit"),
                "timelimit" => self.limit(d, "time_limit_secs"),
                "maxsize" => {
                    if let Some(bytes) = d.args.first().and_then(|v| v.parse::<u64>().ok()) {
                        let _ = writeln!(self.storage, "map_size_bytes = {bytes}");
                    }
                }
                "access" => match acl::translate(&d.args) {
                    Ok(rule) => self.rules.push(rule.toml()),
                    Err(why) => self.drop_access(d, &why),
                },
                "security" if security_needs_tls(&d.args) => self.require_tls = true,
                // Taken with the global directives.
                name if global_only(name) => {}
                name if NOT_NEEDED.contains(&name) => {}
                name => self.note(&d.origin, format!("{name}: no Meridian counterpart")),
            }
        }
        for (overlay, directives) in &db.overlays {
            let what = match overlay.as_str() {
                "dds" => "built in (dynamicObject, Refresh; directory.dynamic_* keys)".to_owned(),
                "sssvlv" => "built in (server-side sort and VLV; directory.sort_* keys)".to_owned(),
                "ppolicy" => "built in: entries' pwdPolicySubentry are honoured and the pwdPolicy \
                              entries load as they are; set [password_policy] from the \
                              ppolicy_default entry's pwd* attributes by hand (the same state \
                              attributes)"
                    .to_owned(),
                "memberof" => self.groups.memberof(directives),
                "refint" => self.groups.refint(directives),
                "unique" => self.groups.unique(directives),
                "dynlist" => self.groups.dynlist(directives),
                other => format!("overlay {other} has no Meridian counterpart"),
            };
            self.note(&db.origin, format!("overlay {overlay}: {what}"));
        }
    }

    /// The first database's rootpw: carried over as a hash.
    fn rootpw(&mut self, d: &Directive) {
        let value = d.args.first().map(String::as_str).unwrap_or_default();
        let bounds = meridian_directory::password::HashBounds::default();
        if value.starts_with('{') {
            match meridian_directory::password::check_stored(value.as_bytes(), &bounds)
            {
                // Carried over as it is: binds check it in its scheme.
                Ok(()) => {
                    let _ = writeln!(
                        self.directory,
                        "admin_password_hash = {}",
                        acl::quote(value)
                    );
                }
                Err(why) => self.note(
                    &d.origin,
                    format!(
                        "rootpw not carried over ({why}); set the password with MERIDIAN_ADMIN_PASSWORD"
                    ),
                ),
            }
        } else {
            // A clear-text rootpw: written as its {ARGON2} hash,
            // never as it is.
            match meridian_directory::password::argon2_phc(
                value.as_bytes(),
                meridian_directory::password::HashCost::default(),
            ) {
                Ok(phc) => {
                    let _ = writeln!(
                        self.directory,
                        "admin_password_hash = {}",
                        acl::quote(&format!("{{ARGON2}}{phc}"))
                    );
                    self.note(
                        &d.origin,
                        "rootpw was clear text: written as its {ARGON2} hash".to_owned(),
                    );
                }
                Err(e) => self.note(&d.origin, format!("rootpw not carried over: {e}")),
            }
        }
    }

    /// One global or frontend directive.
    fn frontend(&mut self, d: &Directive) {
        match d.name.as_str() {
            "include" => {}
            "serverid" => {
                if let Some(id) = d.args.first().and_then(|v| v.parse::<u32>().ok()) {
                    let _ = writeln!(self.directory, "server_id = {id}");
                }
            }
            "sizelimit" => self.limit(d, "size_limit"),
            "timelimit" => self.limit(d, "time_limit_secs"),
            "tlscertificatefile" => tls(d, "tls_certificate_file", &mut self.security),
            "tlscertificatekeyfile" => tls(d, "tls_key_file", &mut self.security),
            "tlscacertificatefile" => tls(d, "tls_ca_file", &mut self.security),
            "tlsverifyclient" => {
                let mode = match d.args.first().map(String::as_str) {
                    Some("never") => "none",
                    Some("allow" | "try") => "optional",
                    Some("demand" | "hard" | "true") => "required",
                    _ => "none",
                };
                let _ = writeln!(self.security, "client_certificates = \"{mode}\"");
            }
            "access" => {
                let target = d.args.get(1).map(String::as_str).unwrap_or_default();
                if d.args.get(1..3).is_some_and(|w| {
                    let w: Vec<&str> = w.iter().map(String::as_str).collect();
                    matches!(
                        w.as_slice(),
                        ["dn.exact=" | "dn.base=", _]
                            | ["dn.base=cn=Subschema" | "dn.exact=cn=Subschema", _]
                    )
                }) || target == "dn.exact="
                    || target == "dn.base="
                    || target.eq_ignore_ascii_case("dn.base=cn=Subschema")
                {
                    self.note(
                        &d.origin,
                        "access to the root DSE or cn=Subschema: Meridian serves both to anyone"
                            .to_owned(),
                    );
                    return;
                }
                // slapd checks the frontend's rules after each database's.
                match acl::translate(&d.args) {
                    Ok(rule) => self.rules.push(rule.toml()),
                    Err(why) => self.drop_access(d, &why),
                }
            }
            name if NOT_NEEDED.contains(&name) => {}
            "security" if security_needs_tls(&d.args) => self.require_tls = true,
            "security" | "require" | "disallow" | "allow" => {
                self.note(
                    &d.origin,
                    format!("{}: see security.require_tls and [security]", d.name),
                );
            }
            name => self.note(&d.origin, format!("{name}: no Meridian counterpart")),
        }
    }

    fn into_migration(mut self) -> Migration {
        let mut toml = String::new();
        let _ = writeln!(
            toml,
            "# Written by `meridian migrate` from an OpenLDAP configuration. Every key\n\
             # not set here keeps its default (contrib/meridian.toml lists them all).\n"
        );
        if !self.server.is_empty() {
            let _ = writeln!(toml, "[server]\n{}", self.server);
        }
        if !self.schema_files.is_empty() {
            let files: Vec<String> = self.schema_files.iter().map(|f| acl::quote(f)).collect();
            let _ = writeln!(self.directory, "schema_files = [{}]", files.join(", "));
        }
        let _ = writeln!(toml, "[directory]\n{}", self.directory);
        if !self.storage.is_empty() || !self.indexes.is_empty() {
            let _ = writeln!(toml, "[storage]\n{}", self.storage);
        }
        if !self.indexes.is_empty() {
            let _ = writeln!(toml, "[storage.indexes]");
            for (attr, kinds) in &self.indexes {
                let kinds: Vec<String> = kinds.iter().map(|k| acl::quote(k)).collect();
                let _ = writeln!(toml, "{attr} = [{}]", kinds.join(", "));
            }
            toml.push('\n');
        }
        let groups = self.groups.toml();
        if !groups.is_empty() {
            let _ = writeln!(toml, "[groups]\n{groups}");
        }
        if self.require_tls {
            // slapd's factors bind every operation; Meridian's key, binds
            // with a password (the clear-text secret such factors protect).
            let _ = writeln!(self.security, "require_tls = true");
        }
        if !self.security.is_empty() {
            let _ = writeln!(toml, "[security]\n{}", self.security);
        }
        for rule in &self.rules {
            let _ = writeln!(toml, "{rule}");
        }
        Migration {
            toml,
            notes: self.notes,
            dropped_access: self.dropped_access,
        }
    }
}

impl Translation {
    /// `index cn,uid eq,sub`: each attribute's index kinds, merged.
    fn index(&mut self, d: &Directive) {
        let Some(attrs) = d.args.first() else {
            return;
        };
        let kinds = d.args.get(1).map_or("eq", String::as_str);
        let mut ours = Vec::new();
        for kind in kinds.split(',') {
            let kind = match kind {
                "eq" | "equality" => "eq",
                "pres" | "present" => "pres",
                "sub" | "substr" | "subinitial" | "subany" | "subfinal" | "substring" => "sub",
                other => {
                    self.note(
                        &d.origin,
                        format!("index type {other}: Meridian indexes eq, pres, sub and ord"),
                    );
                    continue;
                }
            };
            if !ours.contains(&kind) {
                ours.push(kind);
            }
        }
        for attr in attrs.split(',').filter(|a| !a.is_empty()) {
            if attr == "default" {
                self.note(
                    &d.origin,
                    "index default: name each attribute's index types".to_owned(),
                );
                continue;
            }
            match self
                .indexes
                .iter_mut()
                .find(|(a, _)| a.eq_ignore_ascii_case(attr))
            {
                Some((_, kinds)) => {
                    for kind in &ours {
                        if !kinds.iter().any(|k| k == kind) {
                            kinds.push((*kind).to_owned());
                        }
                    }
                }
                None => self.indexes.push((
                    attr.to_owned(),
                    ours.iter().map(|k| (*k).to_owned()).collect(),
                )),
            }
        }
    }
}

impl Translation {
    /// `sizelimit 500` or `sizelimit size.soft=500 ...`: the soft (or only)
    /// number.
    fn limit(&mut self, d: &Directive, key: &str) {
        let number = d.args.iter().find_map(|a| {
            let value = a.rsplit('=').next().unwrap_or(a);
            if a.contains('=') && !a.contains("soft") && d.args.len() > 1 {
                return None;
            }
            value.parse::<u64>().ok()
        });
        match number {
            Some(n) if n > 0 => {
                let _ = writeln!(self.directory, "{key} = {n}");
            }
            _ => self.note(
                &d.origin,
                format!(
                    "{} {}: not translated (Meridian's limits bind everyone but the administrator; \
                     `unlimited` is its default for the administrator)",
                    d.name,
                    d.args.join(" ")
                ),
            ),
        }
    }
}

fn tls(d: &Directive, key: &str, out: &mut String) {
    if let Some(path) = d.args.first() {
        let _ = writeln!(out, "{key} = {}", acl::quote(path));
    }
}

/// `[groups]` gathered from the memberof, refint, unique and dynlist overlays of
/// every database (Meridian keeps one setting for all).
#[derive(Default)]
struct Groups {
    group_classes: Vec<String>,
    member_attributes: Vec<String>,
    memberof_attribute: Option<String>,
    refint_attributes: Vec<String>,
    unique_attributes: Vec<String>,
    unique_subtrees: Vec<String>,
    /// dynlist's group class, URL type and member type.
    dynamic: Option<(String, String, String)>,
}

fn push_new(list: &mut Vec<String>, value: &str) {
    if !list.iter().any(|v| v.eq_ignore_ascii_case(value)) {
        list.push(value.to_owned());
    }
}

impl Groups {
    /// One memberof instance (slapd needs one per group class).
    fn memberof(&mut self, directives: &[Directive]) -> String {
        let arg = |name: &str| {
            directives
                .iter()
                .find(|d| d.name.eq_ignore_ascii_case(name))
                .and_then(|d| d.args.first().cloned())
        };
        push_new(
            &mut self.group_classes,
            &arg("memberof-group-oc").unwrap_or_else(|| "groupOfNames".into()),
        );
        push_new(
            &mut self.member_attributes,
            &arg("memberof-member-ad").unwrap_or_else(|| "member".into()),
        );
        if let Some(attr) = arg("memberof-memberof-ad") {
            self.memberof_attribute = Some(attr);
        }
        let mut what =
            "built in ([groups] memberof: memberOf kept in the same write as the group's change)"
                .to_owned();
        if arg("memberof-dangling").is_some_and(|d| !d.eq_ignore_ascii_case("ignore")) {
            what.push_str("; memberof-dangling is not translated: a member that does not exist is passed over");
        }
        what
    }

    fn refint(&mut self, directives: &[Directive]) -> String {
        let mut what = "built in ([groups] refint)".to_owned();
        for d in directives {
            match d.name.as_str() {
                "refint_attributes" => {
                    for attr in &d.args {
                        push_new(&mut self.refint_attributes, attr);
                    }
                }
                "refint_nothing" => what.push_str(
                    "; refint_nothing is not translated: a value the schema will not let go stays",
                ),
                "refint_modifiersname" => {}
                other => what.push_str(&format!("; {other} is not translated")),
            }
        }
        what
    }

    /// `unique_uri ldap:///BASE?ATTRS?SCOPE` (and the older
    /// `unique_base`/`unique_attributes`).
    fn unique(&mut self, directives: &[Directive]) -> String {
        let mut what = "built in ([groups] unique_attributes, unique_subtrees)".to_owned();
        for d in directives {
            match d.name.as_str() {
                "unique_uri" => {
                    for uri in &d.args {
                        let Some(rest) = uri.strip_prefix("ldap:///") else {
                            what.push_str(&format!(
                                "; {uri}: not translated (not ldap:///BASE?ATTRS?SCOPE)"
                            ));
                            continue;
                        };
                        let mut parts = rest.split('?');
                        let base = parts.next().unwrap_or_default();
                        if !base.is_empty() {
                            push_new(&mut self.unique_subtrees, base);
                        }
                        for attr in parts
                            .next()
                            .unwrap_or_default()
                            .split(',')
                            .filter(|a| !a.is_empty())
                        {
                            push_new(&mut self.unique_attributes, attr);
                        }
                        if parts.nth(1).is_some_and(|filter| !filter.is_empty()) {
                            what.push_str(&format!("; {uri}: its filter is not translated"));
                        }
                    }
                }
                "unique_base" => {
                    for base in &d.args {
                        push_new(&mut self.unique_subtrees, base);
                    }
                }
                "unique_attributes" => {
                    for attr in &d.args {
                        push_new(&mut self.unique_attributes, attr);
                    }
                }
                other => what.push_str(&format!("; {other} is not translated")),
            }
        }
        what
    }

    /// `dynlist-attrset GROUP-OC [URI] URL-AD [MEMBER-AD[+MEMBEROF-AD[@OC]]]`:
    /// the first set that names a member type (dynamic groups); dynamic
    /// lists (no member type: the found entries' attributes merged into
    /// the group) are not served.
    fn dynlist(&mut self, directives: &[Directive]) -> String {
        let mut what =
            "built in ([groups] dynamic_*: members and memberOf computed when read)".to_owned();
        for d in directives {
            if d.name != "dynlist-attrset" {
                what.push_str(&format!("; {} is not translated", d.name));
                continue;
            }
            let mut args = d.args.iter().map(String::as_str);
            let class = args.next().unwrap_or_default();
            let mut url = args.next().unwrap_or_default();
            // An optional URI restricting which groups: not translated.
            if url.to_ascii_lowercase().starts_with("ldap") {
                what.push_str(&format!(
                    "; {url}: the URI restricting the groups is not translated"
                ));
                url = args.next().unwrap_or_default();
            }
            let member = args.next().map(|m| m.split(['+', '@']).next().unwrap_or(m));
            match member {
                Some(member) if !member.contains(':') && self.dynamic.is_none() => {
                    self.dynamic = Some((class.to_owned(), url.to_owned(), member.to_owned()));
                }
                Some(member) if member.contains(':') => what.push_str(&format!(
                    "; {}: a mapped member type is not translated",
                    d.args.join(" ")
                )),
                Some(_) => what.push_str(&format!(
                    "; {}: Meridian keeps one dynamic group class, the first",
                    d.args.join(" ")
                )),
                None => what.push_str(&format!(
                    "; {}: dynamic lists (the URL's entries' attributes merged into the group) are not served",
                    d.args.join(" ")
                )),
            }
        }
        what
    }

    /// The `[groups]` keys that differ from the defaults.
    fn toml(&self) -> String {
        let list = |values: &[String]| {
            let quoted: Vec<String> = values.iter().map(|v| acl::quote(v)).collect();
            format!("[{}]", quoted.join(", "))
        };
        let mut out = String::new();
        if !self.group_classes.is_empty() {
            let _ = writeln!(out, "group_classes = {}", list(&self.group_classes));
            let _ = writeln!(out, "member_attributes = {}", list(&self.member_attributes));
        }
        if let Some(attr) = &self.memberof_attribute {
            let _ = writeln!(out, "memberof_attribute = {}", acl::quote(attr));
        }
        if !self.refint_attributes.is_empty() {
            let _ = writeln!(out, "refint_attributes = {}", list(&self.refint_attributes));
        }
        if !self.unique_attributes.is_empty() {
            let _ = writeln!(out, "unique_attributes = {}", list(&self.unique_attributes));
            let _ = writeln!(out, "unique_subtrees = {}", list(&self.unique_subtrees));
        }
        if let Some((class, url, member)) = &self.dynamic {
            let _ = writeln!(out, "dynamic_group_class = {}", acl::quote(class));
            let _ = writeln!(out, "dynamic_url_attribute = {}", acl::quote(url));
            let _ = writeln!(out, "dynamic_member_attribute = {}", acl::quote(member));
        }
        out
    }
}
