//! The schema (RFC 4512): attribute types, object classes, syntaxes,
//! matching rules, looked up by name or OID interchangeably.
//!
//! A [`Schema`] is built by loading schema files in order
//! ([`Schema::load_str`]); each definition is checked when it is added, so
//! an error names the file and line that caused it. Attribute types get
//! their syntax and matching rules from their superior chain at that
//! moment, and keep them.

mod attr_set;
pub mod description;
mod load;

use std::collections::HashMap;

use rustc_hash::FxBuildHasher;

pub use attr_set::AttrSet;
pub use load::SchemaError;

use crate::rules::{RULES, RuleInfo};
use crate::syntax::{self, Syntax};

/// Index of an attribute type in its schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AttrId(u32);

impl AttrId {
    /// The index, for tables kept beside the schema (one slot a type).
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Index of an object class in its schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClassId(u32);

/// RFC 4512 attribute usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    /// userApplications.
    User,
    /// directoryOperation.
    DirectoryOperation,
    /// distributedOperation.
    DistributedOperation,
    /// dSAOperation.
    DsaOperation,
}

impl Usage {
    /// True for the three operational usages.
    pub fn is_operational(self) -> bool {
        self != Usage::User
    }
}

/// An attribute type with its inherited properties resolved.
#[derive(Debug, Clone)]
pub struct AttributeType {
    /// Numeric OID.
    pub oid: String,
    /// Names, first is the primary one.
    pub names: Vec<String>,
    /// The direct superior.
    pub sup: Option<AttrId>,
    /// Equality rule, own or inherited.
    pub equality: Option<&'static RuleInfo>,
    /// Ordering rule, own or inherited.
    pub ordering: Option<&'static RuleInfo>,
    /// Substrings rule, own or inherited.
    pub substr: Option<&'static RuleInfo>,
    /// Syntax OID, own or inherited.
    pub syntax_oid: String,
    /// The validator for the syntax ([`Syntax::Octets`] if unknown).
    pub syntax: Syntax,
    /// SINGLE-VALUE.
    pub single_value: bool,
    /// COLLECTIVE.
    pub collective: bool,
    /// NO-USER-MODIFICATION.
    pub no_user_modification: bool,
    /// USAGE.
    pub usage: Usage,
    /// OBSOLETE.
    pub obsolete: bool,
    /// The definition as it should be published in the subschema.
    pub definition: String,
}

impl AttributeType {
    /// The primary name, or the OID for unnamed types.
    pub fn name(&self) -> &str {
        self.names.first().map_or(&self.oid, String::as_str)
    }
}

/// Object class kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassKind {
    /// ABSTRACT.
    Abstract,
    /// STRUCTURAL (the default).
    Structural,
    /// AUXILIARY.
    Auxiliary,
}

/// An object class.
#[derive(Debug, Clone)]
pub struct ObjectClass {
    /// Numeric OID.
    pub oid: String,
    /// Names.
    pub names: Vec<String>,
    /// Direct superiors.
    pub sup: Vec<ClassId>,
    /// Kind.
    pub kind: ClassKind,
    /// MUST attributes, own and inherited, sorted.
    pub must: Vec<AttrId>,
    /// MAY attributes, own and inherited, sorted; none of them in `must`.
    pub may: Vec<AttrId>,
    /// OBSOLETE.
    pub obsolete: bool,
    /// The definition as published.
    pub definition: String,
    /// This class and every class it inherits from, each once: filled
    /// in when the class is added, since superiors come first.
    lineage: Vec<ClassId>,
    /// `must` and `may` as one set.
    allowed: AttrSet,
}

impl ObjectClass {
    /// The primary name, or the OID.
    pub fn name(&self) -> &str {
        self.names.first().map_or(&self.oid, String::as_str)
    }

    /// Whether an entry of this class may hold `attr` (MUST or MAY).
    pub fn allows(&self, attr: AttrId) -> bool {
        self.allowed.contains(attr)
    }

    /// The attribute types an entry of this class may hold (MUST and MAY).
    pub fn allowed(&self) -> &AttrSet {
        &self.allowed
    }

    /// This class and every class it inherits from, each once.
    pub fn lineage(&self) -> &[ClassId] {
        &self.lineage
    }
}

/// A complete schema.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    attributes: Vec<AttributeType>,
    classes: Vec<ObjectClass>,
    attr_index: HashMap<String, AttrId, FxBuildHasher>,
    /// For each attribute type, the lower-case names and OIDs of it and
    /// all its subtypes (what a filter on it matches).
    family_spellings: Vec<Vec<String>>,
    /// For each attribute type, it and all its subtypes.
    family: Vec<Vec<AttrId>>,
    class_index: HashMap<String, ClassId, FxBuildHasher>,
    /// Every lower-case name and OID of an attribute type or an object
    /// class, for objectIdentifierMatch ([`Schema::oid_of`]): one lookup
    /// where the two indexes took two (every objectClass index key of
    /// every added entry). An attribute type wins over a class of the
    /// same name.
    oid_index: HashMap<String, Named, FxBuildHasher>,
    /// OpenLDAP `objectidentifier` macros, lower-cased names.
    macros: HashMap<String, String>,
    /// Syntaxes declared by loaded files beyond the built-in table.
    extra_syntaxes: Vec<(String, String)>,
    /// `objectClass` and `extensibleObject`, which every schema check
    /// asks for: found when defined, not looked up by name per entry.
    object_class: Option<AttrId>,
    extensible_object: Option<ClassId>,
    /// `entryCSN`, which every replicated write and first-wins guard
    /// reads: found when defined, not looked up by name per write.
    entry_csn: Option<AttrId>,
    /// The operational types, which no class needs to allow.
    operational: AttrSet,
}

impl Schema {
    /// The built-in schema: system, core, cosine, inetorgperson, nis,
    /// dynamicObject and cn=Monitor's types, as
    /// `crates/model/schema/README.md` describes.
    pub fn builtin() -> Result<Schema, SchemaError> {
        let mut schema = Schema::default();
        for (name, text) in BUILTIN {
            schema.load_str(text, name)?;
        }
        Ok(schema)
    }

    /// Looks up an attribute type by name or OID (case-insensitive).
    /// Options (`;binary`, `;lang-de`) must be stripped first.
    pub fn attribute(&self, name: &str) -> Option<&AttributeType> {
        self.attribute_id(name).and_then(|id| self.attr(id))
    }

    /// The id of an attribute type, by name or OID.
    pub fn attribute_id(&self, name: &str) -> Option<AttrId> {
        lookup(&self.attr_index, name)
    }

    /// The id of `objectClass`.
    pub fn object_class_attr(&self) -> Option<AttrId> {
        self.object_class
    }

    /// The id of `entryCSN`.
    pub fn entry_csn_attr(&self) -> Option<AttrId> {
        self.entry_csn
    }

    /// The id of the `extensibleObject` class.
    pub fn extensible_object_class(&self) -> Option<ClassId> {
        self.extensible_object
    }

    /// The operational attribute types.
    pub fn operational_types(&self) -> &AttrSet {
        &self.operational
    }

    /// An attribute type by id.
    pub fn attr(&self, id: AttrId) -> Option<&AttributeType> {
        self.attributes.get(id.0 as usize)
    }

    /// An object class by name or OID.
    pub fn class(&self, name: &str) -> Option<&ObjectClass> {
        self.class_id(name).and_then(|id| self.class_by_id(id))
    }

    /// The id of an object class, by name or OID.
    pub fn class_id(&self, name: &str) -> Option<ClassId> {
        lookup(&self.class_index, name)
    }

    /// An object class by id.
    pub fn class_by_id(&self, id: ClassId) -> Option<&ObjectClass> {
        self.classes.get(id.0 as usize)
    }

    /// Every attribute type, in definition order.
    pub fn attributes(&self) -> impl Iterator<Item = (AttrId, &AttributeType)> {
        self.attributes
            .iter()
            .enumerate()
            .map(|(i, a)| (AttrId(i as u32), a))
    }

    /// Every object class, in definition order.
    pub fn classes(&self) -> impl Iterator<Item = (ClassId, &ObjectClass)> {
        self.classes
            .iter()
            .enumerate()
            .map(|(i, c)| (ClassId(i as u32), c))
    }

    /// Syntaxes declared by loaded files that are not in the built-in table,
    /// as `(oid, description)`.
    pub fn extra_syntaxes(&self) -> &[(String, String)] {
        &self.extra_syntaxes
    }

    /// The lower-case names and OIDs of `attr` and all its subtypes.
    pub fn family_spellings(&self, attr: AttrId) -> &[String] {
        self.family_spellings
            .get(attr.0 as usize)
            .map_or(&[], Vec::as_slice)
    }

    /// `attr` and all its subtypes: what a filter on `attr` matches.
    /// A lookup, where [`Schema::is_subtype`] walks the superior chain
    /// (perf: that walk, per attribute of every entry a scan visits, was
    /// a tenth of an unindexed search).
    pub fn family(&self, attr: AttrId) -> &[AttrId] {
        self.family.get(attr.0 as usize).map_or(&[], Vec::as_slice)
    }

    /// True if `sub` is `sup` or has it in its superior chain (so a filter
    /// on `name` also matches `cn`).
    pub fn is_subtype(&self, sub: AttrId, sup: AttrId) -> bool {
        let mut cur = Some(sub);
        // The chain is finite: superiors must be defined before use.
        while let Some(id) = cur {
            if id == sup {
                return true;
            }
            cur = self.attr(id).and_then(|a| a.sup);
        }
        false
    }

    /// True if class `sub` is `sup` or inherits from it.
    pub fn class_inherits(&self, sub: ClassId, sup: ClassId) -> bool {
        sub == sup
            || self
                .class_by_id(sub)
                .is_some_and(|c| c.lineage.contains(&sup))
    }

    /// Resolves a name of anything with an OID (attribute type, object
    /// class, matching rule, syntax) to its numeric OID, for
    /// objectIdentifierMatch.
    pub fn oid_of(&self, name: &str) -> Option<&str> {
        let found = with_lower_case(name, |lower| match self.oid_index.get(lower)? {
            Named::Attribute(id) => self.attr(*id).map(|a| a.oid.as_str()),
            Named::Class(id) => self.class_by_id(*id).map(|c| c.oid.as_str()),
        });
        found.or_else(|| crate::rules::find(name).map(|r| r.oid))
    }

    /// A matching rule by name or OID.
    pub fn rule(&self, name: &str) -> Option<&'static RuleInfo> {
        crate::rules::find(name)
    }

    fn push_attribute(&mut self, a: AttributeType) -> Result<AttrId, String> {
        let id = AttrId(self.attributes.len() as u32);
        let mut keys: Vec<String> = a.names.iter().map(|n| n.to_ascii_lowercase()).collect();
        keys.push(a.oid.clone());
        for key in &keys {
            if let Some(existing) = self.attr_index.get(key).and_then(|&e| self.attr(e)) {
                return Err(format!(
                    "attribute type {key:?} is already defined (as {} {})",
                    existing.oid,
                    existing.name()
                ));
            }
        }
        for key in &keys {
            self.attr_index.insert(key.clone(), id);
            self.oid_index.insert(key.clone(), Named::Attribute(id));
        }
        if keys.iter().any(|k| k == "objectclass") {
            self.object_class = Some(id);
        }
        if keys.iter().any(|k| k == "entrycsn") {
            self.entry_csn = Some(id);
        }
        let mut ancestor = Some(id);
        self.family_spellings.push(Vec::new());
        self.family.push(Vec::new());
        let sup = a.sup;
        if a.usage.is_operational() {
            self.operational.insert(id);
        }
        self.attributes.push(a);
        // The new type is a subtype of every type up its superior chain.
        while let Some(x) = ancestor {
            if let Some(list) = self.family_spellings.get_mut(x.0 as usize) {
                list.extend(keys.iter().cloned());
            }
            if let Some(list) = self.family.get_mut(x.0 as usize) {
                list.push(id);
            }
            ancestor = if x == id {
                sup
            } else {
                self.attr(x).and_then(|t| t.sup)
            };
        }
        Ok(id)
    }

    fn push_class(&mut self, mut c: ObjectClass) -> Result<ClassId, String> {
        let id = ClassId(self.classes.len() as u32);
        let mut keys: Vec<String> = c.names.iter().map(|n| n.to_ascii_lowercase()).collect();
        keys.push(c.oid.clone());
        for key in &keys {
            if self.class_index.contains_key(key) {
                return Err(format!("object class {key:?} is already defined"));
            }
        }
        if keys.iter().any(|k| k == "extensibleobject") {
            self.extensible_object = Some(id);
        }
        for key in keys {
            self.class_index.insert(key.clone(), id);
            self.oid_index.entry(key).or_insert(Named::Class(id));
        }
        c.lineage = vec![id];
        for sup in &c.sup {
            let inherited = self
                .classes
                .get(sup.0 as usize)
                .map_or(&[][..], |s| &s.lineage);
            for &class in inherited {
                if !c.lineage.contains(&class) {
                    c.lineage.push(class);
                }
            }
        }
        c.allowed = c.must.iter().chain(&c.may).copied().collect();
        self.classes.push(c);
        Ok(id)
    }
}

/// What a name in [`Schema::oid_of`]'s index names.
#[derive(Debug, Clone, Copy)]
enum Named {
    Attribute(AttrId),
    Class(ClassId),
}

/// Case-insensitive lookup in an index keyed by lower-case names, without
/// allocating for names that are already lower case (most of them: this
/// sits on the path of every DN and filter).
fn lookup<T: Copy>(index: &HashMap<String, T, FxBuildHasher>, name: &str) -> Option<T> {
    with_lower_case(name, |lower| index.get(lower).copied())
}

/// `f` of `name` in ASCII lower case, which short names get on the
/// stack: no allocation per lookup.
fn with_lower_case<R>(name: &str, f: impl FnOnce(&str) -> Option<R>) -> Option<R> {
    if !name.bytes().any(|c| c.is_ascii_uppercase()) {
        return f(name);
    }
    let mut buf = [0u8; 64];
    match buf.get_mut(..name.len()) {
        Some(dst) => {
            dst.copy_from_slice(name.as_bytes());
            dst.make_ascii_lowercase();
            // ASCII lower-casing keeps UTF-8 valid.
            std::str::from_utf8(dst).ok().and_then(f)
        }
        None => f(&name.to_ascii_lowercase()),
    }
}

/// The built-in schema files, in load order.
const BUILTIN: [(&str, &str); 6] = [
    ("system.schema", include_str!("../../schema/system.schema")),
    ("core.schema", include_str!("../../schema/core.schema")),
    ("cosine.schema", include_str!("../../schema/cosine.schema")),
    (
        "inetorgperson.schema",
        include_str!("../../schema/inetorgperson.schema"),
    ),
    ("nis.schema", include_str!("../../schema/nis.schema")),
    (
        "monitor.schema",
        include_str!("../../schema/monitor.schema"),
    ),
];

/// Rules by name or OID, for loaders.
pub(crate) fn rule_named(name: &str) -> Option<&'static RuleInfo> {
    RULES
        .iter()
        .find(|r| r.oid == name || r.name.eq_ignore_ascii_case(name))
}

/// The validator of a syntax OID; unknown syntaxes are octets.
pub(crate) fn syntax_for(oid: &str) -> Syntax {
    syntax::find(oid).map_or(Syntax::Octets, |s| s.syntax)
}
