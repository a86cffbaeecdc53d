//! Alias dereferencing (RFC 4511 section 4.5.1.3, RFC 4512 section 2.6).
//!
//! An `alias` entry stands for the entry its aliasedObjectName names. A
//! search's derefAliases says where aliases are followed: in locating
//! the base (derefFindingBaseObj), among the entries in scope
//! (derefInSearching), both (derefAlways) or nowhere. Followed in
//! searching, an alias is not returned itself; the entry it names is
//! searched instead, with its subtree for a subtree search (X.511
//! section 7.11). As in slapd, a cycle or a dangling alias met in locating
//! the base is aliasProblem naming the alias, and one met among the
//! entries in scope is passed over.

use std::collections::HashSet;

use meridian_model::dn::Dn;
use meridian_model::entry::Entry;
use meridian_proto::{ResultCode, Scope};
use meridian_store::{EntryId, Snapshot};

use crate::presence::Special;
use crate::referral::has_class;
use crate::{Directory, Outcome};

/// The longest chain of aliases followed (slapd follows any length but
/// stops at a cycle; a bound also stops a chain built to be long).
pub(crate) const MAX_HOPS: usize = 32;

/// Where a search that dereferences aliases in searching looks.
#[derive(Debug)]
pub(crate) struct Roots {
    /// The request's base and scope, then each aliased entry: with its
    /// subtree for subtree searches, alone for one-level ones.
    pub(crate) roots: Vec<(Dn, Scope)>,
    /// The aliases met in those scopes: never returned themselves.
    pub(crate) aliases: HashSet<EntryId>,
}

fn alias_problem(alias: &Dn, message: &str) -> Outcome {
    Outcome {
        matched: alias.original().to_owned(),
        ..Outcome::new(ResultCode::ALIAS_PROBLEM, message)
    }
}

/// True if `dn` lies in the scope `scope` of `root`.
fn in_scope(dn: &Dn, root: &Dn, scope: Scope) -> bool {
    match scope {
        Scope::Base => dn.same_entry(root),
        Scope::OneLevel => dn.is_child_of(root),
        Scope::Subtree => dn.is_within(root),
        Scope::Subordinate => dn.is_descendant_of(root),
    }
}

impl Directory {
    fn is_alias(&self, entry: &Entry) -> bool {
        has_class(entry, &self.schema, "alias")
    }

    /// The DN an alias entry names.
    fn aliased_object(&self, entry: &Entry) -> Option<Dn> {
        let attr = self.schema.attribute_id("aliasedObjectName")?;
        let value = entry
            .attributes
            .iter()
            .find(|a| a.desc.attr == attr)?
            .values
            .first()?;
        Dn::parse(value, &self.schema).ok()
    }

    /// Locates `dn` through aliases: an alias is replaced by the entry it
    /// names, and a missing entry below an alias by the same RDNs below
    /// the aliased one (RFC 4511 section 4.5.1.3, derefFindingBaseObj). A
    /// missing DN reached without an alias is returned as it is: the
    /// search reports it as noSuchObject.
    pub(crate) fn find_through_aliases(
        &self,
        snapshot: &Snapshot<'_>,
        dn: Dn,
    ) -> Result<Dn, Outcome> {
        let mut dn = dn;
        let mut followed: Vec<Dn> = Vec::new();
        loop {
            let (alias, rest) = match snapshot.get(&dn)? {
                Some((_, entry)) if self.is_alias(&entry) => (entry, None),
                Some(_) => return Ok(dn),
                None => {
                    let matched = snapshot.matched(&dn)?;
                    let ancestor = Dn::parse(matched.as_bytes(), &self.schema)
                        .ok()
                        .filter(|m| !m.is_root())
                        .map(|m| snapshot.get(&m))
                        .transpose()?
                        .flatten();
                    match ancestor {
                        Some((_, entry)) if self.is_alias(&entry) => {
                            let rest = dn.relative_to(&entry.dn);
                            (entry, rest)
                        }
                        _ => {
                            return match followed.last() {
                                Some(alias) => Err(alias_problem(alias, "aliasedObject not found")),
                                None => Ok(dn),
                            };
                        }
                    }
                }
            };
            if followed.iter().any(|d| d.same_entry(&alias.dn)) {
                return Err(alias_problem(&alias.dn, "circular alias"));
            }
            if followed.len() >= MAX_HOPS {
                return Err(alias_problem(
                    &alias.dn,
                    &format!("a chain of more than {MAX_HOPS} aliases"),
                ));
            }
            let target = self.aliased_object(&alias).ok_or_else(|| {
                alias_problem(&alias.dn, "the alias has no valid aliasedObjectName")
            })?;
            dn = match rest {
                None => target,
                Some(rest) => {
                    let joined = format!("{rest},{}", target.original());
                    Dn::parse(joined.as_bytes(), &self.schema).map_err(|_| {
                        alias_problem(&alias.dn, "the name below the alias is not a valid DN")
                    })?
                }
            };
            followed.push(alias.dn);
        }
    }

    /// Where a search of `scope` under `base` looks when it dereferences
    /// aliases in searching; `None` when no alias lies in that scope (the
    /// usual case, told by one index lookup), and the search is plain.
    pub(crate) fn alias_roots(
        &self,
        snapshot: &Snapshot<'_>,
        base: &Dn,
        scope: Scope,
    ) -> Result<Option<Roots>, Outcome> {
        if scope == Scope::Base || !self.presence.may_hold(Special::Alias) {
            return Ok(None);
        }
        let aliases: Vec<(EntryId, Dn)> = match snapshot.class_members("alias")? {
            Some(ids) => ids
                .into_iter()
                .map(|id| Ok((id, snapshot.dn_of(id)?)))
                .collect::<Result<_, meridian_store::StoreError>>()?,
            None => {
                // Without the objectClass index: one scan for them.
                let filter = meridian_proto::Filter::Equality(meridian_proto::Ava {
                    attr: b"objectClass",
                    value: b"alias",
                });
                let mut found = Vec::new();
                snapshot.search(&Dn::root(), Scope::Subtree, &filter, |id, entry| {
                    found.push((id, entry.dn.clone()));
                    true
                })?;
                found
            }
        };
        if !aliases.iter().any(|(_, dn)| in_scope(dn, base, scope)) {
            return Ok(None);
        }
        // A one-level search takes each aliased entry alone; a subtree
        // search takes its subtree, where aliases are followed again.
        let target_scope = if scope == Scope::OneLevel {
            Scope::Base
        } else {
            Scope::Subtree
        };
        let mut roots = vec![(base.clone(), scope)];
        let mut met = HashSet::new();
        // The base is searched already: an alias back to it adds nothing.
        let mut targets: HashSet<EntryId> = snapshot.id(base)?.into_iter().collect();
        let mut next = 0;
        while let Some((root, root_scope)) = roots.get(next).cloned() {
            next += 1;
            if root_scope == Scope::Base {
                continue;
            }
            for (id, dn) in &aliases {
                if !in_scope(dn, &root, root_scope) || !met.insert(*id) {
                    continue;
                }
                // Cycles and dangling aliases in scope are passed over.
                let Ok(target) = self.find_through_aliases(snapshot, dn.clone()) else {
                    continue;
                };
                if let Some(target_id) = snapshot.id(&target)?
                    && targets.insert(target_id)
                {
                    roots.push((target, target_scope));
                }
            }
            if scope == Scope::OneLevel {
                // Only the base's own children are followed.
                break;
            }
        }
        Ok(Some(Roots {
            roots,
            aliases: met,
        }))
    }
}
