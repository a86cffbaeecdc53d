//! What a search sends for each entry it returns, and who may see it.

use meridian_model::entry::Entry;
use meridian_model::selection::Selection;
use meridian_store::EntryId;

use crate::access::Level;
use crate::encode::{Projection, encode_entry};
use crate::rights::{Memberships, SeenFilter};
use crate::{Directory, Identity};

/// What every entry a search sends needs: who asks, what they asked
/// for, and what decides whether they may see an entry.
pub(super) struct Output<'s> {
    pub(super) who: &'s Identity,
    pub(super) admin: bool,
    pub(super) groups: &'s Memberships,
    pub(super) message_id: i32,
    pub(super) projection: Projection<'s>,
    pub(super) computed: Computed,
    pub(super) visible_filter: &'s SeenFilter<'s>,
    /// Dynamic groups' members and memberOf, when asked for.
    pub(super) dynamic: Option<super::dynlist::DynamicRead>,
}

/// The computed operational attributes a search asked for.
#[derive(Debug, Clone, Copy)]
pub(super) struct Computed {
    pub(super) entry_dn: bool,
    pub(super) has_subordinates: bool,
    pub(super) num_subordinates: bool,
    pub(super) subschema_subentry: bool,
}

impl Computed {
    /// True if the search asked for none of them.
    pub(super) fn none(&self) -> bool {
        !(self.entry_dn
            || self.has_subordinates
            || self.num_subordinates
            || self.subschema_subentry)
    }

    pub(super) fn wanted(selection: &Selection, schema: &meridian_model::Schema) -> Self {
        let wanted = |name: &str| {
            selection.names_any()
                && schema
                    .attribute_id(name)
                    .is_some_and(|id| selection.names(id, schema))
        };
        Computed {
            entry_dn: wanted("entryDN"),
            has_subordinates: wanted("hasSubordinates"),
            num_subordinates: wanted("numSubordinates"),
            subschema_subentry: wanted("subschemaSubentry"),
        }
    }
}

impl Directory {
    /// Appends `entry`, one the store no longer holds (a deleted entry,
    /// as a persistent search reports it), as `req` would have sent it:
    /// if it matches the filter and `who` may see it, with the
    /// attributes asked for that `who` may read (no computed ones: the
    /// entry is gone). True if it was sent.
    pub fn encode_gone_entry(
        &self,
        who: &Identity,
        req: &meridian_proto::SearchRequest<'_>,
        entry: &Entry,
        message_id: i32,
        buf: &mut Vec<u8>,
    ) -> bool {
        let compiled = meridian_model::filter::CompiledFilter::compile(&req.filter, &self.schema);
        if !compiled.matches(entry, &self.schema) {
            return false;
        }
        let admin = matches!(who, Identity::Admin(_));
        let groups = &Memberships::default();
        if !admin && !self.may_see(who, entry, &SeenFilter::new(&compiled), groups) {
            return false;
        }
        let selection = Selection::parse(req.attributes.iter(), &self.schema);
        let projection = Projection {
            selection: &selection,
            types_only: req.types_only,
            schema: &self.schema,
            values: None,
        };
        let visible = |a: &meridian_model::entry::Attribute| {
            admin || self.may_read_attribute(who, &entry.dn, a.desc.attr, groups)
        };
        encode_entry(buf, message_id, entry, projection, visible, &[]);
        true
    }

    /// Whether `entry` may be sent to the caller at all (see `may_see`).
    pub(super) fn may_output(&self, output: &Output<'_>, entry: &Entry) -> bool {
        output.admin || self.may_see(output.who, entry, output.visible_filter, output.groups)
    }

    /// Whether a match read in place as a record, by its DN only, may be
    /// sent: `Some(false)` when the caller may not read the entry;
    /// `None` when the decoded entry must decide, because the filter
    /// tested a type the caller may not search there (`may_see`
    /// evaluates the filter again with the hidden types Undefined).
    pub(super) fn may_output_record(
        &self,
        output: &Output<'_>,
        dn: &meridian_model::dn::Dn,
    ) -> Option<bool> {
        let (who, groups) = (output.who, output.groups);
        if self.access_level(who, dn, None, groups) < Level::Read {
            return Some(false);
        }
        let tested = output.visible_filter.tested();
        let searchable = |attr: &meridian_model::schema::AttrId| {
            self.access_level(who, dn, Some(*attr), groups) >= Level::Search
        };
        if tested.every || !tested.attrs.iter().all(searchable) {
            return None;
        }
        Some(true)
    }

    /// Appends `entry` as a SearchResultEntry: the attributes the caller
    /// asked for and may read, and the computed ones it asked for.
    pub(super) fn encode_match(
        &self,
        output: &Output<'_>,
        snapshot: &meridian_store::Snapshot<'_>,
        id: EntryId,
        entry: &Entry,
        buf: &mut Vec<u8>,
    ) {
        let Output {
            who,
            admin,
            groups,
            computed: wanted,
            ..
        } = *output;
        let with_dynamic = self.with_dynamic_groups(output, entry);
        let entry = with_dynamic.as_ref().unwrap_or(entry);
        let mut computed: Vec<(&str, Vec<Vec<u8>>)> = Vec::new();
        if wanted.entry_dn {
            computed.push(("entryDN", vec![entry.dn.original().as_bytes().to_vec()]));
        }
        if wanted.has_subordinates || wanted.num_subordinates {
            // Only the children the caller could find: counting the
            // others would reveal that they exist.
            let ids = snapshot.children(Some(id)).unwrap_or_default();
            let visible = |child: &meridian_store::EntryId| {
                admin
                    || snapshot
                        .dn_of(*child)
                        .is_ok_and(|dn| self.access_level(who, &dn, None, groups) >= Level::Read)
            };
            // With the suffix entries of naming contexts glued directly
            // below.
            let glued = self
                .contexts_below(&entry.dn)
                .into_iter()
                .filter(|(store, suffix)| {
                    suffix.is_child_of(&entry.dn)
                        && (admin || self.access_level(who, suffix, None, groups) >= Level::Read)
                        && store
                            .snapshot()
                            .is_ok_and(|s| s.id(suffix).is_ok_and(|id| id.is_some()))
                })
                .count();
            let children = if wanted.num_subordinates {
                ids.iter().filter(|c| visible(c)).count() + glued
            } else {
                usize::from(glued > 0 || ids.iter().any(visible))
            };
            if wanted.has_subordinates {
                let v: &[u8] = if children > 0 { b"TRUE" } else { b"FALSE" };
                computed.push(("hasSubordinates", vec![v.to_vec()]));
            }
            if wanted.num_subordinates {
                computed.push(("numSubordinates", vec![children.to_string().into_bytes()]));
            }
        }
        if wanted.subschema_subentry {
            computed.push((
                "subschemaSubentry",
                vec![meridian_model::subschema::SUBSCHEMA_DN.as_bytes().to_vec()],
            ));
        }
        let visible = |a: &meridian_model::entry::Attribute| {
            admin || self.may_read_attribute(who, &entry.dn, a.desc.attr, groups)
        };
        encode_entry(
            buf,
            output.message_id,
            entry,
            output.projection,
            visible,
            &computed,
        );
    }
}
