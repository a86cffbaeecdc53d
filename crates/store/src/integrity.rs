//! `[groups]` resolved against the schema once, at open: which classes
//! make a group, which types name its members and carry memberOf, which
//! types' DN values follow their entry, which must be unique where. What
//! applying does with them is in `apply/integrity.rs`.

use meridian_config::GroupsConfig;
use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_model::entry::Entry;
use meridian_model::schema::{AttrId, ClassId};

use crate::StoreError;

/// memberOf's rules.
#[derive(Debug)]
pub(crate) struct MemberOf {
    /// Group classes (an entry of one of them, or of a subclass, is a
    /// group).
    pub(crate) classes: Vec<ClassId>,
    /// The types that name a group's members.
    pub(crate) members: Vec<AttrId>,
    /// The name of the type kept on members, for the modifies that
    /// keep it.
    pub(crate) attr_name: String,
    /// The member types' spellings, and objectClass's: a modify of any
    /// other type changes nothing about groups.
    pub(crate) member_spellings: Spellings,
    pub(crate) class_spellings: Spellings,
}

/// The names and OIDs of some attribute types: whether a change's
/// description is of one of them, told without a schema lookup (every
/// modify asks, and nearly all answer no).
#[derive(Debug, Default)]
pub(crate) struct Spellings(Vec<String>);

impl Spellings {
    fn of(attrs: impl IntoIterator<Item = AttrId>, schema: &Schema) -> Spellings {
        let mut spellings = Vec::new();
        for attr in attrs {
            if let Some(at) = schema.attr(attr) {
                spellings.extend(at.names.iter().cloned());
                spellings.push(at.oid.clone());
            }
        }
        Spellings(spellings)
    }

    /// Whether `description` (`member`, `member;x-option`) is of one of
    /// the types.
    pub(crate) fn spells(&self, description: &str) -> bool {
        let name = description.split(';').next().unwrap_or(description);
        self.0.iter().any(|known| known.eq_ignore_ascii_case(name))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The resolved `[groups]`.
#[derive(Debug, Default)]
pub(crate) struct Integrity {
    pub(crate) memberof: Option<MemberOf>,
    /// Types whose DN values follow their entry (refint), with their
    /// names.
    pub(crate) refint: Vec<(AttrId, String)>,
    /// Types whose values are unique, with their names.
    pub(crate) unique: Vec<(AttrId, String)>,
    /// Their spellings, for a modify's quick look.
    pub(crate) unique_spellings: Spellings,
    /// Where they are unique; empty: the whole database.
    pub(crate) unique_subtrees: Vec<Dn>,
}

fn attribute(schema: &Schema, key: &str, name: &str) -> Result<(AttrId, String), StoreError> {
    let id = schema.attribute_id(name).ok_or_else(|| {
        StoreError::Config(format!(
            "{key}: attribute type {name:?} is not defined in the schema"
        ))
    })?;
    Ok((id, name.to_owned()))
}

impl Integrity {
    /// Resolves `config`; a name the schema does not define is an error
    /// naming its key.
    pub(crate) fn new(config: &GroupsConfig, schema: &Schema) -> Result<Integrity, StoreError> {
        let memberof = if config.memberof {
            let classes = config
                .group_classes
                .iter()
                .map(|name| {
                    schema.class_id(name).ok_or_else(|| {
                        StoreError::Config(format!(
                            "groups.group_classes: object class {name:?} is not defined in the schema"
                        ))
                    })
                })
                .collect::<Result<_, _>>()?;
            let members: Vec<AttrId> = config
                .member_attributes
                .iter()
                .map(|name| attribute(schema, "groups.member_attributes", name).map(|(id, _)| id))
                .collect::<Result<_, _>>()?;
            let member_spellings = Spellings::of(members.iter().copied(), schema);
            let class_spellings = Spellings::of(schema.object_class_attr(), schema);
            let (_, attr_name) = attribute(
                schema,
                "groups.memberof_attribute",
                &config.memberof_attribute,
            )?;
            Some(MemberOf {
                classes,
                members,
                attr_name,
                member_spellings,
                class_spellings,
            })
        } else {
            None
        };
        let refint = if config.refint {
            config
                .refint_attributes
                .iter()
                .map(|name| attribute(schema, "groups.refint_attributes", name))
                .collect::<Result<_, _>>()?
        } else {
            Vec::new()
        };
        let unique: Vec<(AttrId, String)> = config
            .unique_attributes
            .iter()
            .map(|name| attribute(schema, "groups.unique_attributes", name))
            .collect::<Result<_, _>>()?;
        let unique_spellings = Spellings::of(unique.iter().map(|(id, _)| *id), schema);
        let unique_subtrees = config
            .unique_subtrees
            .iter()
            .map(|text| {
                Dn::parse(text.as_bytes(), schema).map_err(|e| {
                    StoreError::Config(format!("groups.unique_subtrees: {text:?}: {e}"))
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Integrity {
            memberof,
            refint,
            unique,
            unique_spellings,
            unique_subtrees,
        })
    }
}

impl Integrity {
    /// Warns, once at open, of each type it looks entries up by that has
    /// no equality index.
    pub(crate) fn warn_unindexed(&self, indexes: &crate::index::Indexes, schema: &Schema) {
        for name in self.unindexed(indexes, schema) {
            tracing::warn!(
                attribute = %name,
                "[groups] looks entries up by {name}, which has no eq index in storage.indexes: each such lookup (a delete, a rename, a unique value) reads every entry"
            );
        }
    }

    /// The types it looks entries up by that have no equality index.
    fn unindexed(&self, indexes: &crate::index::Indexes, schema: &Schema) -> Vec<String> {
        let members = self.memberof.iter().flat_map(|m| m.members.iter().copied());
        let others = self
            .refint
            .iter()
            .chain(&self.unique)
            .map(|(attr, _)| *attr);
        let mut names: Vec<String> = Vec::new();
        for attr in members.chain(others) {
            let indexed = indexes
                .get(attr)
                .is_some_and(|spec| spec.kinds.contains(&meridian_config::IndexKind::Eq));
            if let Some(at) = schema.attr(attr)
                && !indexed
                && !names.iter().any(|n| n == at.name())
            {
                names.push(at.name().to_owned());
            }
        }
        names
    }
}

impl MemberOf {
    /// Whether `entry` is a group.
    pub(crate) fn is_group(&self, entry: &Entry, schema: &Schema) -> bool {
        let Some(object_class) = schema.object_class_attr() else {
            return false;
        };
        let Some(classes) = entry.get(object_class) else {
            return false;
        };
        self.names_a_group_class(&classes.values, schema)
    }

    /// Whether an entry with these objectClass values is a group.
    pub(crate) fn names_a_group_class(&self, classes: &[Vec<u8>], schema: &Schema) -> bool {
        classes.iter().any(|value| {
            let name = String::from_utf8_lossy(value);
            schema.class_id(&name).is_some_and(|class| {
                self.classes
                    .iter()
                    .any(|group| schema.class_inherits(class, *group))
            })
        })
    }

    /// The DNs a group names as members (those that parse), each once.
    pub(crate) fn members(&self, entry: &Entry, schema: &Schema) -> Vec<Dn> {
        let mut members: Vec<Dn> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for attr in &self.members {
            let Some(values) = entry.get(*attr) else {
                continue;
            };
            for value in &values.values {
                if let Some(dn) = dn_of(value, schema)
                    && seen.insert(dn.normalized().to_owned())
                {
                    members.push(dn);
                }
            }
        }
        members
    }
}

/// The DN a value of a DN-valued type names: the value itself, or, for
/// the Name and Optional UID syntax (`uniqueMember`), the DN before its
/// `#'…'B` UID.
pub(crate) fn dn_of(value: &[u8], schema: &Schema) -> Option<Dn> {
    if let Ok(dn) = Dn::parse(value, schema) {
        return Some(dn);
    }
    let at = value.iter().rposition(|b| *b == b'#')?;
    let (dn, uid) = value.split_at(at);
    let uid = uid.get(1..)?;
    let bits = uid.strip_prefix(b"'")?.strip_suffix(b"'B")?;
    bits.iter()
        .all(|b| matches!(b, b'0' | b'1'))
        .then(|| Dn::parse(dn, schema).ok())
        .flatten()
}
