//! Meridian's directory operations: LDAP requests checked against the
//! schema and the caller's rights, turned into store commands (writes) or
//! snapshot searches (reads).
//!
//! Writes are split in two so the server never holds a borrowed request
//! across an await: `prepare_*` (synchronous, borrows the request,
//! chooses timestamps, entryUUID and entryCSN) returns an owned
//! [`Command`]; [`Directory::execute`] runs it through the store's writer.
//!
//! Access: the administrator may do anything; everyone else is held to
//! the access rules ([`access`]), checked before a command is built for
//! writes and per entry and attribute for reads.
//!
//! This file holds the [`Directory`], its constructors and the routing
//! of a DN to the store of its naming context. Beside it: `prepare.rs`
//! (the write path), `credentials.rs` (userPassword: binds, hashing,
//! Password Modify), `rights.rs` (memberships, require, disclose),
//! `proxy.rs` (proxied authorization), `compare.rs`, `outcome.rs`,
//! `search/` and the modules named below.

pub mod access;
mod alias;
pub mod certificate;
pub mod clock;
mod compare;
mod credentials;
mod crypt;
pub mod dynamic;
pub mod encode;
pub mod follow;
pub mod ids;
mod outcome;
pub mod password;
pub mod policy;
mod prepare;
mod presence;
mod proxy;
mod referral;
mod relax;
mod rights;
mod search;
pub mod sort;

pub use credentials::PasswordChange;
pub use outcome::Outcome;
pub use search::dynlist::DynamicGroups;
pub use search::{PageRequest, SearchControls, SearchCursor, SearchDone, Step, VlvAnswer};
pub use sort::ControlValue;

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use meridian_model::Schema;
use meridian_model::dn::{Dn, RecentParent};
use meridian_model::entry::{AttrName, Description, Entry};
use meridian_model::modify::Modification;
use meridian_model::schema::AttrId;
use meridian_proto::ResultCode;
use meridian_store::{Command, Store};

use crate::access::AccessRules;
use crate::clock::Clock;
use crate::credentials::USER_PASSWORD;
use crate::ids::CsnSource;
use crate::prepare::NEW_ENTRY_ATTRIBUTES;
use crate::proxy::ProxyAuthorizer;

/// Who is asking. The DN is shared: every write a connection sends
/// takes a copy of its identity for its answer, and copying the DN
/// itself was three allocations per write (perf).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// Not bound, or bound anonymously.
    Anonymous,
    /// The configured administrator.
    Admin(Arc<Dn>),
    /// Another authenticated identity.
    User(Arc<Dn>),
}

impl Identity {
    fn dn_text(&self) -> &str {
        match self {
            Identity::Anonymous => "",
            Identity::Admin(dn) | Identity::User(dn) => dn.original(),
        }
    }
}

/// Server-side search limits (RFC 4511 section 4.5.1.4), which bind
/// everyone but the administrator.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Most entries one search returns.
    pub size_limit: usize,
    /// Longest a search runs.
    pub time_limit: Duration,
    /// Most entries one search examines, matching or not
    /// (`directory.lookthrough_limit`; `u64::MAX`: no limit).
    pub lookthrough_limit: u64,
    /// Most filters one search filter is made of
    /// (`directory.max_filter_items`).
    pub max_filter_items: usize,
    /// The longest one search step examines entries before it hands back
    /// so the server can serve others (10 ms by default; not a
    /// config key: tests set zero to cut a search into many steps).
    pub search_step_time: Duration,
    /// Most changes one modify makes (`directory.max_modify_changes`).
    pub max_modify_changes: usize,
    /// Most RDNs of a DN a request names (`directory.max_dn_rdns`).
    pub max_dn_rdns: usize,
    /// Most keys one server-side sort may have (`directory.sort_max_keys`).
    pub sort_max_keys: usize,
    /// Memory the sort keys of every sorted search in progress may hold
    /// together (`directory.sort_memory_bytes`).
    pub sort_memory_bytes: usize,
    /// Dynamic entries' TTL bounds.
    pub dynamic: dynamic::DynamicTtl,
    /// The cost of the `{ARGON2}` hashes of new passwords.
    pub password_hash: password::HashCost,
    /// Replace a stored password in another scheme by its `{ARGON2}`
    /// hash when a bind matches it (`directory.rehash_on_bind`).
    pub rehash_on_bind: bool,
    /// The most work a stored password hash may ask (written or verified).
    pub password_bounds: password::HashBounds,
    /// What a password a user sets must be (`[password_policy]`).
    pub password_policy: policy::PasswordPolicy,
    /// Most groups one nested-group (in-chain) match walks
    /// (`groups.max_nested_groups`).
    pub max_nested_groups: usize,
    /// Dynamic groups (`groups.dynamic_*`); `None`: off.
    pub dynamic_groups: Option<DynamicGroups>,
}

impl Default for Limits {
    fn default() -> Self {
        // slapd's defaults.
        Limits {
            size_limit: 500,
            time_limit: Duration::from_secs(3600),
            lookthrough_limit: 2_000_000,
            max_filter_items: 4096,
            search_step_time: search::STEP_TIME,
            max_modify_changes: 1000,
            max_dn_rdns: 128,
            // slapd's sssvlv default.
            sort_max_keys: 5,
            sort_memory_bytes: 256 << 20,
            dynamic: dynamic::DynamicTtl::default(),
            password_hash: password::HashCost::default(),
            rehash_on_bind: false,
            password_bounds: password::HashBounds::default(),
            password_policy: policy::PasswordPolicy::default(),
            max_nested_groups: 10_000,
            dynamic_groups: None,
        }
    }
}

/// The directory: the store, the schema, and the server's identity rules.
#[derive(Debug)]
pub struct Directory {
    /// The first naming context's store.
    primary: Store,
    /// The stores of the other naming contexts, each with its own
    /// database (`directory.additional_suffixes`).
    more: Vec<Store>,
    schema: Arc<Schema>,
    admin: Dn,
    clock: Arc<dyn Clock>,
    csn: CsnSource,
    /// Limits and access rules: replaced whole by [`Directory::reload`]
    /// (SIGHUP) while every check reads them without a lock.
    limits: arc_swap::ArcSwap<Limits>,
    access: arc_swap::ArcSwap<AccessRules>,
    /// userPassword's ID, looked up once: it is checked on every
    /// attribute a search returns and every write that may need hashing.
    user_password: Option<AttrId>,
    /// dynamicObject's ID, looked up once: every add and modify asks
    /// whether an entry is dynamic.
    dynamic_object: Option<meridian_model::schema::ClassId>,
    /// The operational attributes every new entry gets, parsed once.
    new_entry_attributes: Vec<(AttrName, Description)>,
    /// The password policy's state types, looked up once.
    policy_types: policy::PolicyTypes,
    /// Who besides the administrator may use proxied authorization.
    proxy_authorizers: Vec<ProxyAuthorizer>,
    /// Whether any dynamic entry may exist (found at start, set when one
    /// is added; never cleared): until then an add need not look at its
    /// parent to keep static entries from under dynamic ones.
    may_have_dynamic: std::sync::atomic::AtomicBool,
    /// Whether referral objects and aliases may exist.
    presence: presence::Presence,
    /// What sorted searches in progress hold (`limits.sort_memory_bytes`).
    sort_budget: Arc<sort::SortBudget>,
}

impl Directory {
    /// A directory over `store`.
    pub fn new(store: Store, admin: Dn, clock: Arc<dyn Clock>, limits: Limits) -> Self {
        let schema = Arc::clone(store.schema());
        let may_have_dynamic = dynamic::any_dynamic_entry(&store);
        let presence = presence::Presence::of(&store);
        let sort_budget = sort::SortBudget::new(limits.sort_memory_bytes);
        Directory {
            primary: store,
            more: Vec::new(),
            admin,
            clock,
            csn: CsnSource::new(0),
            limits: arc_swap::ArcSwap::from_pointee(limits),
            access: arc_swap::ArcSwap::from_pointee(AccessRules::default_rules(&schema)),
            user_password: schema.attribute_id(USER_PASSWORD),
            dynamic_object: schema.class_id(dynamic::DYNAMIC_OBJECT),
            new_entry_attributes: NEW_ENTRY_ATTRIBUTES
                .iter()
                .filter_map(|name| {
                    let desc = Description::parse(name.as_bytes(), &schema).ok()?;
                    Some((AttrName::new(name, &desc, &schema), desc))
                })
                .collect(),
            policy_types: policy::PolicyTypes::of(&schema),
            proxy_authorizers: Vec::new(),
            may_have_dynamic: std::sync::atomic::AtomicBool::new(may_have_dynamic),
            presence,
            sort_budget,
            schema,
        }
    }

    /// The same directory stamping entryCSNs with `server_id`
    /// (`directory.server_id`), so that CSNs made on different servers
    /// never collide.
    pub fn with_server_id(mut self, server_id: u16) -> Self {
        self.csn = CsnSource::new(server_id);
        self
    }

    /// The same directory under configured access rules instead of the
    /// defaults.
    pub fn with_access(mut self, access: AccessRules) -> Self {
        self.access = arc_swap::ArcSwap::from_pointee(access);
        self
    }

    /// The same directory serving more naming contexts, one store each
    /// (none may hold another's suffix: `Setup` checks).
    pub fn with_more_contexts(mut self, stores: Vec<Store>) -> Self {
        for store in &stores {
            if dynamic::any_dynamic_entry(store) {
                self.may_have_dynamic
                    .store(true, std::sync::atomic::Ordering::Release);
            }
            self.presence.include(&presence::Presence::of(store));
        }
        self.more.extend(stores);
        self
    }

    /// The limits in force.
    pub(crate) fn limits(&self) -> arc_swap::Guard<Arc<Limits>> {
        self.limits.load()
    }

    /// Replaces the limits and the access rules (`None`: the built-in
    /// ones) while the directory serves: operations that began keep what
    /// they read, the next ones read the new. The sort memory budget keeps
    /// the size it started with.
    pub fn reload(&self, limits: Limits, access: Option<AccessRules>) {
        self.limits.store(Arc::new(limits));
        self.access.store(Arc::new(
            access.unwrap_or_else(|| AccessRules::default_rules(&self.schema)),
        ));
    }

    /// The first naming context's store.
    pub fn store(&self) -> &Store {
        &self.primary
    }

    /// Every naming context's store, the first first.
    pub fn stores(&self) -> impl Iterator<Item = &Store> {
        std::iter::once(&self.primary).chain(&self.more)
    }

    /// The naming context holding `dn`, by position in [`Self::stores`]:
    /// the one with the deepest suffix it is at or under (a context
    /// inside another holds its own subtree, as slapd's subordinate
    /// databases do), else the first (whose store then answers
    /// noSuchObject as a single context would).
    fn context_of(&self, dn: &Dn) -> usize {
        if self.more.is_empty() {
            return 0;
        }
        self.stores()
            .enumerate()
            .filter_map(|(i, store)| {
                let depth = store
                    .suffixes()
                    .iter()
                    .filter(|s| dn.is_within(s))
                    .map(Dn::rdn_count)
                    .max()?;
                Some((depth, std::cmp::Reverse(i)))
            })
            .max()
            .map_or(0, |(_, std::cmp::Reverse(i))| i)
    }

    /// The naming contexts inside another one's tree (glued below it):
    /// each one's store and suffix, strictly below `dn`.
    pub(crate) fn contexts_below(&self, dn: &Dn) -> Vec<(&Store, &Dn)> {
        if self.more.is_empty() {
            return Vec::new();
        }
        self.stores()
            .flat_map(|store| {
                store
                    .suffixes()
                    .iter()
                    .filter(|s| s.is_descendant_of(dn))
                    .map(move |s| (store, s))
            })
            .collect()
    }

    /// Whether a naming context's suffix lies inside another context's
    /// tree: a subordinate context, glued below its superior.
    pub fn is_subordinate(&self, suffix: &Dn) -> bool {
        self.stores()
            .any(|store| store.suffixes().iter().any(|s| suffix.is_descendant_of(s)))
    }

    /// The store holding `dn` (see [`Self::context_of`]).
    fn store_for(&self, dn: &Dn) -> &Store {
        self.stores()
            .nth(self.context_of(dn))
            .unwrap_or(&self.primary)
    }

    /// The schema.
    pub fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    /// The identity a successful bind as `dn` gives.
    pub fn identity_for(&self, dn: Dn) -> Identity {
        if dn.same_entry(&self.admin) {
            Identity::Admin(Arc::new(dn))
        } else {
            Identity::User(Arc::new(dn))
        }
    }

    /// The DN a request names (the empty one is the root); errors are
    /// invalidDNSyntax. Clients work on sibling entries (a stream of
    /// modifies or base searches under `ou=people`): each worker thread
    /// keeps the parent of the last DN it parsed, so a sibling's DN costs
    /// one RDN's parse and allocations (a third of a worker's time went
    /// to parsing DNs under a stream of modifies, perf). The parent is
    /// kept with the schema it was parsed with: a thread may serve
    /// several directories (tests run many servers in one process). The
    /// `Arc` kept holds that schema alive, so no other schema can take
    /// its address and pass for it.
    pub fn parse_dn(&self, text: &[u8]) -> Result<Dn, Outcome> {
        thread_local! {
            static RECENT: RefCell<Option<(Arc<Schema>, RecentParent)>> =
                const { RefCell::new(None) };
        }
        if text.is_empty() {
            return Ok(Dn::root());
        }
        RECENT
            .with_borrow_mut(|recent| {
                let parents = match recent {
                    Some((schema, parents)) if Arc::ptr_eq(schema, &self.schema) => parents,
                    _ => {
                        &mut recent
                            .insert((Arc::clone(&self.schema), RecentParent::default()))
                            .1
                    }
                };
                parents.parse(text, &self.schema)
            })
            .map_err(Outcome::from)
            .and_then(|dn| self.within_depth(dn))
    }

    /// `dn`, unless it has more RDNs than `directory.max_dn_rdns`: each
    /// level is a lookup when a missing entry's matchedDN, its access or
    /// a referral above it is looked for, and a 64 KB request can name
    /// 16,000 of them.
    fn within_depth(&self, dn: Dn) -> Result<Dn, Outcome> {
        let most = self.limits().max_dn_rdns;
        if dn.rdn_count() > most {
            return Err(Outcome::new(
                ResultCode::INVALID_DN_SYNTAX,
                format!(
                    "a DN may have at most {most} RDNs (directory.max_dn_rdns); this one has {}",
                    dn.rdn_count()
                ),
            ));
        }
        Ok(dn)
    }

    /// Learns from commands another node prepared, about to be applied
    /// here (a cluster): what this node's own prepare would have noted.
    /// Its entryCSN clock rises to at least their highest CSN, so its
    /// next CSN is higher whichever node then leads; and adds of referral
    /// objects, aliases and dynamic entries (or changes of objectClass)
    /// set the flags that make operations look for them.
    pub fn observe_applied(&self, commands: &[Command]) {
        let csn_type = self.schema.entry_csn_attr();
        let mut highest: Option<&[u8]> = None;
        for command in commands {
            if let Some(csn) = csn_type.and_then(|t| command.entry_csn(t))
                && highest.is_none_or(|h| csn > h)
            {
                highest = Some(csn);
            }
            self.note_applied(command);
        }
        if let Some(csn) = highest {
            self.csn.observe(&String::from_utf8_lossy(csn));
        }
    }

    fn note_applied(&self, command: &Command) {
        match command {
            Command::Add { entry, .. } => self.note_added(entry),
            Command::AddMany { entries, .. } => entries.iter().for_each(|e| self.note_added(e)),
            Command::Modify { changes, .. } => {
                let object_class = self.schema.object_class_attr();
                let touches = |c: &Modification| {
                    Description::parse(c.attr.as_bytes(), &self.schema)
                        .is_ok_and(|d| Some(d.attr) == object_class)
                };
                if changes.iter().any(touches) {
                    for kind in presence::Special::ALL {
                        self.presence.note(kind);
                    }
                    self.may_have_dynamic
                        .store(true, std::sync::atomic::Ordering::Release);
                }
            }
            Command::Guarded { command, .. }
            | Command::ReadBack { command, .. }
            | Command::Unchanged { command, .. } => {
                self.note_applied(command);
            }
            Command::Transaction { commands } => {
                commands
                    .iter()
                    .for_each(|command| self.note_applied(command));
            }
            Command::Delete { .. }
            | Command::DeleteSubtree { .. }
            | Command::ModifyDn { .. }
            | Command::RebuildIndexes
            | Command::BuildIndexes { .. }
            | Command::SetLoadState(_) => {}
        }
    }

    fn note_added(&self, entry: &Entry) {
        self.note_special(entry);
        if self.is_dynamic(entry) {
            self.may_have_dynamic
                .store(true, std::sync::atomic::Ordering::Release);
        }
    }

    /// Queues a prepared write with the store (in call order) and returns
    /// a handle to its result.
    pub async fn submit(&self, command: Command) -> Result<meridian_store::Submitted, Outcome> {
        self.store_of(&command)
            .submit(command)
            .await
            .map_err(Outcome::from)
    }

    /// The store a command goes to: its target's naming context.
    fn store_of(&self, command: &Command) -> &Store {
        command
            .context_dn()
            .map_or(&self.primary, |dn| self.store_for(dn))
    }

    /// True when `a` and `b` write in the same naming context (one
    /// database, one Raft group): what a transaction's updates must do.
    pub fn same_context(&self, a: &Command, b: &Command) -> bool {
        match (a.context_dn(), b.context_dn()) {
            (Some(a), Some(b)) => self.context_of(a) == self.context_of(b),
            _ => true,
        }
    }

    /// Runs a prepared write through the store's writer.
    pub async fn execute(&self, command: Command) -> Outcome {
        match self.store_of(&command).execute(command).await {
            Ok(_) => Outcome::success(),
            Err(e) => e.into(),
        }
    }
}
