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

pub mod access;
mod alias;
pub mod clock;
mod crypt;
pub mod dynamic;
pub mod encode;
pub mod ids;
pub mod password;
mod presence;
mod referral;
mod search;

pub use search::{PageRequest, SearchControls, SearchCursor, Step};

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use meridian_model::dn::{Dn, RecentParent};
use meridian_model::entry::{AttrName, Description, Entry, Writer};
use meridian_model::modify::{ModOp, Modification};
use meridian_model::schema::AttrId;
use meridian_model::selection::Selection;
use meridian_model::{ModelError, Schema};
use meridian_proto::{
    AddRequest, CompareRequest, ModifyDnRequest, ModifyOperation, ModifyRequest, ResultCode,
};
use meridian_store::{Command, Operational, Store, StoreError};

use crate::access::{AccessRules, FilterAttrs, Level};
use crate::clock::{Clock, generalized_time};
use crate::encode::{Projection, encode_entry_op};
use crate::ids::{CsnSource, uuid_v4};

/// A password change checked by [`Directory::prepare_password_modify`];
/// [`PasswordChange::into_command`] finishes it on the blocking pool.
#[derive(Debug)]
pub struct PasswordChange {
    target: Dn,
    old: Option<Vec<u8>>,
    new: Vec<u8>,
    /// True when the server chose the new password (returned to the client).
    pub generated: bool,
    operational: Operational,
    cost: password::HashCost,
    bounds: password::HashBounds,
}

impl PasswordChange {
    /// The new password in clear text (for genPasswd).
    pub fn new_password(&self) -> &[u8] {
        &self.new
    }

    /// Whose password changes.
    pub fn target(&self) -> &Dn {
        &self.target
    }

    /// Checks the old password if required and hashes the new one. Slow
    /// by design: run it on the blocking pool, once the connection's
    /// earlier writes have committed (it reads what they wrote).
    ///
    /// The old password is checked against the values stored now, and
    /// the change is guarded by the value it matched (the write applies
    /// only if that value is still there): a change of the password by
    /// another connection in between makes the write fail with
    /// assertionFailed instead of replacing a password the client never
    /// proved it knew. [`PasswordChange::CHANGED_MEANWHILE`] is the
    /// answer to give then.
    pub fn into_command(
        self,
        directory: &Directory,
        allow_cleartext: bool,
    ) -> Result<Command, Outcome> {
        let mut proven = None;
        if let Some(old) = &self.old {
            let stored = directory.user_passwords(&self.target)?.ok_or_else(|| {
                Outcome::from(StoreError::NoSuchObject {
                    dn: self.target.original().to_owned(),
                    matched: String::new(),
                })
            })?;
            let matched = stored
                .into_iter()
                .find(|v| password::verify(v, old, allow_cleartext, &self.bounds).matched())
                .ok_or_else(|| {
                    Outcome::new(ResultCode::INVALID_CREDENTIALS, "the old password is wrong")
                })?;
            proven = Some(matched);
        }
        let hashed = password::hash(&self.new, self.cost)
            .map_err(|e| Outcome::new(ResultCode::OTHER, format!("hashing: {e}")))?;
        let modify = Command::Modify {
            dn: self.target,
            changes: vec![Modification {
                op: ModOp::Replace,
                attr: USER_PASSWORD.into(),
                values: vec![hashed],
            }],
            operational: self.operational,
            permissive: false,
        };
        Ok(match proven {
            None => modify,
            Some(value) => {
                let mut assertion = Vec::new();
                meridian_proto::Filter::Equality(meridian_proto::Ava {
                    attr: USER_PASSWORD.as_bytes(),
                    value: &value,
                })
                .to_ber(&mut assertion);
                Command::Guarded {
                    assertion,
                    command: Box::new(modify),
                }
            }
        })
    }

    /// The answer when the guard of [`PasswordChange::into_command`]
    /// fails.
    pub const CHANGED_MEANWHILE: &str = "the password was changed by another operation while the old one was being checked; try again";
}

/// 20 characters from a 64-symbol alphabet (120 bits).
fn generate_password() -> Result<Vec<u8>, Outcome> {
    password::generate()
        .map(String::into_bytes)
        .map_err(|e| Outcome::new(ResultCode::OTHER, e))
}

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

/// An LDAPResult to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// resultCode.
    pub code: ResultCode,
    /// matchedDN.
    pub matched: String,
    /// diagnosticMessage.
    pub message: String,
    /// The referral URLs of a `referral` result (RFC 4511 section
    /// 4.1.10); empty for every other code.
    pub referrals: Vec<String>,
}

impl Outcome {
    /// success.
    pub fn success() -> Self {
        Self::new(ResultCode::SUCCESS, "")
    }

    /// A result without matchedDN.
    pub fn new(code: ResultCode, message: impl Into<String>) -> Self {
        Outcome {
            code,
            matched: String::new(),
            message: message.into(),
            referrals: Vec::new(),
        }
    }
}

impl From<ModelError> for Outcome {
    fn from(e: ModelError) -> Self {
        Outcome::new(e.code, e.message)
    }
}

impl From<StoreError> for Outcome {
    fn from(e: StoreError) -> Self {
        let code = e.code();
        match e {
            StoreError::NoSuchObject { dn, matched } => Outcome {
                code,
                matched,
                message: format!("no such entry: {dn}"),
                referrals: Vec::new(),
            },
            StoreError::Model(m) => m.into(),
            other => Outcome::new(code, other.to_string()),
        }
    }
}

/// Server-side search limits (RFC 4511 section 4.5.1.4), which bind
/// everyone but the administrator.
#[derive(Debug, Clone, Copy)]
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
    /// Dynamic entries' TTL bounds.
    pub dynamic: dynamic::DynamicTtl,
    /// The cost of the `{ARGON2}` hashes of new passwords.
    pub password_hash: password::HashCost,
    /// The most work a stored password hash may ask (written or verified).
    pub password_bounds: password::HashBounds,
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
            dynamic: dynamic::DynamicTtl::default(),
            password_hash: password::HashCost::default(),
            password_bounds: password::HashBounds::default(),
        }
    }
}

/// Group memberships of one caller, looked up once per request: the
/// group's normalised DN and whether the caller is in it.
#[derive(Debug, Default)]
struct Memberships(std::cell::RefCell<Vec<(String, bool)>>);

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
    limits: Limits,
    access: AccessRules,
    /// userPassword's ID, looked up once: it is checked on every
    /// attribute a search returns and every write that may need hashing.
    user_password: Option<AttrId>,
    /// dynamicObject's ID, looked up once: every add and modify asks
    /// whether an entry is dynamic.
    dynamic_object: Option<meridian_model::schema::ClassId>,
    /// The operational attributes every new entry gets, parsed once.
    new_entry_attributes: Vec<(AttrName, Description)>,
    /// Who besides the administrator may use proxied authorization.
    proxy_authorizers: Vec<ProxyAuthorizer>,
    /// Whether any dynamic entry may exist (found at start, set when one
    /// is added; never cleared): until then an add need not look at its
    /// parent to keep static entries from under dynamic ones.
    may_have_dynamic: std::sync::atomic::AtomicBool,
    /// Whether referral objects and aliases may exist.
    presence: presence::Presence,
}

/// One `directory.proxy_authorizers` entry.
#[derive(Debug, Clone)]
enum ProxyAuthorizer {
    Dn(Dn),
    Group(Dn),
}

/// The operational attributes an add sets, in the order they are stored.
const NEW_ENTRY_ATTRIBUTES: [&str; 7] = [
    "structuralObjectClass",
    "entryUUID",
    "creatorsName",
    "createTimestamp",
    "entryCSN",
    "modifiersName",
    "modifyTimestamp",
];

const USER_PASSWORD: &str = "userPassword";

fn insufficient(message: &str) -> Outcome {
    Outcome::new(ResultCode::INSUFFICIENT_ACCESS_RIGHTS, message)
}

impl Directory {
    /// A directory over `store`.
    pub fn new(store: Store, admin: Dn, clock: Arc<dyn Clock>, limits: Limits) -> Self {
        let schema = Arc::clone(store.schema());
        let may_have_dynamic = dynamic::any_dynamic_entry(&store);
        let presence = presence::Presence::of(&store);
        Directory {
            primary: store,
            more: Vec::new(),
            admin,
            clock,
            csn: CsnSource::new(0),
            limits,
            access: AccessRules::default_rules(&schema),
            user_password: schema.attribute_id(USER_PASSWORD),
            dynamic_object: schema.class_id(dynamic::DYNAMIC_OBJECT),
            new_entry_attributes: NEW_ENTRY_ATTRIBUTES
                .iter()
                .filter_map(|name| {
                    let desc = Description::parse(name.as_bytes(), &schema).ok()?;
                    Some((AttrName::new(name, &desc, &schema), desc))
                })
                .collect(),
            proxy_authorizers: Vec::new(),
            may_have_dynamic: std::sync::atomic::AtomicBool::new(may_have_dynamic),
            presence,
            schema,
        }
    }

    /// The same directory letting the identities `specs` names (`dn:DN`,
    /// `group:DN`; `directory.proxy_authorizers`) use proxied
    /// authorization.
    pub fn with_proxy_authorizers(mut self, specs: &[String]) -> Result<Self, String> {
        for (i, spec) in specs.iter().enumerate() {
            let parse = |text: &str| {
                Dn::parse(text.as_bytes(), &self.schema)
                    .map_err(|e| format!("config key `directory.proxy_authorizers` entry {i}: {e}"))
            };
            let authorizer = match spec.split_once(':') {
                Some(("dn", dn)) => ProxyAuthorizer::Dn(parse(dn)?),
                Some(("group", dn)) => ProxyAuthorizer::Group(parse(dn)?),
                _ => {
                    return Err(format!(
                        "config key `directory.proxy_authorizers` entry {i}: {spec:?}: expected dn:DN or group:DN"
                    ));
                }
            };
            self.proxy_authorizers.push(authorizer);
        }
        Ok(self)
    }

    /// The identity an operation runs as under the proxied authorization
    /// control (RFC 4370). `authz_id` is `dn:DN`, or empty for anonymous.
    /// The requester must be the administrator or one of
    /// `directory.proxy_authorizers`; nobody becomes the administrator
    /// this way; the DN must name an entry that exists. Every refusal is
    /// authorizationDenied, saying why.
    pub fn proxied_identity(
        &self,
        requester: &Identity,
        authz_id: &[u8],
    ) -> Result<Identity, Outcome> {
        let denied = |why: String| Outcome::new(ResultCode::AUTHORIZATION_DENIED, why);
        let allowed = match requester {
            Identity::Admin(_) => true,
            Identity::Anonymous => false,
            Identity::User(dn) => self.proxy_authorizers.iter().any(|a| match a {
                ProxyAuthorizer::Dn(d) => d.same_entry(dn),
                ProxyAuthorizer::Group(g) => self.is_member(g, dn),
            }),
        };
        if !allowed {
            return Err(denied(format!(
                "{} may not use proxied authorization (directory.proxy_authorizers)",
                match requester {
                    Identity::Anonymous => "an anonymous client",
                    Identity::Admin(d) | Identity::User(d) => d.original(),
                }
            )));
        }
        if authz_id.is_empty() {
            return Ok(Identity::Anonymous);
        }
        let Some(text) = authz_id.strip_prefix(b"dn:") else {
            return Err(denied(format!(
                "authzId {:?}: only dn: authorization identities are supported",
                String::from_utf8_lossy(authz_id)
            )));
        };
        let dn = Dn::parse(text, &self.schema).map_err(|e| {
            denied(format!(
                "authzId {:?}: {e}",
                String::from_utf8_lossy(authz_id)
            ))
        })?;
        if dn.same_entry(&self.admin) {
            return Err(denied(
                "the administrator cannot be assumed by proxy".into(),
            ));
        }
        let exists = self
            .store_for(&dn)
            .snapshot()
            .and_then(|s| s.id(&dn))
            .map_err(Outcome::from)?
            .is_some();
        if !exists {
            return Err(denied(format!("no entry {} to act as", dn.original())));
        }
        Ok(Identity::User(Arc::new(dn)))
    }

    /// The same directory under configured access rules instead of the
    /// defaults.
    pub fn with_access(mut self, access: AccessRules) -> Self {
        self.access = access;
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

    /// The first naming context's store.
    pub fn store(&self) -> &Store {
        &self.primary
    }

    /// Every naming context's store, the first first.
    pub fn stores(&self) -> impl Iterator<Item = &Store> {
        std::iter::once(&self.primary).chain(&self.more)
    }

    /// The naming context holding `dn`, by position in [`Self::stores`]:
    /// the one whose suffix it is at or under, else the first (whose
    /// store then answers noSuchObject as a single context would).
    fn context_of(&self, dn: &Dn) -> usize {
        if self.more.is_empty() {
            return 0;
        }
        self.stores()
            .position(|store| store.suffixes().iter().any(|s| dn.is_within(s)))
            .unwrap_or(0)
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

    /// The DN a request names. Clients work on sibling entries (a
    /// stream of modifies under `ou=people`): each worker thread keeps
    /// the parent of the last DN it parsed, so a sibling's DN costs one
    /// RDN's parse and allocations (a third of a worker's time went to
    /// parsing DNs under a stream of modifies, perf). The parent is kept
    /// with the schema it was parsed with: a thread may serve several
    /// directories (tests run many servers in one process). The `Arc`
    /// kept holds that schema alive, so no other schema can take its
    /// address and pass for it.
    fn dn(&self, text: &[u8]) -> Result<Dn, Outcome> {
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
    }

    /// Whether `who` is in the group entry at `group` (its member or
    /// uniqueMember values name `who`).
    fn is_member(&self, group: &Dn, who: &Dn) -> bool {
        let Ok(snapshot) = self.store_for(group).snapshot() else {
            return false;
        };
        let Ok(Some((_, entry))) = snapshot.get(group) else {
            return false;
        };
        entry.attributes.iter().any(|a| {
            self.schema.attr(a.desc.attr).is_some_and(|t| {
                t.name().eq_ignore_ascii_case("member")
                    || t.name().eq_ignore_ascii_case("uniqueMember")
            }) && a
                .values
                .iter()
                .any(|v| Dn::parse(v, &self.schema).is_ok_and(|m| m.same_entry(who)))
        })
    }

    /// The access `who` has to `attr` (`None`: the entry itself) of the
    /// entry at `dn`; group memberships are looked up once per `groups`.
    fn access_level(
        &self,
        who: &Identity,
        dn: &Dn,
        attr: Option<AttrId>,
        groups: &Memberships,
    ) -> Level {
        self.access
            .level(who, dn, attr, &self.schema, &|group, member| {
                let mut known = groups.0.borrow_mut();
                if let Some((_, is)) = known.iter().find(|(g, _)| g == group.normalized()) {
                    return *is;
                }
                let is = self.is_member(group, member);
                known.push((group.normalized().to_owned(), is));
                is
            })
    }

    /// Refuses with insufficientAccessRights, saying what was missing,
    /// unless `who` has `need` on `attr` of `dn`.
    fn require(
        &self,
        who: &Identity,
        dn: &Dn,
        attr: Option<AttrId>,
        need: Level,
        groups: &Memberships,
    ) -> Result<(), Outcome> {
        if self.access_level(who, dn, attr, groups) >= need {
            return Ok(());
        }
        let whom = match who {
            Identity::Anonymous => "anonymous clients".to_owned(),
            Identity::Admin(d) | Identity::User(d) => d.original().to_owned(),
        };
        let what = match attr.and_then(|a| self.schema.attr(a)) {
            Some(at) => format!("attribute {} of ", at.name()),
            None => String::new(),
        };
        Err(insufficient(&format!(
            "the access rules do not give {whom} {} access to {what}\"{}\"",
            need.name(),
            dn.original()
        )))
    }

    /// Like [`Self::require`] for an operation on an existing entry, but
    /// where `who` may not even search the entry, the answer is
    /// noSuchObject, as if it were not there: a refusal would reveal
    /// that it exists (slapd's "disclose" rule).
    fn require_visible(
        &self,
        who: &Identity,
        dn: &Dn,
        attr: Option<AttrId>,
        need: Level,
        groups: &Memberships,
    ) -> Result<(), Outcome> {
        let refused = match self.require(who, dn, attr, need, groups) {
            Ok(()) => return Ok(()),
            Err(refused) => refused,
        };
        if self.access_level(who, dn, None, groups) >= Level::Search {
            return Err(refused);
        }
        // The same matchedDN a missing entry would get: its nearest
        // existing ancestor (that the caller may see).
        let matched = match self.store_for(dn).snapshot() {
            Ok(snapshot) => snapshot.matched(dn).unwrap_or_default(),
            Err(_) => String::new(),
        };
        let missing = StoreError::NoSuchObject {
            dn: dn.original().to_owned(),
            matched,
        };
        Err(self.disclose(who, missing.into()))
    }

    /// A noSuchObject's matchedDN names the nearest existing ancestor;
    /// for anyone but the administrator it is moved up to the nearest
    /// one the caller may search, so it never gives away an entry the
    /// rules hide. Every other outcome is returned as it is.
    pub fn disclose(&self, who: &Identity, mut outcome: Outcome) -> Outcome {
        if matches!(who, Identity::Admin(_))
            || outcome.code != ResultCode::NO_SUCH_OBJECT
            || outcome.matched.is_empty()
        {
            return outcome;
        }
        let groups = Memberships::default();
        let mut candidate = Dn::parse(outcome.matched.as_bytes(), &self.schema).ok();
        while let Some(dn) = candidate {
            if dn.is_root() {
                break;
            }
            if self.access_level(who, &dn, None, &groups) >= Level::Search {
                outcome.matched = dn.original().to_owned();
                return outcome;
            }
            candidate = dn.parent();
        }
        outcome.matched = String::new();
        outcome
    }

    /// Whether an attribute description as a client wrote it
    /// (`userPassword`, `USERPASSWORD;x-opt`) is userPassword.
    fn names_user_password(&self, name: &str) -> bool {
        Description::parse(name.as_bytes(), &self.schema)
            .is_ok_and(|d| Some(d.attr) == self.user_password)
    }

    /// Refuses userPassword values given already hashed whose scheme is
    /// unknown or whose cost is over `security.password_max_*`: whoever
    /// writes a hash chooses what every bind to it costs the server.
    fn check_password_values<V: AsRef<[u8]>>(
        &self,
        values: impl IntoIterator<Item = V>,
    ) -> Result<(), Outcome> {
        for value in values {
            let value = value.as_ref();
            if password::is_hashed(value) {
                password::check_stored(value, &self.limits.password_bounds)
                    .map_err(|why| Outcome::new(ResultCode::CONSTRAINT_VIOLATION, why))?;
            }
        }
        Ok(())
    }

    /// The most work a stored password hash may ask (`security.password_max_*`).
    pub fn password_bounds(&self) -> password::HashBounds {
        self.limits.password_bounds
    }

    /// Whether an entry's attribute is userPassword (its description is
    /// already parsed: no name lookup, which every imported entry would pay).
    fn is_user_password(&self, attribute: &meridian_model::entry::Attribute) -> bool {
        Some(attribute.desc.attr) == self.user_password
    }

    /// Whether `who` (not the administrator) may read `attr` of the entry
    /// at `dn`: never userPassword, otherwise as the rules say.
    fn may_read_attribute(
        &self,
        who: &Identity,
        dn: &Dn,
        attr: AttrId,
        groups: &Memberships,
    ) -> bool {
        Some(attr) != self.user_password
            && self.access_level(who, dn, Some(attr), groups) >= Level::Read
    }

    /// Whether `who` may read the entry at `dn` at all: what the
    /// pre-read and post-read controls (RFC 4527) ask before the update.
    pub fn may_read(&self, who: &Identity, dn: &[u8]) -> bool {
        if matches!(who, Identity::Admin(_)) {
            return true;
        }
        match self.dn(dn) {
            Ok(dn) => self.access_level(who, &dn, None, &Memberships::default()) >= Level::Read,
            Err(_) => false,
        }
    }

    /// The value of a pre-read or post-read response control (RFC 4527):
    /// `entry` as a SearchResultEntry with the attributes `attributes`
    /// selects (as a search's attribute list would) that `who` may read.
    pub fn read_entry_value<'a>(
        &self,
        who: &Identity,
        entry: &Entry,
        attributes: impl Iterator<Item = &'a [u8]>,
    ) -> Vec<u8> {
        let selection = Selection::parse(attributes, &self.schema);
        let projection = Projection {
            selection: &selection,
            types_only: false,
            schema: &self.schema,
        };
        let admin = matches!(who, Identity::Admin(_));
        let groups = Memberships::default();
        let visible = |a: &meridian_model::entry::Attribute| {
            admin || self.may_read_attribute(who, &entry.dn, a.desc.attr, &groups)
        };
        let mut value = Vec::new();
        encode_entry_op(
            &mut meridian_ber::Writer::new(&mut value),
            entry,
            projection,
            visible,
            &[],
        );
        value
    }

    /// Timestamps, CSN and names for a write by `who`.
    fn stamp(&self, who: &Identity) -> (String, String, String) {
        let (seconds, csn) = self.time_and_csn();
        (seconds, csn, who.dn_text().to_owned())
    }

    /// Now as a timestamp, and a new CSN for it.
    fn time_and_csn(&self) -> (String, String) {
        let (seconds, micros) = generalized_time(self.clock.now());
        let csn = self.csn.next(&seconds, micros);
        (seconds, csn)
    }

    /// Checks an add and builds its command (operational attributes set).
    pub fn prepare_add(&self, who: &Identity, req: &AddRequest<'_>) -> Result<Command, Outcome> {
        let dn = self.dn(req.dn)?;
        let groups = &Memberships::default();
        self.require(who, &dn, None, Level::Write, groups)?;
        for attr in req.attributes.iter() {
            if let Ok(desc) = Description::parse(attr.ty, &self.schema) {
                self.require(who, &dn, Some(desc.attr), Level::Write, groups)?;
            }
        }
        let entry = Entry::new(
            dn,
            req.attributes.iter().map(|a| (a.ty, a.values.iter())),
            &self.schema,
        )?
        .with_rdn_values(&self.schema);
        let checked = entry.check(&self.schema, Writer::Client)?;
        for attr in entry.attributes.iter().filter(|a| self.is_user_password(a)) {
            self.check_password_values(&attr.values)?;
        }
        let mut entry = self.stamp_new_entry(entry, checked.structural, who.dn_text(), false)?;
        self.prepare_dynamic_add(&mut entry)?;
        self.note_special(&entry);
        // Checked above, before the stamps; what they add is ours and
        // valid, so the writer need not check it all again.
        Ok(Command::Add {
            entry,
            prechecked: true,
        })
    }

    /// Records that `entry`, about to be added, is a referral object or
    /// an alias.
    fn note_special(&self, entry: &Entry) {
        for kind in presence::Special::ALL {
            if referral::has_class(entry, &self.schema, kind.class()) {
                self.presence.note(kind);
            }
        }
    }

    /// Checks an entry of a bulk load (`meridian import`) as the server
    /// checks its own writes (operational attributes may be given) and
    /// gives it the operational attributes an add would, keeping those
    /// it has: an export of this or another server carries its own
    /// entryUUID, timestamps and creator, as `slapadd` keeps them.
    pub fn prepare_import(&self, entry: Entry) -> Result<Entry, Outcome> {
        let entry = entry.with_rdn_values(&self.schema);
        let checked = entry.check(&self.schema, Writer::Server)?;
        // Loaded as the administrator (its name, not a copy of its DN
        // per entry).
        let loader = self.admin.original();
        let mut entry = self.stamp_new_entry(entry, checked.structural, loader, true)?;
        self.stamp_ttl(&mut entry)?;
        Ok(entry)
    }

    /// Adds structuralObjectClass, entryUUID, creatorsName,
    /// createTimestamp, entryCSN, modifiersName and modifyTimestamp (all
    /// of them, or with `keep_given` only those the entry lacks).
    fn stamp_new_entry(
        &self,
        mut entry: Entry,
        structural: meridian_model::schema::ClassId,
        creator: &str,
        keep_given: bool,
    ) -> Result<Entry, Outcome> {
        let structural = self
            .schema
            .class_by_id(structural)
            .map(|c| c.name().to_owned())
            .unwrap_or_default();
        let (now, csn) = self.time_and_csn();
        let creator = creator.to_owned();
        let uuid = uuid_v4().map_err(|e| {
            Outcome::new(
                ResultCode::OTHER,
                format!("no randomness for entryUUID: {e}"),
            )
        })?;
        // In NEW_ENTRY_ATTRIBUTES order.
        let values = [
            structural,
            uuid,
            creator.clone(),
            now.clone(),
            csn,
            creator,
            now,
        ];
        if self.new_entry_attributes.len() != values.len() {
            return Err(Outcome::new(
                ResultCode::OTHER,
                "the schema lacks an operational attribute every entry needs",
            ));
        }
        // One reallocation, not one per doubling on the way.
        entry.attributes.reserve(values.len());
        for ((name, desc), value) in self.new_entry_attributes.iter().zip(values) {
            if keep_given && entry.get(desc.attr).is_some() {
                continue;
            }
            entry.attributes.push(meridian_model::entry::Attribute {
                desc: desc.clone(),
                name: name.clone(),
                values: meridian_model::entry::Values::from_buf([value.into_bytes()]),
            });
        }
        Ok(entry)
    }

    /// Checks a delete and builds its command; `subtree` (the subtree
    /// delete control) removes the entry and everything below it.
    pub fn prepare_delete(
        &self,
        who: &Identity,
        dn: &[u8],
        subtree: bool,
    ) -> Result<Command, Outcome> {
        let dn = self.dn(dn)?;
        if subtree && !matches!(who, Identity::Admin(_)) {
            // The rules are checked per entry, and a subtree's entries are
            // only known inside the write: the control is the
            // administrator's.
            return Err(insufficient(
                "the subtree delete control is for the administrator only",
            ));
        }
        let groups = &Memberships::default();
        self.require_visible(who, &dn, None, Level::Write, groups)?;
        Ok(if subtree {
            Command::DeleteSubtree { dn }
        } else {
            Command::Delete { dn }
        })
    }

    /// The assertion control (RFC 4528) for reads: TRUE for the entry at
    /// `dn`, or assertionFailed. (Writes carry the assertion into their
    /// command, so it is checked atomically when they apply.)
    pub fn check_assertion(
        &self,
        who: &Identity,
        dn: &[u8],
        filter: &meridian_proto::Filter<'_>,
    ) -> Result<(), Outcome> {
        self.check_assertion_inner(who, dn, filter)
            .map_err(|e| self.disclose(who, e))
    }

    fn check_assertion_inner(
        &self,
        who: &Identity,
        dn: &[u8],
        filter: &meridian_proto::Filter<'_>,
    ) -> Result<(), Outcome> {
        let dn = self.dn(dn)?;
        let groups = &Memberships::default();
        self.require_filter_access(who, &dn, filter, groups)?;
        let snapshot = self.store_for(&dn).snapshot().map_err(Outcome::from)?;
        let Some((_, entry)) = snapshot.get(&dn).map_err(Outcome::from)? else {
            return Err(StoreError::NoSuchObject {
                dn: dn.original().to_owned(),
                matched: snapshot.matched(&dn).unwrap_or_default(),
            }
            .into());
        };
        let compiled = meridian_model::filter::CompiledFilter::compile(filter, &self.schema);
        if compiled.matches(&entry, &self.schema) {
            Ok(())
        } else {
            Err(Outcome::new(
                ResultCode::ASSERTION_FAILED,
                "the assertion control's filter is not TRUE for the entry",
            ))
        }
    }

    fn operational_changes(&self, who: &Identity) -> Operational {
        let (now, csn, modifier) = self.stamp(who);
        vec![
            ("modifiersName".into(), vec![modifier.into_bytes()]),
            ("modifyTimestamp".into(), vec![now.into_bytes()]),
            ("entryCSN".into(), vec![csn.into_bytes()]),
        ]
    }

    /// Checks a modify and builds its command.
    pub fn prepare_modify(
        &self,
        who: &Identity,
        req: &ModifyRequest<'_>,
        permissive: bool,
    ) -> Result<Command, Outcome> {
        let dn = self.dn(req.dn)?;
        let groups = &Memberships::default();
        let mut changes = Vec::new();
        let mut touches_object_class = false;
        let most = self.limits.max_modify_changes;
        for (i, change) in req.changes.iter().enumerate() {
            if i == most {
                return Err(Outcome::new(
                    ResultCode::ADMIN_LIMIT_EXCEEDED,
                    format!(
                        "a modify may make at most {most} changes \
                         (directory.max_modify_changes); split this one"
                    ),
                ));
            }
            let m = change.modification;
            let desc = Description::parse(m.ty, &self.schema)?;
            touches_object_class |= Some(desc.attr) == self.schema.object_class_attr();
            self.require_visible(who, &dn, Some(desc.attr), Level::Write, groups)?;
            if let Some(at) = self.schema.attr(desc.attr) {
                if at.no_user_modification {
                    return Err(Outcome::new(
                        ResultCode::CONSTRAINT_VIOLATION,
                        format!("attribute {:?} is not user-modifiable", at.name()),
                    ));
                }
            }
            let adds_values = matches!(
                change.operation,
                ModifyOperation::Add | ModifyOperation::Replace
            );
            if adds_values && Some(desc.attr) == self.user_password {
                self.check_password_values(m.values.iter())?;
            }
            changes.push(Modification {
                op: match change.operation {
                    ModifyOperation::Add => ModOp::Add,
                    ModifyOperation::Delete => ModOp::Delete,
                    ModifyOperation::Replace => ModOp::Replace,
                    ModifyOperation::Increment => ModOp::Increment,
                },
                attr: String::from_utf8_lossy(m.ty).into_owned(),
                values: m.values.iter().map(<[u8]>::to_vec).collect(),
            });
        }
        if touches_object_class {
            self.check_dynamic_modify(&dn, &changes)?;
            // It may become a referral object or an alias.
            for kind in presence::Special::ALL {
                self.presence.note(kind);
            }
        }
        Ok(Command::Modify {
            dn,
            changes,
            operational: self.operational_changes(who),
            permissive,
        })
    }

    /// Checks a modifyDN and builds its command.
    pub fn prepare_modify_dn(
        &self,
        who: &Identity,
        req: &ModifyDnRequest<'_>,
    ) -> Result<Command, Outcome> {
        let dn = self.dn(req.dn)?;
        let groups = &Memberships::default();
        self.require_visible(who, &dn, None, Level::Write, groups)?;
        let new_rdn = std::str::from_utf8(req.new_rdn)
            .map_err(|_| Outcome::new(ResultCode::INVALID_DN_SYNTAX, "newrdn is not UTF-8"))?
            .to_owned();
        let new_superior = match req.new_superior {
            Some(s) => Some(Box::new(self.dn(s)?)),
            None => None,
        };
        if let Some(superior) = &new_superior {
            // Moving an entry writes below its new parent.
            self.require(who, superior, None, Level::Write, groups)?;
            if self.context_of(superior) != self.context_of(&dn) {
                return Err(Outcome::new(
                    ResultCode::AFFECTS_MULTIPLE_DSAS,
                    format!(
                        "{} and {} are in different naming contexts, each its own database: move the entry by adding it there and deleting it here",
                        dn.original(),
                        superior.original()
                    ),
                ));
            }
        }
        Ok(Command::ModifyDn {
            dn,
            new_rdn,
            delete_old_rdn: req.delete_old_rdn,
            new_superior,
            operational: self.operational_changes(who),
        })
    }

    /// The userPassword values a bind as `dn` is checked against, or
    /// `None` if there is no such entry or the rules do not give
    /// anonymous `auth` access to its userPassword (a bind runs as
    /// anonymous, as in slapd); both answer invalidCredentials, so
    /// neither reveals anything.
    pub fn bind_passwords(&self, dn: &Dn) -> Result<Option<Vec<Vec<u8>>>, Outcome> {
        let groups = Memberships::default();
        if self.access_level(&Identity::Anonymous, dn, self.user_password, &groups) < Level::Auth {
            return Ok(None);
        }
        self.user_passwords(dn)
    }

    /// The userPassword values of the entry at `dn`, or `None` if there
    /// is no such entry.
    pub fn user_passwords(&self, dn: &Dn) -> Result<Option<Vec<Vec<u8>>>, Outcome> {
        let snapshot = self.store_for(dn).snapshot().map_err(Outcome::from)?;
        let Some((_, entry)) = snapshot.get(dn).map_err(Outcome::from)? else {
            return Ok(None);
        };
        let attr = self
            .user_password
            .ok_or_else(|| Outcome::new(ResultCode::OTHER, "schema has no userPassword"))?;
        Ok(Some(
            entry
                .get(attr)
                .map(|a| a.values.to_vec())
                .unwrap_or_default(),
        ))
    }

    /// Replaces clear-text userPassword values in a command by their
    /// `{ARGON2}` hash. CPU-heavy by design: call it off the async
    /// workers (the server uses the blocking pool).
    pub fn hash_passwords(&self, command: Command) -> Result<Command, Outcome> {
        let is_password = |name: &str| self.names_user_password(name);
        let hash_all = |values: &mut [Vec<u8>]| -> Result<(), Outcome> {
            for v in values.iter_mut() {
                if !password::is_hashed(v) {
                    *v = password::hash(v, self.limits.password_hash).map_err(|e| {
                        Outcome::new(ResultCode::OTHER, format!("hashing a password: {e}"))
                    })?;
                }
            }
            Ok(())
        };
        match command {
            Command::Add {
                mut entry,
                prechecked,
            } => {
                for attr in entry
                    .attributes
                    .iter_mut()
                    .filter(|a| self.is_user_password(a))
                {
                    hash_all(&mut attr.values)?;
                }
                Ok(Command::Add { entry, prechecked })
            }
            Command::Modify {
                dn,
                mut changes,
                operational,
                permissive,
            } => {
                for change in changes
                    .iter_mut()
                    .filter(|c| matches!(c.op, ModOp::Add | ModOp::Replace) && is_password(&c.attr))
                {
                    hash_all(&mut change.values)?;
                }
                Ok(Command::Modify {
                    dn,
                    changes,
                    operational,
                    permissive,
                })
            }
            Command::Guarded { assertion, command } => Ok(Command::Guarded {
                assertion,
                command: Box::new(self.hash_passwords(*command)?),
            }),
            Command::ReadBack { pre, post, command } => Ok(Command::ReadBack {
                pre,
                post,
                command: Box::new(self.hash_passwords(*command)?),
            }),
            other => Ok(other),
        }
    }

    /// Checks a Password Modify request (RFC 3062) up to what needs the
    /// blocking pool (old password check, hashing): the administrator may
    /// change anyone's password, a user only its own and only with its
    /// old password.
    pub fn prepare_password_modify(
        &self,
        who: &Identity,
        user: Option<&[u8]>,
        old: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<PasswordChange, Outcome> {
        let target = match user {
            Some(id) => {
                // An authzId "dn:..." or a plain DN.
                let text = id.strip_prefix(b"dn:").unwrap_or(id);
                self.dn(text)?
            }
            None => match who {
                Identity::Admin(dn) | Identity::User(dn) => Dn::clone(dn),
                Identity::Anonymous => {
                    return Err(Outcome::new(
                        ResultCode::UNWILLING_TO_PERFORM,
                        "bind first, or name the user whose password to change",
                    ));
                }
            },
        };
        // Changing a password is a write to userPassword: the rules
        // decide (by default only the user and the administrator). Users
        // changing their own must prove they know the old one.
        let groups = &Memberships::default();
        self.require_visible(who, &target, self.user_password, Level::Write, groups)?;
        let check_old = matches!(who, Identity::User(dn) if dn.same_entry(&target));
        if check_old && old.is_none() {
            return Err(Outcome::new(
                ResultCode::UNWILLING_TO_PERFORM,
                "changing your own password needs the old one (oldPasswd)",
            ));
        }
        // The entry must exist; its passwords are read when the old one
        // is checked (`into_command`).
        self.user_passwords(&target)?.ok_or_else(|| {
            Outcome::from(StoreError::NoSuchObject {
                dn: target.original().to_owned(),
                matched: String::new(),
            })
        })?;
        let (new, generated) = match new {
            Some(n) if !n.is_empty() => (n.to_vec(), false),
            _ => (generate_password()?, true),
        };
        Ok(PasswordChange {
            target,
            old: if check_old {
                old.map(<[u8]>::to_vec)
            } else {
                None
            },
            new,
            generated,
            operational: self.operational_changes(who),
            cost: self.limits.password_hash,
            bounds: self.limits.password_bounds,
        })
    }

    /// True if the command holds a clear-text userPassword to hash.
    pub fn needs_hashing(&self, command: &Command) -> bool {
        let is_password = |name: &str| self.names_user_password(name);
        match command {
            Command::Add { entry, .. } => entry.attributes.iter().any(|a| {
                self.is_user_password(a) && a.values.iter().any(|v| !password::is_hashed(v))
            }),
            Command::Modify { changes, .. } => changes.iter().any(|c| {
                matches!(c.op, ModOp::Add | ModOp::Replace)
                    && is_password(&c.attr)
                    && c.values.iter().any(|v| !password::is_hashed(v))
            }),
            Command::Guarded { command, .. } | Command::ReadBack { command, .. } => {
                self.needs_hashing(command)
            }
            _ => false,
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
            .target()
            .map_or(&self.primary, |dn| self.store_for(dn))
    }

    /// Runs a prepared write through the store's writer.
    pub async fn execute(&self, command: Command) -> Outcome {
        match self.store_of(&command).execute(command).await {
            Ok(_) => Outcome::success(),
            Err(e) => e.into(),
        }
    }

    /// Compare (RFC 4511 section 4.10).
    pub fn compare(&self, who: &Identity, req: &CompareRequest<'_>) -> Outcome {
        self.compare_inner(who, req)
            .unwrap_or_else(|e| self.disclose(who, e))
    }

    fn compare_inner(&self, who: &Identity, req: &CompareRequest<'_>) -> Result<Outcome, Outcome> {
        let dn = self.dn(req.dn)?;
        let desc = Description::parse(req.ava.attr, &self.schema)?;
        let groups = &Memberships::default();
        self.require_visible(who, &dn, Some(desc.attr), Level::Compare, groups)?;
        let at = self
            .schema
            .attr(desc.attr)
            .ok_or_else(|| Outcome::new(ResultCode::OTHER, "dangling attribute"))?;
        if Some(desc.attr) == self.user_password && !matches!(who, Identity::Admin(_)) {
            return Err(insufficient(
                "userPassword can only be compared by the administrator",
            ));
        }
        let Some(rule) = at.equality else {
            return Err(Outcome::new(
                ResultCode::INAPPROPRIATE_MATCHING,
                format!("{} has no equality matching rule", at.name()),
            ));
        };
        let snapshot = self.store_for(&dn).snapshot().map_err(Outcome::from)?;
        let Some((_, entry)) = snapshot.get(&dn).map_err(Outcome::from)? else {
            return Err(StoreError::NoSuchObject {
                dn: dn.original().to_owned(),
                matched: snapshot.matched(&dn).unwrap_or_default(),
            }
            .into());
        };
        let Some(asserted) = rule.key(req.ava.value, &self.schema) else {
            return Err(Outcome::new(
                ResultCode::INVALID_ATTRIBUTE_SYNTAX,
                format!("the value is not valid for {}", rule.name),
            ));
        };
        let mut present = false;
        for attr in entry.matching(&desc, &self.schema) {
            present = true;
            if attr
                .values
                .iter()
                .any(|v| rule.key(v, &self.schema).as_ref() == Some(&asserted))
            {
                return Ok(Outcome::new(ResultCode::COMPARE_TRUE, ""));
            }
        }
        if present {
            Ok(Outcome::new(ResultCode::COMPARE_FALSE, ""))
        } else {
            Err(Outcome::new(
                ResultCode::NO_SUCH_ATTRIBUTE,
                format!("the entry has no {} attribute", at.name()),
            ))
        }
    }

    /// Whether a search by `who` may return `entry`: read access to the
    /// entry and search access to every attribute the filter tests.
    fn may_see(
        &self,
        who: &Identity,
        entry: &Entry,
        filter: &FilterAttrs,
        groups: &Memberships,
    ) -> bool {
        let dn = &entry.dn;
        if self.access_level(who, dn, None, groups) < Level::Read {
            return false;
        }
        let searchable =
            |attr: AttrId| self.access_level(who, dn, Some(attr), groups) >= Level::Search;
        filter.attrs.iter().all(|a| searchable(*a))
            && (!filter.every || entry.attributes.iter().all(|a| searchable(a.desc.attr)))
    }

    /// Whether `who` may attach an assertion control with `filter` to a
    /// write on `dn` (the filter is evaluated inside the write).
    pub fn check_assertion_access(
        &self,
        who: &Identity,
        dn: &[u8],
        filter: &meridian_proto::Filter<'_>,
    ) -> Result<(), Outcome> {
        let dn = self.dn(dn)?;
        let groups = &Memberships::default();
        self.require_filter_access(who, &dn, filter, groups)
            .map_err(|e| self.disclose(who, e))
    }

    /// The assertion control's filter, like a search's, needs read
    /// access to the entry and search access to the attributes it tests.
    fn require_filter_access(
        &self,
        who: &Identity,
        dn: &Dn,
        filter: &meridian_proto::Filter<'_>,
        groups: &Memberships,
    ) -> Result<(), Outcome> {
        self.require_visible(who, dn, None, Level::Read, groups)?;
        let attrs = FilterAttrs::of(filter, &self.schema);
        if attrs.every && !matches!(who, Identity::Admin(_)) {
            return Err(insufficient(
                "an extensible match over every attribute needs the administrator",
            ));
        }
        for attr in attrs.attrs {
            self.require(who, dn, Some(attr), Level::Search, groups)?;
        }
        Ok(())
    }
}
