//! Nested groups: the in-chain matching rule (LDAP_MATCHING_RULE_IN_CHAIN,
//! 1.2.840.113556.1.4.1941), as Active Directory, 389 DS and Samba serve
//! it.
//!
//! - `(memberOf:1.2.840.113556.1.4.1941:=G)` matches the members of `G`
//!   and of every group nested in it, however deep.
//! - `(member:1.2.840.113556.1.4.1941:=U)` (or `uniqueMember`) matches
//!   every group `U` is in, directly or through nested groups.
//!
//! No entry alone says whether it matches, so the filter is rewritten
//! before the search: each such match becomes the equality matches it
//! stands for, `(|(memberOf=G)(memberOf=G1)…)` or `(|(member=U)(member=G1)…)`,
//! with the groups found by walking memberOf (kept by the writer,
//! `[groups]`, and indexed). The walk remembers each group it met, so a
//! cycle ends it, and stops at `groups.max_nested_groups` groups with
//! adminLimitExceeded (11). It reads group memberships whatever the
//! requester may read, as Active Directory does; what the search
//! returns is access-checked as any search's.

use meridian_ber::{Tag, Writer};
use std::collections::HashSet;

use meridian_model::dn::Dn;
use meridian_model::schema::AttrId;
use meridian_proto::filter::MatchingRuleAssertion;
use meridian_proto::{Ava, Element as _, Filter, ResultCode, Scope};

use crate::{Directory, Outcome};

/// The rule's OID.
const IN_CHAIN: &[u8] = b"1.2.840.113556.1.4.1941";

/// Which way a match walks.
enum Walk {
    /// `memberOf:…:=G`: the groups nested below `G`.
    Down,
    /// `member:…:=U`: the groups above `U`.
    Up,
}

fn in_chain<'a>(assertion: &MatchingRuleAssertion<'a>) -> Option<(Walk, &'a [u8])> {
    if assertion.rule != Some(IN_CHAIN) || assertion.dn_attributes {
        return None;
    }
    let attr = std::str::from_utf8(assertion.attr?).ok()?;
    let attr = attr.split(';').next().unwrap_or(attr);
    let walk = if attr.eq_ignore_ascii_case("memberOf") {
        Walk::Down
    } else if attr.eq_ignore_ascii_case("member") || attr.eq_ignore_ascii_case("uniqueMember") {
        Walk::Up
    } else {
        return None;
    };
    Some((walk, assertion.attr?))
}

/// Whether `filter` holds an in-chain match anywhere.
fn holds_in_chain(filter: &Filter<'_>) -> bool {
    match filter {
        Filter::And(children) | Filter::Or(children) | Filter::Not(children) => {
            children.iter().any(|child| holds_in_chain(&child))
        }
        Filter::Extensible(assertion) => in_chain(assertion).is_some(),
        _ => false,
    }
}

impl Directory {
    /// `filter` with its in-chain matches rewritten, encoded; `None` when
    /// it has none (nearly every filter: looked at, not copied).
    pub(crate) fn expand_in_chain(&self, filter: &Filter<'_>) -> Result<Option<Vec<u8>>, Outcome> {
        if !holds_in_chain(filter) {
            return Ok(None);
        }
        let mut bytes = Vec::new();
        let mut walked = 0usize;
        self.write_expanded(&mut Writer::new(&mut bytes), filter, &mut walked)?;
        Ok(Some(bytes))
    }

    fn write_expanded(
        &self,
        w: &mut Writer<'_>,
        filter: &Filter<'_>,
        walked: &mut usize,
    ) -> Result<(), Outcome> {
        let set = match filter {
            Filter::And(children) => Some((0, children)),
            Filter::Or(children) => Some((1, children)),
            Filter::Not(children) => Some((2, children)),
            _ => None,
        };
        if let Some((number, children)) = set {
            let mark = w.start(Tag::context(number, true));
            for child in children.iter() {
                self.write_expanded(w, &child, walked)?;
            }
            w.end(mark);
            return Ok(());
        }
        let Filter::Extensible(assertion) = filter else {
            filter.encode(w);
            return Ok(());
        };
        let Some((walk, attr)) = in_chain(assertion) else {
            filter.encode(w);
            return Ok(());
        };
        let Ok(start) = Dn::parse(assertion.value, &self.schema) else {
            // Not a DN: matches nothing, as the rule's equality would say.
            Filter::Or(meridian_proto::Seq::empty()).encode(w);
            return Ok(());
        };
        let groups = match walk {
            Walk::Down => self.nested_below(&start, walked)?,
            Walk::Up => self.groups_above(&start, walked)?,
        };
        let mark = w.start(Tag::context(1, true));
        Filter::Equality(Ava {
            attr,
            value: assertion.value,
        })
        .encode(w);
        for group in &groups {
            Filter::Equality(Ava {
                attr,
                value: group.original().as_bytes(),
            })
            .encode(w);
        }
        w.end(mark);
        Ok(())
    }

    /// Counts one more group walked, refusing past the limit.
    fn walk_one(&self, walked: &mut usize) -> Result<(), Outcome> {
        *walked += 1;
        let most = self.limits().max_nested_groups;
        if *walked > most {
            return Err(Outcome::new(
                ResultCode::ADMIN_LIMIT_EXCEEDED,
                format!(
                    "a nested-group (in-chain) match walked more than {most} groups (groups.max_nested_groups)"
                ),
            ));
        }
        Ok(())
    }

    /// The groups nested in `group`, however deep (not `group` itself):
    /// entries whose memberOf names one met before and that name members
    /// of their own.
    fn nested_below(&self, group: &Dn, walked: &mut usize) -> Result<Vec<Dn>, Outcome> {
        let member_types: Vec<AttrId> = ["member", "uniqueMember"]
            .into_iter()
            .filter_map(|name| self.schema.attribute_id(name))
            .collect();
        let mut met = Met::new(group);
        let mut frontier = vec![group.clone()];
        while let Some(next) = frontier.pop() {
            let filter = Filter::Equality(Ava {
                attr: b"memberOf",
                value: next.original().as_bytes(),
            });
            for store in self.stores() {
                let Ok(snapshot) = store.snapshot() else {
                    continue;
                };
                for suffix in store.suffixes() {
                    let mut nested = Vec::new();
                    // A context whose top entry is missing has nothing.
                    let _ = snapshot.search(suffix, Scope::Subtree, &filter, |_, entry| {
                        if member_types.iter().any(|attr| entry.get(*attr).is_some()) {
                            nested.push(entry.dn.clone());
                        }
                        true
                    });
                    for dn in nested {
                        if met.first_time(&dn) {
                            self.walk_one(walked)?;
                            frontier.push(dn);
                        }
                    }
                }
            }
        }
        Ok(met.found)
    }

    /// The groups `member` is in, directly or through nested groups: its
    /// memberOf, their memberOf, and so on.
    fn groups_above(&self, member: &Dn, walked: &mut usize) -> Result<Vec<Dn>, Outcome> {
        let Some(memberof) = self.schema.attribute_id("memberOf") else {
            return Ok(Vec::new());
        };
        let mut met = Met::new(member);
        let mut frontier = vec![member.clone()];
        while let Some(next) = frontier.pop() {
            let Ok(snapshot) = self.store_for(&next).snapshot() else {
                continue;
            };
            let Ok(Some((_, entry))) = snapshot.get(&next) else {
                continue;
            };
            for value in entry
                .get(memberof)
                .into_iter()
                .flat_map(|a| a.values.iter())
            {
                let Ok(dn) = Dn::parse(value, &self.schema) else {
                    continue;
                };
                if met.first_time(&dn) {
                    self.walk_one(walked)?;
                    frontier.push(dn);
                }
            }
        }
        Ok(met.found)
    }
}

/// The groups a walk met, in order, and their normalised DNs (with the
/// start's), so each is walked once however many ways lead to it.
struct Met {
    seen: HashSet<String>,
    found: Vec<Dn>,
}

impl Met {
    fn new(start: &Dn) -> Met {
        Met {
            seen: HashSet::from([start.normalized().to_owned()]),
            found: Vec::new(),
        }
    }

    /// Whether `dn` is met for the first time (then kept).
    fn first_time(&mut self, dn: &Dn) -> bool {
        let first = self.seen.insert(dn.normalized().to_owned());
        if first {
            self.found.push(dn.clone());
        }
        first
    }
}
