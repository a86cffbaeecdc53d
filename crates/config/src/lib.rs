//! Meridian's configuration: one TOML file, every key with a default.
//!
//! `Config::default()` is a usable server; a file only names what it
//! changes. Unknown keys are refused (a typo must not silently fall back to
//! a default), and [`Config::validate`] names the key and the reason for
//! every value it refuses. `docs/configuration.md` lists every key.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

mod cluster;
mod groups;
mod validate;
pub use cluster::{Ack, ClusterConfig, ClusterNodeConfig, Conflicts, FollowerWrites, Reads};
pub use groups::GroupsConfig;

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML, or a key is unknown or of the wrong type.
    #[error("config file {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message (it names the line and the key).
        message: String,
    },
    /// A key has a value outside what it accepts.
    #[error("config key `{key}`: {reason}")]
    Invalid {
        /// Dotted key, e.g. `server.listen`.
        key: &'static str,
        /// What is wrong and what is accepted.
        reason: String,
    },
}

/// The whole configuration.
#[derive(Debug, Clone, Deserialize, Serialize, Default, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Network and per-connection limits.
    pub server: ServerConfig,
    /// The directory served.
    pub directory: DirectoryConfig,
    /// Storage.
    pub storage: StorageConfig,
    /// Logging.
    pub log: LogConfig,
    /// What clients may make the server do: password hash costs, binds.
    pub security: SecurityConfig,
    /// What a password users set must be.
    pub password_policy: PasswordPolicyConfig,
    /// `[[access]]`: access rules, first match decides; none configured
    /// means the default rules (see docs/configuration.md).
    pub access: Vec<AccessRuleConfig>,
    /// `[cluster]`: replication; off unless `cluster.nodes` lists nodes.
    pub cluster: ClusterConfig,
    /// `[groups]`: memberOf, referential integrity, unique attributes.
    pub groups: GroupsConfig,
}

/// One `[[access]]` rule.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AccessRuleConfig {
    /// The entries: `*`, `base:DN`, `subtree:DN` or `children:DN`.
    pub to: String,
    /// Only these attribute types (and their subtypes); empty: the
    /// entry itself and all its attributes.
    #[serde(default)]
    pub attrs: Vec<String>,
    /// Who gets what, first match decides.
    pub by: Vec<AccessGrantConfig>,
}

/// One `by` clause of an `[[access]]` rule.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AccessGrantConfig {
    /// `*`, `anonymous`, `users`, `self`, `dn:DN` or `group:DN`.
    pub who: String,
    /// `none`, `auth`, `compare`, `search`, `read` or `write`.
    pub grant: String,
}

/// Which storage engine holds the data.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// LMDB files under `directory.data_dir`: durable.
    Mdb,
    /// LMDB on a memory file system (`/dev/shm`), never synced: volatile.
    Memory,
}

/// When a write is acknowledged.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// After its transaction is fsync'd (the default).
    Durable,
    /// After its transaction is committed, without fsync: a crash of the
    /// machine (not of the process) can lose the last writes.
    Relaxed,
    /// After the command is appended to a journal and the journal is
    /// fsync'd; the database itself is written without fsync and is
    /// recovered from a periodic copy and the journal after a crash of
    /// the machine. As safe as `durable`, and far fewer bytes written per
    /// update (see `docs/design/storage.md`).
    Journal,
}

/// Index kinds, as in OpenLDAP's `index` directive.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "lowercase")]
pub enum IndexKind {
    /// Equality (`eq`).
    Eq,
    /// Presence (`pres`).
    Pres,
    /// Substrings (`sub`), by trigrams of the prepared value.
    Sub,
    /// Ordering (`ord`): values in the order of the type's ORDERING
    /// rule, so `>=` and `<=` filters read a range of keys. An attribute
    /// without an ordering rule cannot have one.
    Ord,
}

/// The most DNs `storage.dn_cache_entries` may ask for: 2 GiB of tables.
pub const MAX_DN_CACHE_ENTRIES: usize = 1 << 25;

/// `[storage]`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct StorageConfig {
    /// `mdb` (durable, default) or `memory` (volatile).
    pub backend: Backend,
    /// `durable` (default), `journal` or `relaxed`.
    pub durability: Durability,
    /// With `durability = "journal"`: journal bytes after which the
    /// database is copied (a checkpoint) and older journal files removed.
    /// Bounds the journal's disk use and the replay after a machine crash.
    pub journal_checkpoint_bytes: u64,
    /// Initial LMDB map size; the map grows by doubling when full. Only
    /// for durable stores: elsewhere the map is the file, allocated as it
    /// grows (`docs/design/storage.md`, "Map and file").
    pub map_size_bytes: u64,
    /// Most commands committed in one write transaction (group commit).
    pub max_batch: usize,
    /// Commands waiting for the writer before submitters wait too.
    pub queue_depth: usize,
    /// DNs whose entry IDs the writer remembers for modifies, and as
    /// many that readers remember for reads by DN and base searches (at
    /// most [`MAX_DN_CACHE_ENTRIES`]; each table takes 32 bytes a DN,
    /// reserved at start and paid for as it fills); 0 remembers none. A
    /// remembered ID saves a `dn2id` search and is checked against the
    /// record it names.
    pub dn_cache_entries: usize,
    /// Memory for scan columns: copies of the values of attribute types
    /// that searches keep filtering on without an index, so that such a
    /// search reads those values instead of every stored entry. 0 keeps
    /// none (every such search reads the entries).
    pub scan_columns_bytes: u64,
    /// Commits the change feed keeps for followers (content
    /// synchronization and persistent searches) that have not read
    /// them yet; one that falls further behind is dropped (its search
    /// ends with e-syncRefreshRequired, or its persistent search with
    /// adminLimitExceeded) instead of being buffered for.
    pub change_feed_batches: usize,
    /// Deleted entries remembered (their DN and entryUUID) so that a
    /// content synchronization resuming from its cookie is told what
    /// went without being sent every entry (slapd's
    /// `syncprov-sessionlog`); a consumer older than the oldest is sent
    /// every entry's presence instead. Kept in memory, since the start.
    pub sync_session_log: usize,
    /// Indexed attributes and their kinds, e.g. `uid = ["eq", "sub"]`.
    pub indexes: std::collections::BTreeMap<String, Vec<IndexKind>>,
}

impl Default for StorageConfig {
    fn default() -> Self {
        let mut indexes = std::collections::BTreeMap::new();
        indexes.insert("objectClass".to_owned(), vec![IndexKind::Eq]);
        indexes.insert("uid".to_owned(), vec![IndexKind::Eq, IndexKind::Sub]);
        indexes.insert("cn".to_owned(), vec![IndexKind::Eq, IndexKind::Sub]);
        indexes.insert("mail".to_owned(), vec![IndexKind::Eq]);
        indexes.insert("entryUUID".to_owned(), vec![IndexKind::Eq]);
        // What `[groups]` looks entries up by: a group's members, a
        // member's groups, and the references that follow an entry.
        for name in [
            "member",
            "uniqueMember",
            "memberOf",
            "manager",
            "secretary",
            "seeAlso",
        ] {
            indexes.insert(name.to_owned(), vec![IndexKind::Eq]);
        }
        StorageConfig {
            backend: Backend::Mdb,
            durability: Durability::Durable,
            // About a million modify records: seconds of replay, and a
            // copy of the database per quarter gigabyte of updates.
            journal_checkpoint_bytes: 256 << 20,
            // Address space, not memory or disk: LMDB maps it lazily and the
            // file grows only as pages are written. 8 GiB holds several
            // million typical entries before the first growth.
            map_size_bytes: 8 << 30,
            // A batch commits with one fsync; 1000 modifies per fsync is
            // where seed 000's bundles sit.
            max_batch: 1000,
            queue_depth: 65_536,
            // Up to 64 MB: every DN of seed 000's million entries.
            dn_cache_entries: 1_000_000,
            // Two or three columns of a million short values each.
            scan_columns_bytes: 256 << 20,
            // A batch holds at most max_batch changes of a few dozen
            // bytes each: at most some megabytes, and seconds of the
            // heaviest write load for a follower to catch up.
            change_feed_batches: 1024,
            sync_session_log: 10_000,
            indexes,
        }
    }
}

/// `[server]`: listening, connections and protocol limits.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Address to listen on for plain LDAP (StartTLS upgrades a
    /// connection when a certificate is configured).
    pub listen: String,
    /// Address to listen on for LDAP over TLS (`ldaps://`); empty: none.
    /// Needs `security.tls_certificate_file` and `security.tls_key_file`.
    pub listen_tls: String,
    /// Path of a Unix domain socket to serve LDAP on (`ldapi://`); empty:
    /// none. A client there may bind with SASL EXTERNAL as the user and
    /// group the kernel reports for it: `gidNumber=G+uidNumber=U,
    /// cn=peercred,cn=external,cn=auth`, as slapd names them.
    pub listen_ldapi: String,
    /// The permission bits of the `ldapi://` socket (who may connect).
    pub ldapi_mode: u32,
    /// The owner and group of the `ldapi://` socket, by name or number;
    /// empty: the server's.
    pub ldapi_owner: String,
    /// See `ldapi_owner`.
    pub ldapi_group: String,
    /// A SASL EXTERNAL bind over `ldapi://` by the root user (uid 0) is
    /// the administrator, as Debian's slapd lets root manage it.
    pub ldapi_root_is_admin: bool,
    /// Address of the HTTP endpoint of metrics (`GET /metrics`, in the
    /// Prometheus text format), `/healthz` and `/readyz`; empty: none.
    /// The metrics say what the directory does, not what it holds; keep
    /// the address on a private network all the same.
    pub metrics_listen: String,
    /// Connections served at once; one more gets a Notice of Disconnection
    /// (busy) and is closed.
    pub max_connections: usize,
    /// Requests of one connection in progress or waiting to be written;
    /// at the limit the server stops reading that socket.
    pub max_outstanding_per_connection: usize,
    /// Seconds without a request before a connection is closed; 0 never.
    pub idle_timeout_secs: u64,
    /// Updates one LDAP transaction (RFC 5805) may hold; one more is
    /// refused (adminLimitExceeded) and the transaction goes on without it.
    pub max_transaction_updates: usize,
    /// Bytes of updates one LDAP transaction may hold (their DNs and
    /// values), likewise.
    pub max_transaction_bytes: usize,
    /// Seconds an LDAP transaction may stay open; past them it is
    /// aborted, told by an Aborted Transaction notice when next used.
    pub transaction_timeout_secs: u64,
    /// Searches that follow changes (content synchronization in
    /// refreshAndPersist mode, persistent searches) served at once over
    /// every connection; one more is refused (adminLimitExceeded).
    pub max_followers: usize,
    /// The same, per connection.
    pub max_followers_per_connection: usize,
    /// Largest accepted LDAPMessage in bytes.
    pub max_pdu_bytes: usize,
    /// Largest accepted LDAPMessage before a successful bind (the bind
    /// request itself included), as slapd's `sockbuf_max_incoming`.
    pub max_pdu_bytes_anonymous: usize,
    /// Connections served at once from one client IP address; 0: no
    /// limit but `max_connections`.
    pub max_connections_per_ip: usize,
    /// Seconds a new connection has to send its first request; 0 never.
    pub first_request_timeout_secs: u64,
    /// Seconds a PDU may take from its first byte to its last; 0 never.
    pub pdu_timeout_secs: u64,
    /// Bytes of responses one connection may have waiting for its client
    /// to read them; past it the server reads no more of its requests.
    pub max_buffered_bytes: usize,
    /// Bytes of requests begun and not yet whole, over every connection:
    /// past it a connection holding a large part of one is closed with
    /// busy, so many clients each sending most of a large PDU and then
    /// stalling cannot take the server's memory.
    pub max_partial_pdu_bytes: usize,
    /// Deepest accepted nesting of BER values in a message (filters).
    pub max_ber_depth: usize,
    /// Milliseconds the server holds a Queue Length bundle's responses
    /// waiting for the announced count before sending what it has.
    pub queue_length_flush_ms: u64,
    /// Seconds given to connections to finish and flush at shutdown.
    pub shutdown_grace_secs: u64,
    /// Worker threads; 0 means one per CPU.
    pub worker_threads: usize,
    /// The user `serve` becomes once its sockets and TLS key are taken
    /// (started as root); empty: stays who it was started as.
    pub user: String,
}

/// `[directory]`: what is served and who administers it.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct DirectoryConfig {
    /// The naming context (its database is `data_dir/db`).
    pub suffix: String,
    /// More naming contexts, each with its own database in
    /// `data_dir/contexts/<suffix>`. One inside another's tree is glued
    /// below it, as slapd's subordinate databases: searches of the outer
    /// tree walk it too, an entry cannot move between the two
    /// (affectsMultipleDSAs), and only the outer is listed in the root
    /// DSE's namingContexts.
    pub additional_suffixes: Vec<String>,
    /// The administrator, who bypasses access control.
    pub admin_dn: String,
    /// The administrator's password as a hash with its scheme
    /// (`{SSHA}...`, `{ARGON2}...`: any a bind verifies), as slapd's
    /// `rootpw` holds it; `meridian migrate` carries it over. Empty: the
    /// hash in `data_dir/admin.secret` (generated at the first start) or
    /// `MERIDIAN_ADMIN_PASSWORD`, which wins over both.
    pub admin_password_hash: String,
    /// This server's ID in entryCSNs (OpenLDAP's serverID), 0..=4095:
    /// servers whose writes meet must have different ones.
    pub server_id: u16,
    /// Where databases and the administrator's hashed password live.
    pub data_dir: PathBuf,
    /// Schema files loaded after the built-in schema, in order (OpenLDAP
    /// `.schema` format or LDIF subschema entries).
    pub schema_files: Vec<PathBuf>,
    /// Accept userPassword values stored without a scheme (clear text) at
    /// bind. Off: clear-text values never authenticate.
    pub allow_cleartext_passwords: bool,
    /// On a successful simple bind whose password matched a stored value
    /// in another scheme than `{ARGON2}` (migrated `{MD5}`, `{SSHA}`,
    /// `{CRYPT}`, clear text), replace that value by its `{ARGON2}` hash.
    pub rehash_on_bind: bool,
    /// Most entries one search returns to anyone but the administrator
    /// (all pages of a paged search together); a client may ask for less.
    pub size_limit: usize,
    /// Longest a search by anyone but the administrator runs, in seconds.
    pub time_limit_secs: u64,
    /// Most entries one search by anyone but the administrator examines,
    /// matching or not (then adminLimitExceeded), as 389 DS's
    /// `nsslapd-lookthroughlimit`; 0: no limit.
    pub lookthrough_limit: u64,
    /// Most filters a search filter by anyone but the administrator may
    /// be made of (`(&(a=1)(b=2))` is three); more is adminLimitExceeded.
    pub max_filter_items: usize,
    /// Most changes one modify request may make (then
    /// adminLimitExceeded). Applying a modify looks each change's
    /// attribute up among the entry's, so a request of a hundred thousand
    /// changes would hold the writer, and every write behind it, for
    /// minutes. Many values in one change are not limited by this.
    pub max_modify_changes: usize,
    /// Most RDNs a DN in a request may have (then invalidDNSyntax, as
    /// slapd refuses over-deep DNs): each level of a DN is a lookup when
    /// its matchedDN or its access is worked out.
    pub max_dn_rdns: usize,
    /// Most keys a server-side sort (RFC 2891) may have; more is refused
    /// (unwillingToPerform in the sort response), as slapd's
    /// `sssvlv-maxkeys`.
    pub sort_max_keys: usize,
    /// Memory, in bytes, that the sort keys of every sorted search
    /// (server-side sort, virtual list view) in progress may hold
    /// together. A sort that would need more is answered
    /// adminLimitExceeded in its sort response: unsorted results under a
    /// non-critical control, none under a critical one.
    pub sort_memory_bytes: usize,
    /// Who may act as another user with the proxied authorization control
    /// (RFC 4370), besides the administrator: `dn:DN` or `group:DN`
    /// (members by `member`/`uniqueMember`). Nobody may assume the
    /// administrator this way.
    pub proxy_authorizers: Vec<String>,
    /// Dynamic entries (RFC 2589): the TTL an entry gets when added, and
    /// the least and most a Refresh may grant, in seconds.
    pub dynamic_default_ttl_secs: u32,
    /// See `dynamic_default_ttl_secs`.
    pub dynamic_min_ttl_secs: u32,
    /// See `dynamic_default_ttl_secs`.
    pub dynamic_max_ttl_secs: u32,
    /// How often expired dynamic entries are deleted, in seconds.
    pub dynamic_sweep_secs: u64,
    /// Memory (KiB) of the Argon2id hash of each new password, the
    /// administrator's included. Every bind verifies one: a server whose
    /// clients bind per operation pays this per operation.
    pub password_hash_memory_kib: u32,
    /// Passes of that hash over its memory.
    pub password_hash_iterations: u32,
    /// Binds verified recently, kept (as keyed digests) so that a client
    /// binding again with the same password skips the slow hash; 0 keeps
    /// none. See docs/configuration.md for the trade-off.
    pub bind_cache_entries: usize,
}

/// `[security]`: bounds on the work a client can make the server do
/// through the data it writes or the binds it tries.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SecurityConfig {
    /// Most memory (KiB) an Argon2 or yescrypt password hash may use. A
    /// userPassword written already hashed above it is refused
    /// (constraintViolation); one stored anyway never verifies.
    pub password_max_memory_kib: u32,
    /// Most Argon2 passes.
    pub password_max_iterations: u32,
    /// Most Argon2 lanes.
    pub password_max_lanes: u32,
    /// Most rounds of a `{PBKDF2-SHA256}` hash.
    pub password_max_pbkdf2_rounds: u32,
    /// Most rounds of a `{CRYPT}` SHA-crypt (`$5$`, `$6$`) hash.
    pub password_max_crypt_sha_rounds: u32,
    /// Highest cost of a `{CRYPT}` bcrypt hash.
    pub password_max_bcrypt_cost: u32,
    /// Most values userPassword may hold in one entry (then
    /// constraintViolation): a bind tries each, so a user who stored a
    /// thousand would make every bind to its DN cost a thousand hashes.
    pub max_password_values: usize,
    /// The crypt(3) methods a `{CRYPT}` value may use, by prefix
    /// (`$y$`, `$6$`, `$5$`, `$2b$`, `$2a$`, `$2y$`, `$1$`; `des` for
    /// traditional DES).
    pub password_crypt_methods: Vec<String>,
    /// Failed binds (per DN or per client address, within
    /// `bind_failure_window_secs`) after which each further failure is
    /// answered late; 0: never.
    pub bind_delay_after_failures: u32,
    /// The longest such delay, in milliseconds (it doubles from 100).
    pub bind_max_delay_ms: u64,
    /// Failed binds to one DN that lock it for `bind_lockout_secs`
    /// (binds to it then fail unchecked); 0: never. Not the
    /// administrator's DN.
    pub bind_lockout_failures: u32,
    /// Failed binds from one client address that lock the address; 0:
    /// never.
    pub bind_lockout_failures_per_ip: u32,
    /// Seconds over which failures are counted.
    pub bind_failure_window_secs: u64,
    /// Seconds a lockout lasts.
    pub bind_lockout_secs: u64,
    /// The server's certificate chain, PEM (the server's certificate
    /// first); with `tls_key_file`, enables StartTLS and
    /// `server.listen_tls`. Read again on SIGHUP and when the file
    /// changes.
    pub tls_certificate_file: Option<PathBuf>,
    /// The private key of the certificate, PEM (PKCS #8, PKCS #1 or
    /// SEC1).
    pub tls_key_file: Option<PathBuf>,
    /// Refuse simple binds with a password, and every write, on a
    /// connection without TLS (confidentialityRequired); a connection
    /// of `server.listen_tls` always has TLS.
    pub require_tls: bool,
    /// Client certificates in the TLS handshake: `none` (not asked for),
    /// `optional` (asked for, verified when sent) or `required` (a
    /// handshake without one fails). A verified certificate allows SASL
    /// EXTERNAL binds.
    pub client_certificates: String,
    /// The CAs client certificates are verified against, PEM; needed
    /// unless `client_certificates` is `none`.
    pub tls_ca_file: Option<PathBuf>,
    /// How a client certificate names its entry for SASL EXTERNAL:
    /// `subject` (its subject is the entry's DN) or a search filter with
    /// `{name}` placeholders for subject attributes, e.g. `(uid={cn})`;
    /// exactly one entry must match.
    pub certificate_map: String,
}

impl Default for SecurityConfig {
    fn default() -> Self {
        SecurityConfig {
            password_max_memory_kib: 65_536,
            password_max_iterations: 16,
            password_max_lanes: 8,
            password_max_pbkdf2_rounds: 1_200_000,
            password_max_crypt_sha_rounds: 1_000_000,
            password_max_bcrypt_cost: 14,
            max_password_values: 8,
            password_crypt_methods: ["$y$", "$6$", "$5$", "$2b$", "$2a$", "$2y$", "$1$", "des"]
                .map(str::to_owned)
                .to_vec(),
            bind_delay_after_failures: 3,
            bind_max_delay_ms: 2_000,
            bind_lockout_failures: 10,
            bind_lockout_failures_per_ip: 100,
            bind_failure_window_secs: 300,
            bind_lockout_secs: 300,
            tls_certificate_file: None,
            tls_key_file: None,
            require_tls: false,
            client_certificates: "none".into(),
            tls_ca_file: None,
            certificate_map: "subject".into(),
        }
    }
}

/// `[password_policy]`: what a password a user sets must be (the
/// administrator may set any).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct PasswordPolicyConfig {
    /// Fewest characters of a new password; 0: no minimum.
    pub min_length: usize,
    /// Fewest character classes (lower case, upper case, digits,
    /// others) of a new password, 0..=4.
    pub min_classes: usize,
    /// Failed binds to an entry that lock it (kept in the entry:
    /// `pwdFailureTime`, `pwdAccountLockedTime`); 0: never.
    pub lockout_failures: usize,
    /// Seconds a lock lasts; 0: until the administrator deletes
    /// `pwdAccountLockedTime`.
    pub lockout_secs: u64,
    /// Seconds after which a failure is no longer counted; 0: failures
    /// count until a successful bind.
    pub failure_window_secs: u64,
    /// Seconds a password is good for after it is set (`pwdChangedTime`);
    /// 0: forever.
    pub max_age_secs: u64,
    /// Seconds before expiry in which a successful bind is warned (the
    /// password policy control); 0: no warning.
    pub expire_warning_secs: u64,
    /// Passwords remembered per entry (`pwdHistory`), which a user's new
    /// password may not repeat (nor the current one); 0: none.
    pub history: usize,
    /// A user changing its own password must give the old one, by
    /// Password Modify or by a modify (OpenLDAP's pwdSafeModify).
    pub safe_modify: bool,
    /// Binds an expired password still allows, each warned with the
    /// number left (pwdGraceAuthNLimit); 0: none.
    pub grace_logins: usize,
    /// Seconds after a change before a user may change the password
    /// again (pwdMinAge); 0: at once.
    pub min_age_secs: u64,
    /// Users may change their own password (pwdAllowUserChange).
    pub allow_user_change: bool,
    /// A password the administrator sets must be changed by the user
    /// before anything else once bound (pwdMustChange: the reset marks
    /// the entry `pwdReset: TRUE`).
    pub must_change: bool,
}

impl Default for PasswordPolicyConfig {
    /// No rules; users may change their own password.
    fn default() -> Self {
        PasswordPolicyConfig {
            min_length: 0,
            min_classes: 0,
            lockout_failures: 0,
            lockout_secs: 0,
            failure_window_secs: 0,
            max_age_secs: 0,
            expire_warning_secs: 0,
            history: 0,
            safe_modify: false,
            grace_logins: 0,
            min_age_secs: 0,
            allow_user_change: true,
            must_change: false,
        }
    }
}

/// `[log]`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// `tracing` filter directive, e.g. `info` or `meridian=debug`;
    /// `RUST_LOG` overrides it.
    pub level: String,
    /// One line per operation (target `meridian::access`).
    pub access: bool,
    /// Where the log goes: empty for standard error, else a file, renamed
    /// to `FILE.1` (`.2`, ...) when it reaches `file_max_bytes`.
    pub file: String,
    /// Size at which the log file is rotated.
    pub file_max_bytes: u64,
    /// Rotated files kept (`FILE.1` .. `FILE.N`); older ones are removed.
    pub file_keep: u32,
    /// Lines waiting for the writer (and at most 512 bytes a line on
    /// average); past it new lines are dropped (and counted in the log)
    /// rather than make an operation wait.
    pub queue_lines: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: "127.0.0.1:3389".into(),
            listen_tls: String::new(),
            listen_ldapi: String::new(),
            // Anyone on the host may connect; what they may do is what
            // their identity may (anonymous until they bind).
            ldapi_mode: 0o666,
            ldapi_owner: String::new(),
            ldapi_group: String::new(),
            ldapi_root_is_admin: true,
            metrics_listen: String::new(),
            // Each connection costs a few KiB when idle; 10,000 covers the
            // 5,000 connections of seed 003 with room to spare.
            max_connections: 10_000,
            // Deep enough for the 1000-request bundles of seed 000.
            max_outstanding_per_connection: 4096,
            // As 389 Directory Server's default idle time-out.
            idle_timeout_secs: 3600,
            // A provisioning job's user with its groups, many times over;
            // the bytes bound what one connection's transaction holds.
            max_transaction_updates: 1_000,
            max_transaction_bytes: 16 << 20,
            // A person at an interactive tool, not a forgotten session.
            transaction_timeout_secs: 300,
            // Read replicas, proxies and provisioning daemons: tens;
            // each costs a task and its place in the change feed.
            max_followers: 1_000,
            max_followers_per_connection: 16,
            max_pdu_bytes: meridian_proto::DecodeLimits::DEFAULT_MAX_PDU_BYTES,
            // slapd's sockbuf_max_incoming: 256 KiB before a bind.
            max_pdu_bytes_anonymous: 256 * 1024,
            // A tenth of all connections: one host cannot take them all,
            // and a load generator's hundreds of sessions still fit.
            max_connections_per_ip: 1_000,
            first_request_timeout_secs: 30,
            pdu_timeout_secs: 30,
            // Eight streamed-search steps' worth; a bundle of a thousand
            // pipelined answers is a small part of it.
            max_buffered_bytes: 8 << 20,
            // A thousand clients each halfway through an anonymous
            // request of the largest size.
            max_partial_pdu_bytes: 256 << 20,
            max_ber_depth: meridian_proto::DecodeLimits::DEFAULT_MAX_DEPTH,
            // Short next to a network round trip, long next to the time a
            // bundle's responses take to become ready.
            queue_length_flush_ms: 5,
            shutdown_grace_secs: 10,
            worker_threads: 0,
            user: String::new(),
        }
    }
}

impl Default for DirectoryConfig {
    fn default() -> Self {
        DirectoryConfig {
            suffix: "dc=example,dc=com".into(),
            additional_suffixes: Vec::new(),
            admin_dn: "cn=admin,dc=example,dc=com".into(),
            admin_password_hash: String::new(),
            server_id: 0,
            data_dir: PathBuf::from("./meridian-data"),
            schema_files: Vec::new(),
            allow_cleartext_passwords: false,
            rehash_on_bind: false,
            // slapd's defaults.
            size_limit: 500,
            time_limit_secs: 3600,
            // Twice the entries of the largest seed data set: an unindexed
            // search of a million entries is allowed, a runaway is not.
            lookthrough_limit: 2_000_000,
            max_filter_items: 4096,
            max_modify_changes: 1000,
            // Far deeper than any directory tree in use (a few levels to
            // a dozen); a DN of 16,000 RDNs fits in 64 KB.
            max_dn_rdns: 128,
            // slapd's sssvlv default.
            sort_max_keys: 5,
            // About two million entries sorted by one short key.
            sort_memory_bytes: 256 << 20,
            proxy_authorizers: Vec::new(),
            // OpenLDAP's dds defaults: a day by default, a year at most.
            dynamic_default_ttl_secs: 86_400,
            dynamic_min_ttl_secs: 10,
            dynamic_max_ttl_secs: 31_536_000,
            dynamic_sweep_secs: 10,
            // The argon2 crate's defaults (OWASP's minimum for Argon2id).
            password_hash_memory_kib: 19_456,
            password_hash_iterations: 2,
            bind_cache_entries: 10_000,
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: "info".into(),
            access: true,
            file: String::new(),
            file_max_bytes: 100 << 20,
            file_keep: 5,
            queue_lines: 65_536,
        }
    }
}

impl Config {
    /// The configuration in effect, as TOML (every key, defaults
    /// included), for the start-up log: the cluster secret is replaced
    /// by a note of its length, so the text may be shown and kept.
    pub fn effective_toml(&self) -> String {
        let mut shown = self.clone();
        if !shown.cluster.secret.is_empty() {
            shown.cluster.secret = format!("(set, {} characters)", shown.cluster.secret.len());
        }
        if let Some(scheme) = shown
            .directory
            .admin_password_hash
            .split_inclusive('}')
            .next()
            .filter(|_| !shown.directory.admin_password_hash.is_empty())
        {
            shown.directory.admin_password_hash = format!("{scheme}(set)");
        }
        toml::to_string(&shown).unwrap_or_else(|e| format!("(not shown: {e})"))
    }

    /// Parses TOML text; `path` is only used in error messages.
    pub fn from_toml(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Reads, parses and validates a file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_toml(&text, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_choices_are_parsed_once_and_an_unknown_one_is_refused() {
        let config = Config::from_toml(
            "[cluster]\nack = \"all\"\nreads = \"linearizable\"\nfollowers = \"referral\"\n",
            Path::new("x.toml"),
        )
        .unwrap();
        assert_eq!(
            (
                config.cluster.ack,
                config.cluster.reads,
                config.cluster.followers
            ),
            (Ack::All, Reads::Linearizable, FollowerWrites::Referral)
        );
        let err = Config::from_toml("[cluster]\nreads = \"eventual\"\n", Path::new("x.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("reads") && err.contains("eventual") && err.contains("linearizable"),
            "{err}"
        );
    }

    #[test]
    fn defaults_are_valid_and_an_empty_file_is_the_default() {
        Config::default().validate().unwrap();
        assert_eq!(
            Config::from_toml("", Path::new("x.toml")).unwrap(),
            Config::default()
        );
    }

    #[test]
    fn the_effective_configuration_reads_back_and_hides_the_secret() {
        let text = "[storage.indexes]\nuid = [\"eq\", \"sub\"]\n\
                    [[access]]\nto = \"*\"\nby = [ { who = \"users\", grant = \"read\" } ]\n\
                    [cluster]\nnode_id = 1\nsecret = \"a-cluster-secret-of-some-length\"\n\
                    [[cluster.nodes]]\nid = 1\npeer = \"127.0.0.1:7001\"\nldap = \"ldap://127.0.0.1:3389\"\n";
        let config = Config::from_toml(text, Path::new("x.toml")).unwrap();
        let shown = config.effective_toml();
        assert!(!shown.contains("a-cluster-secret"), "{shown}");
        assert!(shown.contains("(set, 31 characters)"), "{shown}");
        let back = Config::from_toml(&shown, Path::new("shown.toml")).unwrap();
        let mut expected = config.clone();
        expected.cluster.secret = "(set, 31 characters)".into();
        assert_eq!(back, expected);
        assert_eq!(
            Config::from_toml(&Config::default().effective_toml(), Path::new("d.toml")).unwrap(),
            Config::default()
        );
    }

    #[test]
    fn a_file_changes_only_what_it_names() {
        let c = Config::from_toml(
            "[server]\nlisten = \"0.0.0.0:1389\"\n[directory]\nsuffix = \"o=test\"\n",
            Path::new("x.toml"),
        )
        .unwrap();
        assert_eq!(c.server.listen, "0.0.0.0:1389");
        assert_eq!(c.directory.suffix, "o=test");
        assert_eq!(c.server.max_connections, 10_000);
    }

    #[test]
    fn unknown_keys_are_refused_with_their_name() {
        let err = Config::from_toml("[server]\nlisen = \"x\"\n", Path::new("x.toml")).unwrap_err();
        assert!(err.to_string().contains("lisen"), "{err}");
    }

    #[test]
    fn invalid_values_name_the_key() {
        for (text, key) in [
            ("[server]\nlisten = \"localhost\"", "server.listen"),
            ("[server]\nmax_connections = 0", "server.max_connections"),
            ("[server]\nmax_ber_depth = 2", "server.max_ber_depth"),
            ("[directory]\nsuffix = \"dc=\\\\x\"", "directory.suffix"),
            ("[directory]\nadmin_dn = \"\"", "directory.admin_dn"),
            (
                "[directory]\npassword_hash_memory_kib = 4",
                "directory.password_hash_memory_kib",
            ),
            (
                "[directory]\npassword_hash_iterations = 0",
                "directory.password_hash_iterations",
            ),
            (
                "[directory]\nbind_cache_entries = 2000000",
                "directory.bind_cache_entries",
            ),
            (
                "[storage]\ndn_cache_entries = 40000000",
                "storage.dn_cache_entries",
            ),
        ] {
            let err = Config::from_toml(text, Path::new("x.toml")).unwrap_err();
            assert!(err.to_string().contains(key), "{text}: {err}");
        }
    }
}
