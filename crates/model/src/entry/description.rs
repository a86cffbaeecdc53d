//! Attribute descriptions (RFC 4512 2.5: a type and its options) and the
//! caches that parse a run of them once.

use meridian_proto::ResultCode;

use super::{AttrName, spelling};
use crate::schema::AttrId;
use crate::{ModelError, Schema};

/// An attribute description: a type and its options (RFC 4512 2.5).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Description {
    /// The attribute type.
    pub attr: AttrId,
    /// Options, lower-cased and sorted (`binary`, `lang-de`); in a
    /// filter or an attribute list, also language ranges (`lang-en-`).
    pub options: Vec<String>,
}

impl Clone for Description {
    /// Decoding a record clones a description per attribute, and almost
    /// none has options: an empty list is made without the generic
    /// clone's call (about 300 of a base search's 26,000 instructions,
    /// callgrind).
    fn clone(&self) -> Description {
        Description {
            attr: self.attr,
            options: if self.options.is_empty() {
                Vec::new()
            } else {
                self.options.clone()
            },
        }
    }
}

/// Whether an attribute's option `have` is what a filter or attribute
/// list's option `wanted` asks for: the same option, or, for a language
/// range (RFC 3866 section 2.2: a language tag option ending in `-`),
/// the tag it names or any tag below it (`lang-en-` covers `lang-en`
/// and `lang-en-us`; `lang-` covers every language tag). `wanted` is
/// lower-case (as parsed); `have` in any case (a stored record's
/// spelling is compared as it is, without a lower-cased copy).
pub fn option_covers(wanted: &str, have: &[u8]) -> bool {
    let wanted = wanted.as_bytes();
    match wanted.strip_suffix(b"-") {
        Some(tag) if wanted.starts_with(b"lang-") => {
            have.get(..wanted.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(wanted))
                || (tag != b"lang" && have.eq_ignore_ascii_case(tag))
        }
        _ => have.eq_ignore_ascii_case(wanted),
    }
}

impl Description {
    /// Parses `type;option;...` of a stored attribute. Unknown types are
    /// undefinedAttributeType; options other than `binary` and language
    /// tags are refused the same way, as slapd does without extra
    /// configuration (a language range among them: it selects, it does
    /// not name a value's language).
    pub fn parse(text: &[u8], schema: &Schema) -> Result<Description, ModelError> {
        let desc = Self::parse_selector(text, schema)?;
        if let Some(range) = desc.options.iter().find(|o| o.ends_with('-')) {
            return Err(ModelError::new(
                ResultCode::UNDEFINED_ATTRIBUTE_TYPE,
                format!(
                    "attribute option {range:?} is a language range (RFC 3866), which selects attributes in filters and attribute lists but cannot name a stored one"
                ),
            ));
        }
        Ok(desc)
    }

    /// Parses `type;option;...` as a filter or an attribute list names
    /// attributes: as [`Description::parse`], language ranges allowed.
    pub fn parse_selector(text: &[u8], schema: &Schema) -> Result<Description, ModelError> {
        let text = std::str::from_utf8(text).map_err(|_| {
            ModelError::new(
                ResultCode::UNDEFINED_ATTRIBUTE_TYPE,
                "attribute description is not UTF-8",
            )
        })?;
        let mut parts = text.split(';');
        let ty = parts.next().unwrap_or_default();
        let attr = schema.attribute_id(ty).ok_or_else(|| {
            ModelError::new(
                ResultCode::UNDEFINED_ATTRIBUTE_TYPE,
                format!("attribute type {ty:?} is not defined in the schema"),
            )
        })?;
        let mut options = Vec::new();
        for option in parts {
            let lower = option.to_ascii_lowercase();
            let valid_chars = !lower.is_empty()
                && lower
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'-');
            if !valid_chars || !(lower == "binary" || lower.starts_with("lang-")) {
                return Err(ModelError::new(
                    ResultCode::UNDEFINED_ATTRIBUTE_TYPE,
                    format!(
                        "attribute option {option:?} of {text:?} is not supported (only binary and lang-*)"
                    ),
                ));
            }
            options.push(lower);
        }
        options.sort();
        options.dedup();
        Ok(Description { attr, options })
    }

    /// True if an attribute with this description is matched by a filter
    /// or selection naming `wanted` (same type or a subtype, and every
    /// option of `wanted` present here).
    pub fn is_matched_by(&self, wanted: &Description, schema: &Schema) -> bool {
        schema.is_subtype(self.attr, wanted.attr)
            && wanted
                .options
                .iter()
                .all(|w| self.options.iter().any(|o| option_covers(w, o.as_bytes())))
    }
}

/// What was derived from the attribute name last seen at each position
/// of a record. The records of a bulk load list the same names in the
/// same order, so comparing one name with the last one there is cheaper
/// than parsing or hashing it again.
#[derive(Debug)]
pub struct ByPosition<T> {
    slots: Vec<Option<(String, T)>>,
}

impl<T> Default for ByPosition<T> {
    fn default() -> Self {
        ByPosition { slots: Vec::new() }
    }
}

impl<T: Clone> ByPosition<T> {
    /// Positions past this are never remembered (a few dozen attributes
    /// cover real entries; this bounds the memory).
    pub(crate) const POSITIONS: usize = 64;

    /// What was remembered for `name` at `position`, if `name` is the
    /// name last seen there.
    pub fn get(&self, position: usize, name: &str) -> Option<&T> {
        match self.slots.get(position) {
            Some(Some((seen, value))) if seen == name => Some(value),
            _ => None,
        }
    }

    /// Remembers `value` for `name` at `position`.
    pub fn remember(&mut self, position: usize, name: &str, value: T) {
        if position >= Self::POSITIONS {
            return;
        }
        if self.slots.len() <= position {
            self.slots.resize(position + 1, None);
        }
        if let Some(slot) = self.slots.get_mut(position) {
            *slot = Some((name.to_owned(), value));
        }
    }
}

/// The descriptions of the previous entries' attributes, by position,
/// and whether each name was its type's primary name. For one schema.
#[derive(Debug, Default)]
pub struct RecentDescriptions(ByPosition<(Description, bool)>);

impl RecentDescriptions {
    /// [`Description::parse`] of `name`, found at `position` of a record,
    /// and `name` as an attribute's [`AttrName`].
    pub fn parse(
        &mut self,
        position: usize,
        name: &str,
        schema: &Schema,
    ) -> Result<(Description, AttrName), ModelError> {
        if let Some((desc, primary)) = self.0.get(position, name) {
            return Ok((
                desc.clone(),
                AttrName::spelled(&spelling(name, desc), *primary),
            ));
        }
        let desc = Description::parse(name.as_bytes(), schema)?;
        let primary = AttrName::is_primary(name, &desc, schema);
        self.0.remember(position, name, (desc.clone(), primary));
        let spelled = AttrName::spelled(&spelling(name, &desc), primary);
        Ok((desc, spelled))
    }
}
