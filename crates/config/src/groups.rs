//! `[groups]`: what the server keeps true between entries that name each
//! other: memberOf beside the groups, references to an entry renamed or
//! deleted, and attribute values unique within a subtree.

use serde::{Deserialize, Serialize};

use crate::ConfigError;

/// `[groups]`: the integrity the writer maintains, in the same write as
/// the change that calls for it (docs/groups.md).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct GroupsConfig {
    /// Keep `memberof_attribute` on every member of a group (an entry
    /// of one of `group_classes`), naming the group: as slapd's memberof
    /// overlay, but in the same write as the group's change.
    pub memberof: bool,
    /// The object classes of groups (slapd's `memberof-group-oc`).
    pub group_classes: Vec<String>,
    /// The attributes that name a group's members (slapd's
    /// `memberof-member-ad`).
    pub member_attributes: Vec<String>,
    /// The attribute kept on members (slapd's `memberof-memberof-ad`);
    /// operational, and not writable by clients.
    pub memberof_attribute: String,
    /// When an entry is deleted or renamed, delete or rewrite the values
    /// that name it in `refint_attributes` of every entry (slapd's refint
    /// overlay, in the same write).
    pub refint: bool,
    /// The attributes whose DN values follow their entry (slapd's
    /// `refint_attributes`).
    pub refint_attributes: Vec<String>,
    /// Attributes whose values must be unique (slapd's unique overlay):
    /// an add or modify that would give a value another entry has within
    /// `unique_subtrees` is refused with constraintViolation (19). Each
    /// needs an equality index.
    pub unique_attributes: Vec<String>,
    /// Where `unique_attributes` are unique: DNs of subtrees; empty:
    /// each naming context.
    pub unique_subtrees: Vec<String>,
    /// Most groups a nested-group (in-chain) match walks before it
    /// gives up with adminLimitExceeded (11).
    pub max_nested_groups: usize,
    /// Dynamic groups (slapd's dynlist overlay): an entry of
    /// `dynamic_group_class` has as members, when read, the entries its
    /// `dynamic_url_attribute` LDAP URLs find, and those entries have it
    /// in `memberof_attribute` when asked. Needs the schema to define the
    /// class and the type (slapd's dyngroup.schema).
    pub dynamic_groups: bool,
    /// The class of dynamic groups (dynlist's group-oc).
    pub dynamic_group_class: String,
    /// The attribute holding their LDAP URLs (dynlist's URL-ad).
    pub dynamic_url_attribute: String,
    /// The attribute their members are returned in (dynlist's member-ad).
    pub dynamic_member_attribute: String,
    /// Most members computed for one dynamic group at one read; past it
    /// the rest are left out and a warning is logged.
    pub max_dynamic_members: usize,
}

impl Default for GroupsConfig {
    fn default() -> Self {
        GroupsConfig {
            memberof: true,
            group_classes: vec!["groupOfNames".into(), "groupOfUniqueNames".into()],
            member_attributes: vec!["member".into(), "uniqueMember".into()],
            memberof_attribute: "memberOf".into(),
            refint: true,
            refint_attributes: vec![
                "member".into(),
                "uniqueMember".into(),
                "manager".into(),
                "secretary".into(),
                "seeAlso".into(),
            ],
            unique_attributes: Vec::new(),
            unique_subtrees: Vec::new(),
            max_nested_groups: 10_000,
            dynamic_groups: true,
            dynamic_group_class: "groupOfURLs".into(),
            dynamic_url_attribute: "memberURL".into(),
            dynamic_member_attribute: "member".into(),
            max_dynamic_members: 10_000,
        }
    }
}

impl GroupsConfig {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key, reason: String| Err(ConfigError::Invalid { key, reason });
        if self.memberof && (self.group_classes.is_empty() || self.member_attributes.is_empty()) {
            return invalid(
                "groups.group_classes",
                "with groups.memberof on, name at least one group class and one member attribute"
                    .into(),
            );
        }
        if self.memberof_attribute.is_empty() {
            return invalid("groups.memberof_attribute", "give an attribute type".into());
        }
        if self.max_nested_groups == 0 {
            return invalid("groups.max_nested_groups", "give at least 1".into());
        }
        if self.dynamic_groups {
            for (key, value) in [
                ("groups.dynamic_group_class", &self.dynamic_group_class),
                ("groups.dynamic_url_attribute", &self.dynamic_url_attribute),
                (
                    "groups.dynamic_member_attribute",
                    &self.dynamic_member_attribute,
                ),
            ] {
                if value.is_empty() {
                    return invalid(
                        key,
                        "give a name, or set groups.dynamic_groups = false".into(),
                    );
                }
            }
            if self.max_dynamic_members == 0 {
                return invalid("groups.max_dynamic_members", "give at least 1".into());
            }
        }
        Ok(())
    }
}
