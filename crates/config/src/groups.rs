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
        Ok(())
    }
}
