//! Dynamic entries (RFC 2589): entries of the auxiliary class
//! dynamicObject live for a time-to-live, extended by the Refresh
//! extended operation, and are deleted once it runs out.
//!
//! An added dynamic entry gets `entryTtl` (the TTL granted, seconds) and
//! `entryExpireTimestamp` (when it expires; Meridian's own attribute).
//! [`Directory::prepare_refresh`] grants a new TTL clamped to the
//! configured bounds. [`Directory::sweep_expired`] deletes expired entries,
//! deepest first; the server runs it every `directory.dynamic_sweep_secs`.
//! Time comes from the directory's clock, so tests move it instead of
//! sleeping. A static entry may not be placed under a dynamic one, and
//! no modification may make an entry dynamic or static.

use std::time::Duration;

use meridian_model::dn::Dn;
use meridian_model::entry::{Description, Entry};
use meridian_model::modify::{ModOp, Modification};
use meridian_proto::{Ava, Depth, Filter, ResultCode, Scope, filter_str};
use meridian_store::{Command, StoreError};

use crate::access::Level;
use crate::clock::generalized_time;
use crate::rights::Memberships;
use crate::{Directory, Identity, Outcome};

/// TTL bounds, in seconds (`directory.dynamic_*_ttl_secs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DynamicTtl {
    /// What an added dynamic entry gets.
    pub default_secs: u32,
    /// The least a Refresh grants.
    pub min_secs: u32,
    /// The most a Refresh grants.
    pub max_secs: u32,
}

impl Default for DynamicTtl {
    fn default() -> Self {
        DynamicTtl {
            default_secs: 86_400,
            min_secs: 10,
            max_secs: 31_536_000,
        }
    }
}

impl DynamicTtl {
    /// The TTL a Refresh asking for `requested` seconds gets.
    pub fn grant(&self, requested: u32) -> u32 {
        requested.clamp(self.min_secs, self.max_secs)
    }
}

pub(crate) const DYNAMIC_OBJECT: &str = "dynamicObject";

fn dynamic_filter() -> Filter<'static> {
    Filter::Equality(Ava {
        attr: b"objectClass",
        value: DYNAMIC_OBJECT.as_bytes(),
    })
}

/// Whether `store` holds a dynamic entry (true when it cannot tell).
pub(crate) fn any_dynamic_entry(store: &meridian_store::Store) -> bool {
    let Ok(snapshot) = store.snapshot() else {
        return true;
    };
    let mut found = false;
    let searched = snapshot.search(&Dn::root(), Scope::Subtree, &dynamic_filter(), |_, _| {
        found = true;
        false
    });
    found || searched.is_err()
}

impl Directory {
    /// Whether `values` (of objectClass) name dynamicObject.
    fn names_dynamic_object<'a>(&self, values: impl Iterator<Item = &'a [u8]>) -> bool {
        // Every add asks, so no value is looked up in the schema unless
        // it is an OID: names are compared with the class's own.
        let Some(dynamic) = self.dynamic_object else {
            return false;
        };
        let Some(class) = self.schema.class_by_id(dynamic) else {
            return false;
        };
        let mut values = values.filter_map(|v| std::str::from_utf8(v).ok().map(str::trim));
        values.any(|name| {
            class.names.iter().any(|n| n.eq_ignore_ascii_case(name))
                || (name.starts_with(|c: char| c.is_ascii_digit())
                    && self.schema.class_id(name) == Some(dynamic))
        })
    }

    /// Whether `entry` is dynamic (objectClass dynamicObject).
    pub(crate) fn is_dynamic(&self, entry: &Entry) -> bool {
        self.schema
            .object_class_attr()
            .and_then(|oc| entry.get(oc))
            .is_some_and(|a| self.names_dynamic_object(a.values.iter().map(Vec::as_slice)))
    }

    /// The `(name, values)` of the TTL attributes for `ttl` seconds from now.
    fn ttl_attributes(&self, ttl: u32) -> [(&'static str, Vec<u8>); 2] {
        let expires = self.clock.now() + Duration::from_secs(u64::from(ttl));
        [
            ("entryTtl", ttl.to_string().into_bytes()),
            (
                "entryExpireTimestamp",
                generalized_time(expires).0.into_bytes(),
            ),
        ]
    }

    /// Gives a dynamic entry that lacks them its TTL attributes (the
    /// default TTL from now); true if the entry is dynamic.
    pub(crate) fn stamp_ttl(&self, entry: &mut Entry) -> Result<bool, Outcome> {
        if !self.is_dynamic(entry) {
            return Ok(false);
        }
        self.may_have_dynamic
            .store(true, std::sync::atomic::Ordering::Release);
        for (name, value) in self.ttl_attributes(self.limits().dynamic.default_secs) {
            let desc = Description::parse(name.as_bytes(), &self.schema)?;
            if entry.get(desc.attr).is_none() {
                entry.attributes.push(meridian_model::entry::Attribute {
                    name: meridian_model::entry::AttrName::new(name, &desc, &self.schema),
                    desc,
                    values: meridian_model::entry::Values::from_buf([value]),
                });
            }
        }
        Ok(true)
    }

    /// For an add: a dynamic entry gets its TTL attributes; a static one
    /// may not be placed under a dynamic parent.
    pub(crate) fn prepare_dynamic_add(&self, entry: &mut Entry) -> Result<(), Outcome> {
        if self.stamp_ttl(entry)?
            || !self
                .may_have_dynamic
                .load(std::sync::atomic::Ordering::Acquire)
        {
            return Ok(());
        }
        let Some(parent) = entry.dn.parent().filter(|p| !p.is_root()) else {
            return Ok(());
        };
        let snapshot = self.store_for(&parent).snapshot().map_err(Outcome::from)?;
        if let Some((_, parent)) = snapshot.get(&parent).map_err(Outcome::from)?
            && self.is_dynamic(&parent)
        {
            return Err(Outcome::new(
                ResultCode::UNWILLING_TO_PERFORM,
                format!(
                    "{} is dynamic (RFC 2589): only dynamic entries may be placed under it",
                    parent.dn.original()
                ),
            ));
        }
        Ok(())
    }

    /// For a modify: no change may add or remove dynamicObject.
    pub(crate) fn check_dynamic_modify(
        &self,
        dn: &Dn,
        changes: &[Modification],
    ) -> Result<(), Outcome> {
        let oc = self.schema.object_class_attr();
        // objectClassViolation, as slapd's dds overlay answers (RFC 2589
        // section 3: a static entry cannot become dynamic, nor back).
        let refused = || {
            Outcome::new(
                ResultCode::OBJECT_CLASS_VIOLATION,
                "an entry cannot become dynamic or static (RFC 2589): dynamicObject is set when it is added",
            )
        };
        for change in changes {
            let is_oc = Description::parse(change.attr.as_bytes(), &self.schema)
                .is_ok_and(|d| Some(d.attr) == oc);
            if !is_oc {
                continue;
            }
            let names = self.names_dynamic_object(change.values.iter().map(Vec::as_slice));
            match change.op {
                ModOp::Add | ModOp::Delete if names => return Err(refused()),
                ModOp::Replace => {
                    let snapshot = self.store_for(dn).snapshot().map_err(Outcome::from)?;
                    let was = snapshot
                        .get(dn)
                        .map_err(Outcome::from)?
                        .is_some_and(|(_, e)| self.is_dynamic(&e));
                    if was != names {
                        return Err(refused());
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Checks a Refresh (RFC 2589) of the entry at `dn` for `requested`
    /// seconds by `who`: the command that sets its new TTL, and the TTL
    /// granted (clamped to the configured bounds). The entry must exist
    /// and be dynamic, and `who` needs write access to it.
    pub fn prepare_refresh(
        &self,
        who: &Identity,
        dn: &[u8],
        requested: u32,
    ) -> Result<(Command, u32), Outcome> {
        let dn = self.parse_dn(dn)?;
        let groups = &Memberships::default();
        self.require_visible(who, &dn, None, Level::Write, groups)?;
        let snapshot = self.store_for(&dn).snapshot().map_err(Outcome::from)?;
        let Some((_, entry)) = snapshot.get(&dn).map_err(Outcome::from)? else {
            let missing = StoreError::NoSuchObject {
                dn: dn.original().to_owned(),
                matched: snapshot.matched(&dn).unwrap_or_default(),
            };
            return Err(self.disclose(who, missing.into()));
        };
        if !self.is_dynamic(&entry) {
            return Err(Outcome::new(
                ResultCode::OBJECT_CLASS_VIOLATION,
                format!(
                    "{} is not a dynamic entry (objectClass dynamicObject): there is nothing to refresh",
                    dn.original()
                ),
            ));
        }
        let granted = self.limits().dynamic.grant(requested);
        let operational = self
            .ttl_attributes(granted)
            .into_iter()
            .map(|(name, value)| (name.into(), vec![value]))
            .collect();
        let command = Command::Modify {
            dn,
            changes: Vec::new(),
            operational,
            permissive: false,
        };
        Ok((command, granted))
    }

    /// Deletes every dynamic entry whose time has run out, deepest first
    /// (an expired entry whose children live on waits for them); the
    /// number deleted.
    pub async fn sweep_expired(&self) -> Result<usize, Outcome> {
        let now = generalized_time(self.clock.now()).0;
        // The time is in the filter, not tested on each dynamic entry
        // found: only expired ones are decoded, and with an ordering
        // index on entryExpireTimestamp (`ord`) only they are read.
        let text = format!("(&(objectClass={DYNAMIC_OBJECT})(entryExpireTimestamp<={now}))");
        let unparsable = |e: &dyn std::fmt::Display| {
            Outcome::new(ResultCode::OTHER, format!("sweep filter {text}: {e}"))
        };
        let ber = filter_str::parse(&text, 4).map_err(|e| unparsable(&e))?;
        let due = Filter::from_ber(&ber, Depth::new(4)).map_err(|e| unparsable(&e))?;
        let mut expired: Vec<Dn> = Vec::new();
        for store in self.stores() {
            let snapshot = store.snapshot().map_err(Outcome::from)?;
            snapshot
                .search(&Dn::root(), Scope::Subtree, &due, |_, entry| {
                    expired.push(entry.dn.clone());
                    true
                })
                .map_err(Outcome::from)?;
        }
        expired.sort_by_key(|dn| std::cmp::Reverse(dn.rdn_count()));
        // Each delete is guarded by the expiry it was chosen for, tested
        // when it applies: an entry refreshed since (a Refresh on this
        // server, or on another node of a cluster, ordered before this
        // delete in the log) lives on.
        let guard = filter_str::parse(&format!("(entryExpireTimestamp<={now})"), 4)
            .map_err(|e| unparsable(&e))?;
        let mut deleted = 0;
        for dn in expired {
            let command = Command::Guarded {
                assertion: guard.clone(),
                command: Box::new(Command::Delete { dn: dn.clone() }),
            };
            match self.store_for(&dn).execute(command).await {
                Ok(_) => deleted += 1,
                // Children still alive, deleted or refreshed meanwhile:
                // next sweep.
                Err(StoreError::NotAllowedOnNonLeaf(_) | StoreError::NoSuchObject { .. }) => {}
                Err(e) if e.code() == ResultCode::ASSERTION_FAILED => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(deleted)
    }
}
