//! Filter evaluation (RFC 4511 section 4.5.1.7) with three-valued logic.
//!
//! A filter is compiled once per search against the schema
//! ([`CompiledFilter::compile`]): attribute names resolved, matching rules
//! chosen, assertion values reduced to keys. Evaluating it against an
//! entry then only prepares the entry's values.
//!
//! Undefined arises, as the RFC says, when the attribute type is unknown,
//! when it has no matching rule of the needed kind, or when the assertion
//! value is not valid for the rule. `present` on an unknown type is FALSE.
//!
//! The approximate rule (`~=`) is documented here: for attributes whose
//! equality rule prepares strings, values match when they are equal after
//! case folding and removing every space; for other attributes it is the
//! equality rule.

use std::cmp::Ordering;

use meridian_proto::{Filter, Substring};

use crate::entry::{Description, Entry, option_covers};
use crate::prep::Part;
use crate::rules::{Norm, RuleInfo, RuleKind, substrings_match};
use crate::schema::{AttrId, Schema};

/// TRUE, FALSE or Undefined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ternary {
    /// TRUE.
    True,
    /// FALSE.
    False,
    /// Undefined.
    Undefined,
}

impl Ternary {
    fn not(self) -> Ternary {
        match self {
            Ternary::True => Ternary::False,
            Ternary::False => Ternary::True,
            Ternary::Undefined => Ternary::Undefined,
        }
    }
}

/// A filter ready to evaluate against entries of one schema.
#[derive(Debug, Clone)]
pub struct CompiledFilter {
    root: Node,
    /// How many attribute items ([`Wanted`]) the filter has; each has a
    /// slot below this.
    slots: usize,
}

#[derive(Debug, Clone)]
enum Node {
    And(Vec<Node>),
    Or(Vec<Node>),
    Not(Box<Node>),
    Compare {
        desc: Wanted,
        rule: &'static RuleInfo,
        key: Vec<u8>,
        want: Want,
    },
    Substrings {
        desc: Wanted,
        rule: &'static RuleInfo,
        parts: Vec<(Part, Vec<u8>)>,
    },
    Present(Wanted),
    Approx {
        desc: Wanted,
        rule: &'static RuleInfo,
        key: Vec<u8>,
    },
    Extensible {
        desc: Option<Description>,
        rule: &'static RuleInfo,
        key: Vec<u8>,
        dn_attributes: bool,
    },
    /// `(objectClass=x)`: TRUE when the entry belongs to `x` or a
    /// subclass of it, as slapd's objectSubClassMatch does (an
    /// inetOrgPerson is a person).
    ObjectClass(crate::schema::ClassId, Wanted),
    /// Always Undefined (unknown type, missing rule, invalid assertion).
    Undefined,
    /// Always FALSE (`present` of an unknown type).
    False,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    Equal,
    GreaterOrEqual,
    LessOrEqual,
}

fn approx_key(norm: Norm, value: &[u8], schema: &Schema) -> Option<Vec<u8>> {
    match norm {
        Norm::CaseIgnore
        | Norm::CaseExact
        | Norm::CaseIgnoreIa5
        | Norm::CaseExactIa5
        | Norm::CaseIgnoreList => {
            let mut key = Norm::CaseIgnore.key(value, schema)?;
            key.retain(|c| *c != b' ');
            Some(key)
        }
        other => other.key(value, schema),
    }
}

impl CompiledFilter {
    /// Compiles `filter` against `schema`.
    pub fn compile(filter: &Filter<'_>, schema: &Schema) -> CompiledFilter {
        let mut slots = 0;
        let root = compile(filter, schema, &mut slots);
        CompiledFilter { root, slots }
    }

    /// The number of attribute items: [`Wanted::slot`] is below it.
    pub fn wanted_slots(&self) -> usize {
        self.slots
    }

    /// Evaluates the filter against `entry`.
    pub fn evaluate<T: Target + ?Sized>(&self, entry: &T, schema: &Schema) -> Ternary {
        eval(&self.root, entry, schema, &|_| true)
    }

    /// Evaluates the filter as someone who may test only the attribute
    /// types `visible` accepts (search access): an assertion on another
    /// type is Undefined, and a match over every attribute skips them, as
    /// slapd evaluates filters under access control. Never TRUE where
    /// [`CompiledFilter::evaluate`] is not: Undefined in place of a value
    /// cannot make And, Or or Not true.
    pub fn evaluate_visible<T: Target + ?Sized>(
        &self,
        entry: &T,
        schema: &Schema,
        visible: &impl Fn(AttrId) -> bool,
    ) -> Ternary {
        eval(&self.root, entry, schema, visible)
    }

    /// True if the entry matches (TRUE; FALSE and Undefined do not).
    pub fn matches<T: Target + ?Sized>(&self, entry: &T, schema: &Schema) -> bool {
        self.evaluate(entry, schema) == Ternary::True
    }

    /// Calls `each` with the type each item asserts on, and with `None`
    /// for an item that may test any attribute of an entry (an
    /// extensible match without a type, or with dnAttributes): the types
    /// access control looks at before [`CompiledFilter::evaluate_visible`].
    /// Items that are always Undefined or FALSE (an unknown type, a rule
    /// the type lacks) test nothing and are not reported.
    pub fn visit_tested(&self, each: &mut impl FnMut(Option<AttrId>)) {
        visit_tested(&self.root, each);
    }
}

fn visit_tested(node: &Node, each: &mut impl FnMut(Option<AttrId>)) {
    match node {
        Node::And(children) | Node::Or(children) => {
            for child in children {
                visit_tested(child, each);
            }
        }
        Node::Not(child) => visit_tested(child, each),
        Node::Compare { desc, .. }
        | Node::Substrings { desc, .. }
        | Node::Approx { desc, .. }
        | Node::Present(desc)
        | Node::ObjectClass(_, desc) => each(Some(desc.desc.attr)),
        Node::Extensible {
            desc: Some(d),
            dn_attributes: false,
            ..
        } => each(Some(d.attr)),
        Node::Extensible { .. } => each(None),
        Node::Undefined | Node::False => {}
    }
}

/// Compiles one filter; `slots` numbers the attribute items.
fn compile(filter: &Filter<'_>, schema: &Schema, slots: &mut usize) -> Node {
    let desc = |attr: &[u8]| Description::parse_selector(attr, schema).ok();
    let mut wanted = |d: Description| {
        *slots += 1;
        Wanted {
            desc: d,
            slot: *slots - 1,
        }
    };
    let rule_of = |d: &Description, kind: RuleKind| {
        let at = schema.attr(d.attr)?;
        match kind {
            RuleKind::Equality => at.equality,
            RuleKind::Ordering => at.ordering,
            RuleKind::Substrings => at.substr,
        }
    };
    match filter {
        Filter::And(children) => Node::And(
            children
                .iter()
                .map(|f| compile(&f, schema, slots))
                .collect(),
        ),
        Filter::Or(children) => Node::Or(
            children
                .iter()
                .map(|f| compile(&f, schema, slots))
                .collect(),
        ),
        Filter::Not(child) => match child.iter().next() {
            Some(f) => Node::Not(Box::new(compile(&f, schema, slots))),
            None => Node::Undefined,
        },
        Filter::Present(attr) => desc(attr).map_or(Node::False, |d| Node::Present(wanted(d))),
        Filter::Equality(ava) | Filter::GreaterOrEqual(ava) | Filter::LessOrEqual(ava) => {
            let (kind, want) = match filter {
                Filter::Equality(_) => (RuleKind::Equality, Want::Equal),
                Filter::GreaterOrEqual(_) => (RuleKind::Ordering, Want::GreaterOrEqual),
                _ => (RuleKind::Ordering, Want::LessOrEqual),
            };
            let Some(d) = desc(ava.attr) else {
                return Node::Undefined;
            };
            if want == Want::Equal && Some(d.attr) == schema.object_class_attr() {
                return match std::str::from_utf8(ava.value)
                    .ok()
                    .and_then(|n| schema.class_id(n.trim()))
                {
                    Some(class) => Node::ObjectClass(class, wanted(d)),
                    // An unknown class is an assertion value the rule
                    // cannot take: Undefined, as in slapd.
                    None => Node::Undefined,
                };
            }
            let Some(rule) = rule_of(&d, kind) else {
                return Node::Undefined;
            };
            match rule.key(ava.value, schema) {
                Some(key) => Node::Compare {
                    desc: wanted(d),
                    rule,
                    key,
                    want,
                },
                None => Node::Undefined,
            }
        }
        Filter::Approx(ava) => {
            let Some(d) = desc(ava.attr) else {
                return Node::Undefined;
            };
            let Some(rule) = rule_of(&d, RuleKind::Equality) else {
                return Node::Undefined;
            };
            match approx_key(rule.norm, ava.value, schema) {
                Some(key) => Node::Approx {
                    desc: wanted(d),
                    rule,
                    key,
                },
                None => Node::Undefined,
            }
        }
        Filter::Substrings(s) => {
            let Some(d) = desc(s.attr) else {
                return Node::Undefined;
            };
            let Some(rule) = rule_of(&d, RuleKind::Substrings) else {
                return Node::Undefined;
            };
            let parts: Vec<(Part, &[u8])> = s
                .parts
                .iter()
                .map(|p| match p {
                    Substring::Initial(v) => (Part::Initial, v),
                    Substring::Any(v) => (Part::Any, v),
                    Substring::Final(v) => (Part::Final, v),
                })
                .collect();
            match rule.substring_parts(&parts, schema) {
                Some(parts) => Node::Substrings {
                    desc: wanted(d),
                    rule,
                    parts,
                },
                None => Node::Undefined,
            }
        }
        Filter::Extensible(m) => {
            let d = match m.attr {
                Some(attr) => match desc(attr) {
                    Some(d) => Some(d),
                    None => return Node::Undefined,
                },
                None => None,
            };
            let rule = match m.rule {
                Some(name) => match std::str::from_utf8(name).ok().and_then(|n| schema.rule(n)) {
                    Some(r) => r,
                    None => return Node::Undefined,
                },
                // No rule: the type's equality rule (RFC 4511 4.5.1.7.7).
                None => match d.as_ref().and_then(|d| rule_of(d, RuleKind::Equality)) {
                    Some(r) => r,
                    None => return Node::Undefined,
                },
            };
            if rule.kind == RuleKind::Substrings {
                // A substrings rule needs a SubstringAssertion, which the
                // extensible form cannot carry structurally here.
                return Node::Undefined;
            }
            match rule.key(m.value, schema) {
                Some(key) => Node::Extensible {
                    desc: d,
                    rule,
                    key,
                    dn_attributes: m.dn_attributes,
                },
                None => Node::Undefined,
            }
        }
    }
}

/// The visitor a [`Target`] calls for each attribute: its name and a
/// lazy iterator over its values; returns false to stop.
pub type AttributeVisitor<'v> =
    dyn FnMut(AttrName<'_>, &mut dyn Iterator<Item = &[u8]>) -> bool + 'v;

/// The visitor [`Target::visit_wanted`] calls with the values of each
/// attribute a filter item matches; returns false to stop.
pub type ValuesVisitor<'v> = dyn FnMut(&mut dyn Iterator<Item = &[u8]>) -> bool + 'v;

/// What a filter is evaluated against: an [`Entry`], or any other view of
/// one (the store evaluates filters on stored bytes, without building an
/// `Entry` for every candidate).
pub trait Target {
    /// Calls `visit` with each attribute (its name and values) until it
    /// returns false.
    fn visit_attributes(&self, schema: &Schema, visit: &mut AttributeVisitor<'_>);

    /// Calls `visit` with the values of each attribute `wanted` matches,
    /// until it returns false. A target that can tell cheaply which of
    /// its attributes match (the store remembers it per stored name)
    /// overrides this; the default tests every name.
    fn visit_wanted(&self, schema: &Schema, wanted: &Wanted, visit: &mut ValuesVisitor<'_>) {
        visit_wanted_by_name(self, schema, wanted, visit);
    }

    /// The `(type, value)` pairs of the entry's DN, for `dnAttributes`.
    fn dn_values(&self, schema: &Schema) -> Vec<(AttrId, Vec<u8>)>;
}

/// [`Target::visit_wanted`] by testing every attribute's name.
pub fn visit_wanted_by_name<T: Target + ?Sized>(
    target: &T,
    schema: &Schema,
    wanted: &Wanted,
    visit: &mut ValuesVisitor<'_>,
) {
    target.visit_attributes(schema, &mut |name, values| {
        !wanted.matches(name, schema) || visit(values)
    });
}

/// An attribute's name as a [`Target`] has it: already resolved, or the
/// raw description bytes of a stored entry (resolved only if needed: most
/// filter items just compare names).
#[derive(Debug, Clone, Copy)]
pub enum AttrName<'a> {
    /// A resolved description.
    Resolved(&'a Description),
    /// `type;options` as stored.
    Raw(&'a [u8]),
}

impl AttrName<'_> {
    fn resolve(self, schema: &Schema) -> Option<Description> {
        match self {
            AttrName::Resolved(d) => Some(d.clone()),
            AttrName::Raw(raw) => Description::parse(raw, schema).ok(),
        }
    }
}

/// The attribute a filter item is about. Raw names are matched by
/// comparing bytes with the spellings of it and its subtypes, not by
/// schema lookups.
#[derive(Debug, Clone)]
pub struct Wanted {
    desc: Description,
    /// This item's number within its filter, so a [`Target`] can
    /// remember per item which of its names match
    /// ([`CompiledFilter::wanted_slots`]).
    slot: usize,
}

impl Wanted {
    /// This item's number within its compiled filter.
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// Whether an attribute named `name` is this item's type (or a
    /// subtype) with at least the options asked for.
    pub fn matches(&self, name: AttrName<'_>, schema: &Schema) -> bool {
        match name {
            AttrName::Resolved(d) => {
                schema.family(self.desc.attr).contains(&d.attr)
                    && self
                        .desc
                        .options
                        .iter()
                        .all(|w| d.options.iter().any(|o| option_covers(w, o.as_bytes())))
            }
            AttrName::Raw(raw) => {
                let mut parts = raw.split(|b| *b == b';');
                let base = parts.next().unwrap_or_default();
                if !schema
                    .family_spellings(self.desc.attr)
                    .iter()
                    .any(|s| s.as_bytes().eq_ignore_ascii_case(base))
                {
                    return false;
                }
                // Every option asked for must be on the attribute.
                self.desc
                    .options
                    .iter()
                    .all(|want| parts.clone().any(|o| option_covers(want, o)))
            }
        }
    }
}

impl<T: Target + ?Sized> Target for &T {
    fn visit_attributes(&self, schema: &Schema, visit: &mut AttributeVisitor<'_>) {
        (**self).visit_attributes(schema, visit);
    }

    fn visit_wanted(&self, schema: &Schema, wanted: &Wanted, visit: &mut ValuesVisitor<'_>) {
        (**self).visit_wanted(schema, wanted, visit);
    }

    fn dn_values(&self, schema: &Schema) -> Vec<(AttrId, Vec<u8>)> {
        (**self).dn_values(schema)
    }
}

impl Target for Entry {
    fn visit_attributes(&self, _schema: &Schema, visit: &mut AttributeVisitor<'_>) {
        for a in &self.attributes {
            if !visit(
                AttrName::Resolved(&a.desc),
                &mut a.values.iter().map(Vec::as_slice),
            ) {
                return;
            }
        }
    }

    fn dn_values(&self, _schema: &Schema) -> Vec<(AttrId, Vec<u8>)> {
        self.dn
            .rdn_values()
            .iter()
            .flat_map(|rdn| rdn.iter())
            .cloned()
            .collect()
    }
}

/// Accumulates per-value results: TRUE if any is TRUE (and stops), else
/// Undefined if any is, else FALSE.
#[derive(Debug, Clone, Copy, Default)]
struct AnyValue {
    truth: bool,
    undefined: bool,
}

impl AnyValue {
    /// Adds one result; returns false once TRUE is reached.
    fn add(&mut self, r: Ternary) -> bool {
        match r {
            Ternary::True => {
                self.truth = true;
                return false;
            }
            Ternary::Undefined => self.undefined = true,
            Ternary::False => {}
        }
        true
    }

    fn result(self) -> Ternary {
        if self.truth {
            Ternary::True
        } else if self.undefined {
            Ternary::Undefined
        } else {
            Ternary::False
        }
    }
}

fn compare(rule: &RuleInfo, value: &[u8], key: &[u8], want: Want, schema: &Schema) -> Ternary {
    let Some(vk) = rule.key_cow(value, schema) else {
        return Ternary::Undefined;
    };
    let ord = rule.compare_keys(&vk, key);
    let hit = match want {
        Want::Equal => ord == Ordering::Equal,
        Want::GreaterOrEqual => ord != Ordering::Less,
        Want::LessOrEqual => ord != Ordering::Greater,
    };
    if hit { Ternary::True } else { Ternary::False }
}

/// Folds `test` over the values of the attributes `wanted` matches.
fn over_values<T: Target + ?Sized>(
    target: &T,
    wanted: &Wanted,
    schema: &Schema,
    mut test: impl FnMut(&[u8]) -> Ternary,
) -> Ternary {
    let mut acc = AnyValue::default();
    target.visit_wanted(schema, wanted, &mut |values| {
        for v in values {
            if !acc.add(test(v)) {
                return false;
            }
        }
        true
    });
    acc.result()
}

fn eval<T: Target + ?Sized, V: Fn(AttrId) -> bool>(
    node: &Node,
    entry: &T,
    schema: &Schema,
    visible: &V,
) -> Ternary {
    match node {
        Node::And(children) => {
            let mut undefined = false;
            for child in children {
                match eval(child, entry, schema, visible) {
                    Ternary::False => return Ternary::False,
                    Ternary::Undefined => undefined = true,
                    Ternary::True => {}
                }
            }
            if undefined {
                Ternary::Undefined
            } else {
                Ternary::True
            }
        }
        Node::Or(children) => {
            let mut acc = AnyValue::default();
            for child in children {
                if !acc.add(eval(child, entry, schema, visible)) {
                    break;
                }
            }
            acc.result()
        }
        Node::Not(child) => eval(child, entry, schema, visible).not(),
        Node::Present(wanted) if !visible(wanted.desc.attr) => Ternary::Undefined,
        Node::Compare { desc, .. } | Node::Approx { desc, .. } | Node::Substrings { desc, .. }
            if !visible(desc.desc.attr) =>
        {
            Ternary::Undefined
        }
        Node::ObjectClass(_, wanted) if !visible(wanted.desc.attr) => Ternary::Undefined,
        Node::Extensible { desc: Some(d), .. } if !visible(d.attr) => Ternary::Undefined,
        Node::Present(wanted) => {
            let mut found = false;
            entry.visit_wanted(schema, wanted, &mut |_| {
                found = true;
                false
            });
            if found { Ternary::True } else { Ternary::False }
        }
        Node::Compare {
            desc,
            rule,
            key,
            want,
        } => over_values(entry, desc, schema, |v| {
            compare(rule, v, key, *want, schema)
        }),
        Node::Approx { desc, rule, key } => {
            over_values(entry, desc, schema, |v| {
                match approx_key(rule.norm, v, schema) {
                    Some(k) if k == *key => Ternary::True,
                    Some(_) => Ternary::False,
                    None => Ternary::Undefined,
                }
            })
        }
        Node::Substrings { desc, rule, parts } => {
            over_values(entry, desc, schema, |v| match rule.key_cow(v, schema) {
                Some(k) if substrings_match(&k, parts) => Ternary::True,
                Some(_) => Ternary::False,
                None => Ternary::Undefined,
            })
        }
        Node::Extensible {
            desc,
            rule,
            key,
            dn_attributes,
        } => {
            let want = if rule.kind == RuleKind::Ordering {
                // X.501 reads an ordering rule used as a match as "less
                // than or equal" for the assertion.
                Want::LessOrEqual
            } else {
                Want::Equal
            };
            let applies = |attr: AttrId| match desc {
                Some(d) => schema.is_subtype(attr, d.attr),
                // Without a type: every attribute whose syntax the rule
                // applies to (its matching rule use).
                None => schema
                    .attr(attr)
                    .is_some_and(|a| a.syntax_oid == rule.syntax),
            };
            let mut acc = AnyValue::default();
            entry.visit_attributes(schema, &mut |name, values| {
                // Extensible matches are rare: resolving every name is fine.
                let Some(d) = name.resolve(schema) else {
                    return true;
                };
                if !applies(d.attr)
                    || !visible(d.attr)
                    || desc.as_ref().is_some_and(|w| !d.is_matched_by(w, schema))
                {
                    return true;
                }
                for v in values {
                    if !acc.add(compare(rule, v, key, want, schema)) {
                        return false;
                    }
                }
                true
            });
            if *dn_attributes && !acc.truth {
                for (attr, v) in entry.dn_values(schema) {
                    if applies(attr)
                        && visible(attr)
                        && !acc.add(compare(rule, &v, key, want, schema))
                    {
                        break;
                    }
                }
            }
            acc.result()
        }
        Node::ObjectClass(class, wanted) => {
            let mut member = false;
            entry.visit_wanted(schema, wanted, &mut |values| {
                member = values
                    .filter_map(|v| {
                        std::str::from_utf8(v)
                            .ok()
                            .and_then(|n| schema.class_id(n.trim()))
                    })
                    .any(|c| schema.class_inherits(c, *class));
                !member
            });
            if member {
                Ternary::True
            } else {
                Ternary::False
            }
        }
        Node::Undefined => Ternary::Undefined,
        Node::False => Ternary::False,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dn::Dn;
    use meridian_proto::{Depth, filter_str};

    fn person(schema: &Schema) -> Entry {
        let dn = Dn::parse(b"uid=jdoe,ou=People,dc=example,dc=com", schema).unwrap();
        let attrs: &[(&str, &[&str])] = &[
            (
                "objectClass",
                &[
                    "top",
                    "person",
                    "organizationalPerson",
                    "inetOrgPerson",
                    "posixAccount",
                ],
            ),
            ("uid", &["jdoe"]),
            ("cn", &["John  Doe", "Johnny"]),
            ("cn;lang-de", &["Johann Doe"]),
            ("sn", &["Doe"]),
            ("uidNumber", &["1000"]),
            ("gidNumber", &["100"]),
            ("homeDirectory", &["/home/jdoe"]),
            ("mail", &["JDoe@Example.com"]),
            ("telephoneNumber", &["+1 512-315-0280"]),
            ("createTimestamp", &["20261122010203Z"]),
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

    fn eval_str(filter: &str) -> Ternary {
        let schema = Schema::builtin().unwrap();
        let ber = filter_str::parse(filter, 32).unwrap();
        let f = Filter::from_ber(&ber, Depth::new(32)).unwrap();
        CompiledFilter::compile(&f, &schema).evaluate(&person(&schema), &schema)
    }

    /// What `visit_tested` reports for `filter`: type names in order
    /// (`*` for an item over every attribute).
    fn tested(filter: &str) -> Vec<String> {
        let schema = Schema::builtin().unwrap();
        let ber = filter_str::parse(filter, 32).unwrap();
        let f = Filter::from_ber(&ber, Depth::new(32)).unwrap();
        let mut out = Vec::new();
        CompiledFilter::compile(&f, &schema).visit_tested(&mut |attr| {
            out.push(match attr {
                Some(id) => schema.attr(id).unwrap().name().to_owned(),
                None => "*".to_owned(),
            });
        });
        out
    }

    #[test]
    fn tested_types_are_the_items_that_can_match() {
        assert_eq!(
            tested("(&(objectClass=person)(|(cn=a*)(!(mail~=b)))(uidNumber>=5)(sn=*))"),
            ["objectClass", "cn", "mail", "uidNumber", "sn"]
        );
        // Subtypes and options report the type asserted on.
        assert_eq!(tested("(cn;lang-de=x)"), ["cn"]);
        // Items on unknown types, with a rule the type lacks (uid has no
        // ordering) or a value the rule refuses are Undefined (or FALSE)
        // whatever the entry holds: they test nothing.
        assert!(
            tested("(|(noSuchType=x)(noSuchType=*)(uid>=c)(uidNumber=x)(objectClass=noSuchClass))")
                .is_empty()
        );
        // An extensible match names its type, unless it has none or also
        // matches the DN's values: then every attribute may be tested.
        assert_eq!(tested("(cn:caseExactMatch:=x)"), ["cn"]);
        assert_eq!(tested("(:caseIgnoreMatch:=x)"), ["*"]);
        assert_eq!(tested("(cn:dn:=x)"), ["*"]);
    }

    #[test]
    fn family_spellings_cover_subtypes() {
        let schema = Schema::builtin().unwrap();
        let name = schema.family_spellings(schema.attribute_id("name").unwrap());
        for expected in [
            "name",
            "2.5.4.41",
            "cn",
            "commonname",
            "2.5.4.3",
            "sn",
            "surname",
        ] {
            assert!(name.iter().any(|s| s == expected), "{expected}");
        }
        let cn = schema.family_spellings(schema.attribute_id("cn").unwrap());
        assert!(!cn.iter().any(|s| s == "sn"));
    }

    #[test]
    fn table_of_filters() {
        use Ternary::*;
        let cases = [
            ("(uid=JDOE)", True),
            ("(cn=john doe)", True),
            ("(cn=Johann Doe)", True),
            ("(cn;lang-de=johann doe)", True),
            ("(cn;lang-de=johnny)", False),
            ("(name=doe)", True), // sn is a subtype of name
            ("(objectClass=INETORGPERSON)", True),
            ("(objectClass=2.16.840.1.113730.3.2.2)", True),
            ("(objectClass=groupOfNames)", False),
            ("(uidNumber>=999)", True),
            ("(uidNumber>=1001)", False),
            ("(uidNumber<=1000)", True),
            ("(uidNumber=01000)", Undefined),
            ("(objectClass=person)", True),
            ("(objectClass=top)", True),
            ("(objectClass=nosuchclass)", Undefined),
            ("(uidNumber=abc)", Undefined),
            ("(gidNumber<=99)", False),
            ("(mail=jdoe@example.COM)", True),
            ("(telephoneNumber=+15123150280)", True),
            ("(telephoneNumber=*315 0280)", True),
            ("(cn=jo*)", True),
            ("(cn=*ohann*)", True),
            ("(cn=*xyz*)", False),
            ("(sn>=A)", Undefined), // sn has no ordering rule
            ("(nosuchattr=x)", Undefined),
            ("(nosuchattr=*)", False),
            ("(!(nosuchattr=x))", Undefined),
            ("(|(nosuchattr=x)(uid=jdoe))", True),
            ("(&(nosuchattr=x)(uid=jdoe))", Undefined),
            ("(&(nosuchattr=x)(uid=other))", False),
            ("(&)", True),
            ("(|)", False),
            ("(cn~=johndoe)", True),
            ("(cn~=JOHN DO)", False),
            ("(createTimestamp>=20261122000000Z)", True),
            ("(createTimestamp<=202611220102Z)", False),
            ("(uid:caseExactMatch:=jdoe)", True),
            ("(uid:caseExactMatch:=JDOE)", False),
            ("(:caseIgnoreMatch:=doe)", True),
            ("(ou:dn:=people)", True),
            ("(ou=people)", False),
            ("(dc:dn:caseIgnoreMatch:=EXAMPLE)", True),
            ("(uid:nosuchMatch:=x)", Undefined),
            ("(uidNumber:integerOrderingMatch:=2000)", True),
        ];
        let mut failures = Vec::new();
        for (filter, expected) in cases {
            let got = eval_str(filter);
            if got != expected {
                failures.push(format!("{filter}: expected {expected:?}, got {got:?}"));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}

/// The values a search returns under the matched values control (RFC
/// 3876): each item of the ValuesReturnFilter is tested against each
/// value of the attributes its type names (subtypes and options as in a
/// search filter), and only the values some item matches are returned:
/// an attribute no item names, or none of whose values match, is left
/// out (as slapd does). An item of an unknown type, and an extensible
/// item without a type, name nothing.
#[derive(Debug)]
pub struct ValuesFilter {
    items: Vec<(Description, CompiledFilter)>,
}

impl ValuesFilter {
    /// Compiles the items of a ValuesReturnFilter (`and`, `or` and `not`
    /// were refused when decoding).
    pub fn compile(items: &[Filter<'_>], schema: &Schema) -> ValuesFilter {
        let items = items
            .iter()
            .filter_map(|item| {
                let attr = match item {
                    Filter::Equality(a)
                    | Filter::GreaterOrEqual(a)
                    | Filter::LessOrEqual(a)
                    | Filter::Approx(a) => a.attr,
                    Filter::Substrings(s) => s.attr,
                    Filter::Present(attr) => attr,
                    Filter::Extensible(m) => m.attr?,
                    Filter::And(_) | Filter::Or(_) | Filter::Not(_) => return None,
                };
                let desc = Description::parse_selector(attr, schema).ok()?;
                Some((desc, CompiledFilter::compile(item, schema)))
            })
            .collect();
        ValuesFilter { items }
    }

    /// The values of `attribute` to return: those that some item naming
    /// its type matches (perhaps none).
    pub fn values<'v>(
        &self,
        attribute: &'v crate::entry::Attribute,
        schema: &Schema,
    ) -> Vec<&'v [u8]> {
        let naming: Vec<&CompiledFilter> = self
            .items
            .iter()
            .filter(|(desc, _)| attribute.desc.is_matched_by(desc, schema))
            .map(|(_, filter)| filter)
            .collect();
        if naming.is_empty() {
            return Vec::new();
        }
        attribute
            .values
            .iter()
            .filter(|value| {
                // The value alone, as an entry of one attribute.
                let alone = Entry {
                    dn: crate::dn::Dn::root(),
                    attributes: vec![crate::entry::Attribute {
                        desc: attribute.desc.clone(),
                        name: attribute.name.clone(),
                        values: std::iter::once((*value).clone()).collect(),
                    }],
                };
                naming.iter().any(|filter| filter.matches(&alone, schema))
            })
            .map(Vec::as_slice)
            .collect()
    }
}
