//! The schema check of an entry (RFC 4512: classes, required and allowed
//! types, single-valued types, syntaxes and duplicate values) with the
//! result codes of RFC 4511.

use meridian_proto::ResultCode;

use super::{CheckedEntry, Entry, Values, WrittenBy};
use crate::schema::{AttrId, AttrSet, AttributeType, ClassId, ClassKind};
use crate::{ModelError, Schema};

pub(crate) fn violation(code: ResultCode, message: String) -> ModelError {
    ModelError::new(code, message)
}

/// [`check_values`] for values added to an attribute of type `at`
/// whose values held before were valid and distinct, by a change that
/// refused a value equal to one held or to another added (a modify's
/// add): the added values' syntax, and the number of values, `total`
/// after the change. A value added to a group of ten thousand members
/// is checked alone.
pub fn check_added_values(
    at: &AttributeType,
    added: &[&[u8]],
    total: usize,
) -> Result<(), ModelError> {
    let name = at.name();
    if at.single_value && total > 1 {
        return Err(violation(
            ResultCode::CONSTRAINT_VIOLATION,
            format!("attribute {name:?} is single-valued but has {total} values"),
        ));
    }
    for value in added {
        if !at.syntax.is_valid(value) {
            return Err(violation(
                ResultCode::INVALID_ATTRIBUTE_SYNTAX,
                format!(
                    "attribute {name:?}: a value added is invalid per syntax {}",
                    at.syntax_oid
                ),
            ));
        }
    }
    Ok(())
}

/// The checks of one attribute's values, of type `at`, in an entry being
/// written: whether `writer` may set it, the number of values, their
/// syntax, and no value twice by the equality rule.
pub fn check_values(
    at: &AttributeType,
    values: &[Vec<u8>],
    writer: WrittenBy,
    schema: &Schema,
) -> Result<(), ModelError> {
    let name = at.name();
    if writer == WrittenBy::Client && at.no_user_modification {
        return Err(violation(
            ResultCode::CONSTRAINT_VIOLATION,
            format!("attribute {name:?} is not user-modifiable"),
        ));
    }
    if at.single_value && values.len() > 1 {
        return Err(violation(
            ResultCode::CONSTRAINT_VIOLATION,
            format!(
                "attribute {name:?} is single-valued but has {} values",
                values.len()
            ),
        ));
    }
    for (i, value) in values.iter().enumerate() {
        if !at.syntax.is_valid(value) {
            return Err(violation(
                ResultCode::INVALID_ATTRIBUTE_SYNTAX,
                format!(
                    "attribute {name:?}: value #{i} is invalid per syntax {}",
                    at.syntax_oid
                ),
            ));
        }
    }
    // One value cannot be a duplicate; its syntax was checked above.
    if let (Some(rule), true) = (at.equality, values.len() > 1) {
        let mut keys = Vec::with_capacity(values.len());
        for (i, value) in values.iter().enumerate() {
            let key = rule.key_cow(value, schema).ok_or_else(|| {
                violation(
                    ResultCode::INVALID_ATTRIBUTE_SYNTAX,
                    format!(
                        "attribute {name:?}: value #{i} cannot be matched with {}",
                        rule.name
                    ),
                )
            })?;
            keys.push((key, i));
        }
        if let Some(i) = first_repeated(&mut keys) {
            return Err(violation(
                ResultCode::ATTRIBUTE_OR_VALUE_EXISTS,
                format!("attribute {name:?}: value #{i} is provided more than once"),
            ));
        }
    }
    Ok(())
}

/// The first position, in the values' order, whose key an earlier value
/// has too, sorting `keys` (each value's key and position) to find it.
/// Sorted, not compared pairwise: a value added to a group of ten
/// thousand members compared every pair of them, 235 ms a modify (perf:
/// 78 % of the writer in `memcmp`); a client's attribute of many values
/// must not cost the square of their number.
pub(crate) fn first_repeated(keys: &mut [(std::borrow::Cow<'_, [u8]>, usize)]) -> Option<usize> {
    keys.sort_unstable();
    // Within a run of equal keys, positions ascend: the second is where
    // a walk in the values' order meets the key again.
    keys.windows(2)
        .filter(|pair| matches!(pair, [(a, _), (b, _)] if a == b))
        .filter_map(|pair| pair.get(1).map(|(_, i)| *i))
        .min()
}

/// What an entry's object classes decide, whatever its other attributes
/// hold: the classes listed, the attributes they allow and require, and
/// the structural class. A function of the objectClass values alone, so
/// the same values give the same rules ([`KnownClasses`]).
#[derive(Debug, Clone)]
pub struct ClassRules {
    listed: ClassList,
    /// What an entry of these classes may hold: what they allow (a class
    /// allows what its superiors allow, so what the listed classes allow
    /// is what the entry's classes allow), and every operational type;
    /// everything when one is `extensibleObject`.
    permitted: Option<AttrSet>,
    /// What the listed classes require (a class requires what its
    /// superiors require).
    must: AttrSet,
    structural: ClassId,
}

impl ClassRules {
    /// The rules of the object classes `values` names, or why they are
    /// no valid list of classes.
    pub fn of(values: &[Vec<u8>], schema: &Schema) -> Result<ClassRules, ModelError> {
        let mut listed = ClassList::new();
        let mut classes = ClassList::new();
        let mut permitted = schema.operational_types().clone();
        for (i, value) in values.iter().enumerate() {
            // slapd answers invalidAttributeSyntax here: an OID value that
            // names nothing.
            let (id, class) = std::str::from_utf8(value)
                .ok()
                .and_then(|name| schema.class_id(name.trim()))
                .and_then(|id| Some((id, schema.class_by_id(id)?)))
                .ok_or_else(|| {
                    violation(
                        ResultCode::INVALID_ATTRIBUTE_SYNTAX,
                        format!(
                            "objectClass: value #{i} ({:?}) is not a defined object class",
                            String::from_utf8_lossy(value)
                        ),
                    )
                })?;
            if listed.contains(&id) {
                continue;
            }
            listed.push(id);
            for &c in class.lineage() {
                if !classes.contains(&c) {
                    classes.push(c);
                }
            }
            permitted.union_with(class.allowed());
        }

        let structural = structural_class(&classes, schema)?;
        let extensible = schema
            .extensible_object_class()
            .is_some_and(|x| classes.contains(&x));
        let permitted = (!extensible).then_some(permitted);
        let must = listed
            .iter()
            .filter_map(|&id| schema.class_by_id(id))
            .flat_map(|c| c.must.iter().copied())
            .collect();
        Ok(ClassRules {
            listed,
            permitted,
            must,
            structural,
        })
    }
}

impl ClassRules {
    /// Checks that an entry of these classes, holding attributes of the
    /// types `present`, has every type its classes require and only types
    /// they allow (operational types aside). `types` are the same types,
    /// in the entry's order: the first not allowed is the one named.
    pub fn check_types(
        &self,
        schema: &Schema,
        present: &AttrSet,
        types: impl Iterator<Item = AttrId>,
    ) -> Result<(), ModelError> {
        // Two tests of a few words each; only a failure looks for what
        // to name in the message.
        let all_permitted = self
            .permitted
            .as_ref()
            .is_none_or(|permitted| present.is_subset(permitted));
        if all_permitted && self.must.is_subset(present) {
            return Ok(());
        }
        // MUST and MAY. A class's MUST holds its superiors', so the
        // listed classes' MUST are all the entry's classes require.
        for c in self.listed.iter().filter_map(|&id| schema.class_by_id(id)) {
            if let Some(&missing) = c.must.iter().find(|&&must| !present.contains(must)) {
                let attr = schema.attr(missing).map_or("?", |a| a.name());
                return Err(violation(
                    ResultCode::OBJECT_CLASS_VIOLATION,
                    format!("object class {:?} requires attribute {attr:?}", c.name()),
                ));
            }
        }
        let Some(permitted) = &self.permitted else {
            return Ok(());
        };
        for attr in types {
            let Some(at) = schema.attr(attr) else {
                continue;
            };
            if !permitted.contains(attr) {
                return Err(violation(
                    ResultCode::OBJECT_CLASS_VIOLATION,
                    format!(
                        "attribute {:?} is not allowed by the entry's object classes",
                        at.name()
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The rules of the object class lists a writer has checked, by the
/// exact values. The entries of a directory share a handful of class
/// lists, and working a list's rules out again for every modify (each
/// name looked up, lineages merged, the structural chain found) was a
/// twentieth of the store writer's time (perf).
#[derive(Debug, Default)]
pub struct KnownClasses {
    seen: Vec<(Values, ClassRules)>,
}

impl KnownClasses {
    /// Lists kept; later ones are worked out each time.
    pub(crate) const LIMIT: usize = 16;

    /// The rules of the object classes `values` names (an objectClass
    /// attribute's values, in order), worked out if not kept.
    pub fn rules_of<'v>(
        &mut self,
        values: impl ExactSizeIterator<Item = &'v [u8]> + Clone,
        schema: &Schema,
    ) -> Result<std::borrow::Cow<'_, ClassRules>, ModelError> {
        let same = |seen: &Values| {
            seen.len() == values.len() && seen.iter().zip(values.clone()).all(|(s, v)| s == v)
        };
        let at = match self.seen.iter().position(|(seen, _)| same(seen)) {
            Some(at) => at,
            None => {
                let values: Values = values.map(<[u8]>::to_vec).collect();
                let rules = ClassRules::of(&values, schema)?;
                if self.seen.len() >= Self::LIMIT {
                    return Ok(std::borrow::Cow::Owned(rules));
                }
                self.seen.push((values, rules));
                self.seen.len() - 1
            }
        };
        self.seen
            .get(at)
            .map(|(_, rules)| std::borrow::Cow::Borrowed(rules))
            .ok_or_else(|| ModelError::internal("the class rules just remembered are not there"))
    }
}

/// The one structural class chain's most specific class.
pub(crate) fn structural_class(
    classes: &[ClassId],
    schema: &Schema,
) -> Result<ClassId, ModelError> {
    let structural: ClassList = classes
        .iter()
        .copied()
        .filter(|&c| {
            schema
                .class_by_id(c)
                .is_some_and(|c| c.kind == ClassKind::Structural)
        })
        .collect();
    let most_specific: ClassList = structural
        .iter()
        .copied()
        .filter(|&c| {
            !structural
                .iter()
                .any(|&o| o != c && schema.class_inherits(o, c))
        })
        .collect();
    match most_specific.as_slice() {
        [one] => Ok(*one),
        [] => Err(violation(
            ResultCode::OBJECT_CLASS_VIOLATION,
            "no structural object class provided".into(),
        )),
        many => {
            let names: Vec<&str> = many
                .iter()
                .filter_map(|&c| schema.class_by_id(c).map(|c| c.name()))
                .collect();
            Err(violation(
                ResultCode::OBJECT_CLASS_VIOLATION,
                format!(
                    "invalid structural object class chain ({})",
                    names.join("/")
                ),
            ))
        }
    }
}

/// Which values of a type [`Entry::check_after_modify_by`] validates.
pub enum ValuesCheck<'v> {
    /// None (the type was not changed).
    Skip,
    /// Every value.
    All,
    /// Only these, added to values valid and distinct before.
    Added(Vec<&'v [u8]>),
}

/// An entry's object classes: a handful, so kept inline.
pub(crate) type ClassList = smallvec::SmallVec<[ClassId; 8]>;

impl Entry {
    /// Checks the entry against the schema.
    pub fn check(&self, schema: &Schema, writer: WrittenBy) -> Result<CheckedEntry, ModelError> {
        self.check_values_of(schema, writer, |_| ValuesCheck::All, None)
    }

    /// [`Entry::check`] after a modify whose changed types are those
    /// `changed` says: the object class rules and the RDN are checked as for a
    /// new entry, but the values of the other types (unchanged, checked
    /// when they were written) are not validated again, as slapd does.
    /// Validating every value of the entry was a tenth of the store
    /// writer's time per modify (perf). The rules of object class lists
    /// seen before are taken from `known`.
    pub fn check_after_modify(
        &self,
        schema: &Schema,
        writer: WrittenBy,
        changed: impl Fn(AttrId) -> bool,
        known: &mut KnownClasses,
    ) -> Result<CheckedEntry, ModelError> {
        let check = |attr| match changed(attr) {
            true => ValuesCheck::All,
            false => ValuesCheck::Skip,
        };
        self.check_values_of(schema, writer, check, Some(known))
    }

    /// [`Entry::check_after_modify`] where `check` says, type by type,
    /// which values to validate: all, none, or only those a change added
    /// ([`check_added_values`]), in the one pass over the entry's types,
    /// so the first refusal is the one the whole check would give.
    pub fn check_after_modify_by<'v>(
        &self,
        schema: &Schema,
        writer: WrittenBy,
        check: impl Fn(AttrId) -> ValuesCheck<'v>,
        known: &mut KnownClasses,
    ) -> Result<CheckedEntry, ModelError> {
        self.check_values_of(schema, writer, check, Some(known))
    }

    pub(crate) fn check_values_of<'v>(
        &self,
        schema: &Schema,
        writer: WrittenBy,
        values_to_check: impl Fn(AttrId) -> ValuesCheck<'v>,
        known: Option<&mut KnownClasses>,
    ) -> Result<CheckedEntry, ModelError> {
        let oc_id = schema
            .object_class_attr()
            .ok_or_else(|| ModelError::internal("the schema has no objectClass type"))?;
        let Some(oc_attr) = self.get(oc_id) else {
            return Err(violation(
                ResultCode::OBJECT_CLASS_VIOLATION,
                "no objectClass attribute".into(),
            ));
        };
        let oc_values = oc_attr.values.iter().map(Vec::as_slice);
        // A lone check keeps nothing: a copy of the values kept for no
        // later check would be one more allocation per add.
        let rules = match known {
            Some(known) => known.rules_of(oc_values, schema)?,
            None => std::borrow::Cow::Owned(ClassRules::of(&oc_attr.values, schema)?),
        };
        for attr in &self.attributes {
            let Some(at) = schema.attr(attr.desc.attr) else {
                continue;
            };
            match values_to_check(attr.desc.attr) {
                ValuesCheck::Skip => {}
                ValuesCheck::All => check_values(at, &attr.values, writer, schema)?,
                ValuesCheck::Added(added) => check_added_values(at, &added, attr.values.len())?,
            }
        }
        let types = || self.attributes.iter().map(|a| a.desc.attr);
        rules.check_types(schema, &types().collect(), types())?;

        // The RDN's values must be values of the entry (X.501).
        if let Some(rdn) = self.dn.rdn_values().first() {
            for (attr, value) in rdn.iter() {
                let present = self.get(*attr).is_some_and(|a| a.has_value(value, schema));
                if !present {
                    let name = schema.attr(*attr).map_or("?", |a| a.name());
                    return Err(violation(
                        ResultCode::NAMING_VIOLATION,
                        format!("value of naming attribute {name:?} is not present in the entry"),
                    ));
                }
            }
        }
        Ok(CheckedEntry {
            structural: rules.structural,
        })
    }
}
