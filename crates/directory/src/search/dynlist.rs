//! Dynamic groups, as slapd's dynlist overlay serves them with
//! `dynlist-attrset groupOfURLs memberURL member+memberOf@groupOfNames`:
//! a group of `groups.dynamic_group_class` stores no members but LDAP
//! URLs (RFC 4516, `ldap:///BASE??SCOPE?FILTER`, in
//! `groups.dynamic_url_attribute`); read with its member type asked for,
//! it is returned with the DNs those searches find; an entry read with
//! `memberOf` asked for is returned with the dynamic groups whose URLs
//! find it, beside its stored values.
//!
//! Computed at read time, not stored: nothing to keep in step, and no
//! index, so a filter on a dynamic group's members or on their memberOf
//! does not see them (as with slapd's dynlist, whose filters on dynamic
//! memberOf need its own, unindexed, evaluation). Members are those the
//! reader may read. Bounded: `groups.max_dynamic_members` per group per
//! read (the rest left out, with a warning in the log: fewer members,
//! never more).

use std::cell::OnceCell;

use meridian_model::dn::Dn;
use meridian_model::entry::{Description, Entry};
use meridian_model::filter::CompiledFilter;
use meridian_model::modify::{Change, ModOp};
use meridian_model::schema::AttrId;
use meridian_model::selection::Selection;
use meridian_proto::{Depth, Filter, Scope};

use crate::Directory;
use crate::access::Level;
use crate::search::output::Output;

/// The deepest nesting of a URL's filter (the protocol's own default).
const URL_FILTER_DEPTH: usize = meridian_proto::DecodeLimits::DEFAULT_MAX_DEPTH;

/// `[groups] dynamic_*`, as configured (`Limits::dynamic_groups`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DynamicGroups {
    /// The class of dynamic groups (`groupOfURLs`).
    pub class: String,
    /// Their URL attribute (`memberURL`).
    pub url_attribute: String,
    /// The type their members are returned in (`member`).
    pub member_attribute: String,
    /// The type groups are returned in on members (`memberOf`).
    pub member_of_attribute: String,
    /// Most members computed for one group at one read.
    pub max_members: usize,
}

/// One search step's dynamic groups: what it asked for, the types
/// resolved in the schema, the groups loaded once for every entry.
pub(super) struct DynamicRead {
    class: String,
    url: AttrId,
    member: NamedType,
    member_of: NamedType,
    max_members: usize,
    /// The member type was asked for: dynamic groups get their members.
    members: bool,
    /// memberOf was asked for: entries get their dynamic groups.
    member_of_wanted: bool,
    /// Every dynamic group, loaded at the first entry that needs them.
    groups: OnceCell<Vec<Group>>,
}

/// An attribute type and the name it was configured by.
struct NamedType {
    attr: AttrId,
    name: String,
}

impl NamedType {
    fn name(&self) -> &str {
        &self.name
    }
}

/// A dynamic group and its searches.
struct Group {
    dn: Dn,
    urls: Vec<MemberUrl>,
}

/// One `memberURL`: where it searches, and for what.
struct MemberUrl {
    base: Dn,
    scope: Scope,
    /// The filter, BER encoded.
    filter: Vec<u8>,
    compiled: CompiledFilter,
}

impl MemberUrl {
    /// Parses `ldap://[host]/BASE[?ATTRS[?SCOPE[?FILTER]]]` (RFC 4516):
    /// the scope defaults to base and the filter to
    /// `(objectClass=*)`; the host is not looked at (the search is
    /// local) and neither are the attributes (members are named by DN).
    /// `None` for a value that is not such a URL.
    fn parse(text: &[u8], directory: &Directory) -> Option<MemberUrl> {
        let text = std::str::from_utf8(text).ok()?;
        let rest = text
            .get(..7)
            .filter(|scheme| scheme.eq_ignore_ascii_case("ldap://"))
            .and_then(|_| text.get(7..))?;
        let (_host, path) = rest.split_once('/')?;
        let mut parts = path.split('?');
        let base = crate::referral::percent_decode(parts.next().unwrap_or_default());
        let _attributes = parts.next();
        let scope = match parts
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase()
            .as_str()
        {
            "" | "base" => Scope::Base,
            "one" => Scope::OneLevel,
            "sub" => Scope::Subtree,
            "subordinates" => Scope::Subordinate,
            _ => return None,
        };
        let filter = match parts.next().map(crate::referral::percent_decode) {
            Some(filter) if !filter.is_empty() => filter,
            _ => "(objectClass=*)".to_owned(),
        };
        let schema = directory.schema();
        let base = Dn::parse(base.as_bytes(), schema).ok()?;
        let filter = meridian_proto::filter_str::parse(&filter, URL_FILTER_DEPTH).ok()?;
        let compiled = CompiledFilter::compile(
            &Filter::from_ber(&filter, Depth::new(URL_FILTER_DEPTH)).ok()?,
            schema,
        );
        Some(MemberUrl {
            base,
            scope,
            filter,
            compiled,
        })
    }

    /// Whether `entry` is one this URL's search finds.
    fn finds(&self, entry: &Entry, directory: &Directory) -> bool {
        let dn = &entry.dn;
        let in_scope = match self.scope {
            Scope::Base => dn == &self.base,
            Scope::OneLevel => dn.is_child_of(&self.base),
            Scope::Subtree => dn.is_within(&self.base),
            Scope::Subordinate => dn.is_within(&self.base) && dn != &self.base,
        };
        in_scope && self.compiled.matches(entry, directory.schema())
    }
}

impl DynamicRead {
    /// What a search selecting `selection` needs of dynamic groups;
    /// `None` when they are off, not in the schema, or not asked for.
    pub(super) fn wanted(directory: &Directory, selection: &Selection) -> Option<DynamicRead> {
        let limits = directory.limits();
        let config = limits.dynamic_groups.as_ref()?;
        let schema = directory.schema();
        // Asked at every search step: without the class in the schema
        // (the default schema), a lookup and nothing parsed.
        schema.class_id(&config.class)?;
        let url = schema.attribute_id(&config.url_attribute)?;
        let named = |name: &String| {
            Some(NamedType {
                attr: Description::parse(name.as_bytes(), schema).ok()?.attr,
                name: name.clone(),
            })
        };
        let member = named(&config.member_attribute)?;
        let member_of = named(&config.member_of_attribute)?;
        let asked = |named: &NamedType| selection.names(named.attr, schema);
        let members = asked(&member);
        // memberOf is operational: only by name (or `+`).
        let member_of_wanted = selection.names_any() && asked(&member_of);
        (members || member_of_wanted).then(|| DynamicRead {
            class: config.class.clone(),
            url,
            member,
            member_of,
            max_members: config.max_members,
            members,
            member_of_wanted,
            groups: OnceCell::new(),
        })
    }
}

impl Directory {
    /// `entry` as a search returns it with dynamic groups computed: a
    /// dynamic group with its members, an entry with its dynamic groups
    /// in memberOf. `None`: nothing to add, send `entry` as it is.
    pub(super) fn with_dynamic_groups(&self, output: &Output<'_>, entry: &Entry) -> Option<Entry> {
        let dynamic = output.dynamic.as_ref()?;
        let mut added: Vec<(&NamedType, Vec<Vec<u8>>)> = Vec::new();
        if dynamic.members && crate::referral::has_class(entry, &self.schema, &dynamic.class) {
            let members = self.dynamic_members(output, dynamic, entry);
            if !members.is_empty() {
                added.push((&dynamic.member, members));
            }
        }
        if dynamic.member_of_wanted {
            let groups = dynamic.groups.get_or_init(|| self.dynamic_groups(dynamic));
            let of: Vec<Vec<u8>> = groups
                .iter()
                .filter(|group| group.urls.iter().any(|url| url.finds(entry, self)))
                .map(|group| group.dn.original().as_bytes().to_vec())
                .collect();
            if !of.is_empty() {
                added.push((&dynamic.member_of, of));
            }
        }
        if added.is_empty() {
            return None;
        }
        // Beside the stored values, each once: the model's permissive add.
        let changes = added.iter().map(|(desc, values)| Change {
            op: ModOp::Add,
            attr: desc.name(),
            values,
        });
        meridian_model::modify::apply_changes(entry.clone(), changes, &self.schema, true).ok()
    }

    /// The DNs `group`'s URLs find that the reader may read, at most
    /// `max_members`.
    fn dynamic_members(
        &self,
        output: &Output<'_>,
        dynamic: &DynamicRead,
        group: &Entry,
    ) -> Vec<Vec<u8>> {
        let mut members: Vec<Vec<u8>> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut cut = false;
        let urls = group
            .get(dynamic.url)
            .into_iter()
            .flat_map(|a| a.values.iter())
            .filter_map(|value| MemberUrl::parse(value, self));
        for url in urls {
            let Ok(snapshot) = self.store_for(&url.base).snapshot() else {
                continue;
            };
            let Ok(filter) = Filter::from_ber(&url.filter, Depth::new(URL_FILTER_DEPTH)) else {
                continue;
            };
            // A base that does not exist finds nothing.
            let _ = snapshot.search(&url.base, url.scope, &filter, |_, entry| {
                let readable = output.admin
                    || self.access_level(output.who, &entry.dn, None, output.groups) >= Level::Read;
                if readable && seen.insert(entry.dn.normalized().to_owned()) {
                    if members.len() == dynamic.max_members {
                        cut = true;
                        return false;
                    }
                    members.push(entry.dn.original().as_bytes().to_vec());
                }
                true
            });
        }
        if cut {
            tracing::warn!(
                group = %group.dn.original(),
                most = dynamic.max_members,
                "a dynamic group finds more members than groups.max_dynamic_members: the rest are left out of this read"
            );
        }
        members
    }

    /// Every dynamic group of every naming context, with its URLs.
    fn dynamic_groups(&self, dynamic: &DynamicRead) -> Vec<Group> {
        let class = Filter::Equality(meridian_proto::Ava {
            attr: b"objectClass",
            value: dynamic.class.as_bytes(),
        });
        let mut groups = Vec::new();
        for store in self.stores() {
            let Ok(snapshot) = store.snapshot() else {
                continue;
            };
            for suffix in store.suffixes() {
                let _ = snapshot.search(suffix, Scope::Subtree, &class, |_, entry| {
                    let urls: Vec<MemberUrl> = entry
                        .get(dynamic.url)
                        .into_iter()
                        .flat_map(|a| a.values.iter())
                        .filter_map(|value| MemberUrl::parse(value, self))
                        .collect();
                    if !urls.is_empty() {
                        groups.push(Group {
                            dn: entry.dn.clone(),
                            urls,
                        });
                    }
                    true
                });
            }
        }
        groups
    }
}
