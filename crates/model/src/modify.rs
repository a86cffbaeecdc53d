//! Applying a ModifyRequest's changes to an entry (RFC 4511 section 4.6,
//! RFC 4525 for increment). Pure and deterministic: the same entry and
//! changes give the same result, which the store relies on.

use std::collections::HashMap;

use meridian_proto::ResultCode;

use crate::ModelError;
use crate::entry::{AttrName, Attribute, Description, Entry, Values};
use crate::schema::{AttrId, Schema};

/// A change operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModOp {
    /// Add values (the attribute is created if absent).
    Add,
    /// Delete the listed values, or the whole attribute if none listed.
    Delete,
    /// Replace all values (none listed: remove the attribute).
    Replace,
    /// Add the (single) integer value to every value (RFC 4525).
    Increment,
}

/// One change, with the attribute description as the client wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Modification {
    /// The operation.
    pub op: ModOp,
    /// The attribute description (`cn`, `cn;lang-de`).
    pub attr: String,
    /// The values.
    pub values: Vec<Vec<u8>>,
}

fn error(code: ResultCode, message: String) -> ModelError {
    ModelError::new(code, message)
}

/// Applies `changes` in order to a copy of `entry`. With `permissive`
/// (the permissive modify control), adding a present value or deleting an
/// absent one is not an error. The result is not schema-checked: callers
/// check the whole entry afterwards, as RFC 4511 requires.
pub fn apply(
    entry: &Entry,
    changes: &[Modification],
    schema: &Schema,
    permissive: bool,
) -> Result<Entry, ModelError> {
    let changes = changes.iter().map(Modification::as_change);
    apply_changes(entry.clone(), changes, schema, permissive)
}

/// One change, borrowed: a [`Modification`] as a client sent it, or one
/// the server adds (the operational attributes it replaces) without
/// building a `Modification` for it.
#[derive(Debug, Clone, Copy)]
pub struct Change<'a> {
    /// The operation.
    pub op: ModOp,
    /// The attribute description (`cn`, `cn;lang-de`).
    pub attr: &'a str,
    /// The values.
    pub values: &'a [Vec<u8>],
}

impl Modification {
    /// This modification as a [`Change`].
    pub fn as_change(&self) -> Change<'_> {
        Change {
            op: self.op,
            attr: &self.attr,
            values: &self.values,
        }
    }
}

/// [`apply`] over borrowed changes in order (a client's, then the
/// operational ones the server replaces), changing `out` itself: a
/// caller that no longer needs the entry as it was saves a copy. On an
/// error `out` is dropped half changed.
pub fn apply_changes<'a>(
    mut out: Entry,
    changes: impl IntoIterator<Item = Change<'a>>,
    schema: &Schema,
    permissive: bool,
) -> Result<Entry, ModelError> {
    for change in changes {
        let desc = Description::parse(change.attr.as_bytes(), schema)?;
        apply_change(&mut out, &desc, change, schema, permissive, None)?;
    }
    check_rdn_kept(&out, schema)?;
    Ok(out)
}

/// Whether a value surely is not among an attribute's values as the
/// entry held them before a modify (see [`apply_described_changes`]).
pub type Absent<'a> = &'a dyn Fn(&Description, &[u8]) -> bool;

/// [`apply_changes`] over changes whose descriptions the caller has
/// parsed already (the store's writer, which needs them first to know
/// the types changed: parsing each twice was a few percent of its time).
/// `absent`, when given, tells of a value to add or delete that the
/// entry as it was before these changes surely holds no value equal to
/// it (the store asks its equality index): a change of a few values to an
/// attribute of thousands (a member added to a big group) then works out
/// the keys of the values it changes, not of every value held.
pub fn apply_described_changes<'a, 'd>(
    mut out: Entry,
    changes: impl IntoIterator<Item = (&'d Description, Change<'a>)>,
    schema: &Schema,
    permissive: bool,
    absent: Option<Absent<'_>>,
) -> Result<Entry, ModelError> {
    // The index speaks of the entry as it was: only for a type no
    // earlier change of this modify touched.
    let mut touched: Vec<AttrId> = Vec::new();
    for (desc, change) in changes {
        let absent = absent.filter(|_| desc.options.is_empty() && !touched.contains(&desc.attr));
        apply_change(&mut out, desc, change, schema, permissive, absent)?;
        touched.push(desc.attr);
    }
    check_rdn_kept(&out, schema)?;
    Ok(out)
}

/// One change, of the type `desc` (parsed from `change.attr`).
fn apply_change(
    out: &mut Entry,
    desc: &Description,
    change: Change<'_>,
    schema: &Schema,
    permissive: bool,
    absent: Option<Absent<'_>>,
) -> Result<(), ModelError> {
    let at = schema
        .attr(desc.attr)
        .ok_or_else(|| ModelError::internal(format!("attribute ID {:?} has no type", desc.attr)))?;
    let name = change.attr;
    let rule = at.equality;
    let key = |v: &[u8]| -> Result<Vec<u8>, ModelError> {
        match rule {
            Some(r) => r.key(v, schema).ok_or_else(|| {
                error(
                    ResultCode::INVALID_ATTRIBUTE_SYNTAX,
                    format!("{name}: value is invalid for {}", r.name),
                )
            }),
            None => Ok(v.to_vec()),
        }
    };
    let position = out.attributes.iter().position(|a| a.desc == *desc);
    let at = Target {
        name: change.attr,
        desc,
        position,
    };
    match change.op {
        ModOp::Add => {
            let absent = absent.map(|absent| |v: &[u8]| absent(desc, v));
            add_values(out, &at, change.values, schema, permissive, key, absent)
        }
        ModOp::Delete => {
            let absent = absent.map(|absent| |v: &[u8]| absent(desc, v));
            delete_values(out, &at, change.values, permissive, key, absent)
        }
        ModOp::Replace => {
            if let Some(idx) = position {
                out.attributes.remove(idx);
            }
            if !change.values.is_empty() {
                out.attributes.push(Attribute {
                    desc: desc.clone(),
                    name: AttrName::new(change.attr, desc, schema),
                    values: change.values.iter().cloned().collect(),
                });
            }
            Ok(())
        }
        ModOp::Increment => increment_values(
            out,
            &at,
            change.values,
            rule.is_some_and(|r| r.name == "integerMatch"),
        ),
    }
}

/// The attribute a change is about: its name as the client wrote it, its
/// description, and where it is in the entry, if it is there.
struct Target<'c> {
    name: &'c str,
    desc: &'c Description,
    position: Option<usize>,
}

/// Adds `values` (attributeOrValueExists for one present, unless
/// permissive).
fn add_values(
    out: &mut Entry,
    at: &Target<'_>,
    values: &[Vec<u8>],
    schema: &Schema,
    permissive: bool,
    key: impl Fn(&[u8]) -> Result<Vec<u8>, ModelError>,
    absent: Option<impl Fn(&[u8]) -> bool>,
) -> Result<(), ModelError> {
    let name = at.name;
    if values.is_empty() {
        return Err(error(
            ResultCode::PROTOCOL_ERROR,
            format!("{name}: add without values"),
        ));
    }
    let idx = match at.position {
        Some(i) => i,
        None => {
            out.attributes.push(Attribute {
                desc: at.desc.clone(),
                name: AttrName::new(at.name, at.desc, schema),
                values: Values::new(),
            });
            out.attributes.len() - 1
        }
    };
    let attr = out
        .attributes
        .get_mut(idx)
        .ok_or_else(|| ModelError::internal("attribute position past the entry's list"))?;
    // The keys present, each worked out once: the values of the
    // attribute, then those this change adds. (Looked for value
    // by value, the keys of every present value were worked out
    // again for each value added: the square of their number
    // for a large add.)
    // None of the values is held: only they need their keys (two equal
    // ones among them are still one too many).
    if let Some(absent) = absent
        && values.iter().all(|v| absent(v))
    {
        let mut added = std::collections::HashSet::with_capacity(values.len());
        for value in values {
            if !added.insert(key(value)?) {
                if permissive {
                    continue;
                }
                return Err(error(
                    ResultCode::ATTRIBUTE_OR_VALUE_EXISTS,
                    format!("{name}: value already present"),
                ));
            }
            attr.values.push(value.clone());
        }
        return Ok(());
    }
    let mut present = PresentKeys::of(&attr.values, &key);
    for value in values {
        let k = key(value)?;
        if present.holds(&k) {
            if permissive {
                continue;
            }
            return Err(error(
                ResultCode::ATTRIBUTE_OR_VALUE_EXISTS,
                format!("{name}: value already present"),
            ));
        }
        present.insert(k, attr.values.len());
        attr.values.push(value.clone());
    }
    Ok(())
}

/// Deletes `values`, or the whole attribute when none are given
/// (noSuchAttribute for what is not there, unless permissive).
fn delete_values(
    out: &mut Entry,
    at: &Target<'_>,
    values: &[Vec<u8>],
    permissive: bool,
    key: impl Fn(&[u8]) -> Result<Vec<u8>, ModelError>,
    absent: Option<impl Fn(&[u8]) -> bool>,
) -> Result<(), ModelError> {
    let name = at.name;
    let Some(idx) = at.position else {
        if permissive {
            return Ok(());
        }
        return Err(error(
            ResultCode::NO_SUCH_ATTRIBUTE,
            format!("{name}: no such attribute"),
        ));
    };
    if values.is_empty() {
        out.attributes.remove(idx);
        return Ok(());
    }
    let attr = out
        .attributes
        .get_mut(idx)
        .ok_or_else(|| ModelError::internal("attribute position past the entry's list"))?;
    let deleted = match absent.and_then(|absent| deleted_as_written(&attr.values, values, absent)) {
        Some(Err(())) if !permissive => {
            return Err(error(
                ResultCode::NO_SUCH_ATTRIBUTE,
                format!("{name}: no such value"),
            ));
        }
        Some(Ok(deleted)) => Some(deleted),
        _ => None,
    };
    let deleted = match deleted {
        Some(deleted) => deleted,
        None => deleted_by_key(&attr.values, values, permissive, &key, name)?,
    };
    let mut flags = deleted.into_iter();
    attr.values.retain(|_| !flags.next().unwrap_or(false));
    if attr.values.is_empty() {
        out.attributes.remove(idx);
    }
    Ok(())
}

/// Which of `held` go when `values` are deleted, each found by its bytes
/// where the index says it may be held (a client deletes a member as it
/// was added): `None` when one is not found so, for
/// [`deleted_by_key`] to decide; `Some(Err(()))` when the index says one
/// is surely not held.
fn deleted_as_written(
    held: &[Vec<u8>],
    values: &[Vec<u8>],
    absent: impl Fn(&[u8]) -> bool,
) -> Option<Result<Vec<bool>, ()>> {
    let mut deleted = vec![false; held.len()];
    for value in values {
        if absent(value) {
            return Some(Err(()));
        }
        let at = held
            .iter()
            .enumerate()
            .position(|(i, v)| v == value && !deleted.get(i).copied().unwrap_or(true))?;
        if let Some(flag) = deleted.get_mut(at) {
            *flag = true;
        }
    }
    Some(Ok(deleted))
}

/// Which of `held` go when `values` are deleted, by their keys: each
/// value takes the first held value of its key that no earlier one took.
fn deleted_by_key(
    held: &[Vec<u8>],
    values: &[Vec<u8>],
    permissive: bool,
    key: &impl Fn(&[u8]) -> Result<Vec<u8>, ModelError>,
    name: &str,
) -> Result<Vec<bool>, ModelError> {
    let mut present = PresentKeys::of(held, key);
    let mut deleted = vec![false; held.len()];
    for value in values {
        match present.take(&key(value)?) {
            Some(at) => {
                if let Some(flag) = deleted.get_mut(at) {
                    *flag = true;
                }
            }
            None if permissive => {}
            None => {
                return Err(error(
                    ResultCode::NO_SUCH_ATTRIBUTE,
                    format!("{name}: no such value"),
                ));
            }
        }
    }
    Ok(deleted)
}

/// Adds the one value of `values` to every value of an INTEGER
/// attribute (RFC 4525).
fn increment_values(
    out: &mut Entry,
    at: &Target<'_>,
    values: &[Vec<u8>],
    integer: bool,
) -> Result<(), ModelError> {
    let name = at.name;
    let [delta] = values else {
        return Err(error(
            ResultCode::PROTOCOL_ERROR,
            format!("{name}: increment takes exactly one value"),
        ));
    };
    let delta = parse_integer(delta).ok_or_else(|| {
        error(
            ResultCode::INVALID_ATTRIBUTE_SYNTAX,
            format!("{name}: increment value is not an INTEGER"),
        )
    })?;
    if !integer {
        return Err(error(
            ResultCode::CONSTRAINT_VIOLATION,
            format!("{name}: increment needs an INTEGER attribute"),
        ));
    }
    let Some(idx) = at.position else {
        return Err(error(
            ResultCode::NO_SUCH_ATTRIBUTE,
            format!("{name}: no such attribute to increment"),
        ));
    };
    let attr = out
        .attributes
        .get_mut(idx)
        .ok_or_else(|| ModelError::internal("attribute position past the entry's list"))?;
    for value in &mut attr.values {
        let current = parse_integer(value).ok_or_else(|| {
            error(
                ResultCode::CONSTRAINT_VIOLATION,
                format!("{name}: stored value is not an INTEGER"),
            )
        })?;
        let next = current.checked_add(delta).ok_or_else(|| {
            error(
                ResultCode::CONSTRAINT_VIOLATION,
                format!("{name}: increment overflows"),
            )
        })?;
        *value = next.to_string().into_bytes();
    }
    Ok(())
}

/// The equality keys of an attribute's values, with where each value
/// is, for a change that adds or deletes values. A value whose key cannot
/// be worked out (stored before a schema change) matches nothing. Hashed
/// with the standard library's keyed hasher: the keys are a client's.
struct PresentKeys {
    /// Each key's positions, the first last (taken first).
    at: HashMap<Vec<u8>, Vec<usize>>,
}

impl PresentKeys {
    fn of(values: &[Vec<u8>], key: impl Fn(&[u8]) -> Result<Vec<u8>, ModelError>) -> PresentKeys {
        let mut at: HashMap<Vec<u8>, Vec<usize>> = HashMap::with_capacity(values.len());
        for (i, value) in values.iter().enumerate().rev() {
            if let Ok(k) = key(value) {
                at.entry(k).or_default().push(i);
            }
        }
        PresentKeys { at }
    }

    /// Whether a value not taken has `key`.
    fn holds(&self, key: &[u8]) -> bool {
        self.at.get(key).is_some_and(|at| !at.is_empty())
    }

    /// The first position holding `key` not taken yet, taken.
    fn take(&mut self, key: &[u8]) -> Option<usize> {
        self.at.get_mut(key)?.pop()
    }

    /// Records a value of `key` now at `position`.
    fn insert(&mut self, key: Vec<u8>, position: usize) {
        self.at.entry(key).or_default().push(position);
    }
}

/// X.511: a modify may not remove a value of the RDN (a modify never
/// changes the DN: `out.dn` is the entry's).
fn check_rdn_kept(out: &Entry, schema: &Schema) -> Result<(), ModelError> {
    if let Some(rdn) = out.dn.rdn_values().first() {
        for (attr, value) in rdn.iter() {
            let kept = out.get(*attr).is_some_and(|a| a.has_value(value, schema));
            if !kept {
                let name = schema.attr(*attr).map_or("?", |a| a.name());
                return Err(error(
                    ResultCode::NOT_ALLOWED_ON_RDN,
                    format!("{name}: cannot remove the value of the entry's RDN"),
                ));
            }
        }
    }
    Ok(())
}

fn parse_integer(v: &[u8]) -> Option<i128> {
    std::str::from_utf8(v).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dn::Dn;

    fn base(schema: &Schema) -> Entry {
        let dn = Dn::parse(b"uid=jdoe,dc=example,dc=com", schema).unwrap();
        let attrs: &[(&str, &[&str])] = &[
            ("objectClass", &["inetOrgPerson", "posixAccount"]),
            ("uid", &["jdoe"]),
            ("cn", &["John"]),
            ("sn", &["Doe"]),
            ("mail", &["a@x.com", "b@x.com"]),
            ("uidNumber", &["1000"]),
            ("gidNumber", &["100"]),
            ("homeDirectory", &["/home/jdoe"]),
        ];
        Entry::new(
            dn,
            attrs
                .iter()
                .map(|(n, vs)| (n.as_bytes(), vs.iter().map(|v| v.as_bytes()))),
            schema,
        )
        .unwrap()
    }

    fn change(op: ModOp, attr: &str, values: &[&str]) -> Modification {
        Modification {
            op,
            attr: attr.into(),
            values: values.iter().map(|v| v.as_bytes().to_vec()).collect(),
        }
    }

    fn values(e: &Entry, schema: &Schema, attr: &str) -> Vec<String> {
        e.get(schema.attribute_id(attr).unwrap())
            .map(|a| {
                a.values
                    .iter()
                    .map(|v| String::from_utf8(v.clone()).unwrap())
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn each_operation() {
        let s = Schema::builtin().unwrap();
        let e = base(&s);
        let r = apply(&e, &[change(ModOp::Add, "mail", &["c@x.com"])], &s, false).unwrap();
        assert_eq!(values(&r, &s, "mail"), ["a@x.com", "b@x.com", "c@x.com"]);
        let r = apply(
            &e,
            &[change(ModOp::Delete, "mail", &["A@X.COM"])],
            &s,
            false,
        )
        .unwrap();
        assert_eq!(values(&r, &s, "mail"), ["b@x.com"]);
        let r = apply(&e, &[change(ModOp::Delete, "mail", &[])], &s, false).unwrap();
        assert!(values(&r, &s, "mail").is_empty());
        let r = apply(
            &e,
            &[change(ModOp::Replace, "cn", &["Johnny", "J"])],
            &s,
            false,
        )
        .unwrap();
        assert_eq!(values(&r, &s, "cn"), ["Johnny", "J"]);
        let r = apply(&e, &[change(ModOp::Replace, "description", &[])], &s, false).unwrap();
        assert_eq!(r, e);
        let r = apply(
            &e,
            &[change(ModOp::Increment, "uidNumber", &["-5"])],
            &s,
            false,
        )
        .unwrap();
        assert_eq!(values(&r, &s, "uidNumber"), ["995"]);
        // In order: delete then add the same value.
        let r = apply(
            &e,
            &[
                change(ModOp::Delete, "mail", &["a@x.com"]),
                change(ModOp::Add, "mail", &["a@x.com"]),
            ],
            &s,
            false,
        )
        .unwrap();
        assert_eq!(values(&r, &s, "mail"), ["b@x.com", "a@x.com"]);
    }

    #[test]
    fn a_permissive_add_skips_present_values_only() {
        // The permissive modify control passes over a value already
        // there, not over the rest of the change or the changes after it.
        let s = Schema::builtin().unwrap();
        let changes = [
            change(ModOp::Add, "mail", &["a@x.com", "c@x.com"]),
            change(ModOp::Add, "description", &["added"]),
        ];
        let both = |out: Entry| {
            let values = |name: &str| {
                let id = s.attribute_id(name).unwrap();
                out.get(id).map_or(0, |a| a.values.len())
            };
            (values("mail"), values("description"))
        };
        let out = apply(&base(&s), &changes, &s, true).unwrap();
        assert_eq!(both(out), (3, 1));
        let out = described_apply(&changes, &s, true, None).unwrap();
        assert_eq!(both(out), (3, 1));
    }

    /// `changes` to [`base`] through [`apply_described_changes`].
    fn described_apply(
        changes: &[Modification],
        s: &Schema,
        permissive: bool,
        absent: Option<Absent<'_>>,
    ) -> Result<Entry, ModelError> {
        let described: Vec<_> = changes
            .iter()
            .map(|m| {
                (
                    Description::parse(m.attr.as_bytes(), s).unwrap(),
                    m.as_change(),
                )
            })
            .collect();
        let pairs = described.iter().map(|(desc, change)| (desc, *change));
        apply_described_changes(base(s), pairs, s, permissive, absent)
    }

    #[test]
    fn what_the_index_says_is_absent_is_added_or_refused_without_every_key() {
        let s = Schema::builtin().unwrap();
        let run = |changes: &[Modification], absent: &[&str]| {
            let oracle = |_: &Description, v: &[u8]| absent.iter().any(|a| a.as_bytes() == v);
            described_apply(changes, &s, false, Some(&oracle))
        };
        let mails = |out: Entry| -> Vec<String> {
            let id = s.attribute_id("mail").unwrap();
            out.get(id)
                .map(|a| {
                    a.values
                        .iter()
                        .map(|v| String::from_utf8_lossy(v).into_owned())
                        .collect()
                })
                .unwrap_or_default()
        };
        // Added without looking at the values held.
        let out = run(
            &[change(ModOp::Add, "mail", &["new@x.com"])],
            &["new@x.com"],
        )
        .unwrap();
        assert_eq!(mails(out), ["a@x.com", "b@x.com", "new@x.com"]);
        // Twice in one change is still one too many.
        let twice = run(
            &[change(ModOp::Add, "mail", &["n@x.com", "N@x.com"])],
            &["n@x.com", "N@x.com"],
        );
        assert_eq!(
            twice.unwrap_err().code,
            ResultCode::ATTRIBUTE_OR_VALUE_EXISTS
        );
        // Deleted by its bytes; surely absent is noSuchAttribute.
        let out = run(&[change(ModOp::Delete, "mail", &["b@x.com"])], &[]).unwrap();
        assert_eq!(mails(out), ["a@x.com"]);
        let gone = run(
            &[change(ModOp::Delete, "mail", &["zz@x.com"])],
            &["zz@x.com"],
        );
        assert_eq!(gone.unwrap_err().code, ResultCode::NO_SUCH_ATTRIBUTE);
        // Spelled otherwise than held: found by its key.
        let out = run(&[change(ModOp::Delete, "mail", &["B@X.COM"])], &[]).unwrap();
        assert_eq!(mails(out), ["a@x.com"]);
        // The index speaks of the entry before the modify: after a change
        // of the same type it is not believed.
        let changes = [
            change(ModOp::Add, "mail", &["c@x.com"]),
            change(ModOp::Add, "mail", &["c@x.com"]),
        ];
        let again = run(&changes, &["c@x.com"]);
        assert_eq!(
            again.unwrap_err().code,
            ResultCode::ATTRIBUTE_OR_VALUE_EXISTS
        );
    }

    #[test]
    fn errors_and_permissive() {
        let s = Schema::builtin().unwrap();
        let e = base(&s);
        let code = |changes: &[Modification], permissive| {
            apply(&e, changes, &s, permissive)
                .map(|_| ())
                .map_err(|e| e.code)
        };
        assert_eq!(
            code(&[change(ModOp::Add, "mail", &["A@x.com"])], false),
            Err(ResultCode::ATTRIBUTE_OR_VALUE_EXISTS)
        );
        assert_eq!(
            code(&[change(ModOp::Add, "mail", &["A@x.com"])], true),
            Ok(())
        );
        assert_eq!(
            code(&[change(ModOp::Delete, "mail", &["zz@x.com"])], false),
            Err(ResultCode::NO_SUCH_ATTRIBUTE)
        );
        assert_eq!(
            code(&[change(ModOp::Delete, "mail", &["zz@x.com"])], true),
            Ok(())
        );
        assert_eq!(
            code(&[change(ModOp::Delete, "description", &[])], false),
            Err(ResultCode::NO_SUCH_ATTRIBUTE)
        );
        assert_eq!(
            code(&[change(ModOp::Delete, "uid", &[])], false),
            Err(ResultCode::NOT_ALLOWED_ON_RDN)
        );
        assert_eq!(
            code(&[change(ModOp::Replace, "uid", &["other"])], false),
            Err(ResultCode::NOT_ALLOWED_ON_RDN)
        );
        assert_eq!(
            code(&[change(ModOp::Increment, "cn", &["1"])], false),
            Err(ResultCode::CONSTRAINT_VIOLATION)
        );
        assert_eq!(
            code(&[change(ModOp::Increment, "uidNumber", &["x"])], false),
            Err(ResultCode::INVALID_ATTRIBUTE_SYNTAX)
        );
        assert_eq!(
            code(&[change(ModOp::Increment, "employeeNumber", &["1"])], false),
            Err(ResultCode::CONSTRAINT_VIOLATION)
        );
        assert_eq!(
            code(&[change(ModOp::Add, "nosuch", &["1"])], false),
            Err(ResultCode::UNDEFINED_ATTRIBUTE_TYPE)
        );
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        /// The adds and deletes of values as they were applied before
        /// `PresentKeys`, each value looked for among all present ones:
        /// the reference the keyed lookups must answer as.
        fn one_by_one(
            present: &[String],
            op: ModOp,
            values: &[String],
            permissive: bool,
            key: impl Fn(&str) -> Option<Vec<u8>>,
        ) -> Result<Vec<String>, ResultCode> {
            let mut out = present.to_vec();
            let find =
                |out: &[String], k: &[u8]| out.iter().position(|v| key(v).as_deref() == Some(k));
            match op {
                ModOp::Add if values.is_empty() => return Err(ResultCode::PROTOCOL_ERROR),
                ModOp::Add => {
                    for value in values {
                        let k = key(value).ok_or(ResultCode::INVALID_ATTRIBUTE_SYNTAX)?;
                        match find(&out, &k) {
                            Some(_) if permissive => {}
                            Some(_) => return Err(ResultCode::ATTRIBUTE_OR_VALUE_EXISTS),
                            None => out.push(value.clone()),
                        }
                    }
                }
                _ if present.is_empty() && !permissive => {
                    return Err(ResultCode::NO_SUCH_ATTRIBUTE);
                }
                _ if present.is_empty() => {}
                _ if values.is_empty() => out.clear(),
                _ => {
                    for value in values {
                        let k = key(value).ok_or(ResultCode::INVALID_ATTRIBUTE_SYNTAX)?;
                        match find(&out, &k) {
                            Some(at) => {
                                out.remove(at);
                            }
                            None if permissive => {}
                            None => return Err(ResultCode::NO_SUCH_ATTRIBUTE),
                        }
                    }
                }
            }
            Ok(out)
        }

        /// Values of `mail` (case-insensitive), some equal by its rule,
        /// one it cannot match (not IA5).
        fn mail() -> impl Strategy<Value = String> {
            prop::sample::select(vec!["a@x", "A@X", "b@x", "B@x", "c@x", "d@x", "é@x"])
                .prop_map(str::to_owned)
        }

        proptest! {
            #[test]
            fn keyed_adds_and_deletes_answer_as_one_by_one(
                present in proptest::collection::vec(mail(), 0..6),
                values in proptest::collection::vec(mail(), 0..6),
                add in any::<bool>(),
                permissive in any::<bool>(),
            ) {
                let s = Schema::builtin().unwrap();
                let rule = s.attribute("mail").unwrap().equality.unwrap();
                let key = |v: &str| rule.key(v.as_bytes(), &s);
                // A stored attribute holds each key once, and valid values.
                let mut stored: Vec<String> = Vec::new();
                for v in present {
                    if let Some(k) = key(&v)
                        && !stored.iter().any(|p| key(p).as_deref() == Some(&k[..])) {
                            stored.push(v);
                        }
                }
                let mut entry = base(&s);
                let mail_id = s.attribute_id("mail").unwrap();
                entry.attributes.retain(|a| a.desc.attr != mail_id);
                if !stored.is_empty() {
                    let refs: Vec<&str> = stored.iter().map(String::as_str).collect();
                    entry = apply(&entry, &[change(ModOp::Add, "mail", &refs)], &s, false).unwrap();
                }
                let op = if add { ModOp::Add } else { ModOp::Delete };
                let refs: Vec<&str> = values.iter().map(String::as_str).collect();
                let ours = apply(&entry, &[change(op, "mail", &refs)], &s, permissive)
                    .map(|e| values_of(&e, &s))
                    .map_err(|e| e.code);
                let theirs = one_by_one(&stored, op, &values, permissive, key);
                prop_assert_eq!(ours, theirs);
            }
        }

        fn values_of(e: &Entry, s: &Schema) -> Vec<String> {
            values(e, s, "mail")
        }
    }
}
