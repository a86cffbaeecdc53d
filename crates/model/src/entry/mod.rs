//! Entries and schema checking (RFC 4512 section 3.3 and 4.1).
//!
//! An [`Entry`] keeps user values exactly as given; matching rules produce
//! their keys when needed. [`Entry::check`] enforces the schema and maps
//! each failure to the result code RFC 4511 and slapd use, with a message
//! that names the attribute or class at fault.
//!
//! Descriptions (a type and its options) are in `description.rs`, the
//! schema check in `check.rs`; entries and their attributes here.

mod check;
mod description;

pub use check::*;
pub use description::*;

use meridian_proto::ResultCode;

use crate::ModelError;
use crate::dn::Dn;
use crate::schema::{AttrId, ClassId, Schema};

/// The values of an attribute: inline when there is one, as for most
/// attributes, so a single-valued attribute costs one allocation (its
/// value), not two. Allocations were most of a bulk load's parsing time,
/// each a cache miss in the allocator (perf).
pub type Values = smallvec::SmallVec<[Vec<u8>; 1]>;

/// How an attribute's name is spelled (it is returned to clients as
/// given): as the schema's primary name of its type, which nearly every
/// attribute is and which then costs no allocation, or otherwise, kept
/// as written. Built only by the constructors here, which all store the
/// primary name as nothing, so one spelling has one representation and
/// `==` compares spellings.
///
/// A bulk load allocated a string per attribute name (a seventh of the
/// allocations of an import, DHAT), and every record decoded for a
/// modify or a search did too.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttrName(Option<Box<str>>);

impl AttrName {
    /// The name `text` of an attribute described by `desc`.
    pub fn new(text: &str, desc: &Description, schema: &Schema) -> AttrName {
        Self::spelled(&spelling(text, desc), Self::is_primary(text, desc, schema))
    }

    /// `text`, which is its type's primary name if `primary`.
    fn spelled(text: &str, primary: bool) -> AttrName {
        AttrName((!primary).then(|| text.into()))
    }

    /// The primary name of `desc`'s type, when `desc` has no options.
    pub fn primary() -> AttrName {
        AttrName(None)
    }

    fn is_primary(text: &str, desc: &Description, schema: &Schema) -> bool {
        desc.options.is_empty() && schema.attr(desc.attr).is_some_and(|a| a.name() == text)
    }

    /// The spelling, when it is not the primary name of the type.
    pub fn given(&self) -> Option<&str> {
        self.0.as_deref()
    }

    /// The name as the client wrote it, of an attribute of type `attr`:
    /// the spelling, or the type's primary name.
    pub fn text<'a>(&'a self, attr: AttrId, schema: &'a Schema) -> &'a str {
        match self.given() {
            Some(text) => text,
            None => schema.attr(attr).map_or("", |a| a.name()),
        }
    }
}

/// How an attribute written `text` is spelled back to clients: the type
/// as written, then its options as slapd returns them, lower-cased and
/// sorted (`CN;Lang-DE;binary` is returned `CN;binary;lang-de`).
fn spelling<'t>(text: &'t str, desc: &Description) -> std::borrow::Cow<'t, str> {
    if desc.options.is_empty() {
        return std::borrow::Cow::Borrowed(text);
    }
    let ty = text.split(';').next().unwrap_or_default();
    let mut spelled = String::with_capacity(text.len());
    spelled.push_str(ty);
    for option in &desc.options {
        spelled.push(';');
        spelled.push_str(option);
    }
    if spelled == text {
        std::borrow::Cow::Borrowed(text)
    } else {
        std::borrow::Cow::Owned(spelled)
    }
}

/// One attribute of an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribute {
    /// Type and options.
    pub desc: Description,
    /// The name as the client wrote it: see [`Attribute::name`].
    pub name: AttrName,
    /// Values as given.
    pub values: Values,
}

impl Attribute {
    /// The name as the client wrote it.
    pub fn name<'a>(&'a self, schema: &'a Schema) -> &'a str {
        self.name.text(self.desc.attr, schema)
    }

    /// Whether `value` is one of the values, by the type's equality rule
    /// (by bytes if it has none).
    pub fn has_value(&self, value: &[u8], schema: &Schema) -> bool {
        holds_value(
            self.values.iter().map(Vec::as_slice),
            self.desc.attr,
            value,
            schema,
        )
    }
}

/// Whether `values`, of type `attr`, hold `value` by the type's equality
/// rule (by bytes if it has none): [`Attribute::has_value`], for values
/// wherever they are (a stored record's, for a modify made on the record).
pub fn holds_value<'v>(
    values: impl Iterator<Item = &'v [u8]> + Clone,
    attr: AttrId,
    value: &[u8],
    schema: &Schema,
) -> bool {
    // The same bytes (nearly always: an entry repeats its RDN) need no
    // matching rule.
    if values.clone().any(|v| v == value) {
        return true;
    }
    let Some(rule) = schema.attr(attr).and_then(|t| t.equality) else {
        return false;
    };
    let Some(wanted) = rule.key_cow(value, schema) else {
        return false;
    };
    values
        .into_iter()
        .any(|v| rule.key_cow(v, schema).is_some_and(|k| k == wanted))
}

/// Where an entry being built has each description, for merging the
/// values given under one description: found by a scan while the entry
/// has few attributes, as nearly every entry does, and by a hash of the
/// descriptions past that (keyed by the standard library's hasher: the
/// descriptions are a client's), so that an entry of fifty thousand
/// attributes (`description;lang-xN`) is not built in the square of
/// their number (17 s for one add, perf).
#[derive(Default)]
struct Positions {
    by_desc: Option<std::collections::HashMap<Description, usize>>,
}

impl Positions {
    /// Attributes scanned before the hash is built.
    const SCAN: usize = 32;

    /// The position of `desc` in `out`.
    fn find(&mut self, out: &[Attribute], desc: &Description) -> Option<usize> {
        if out.len() <= Self::SCAN {
            return out.iter().position(|a| a.desc == *desc);
        }
        let by_desc = self.by_desc.get_or_insert_with(|| {
            out.iter()
                .enumerate()
                .map(|(i, a)| (a.desc.clone(), i))
                .collect()
        });
        by_desc.get(desc).copied()
    }

    /// Notes the attribute just pushed onto `out`.
    fn pushed(&mut self, out: &[Attribute]) {
        if let (Some(by_desc), Some(last)) = (&mut self.by_desc, out.last()) {
            by_desc.insert(last.desc.clone(), out.len() - 1);
        }
    }
}

/// An entry: a DN and attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The entry's DN.
    pub dn: Dn,
    /// Attributes, each description once.
    pub attributes: Vec<Attribute>,
}

/// What a schema check found out about a valid entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedEntry {
    /// The structural object class (the most specific of the chain).
    pub structural: ClassId,
}

/// Who is writing: clients may not set NO-USER-MODIFICATION attributes;
/// the server itself (operational attributes, imports) may.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WrittenBy {
    /// An LDAP client.
    Client,
    /// The server or an offline import.
    Server,
}

impl Entry {
    /// An entry from text: its DN and `(description, values)` pairs, as
    /// tests and tools write one (`Entry::new` over the bytes).
    pub fn from_text(
        dn: &str,
        attributes: &[(&str, &[&str])],
        schema: &Schema,
    ) -> Result<Entry, ModelError> {
        Entry::new(
            Dn::parse(dn.as_bytes(), schema)?,
            attributes
                .iter()
                .map(|(name, values)| (name.as_bytes(), values.iter().map(|v| v.as_bytes()))),
            schema,
        )
    }

    /// Builds an entry from a DN and `(description, values)` pairs, merging
    /// repeated descriptions. Attributes without values are refused
    /// (RFC 4511 section 4.7: every attribute of an add has values).
    pub fn new<'a, V>(
        dn: Dn,
        attributes: impl IntoIterator<Item = (&'a [u8], V)>,
        schema: &Schema,
    ) -> Result<Entry, ModelError>
    where
        V: IntoIterator<Item = &'a [u8]>,
    {
        let mut out: Vec<Attribute> = Vec::new();
        let mut positions = Positions::default();
        for (name, values) in attributes {
            let desc = Description::parse(name, schema)?;
            let values: Values = values.into_iter().map(<[u8]>::to_vec).collect();
            let label = String::from_utf8_lossy(name);
            if values.is_empty() {
                return Err(violation(
                    ResultCode::PROTOCOL_ERROR,
                    format!("attribute {label:?} has no values"),
                ));
            }
            match positions.find(&out, &desc).and_then(|i| out.get_mut(i)) {
                Some(existing) => existing.values.extend(values),
                None => {
                    out.push(Attribute {
                        name: AttrName::new(&label, &desc, schema),
                        desc,
                        values,
                    });
                    positions.pushed(&out);
                }
            }
        }
        Ok(Entry {
            dn,
            attributes: out,
        })
    }

    /// [`Entry::new`] from `(description, value)` pairs, one value each
    /// (as LDIF gives them): values move into the entry instead of being
    /// copied, and names spelled as their type's primary name are not
    /// kept. `recent` remembers the descriptions of the previous entries.
    pub fn from_values<N: AsRef<str>>(
        dn: Dn,
        pairs: impl IntoIterator<Item = (N, Vec<u8>)>,
        schema: &Schema,
        recent: &mut RecentDescriptions,
    ) -> Result<Entry, ModelError> {
        let pairs = pairs.into_iter();
        // Room for the attributes given and for the operational ones
        // the server adds to a new entry (seven), so they never move.
        let mut out: Vec<Attribute> = Vec::with_capacity(pairs.size_hint().0 + 8);
        let mut positions = Positions::default();
        for (position, (name, value)) in pairs.enumerate() {
            let (desc, name) = recent.parse(position, name.as_ref(), schema)?;
            match positions.find(&out, &desc).and_then(|i| out.get_mut(i)) {
                Some(existing) => existing.values.push(value),
                None => {
                    out.push(Attribute {
                        desc,
                        name,
                        values: Values::from_buf([value]),
                    });
                    positions.pushed(&out);
                }
            }
        }
        Ok(Entry {
            dn,
            attributes: out,
        })
    }

    /// Adds the values of the entry's RDN that its attributes lack, as
    /// slapd does on add (X.501 requires them; clients often omit them).
    pub fn with_rdn_values(mut self, schema: &Schema) -> Entry {
        let Some(rdn) = self.dn.rdn_values().first() else {
            return self;
        };
        let mut missing = Vec::new();
        for (attr, value) in rdn.iter() {
            let present = self.get(*attr).is_some_and(|a| a.has_value(value, schema));
            let listed = missing.iter().any(|(a, v)| a == attr && v == value);
            if !present && !listed {
                missing.push((*attr, value.clone()));
            }
        }
        for (attr, value) in missing {
            match self
                .attributes
                .iter_mut()
                .find(|a| a.desc.attr == attr && a.desc.options.is_empty())
            {
                Some(a) => a.values.push(value),
                None => self.attributes.push(Attribute {
                    desc: Description {
                        attr,
                        options: Vec::new(),
                    },
                    name: AttrName::primary(),
                    values: Values::from_buf([value]),
                }),
            }
        }
        self
    }

    /// The attribute with exactly this type and no options.
    pub fn get(&self, attr: AttrId) -> Option<&Attribute> {
        self.attributes
            .iter()
            .find(|a| a.desc.attr == attr && a.desc.options.is_empty())
    }

    /// Attributes matched by `wanted` (subtypes and option subsets).
    pub fn matching<'e>(
        &'e self,
        wanted: &'e Description,
        schema: &'e Schema,
    ) -> impl Iterator<Item = &'e Attribute> {
        self.attributes
            .iter()
            .filter(move |a| a.desc.is_matched_by(wanted, schema))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keep_their_spelling_and_primary_names_hold_no_text() {
        let schema = Schema::builtin().unwrap();
        let dn = Dn::parse(b"cn=a,dc=example,dc=com", &schema).unwrap();
        let given: [(&str, &[u8]); 4] = [
            ("cn", b"a"),
            ("SN", b"b"),
            ("description;lang-de", b"c"),
            ("2.5.4.20", b"1"),
        ];
        let e = Entry::new(dn, given.map(|(n, v)| (n.as_bytes(), [v])), &schema).unwrap();
        let spelled: Vec<_> = e.attributes.iter().map(|a| a.name(&schema)).collect();
        assert_eq!(spelled, ["cn", "SN", "description;lang-de", "2.5.4.20"]);
        let kept: Vec<_> = e.attributes.iter().map(|a| a.name.given()).collect();
        assert_eq!(
            kept,
            [
                None,
                Some("SN"),
                Some("description;lang-de"),
                Some("2.5.4.20")
            ]
        );
        // One spelling, one representation: `==` compares spellings.
        let cn = e.attributes.first().unwrap();
        assert_eq!(cn.name, AttrName::new("cn", &cn.desc, &schema));
        assert_ne!(cn.name, AttrName::new("CN", &cn.desc, &schema));
    }

    #[test]
    fn remembered_descriptions_are_those_parsed_afresh() {
        let schema = Schema::builtin().unwrap();
        let mut recent = RecentDescriptions::default();
        let records: [&[&str]; 3] = [
            &["objectClass", "cn", "description;lang-de"],
            &["objectClass", "CN", "description;lang-de", "sn"],
            &["sn", "cn", "nosuch"],
        ];
        for names in records {
            for (position, name) in names.iter().enumerate() {
                let fresh = Description::parse(name.as_bytes(), &schema)
                    .map(|d| (AttrName::new(name, &d, &schema), d));
                let remembered = recent.parse(position, name, &schema);
                match (fresh, remembered) {
                    (Ok((a_name, a)), Ok((b, b_name))) => {
                        assert_eq!(a, b, "{name}");
                        assert_eq!(a_name, b_name, "{name}");
                    }
                    (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                    (a, b) => panic!("{name}: {a:?} against {b:?}"),
                }
            }
        }
    }

    fn entry(schema: &Schema, dn: &str, attrs: &[(&str, &[&str])]) -> Entry {
        Entry::from_text(dn, attrs, schema).unwrap()
    }

    #[test]
    fn known_class_rules_are_those_of_the_classes_listed() {
        // One writer checks entries of several class lists in turn, and
        // more lists than it keeps: each check must give what a check
        // that knows no classes gives.
        let s = Schema::builtin().unwrap();
        let dn = "uid=jdoe,ou=People,dc=example,dc=com";
        let lists: [&[&str]; 6] = [
            &["inetOrgPerson"],
            &["account"],
            &["inetOrgPerson", "posixAccount"],
            &["account", "posixAccount"],
            &["person", "account"],
            &["nosuchClass"],
        ];
        // `host` only an account allows, `mail` only an inetOrgPerson,
        // `uidNumber` a posixAccount needs; `sn` a person needs.
        let attrs: &[(&str, &[&str])] = &[
            ("uid", &["jdoe"]),
            ("cn", &["J"]),
            ("sn", &["D"]),
            ("host", &["h"]),
            ("mail", &["j@x"]),
        ];
        let mut known = KnownClasses::default();
        for round in 0..(KnownClasses::LIMIT / lists.len() + 2) {
            for (i, classes) in lists.iter().enumerate() {
                // Each list with and without the types some need.
                for without in [None, Some("host"), Some("mail"), Some("sn")] {
                    // Spelled anew each round (the check trims a value),
                    // so the lists outnumber what is kept.
                    let spelled: Vec<String> = classes
                        .iter()
                        .map(|c| format!("{c}{}", " ".repeat(round)))
                        .collect();
                    let spelled: Vec<&str> = spelled.iter().map(String::as_str).collect();
                    let mut given: Vec<(&str, &[&str])> = vec![("objectClass", &spelled)];
                    given.extend(attrs.iter().filter(|(n, _)| Some(*n) != without));
                    let e = entry(&s, dn, &given);
                    let fresh = e.check_after_modify(
                        &s,
                        WrittenBy::Server,
                        |_| true,
                        &mut KnownClasses::default(),
                    );
                    let reused = e.check_after_modify(&s, WrittenBy::Server, |_| true, &mut known);
                    assert_eq!(fresh, reused, "list {i} without {without:?}, round {round}");
                }
            }
        }
    }

    fn check(attrs: &[(&str, &[&str])]) -> Result<CheckedEntry, ModelError> {
        let s = Schema::builtin().unwrap();
        entry(&s, "uid=jdoe,ou=People,dc=example,dc=com", attrs).check(&s, WrittenBy::Client)
    }

    const PERSON: &[(&str, &[&str])] = &[
        ("objectClass", &["inetOrgPerson", "posixAccount"]),
        ("uid", &["jdoe"]),
        ("cn", &["John Doe"]),
        ("sn", &["Doe"]),
        ("uidNumber", &["1000"]),
        ("gidNumber", &["1000"]),
        ("homeDirectory", &["/home/jdoe"]),
        ("mail", &["jdoe@example.com", "john@example.com"]),
        ("cn;lang-de", &["Johann Doe"]),
    ];

    #[test]
    fn a_valid_entry_passes_and_names_its_structural_class() {
        let s = Schema::builtin().unwrap();
        let checked = check(PERSON).unwrap();
        assert_eq!(
            s.class_by_id(checked.structural).unwrap().name(),
            "inetOrgPerson"
        );
    }

    fn expect(attrs: &[(&str, &[&str])], code: ResultCode, fragment: &str) {
        let err = check(attrs).expect_err(fragment);
        assert_eq!(err.code, code, "{}", err.message);
        assert!(err.message.contains(fragment), "{}", err.message);
    }

    fn with(
        change: (&'static str, &'static [&'static str]),
    ) -> Vec<(&'static str, &'static [&'static str])> {
        let mut attrs: Vec<_> = PERSON
            .iter()
            .copied()
            .filter(|(n, _)| *n != change.0)
            .collect();
        if !change.1.is_empty() {
            attrs.push(change);
        }
        attrs
    }

    #[test]
    fn each_violation_has_its_result_code_and_names_the_culprit() {
        use ResultCode as R;
        expect(&with(("sn", &[])), R::OBJECT_CLASS_VIOLATION, "\"sn\"");
        // Required by the second listed class, an auxiliary one.
        expect(
            &with(("homeDirectory", &[])),
            R::OBJECT_CLASS_VIOLATION,
            "\"posixAccount\" requires attribute \"homeDirectory\"",
        );
        expect(
            &with(("objectClass", &[])),
            R::OBJECT_CLASS_VIOLATION,
            "no objectClass",
        );
        expect(
            &with(("objectClass", &["posixAccount"])),
            R::OBJECT_CLASS_VIOLATION,
            "no structural",
        );
        expect(
            &with((
                "objectClass",
                &["inetOrgPerson", "posixAccount", "organization"],
            )),
            R::OBJECT_CLASS_VIOLATION,
            "chain",
        );
        expect(
            &with(("objectClass", &["inetOrgPerson", "posixAccount", "nosuch"])),
            R::INVALID_ATTRIBUTE_SYNTAX,
            "nosuch",
        );
        expect(
            &with(("uidNumber", &["1", "2"])),
            R::CONSTRAINT_VIOLATION,
            "uidNumber",
        );
        expect(
            &with(("uidNumber", &["x"])),
            R::INVALID_ATTRIBUTE_SYNTAX,
            "uidNumber",
        );
        expect(
            &with(("mail", &["a@x", "A@X"])),
            R::ATTRIBUTE_OR_VALUE_EXISTS,
            "mail",
        );
        expect(
            &with(("dc", &["example"])),
            R::OBJECT_CLASS_VIOLATION,
            "\"dc\"",
        );
        expect(
            &with(("entryUUID", &["597ae2f6-16a6-1027-98f4-d28b5365dc14"])),
            R::CONSTRAINT_VIOLATION,
            "entryUUID",
        );
        expect(&with(("uid", &["someoneelse"])), R::NAMING_VIOLATION, "uid");
    }

    #[test]
    fn values_of_one_description_merge_however_many_attributes_there_are() {
        // Past `Positions::SCAN` attributes, a hash finds them: the
        // merging must be the same on either side of it.
        let s = Schema::builtin().unwrap();
        let dn = Dn::parse(b"cn=many,dc=example,dc=com", &s).unwrap();
        let mut pairs: Vec<(String, String)> = (0..100)
            .map(|i| (format!("description;lang-x{i}"), format!("v{i}")))
            .collect();
        for i in [5, 70, 5, 99, 0] {
            pairs.push((format!("description;lang-X{i}"), format!("again {i}")));
        }
        let expected = |e: &Entry| {
            assert_eq!(e.attributes.len(), 100);
            for (i, attr) in e.attributes.iter().enumerate() {
                let mut values = vec![format!("v{i}")];
                for again in [5, 70, 5, 99, 0].into_iter().filter(|&a| a == i) {
                    values.push(format!("again {again}"));
                }
                let got: Vec<String> = attr
                    .values
                    .iter()
                    .map(|v| String::from_utf8(v.clone()).unwrap())
                    .collect();
                assert_eq!(got, values, "attribute {i}");
            }
        };
        let e = Entry::new(
            dn.clone(),
            pairs.iter().map(|(n, v)| (n.as_bytes(), [v.as_bytes()])),
            &s,
        )
        .unwrap();
        expected(&e);
        let e = Entry::from_values(
            dn,
            pairs
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_bytes().to_vec())),
            &s,
            &mut RecentDescriptions::default(),
        )
        .unwrap();
        expected(&e);
    }

    #[test]
    fn the_first_value_repeated_is_the_one_named() {
        // By the equality rule (mail ignores case): #2 repeats #0 and #4
        // repeats #1; a walk in order meets #2 first.
        let s = Schema::builtin().unwrap();
        let mail = s.attribute("mail").unwrap();
        let values = |texts: &[&str]| -> Vec<Vec<u8>> {
            texts.iter().map(|t| t.as_bytes().to_vec()).collect()
        };
        let cases: [(&[&str], Option<&str>); 4] = [
            (&["a@x", "b@x", "A@X", "c@x", "B@x"], Some("value #2 ")),
            (&["a@x", "b@x", "c@x", "b@X", "a@X"], Some("value #3 ")),
            (&["a@x", "b@x"], None),
            (&["a@x"], None),
        ];
        for (texts, named) in cases {
            let result = check_values(mail, &values(texts), WrittenBy::Client, &s);
            match named {
                None => result.unwrap(),
                Some(fragment) => {
                    let err = result.unwrap_err();
                    assert_eq!(err.code, ResultCode::ATTRIBUTE_OR_VALUE_EXISTS);
                    assert!(err.message.contains(fragment), "{texts:?}: {}", err.message);
                }
            }
        }
        // Many values, all distinct but for the last: found, with the
        // position of the repeat.
        let mut many: Vec<Vec<u8>> = (0..20_000)
            .map(|i| format!("u{i}@x").into_bytes())
            .collect();
        many.push(b"U7@X".to_vec());
        let err = check_values(mail, &many, WrittenBy::Client, &s).unwrap_err();
        assert!(err.message.contains("value #20000 "), "{}", err.message);
        many.pop();
        check_values(mail, &many, WrittenBy::Client, &s).unwrap();
    }

    #[test]
    fn extensible_object_allows_any_user_attribute() {
        let mut attrs = with(("dc", &["example"]));
        attrs.retain(|(n, _)| *n != "objectClass");
        attrs.push((
            "objectClass",
            &["inetOrgPerson", "posixAccount", "extensibleObject"],
        ));
        check(&attrs).unwrap();
    }

    #[test]
    fn descriptions_and_subtypes() {
        let s = Schema::builtin().unwrap();
        let err = Description::parse(b"nosuch", &s).unwrap_err();
        assert_eq!(err.code, ResultCode::UNDEFINED_ATTRIBUTE_TYPE);
        assert!(Description::parse(b"cn;x-foo", &s).is_err());
        let cn_de = Description::parse(b"CN;Lang-DE", &s).unwrap();
        let name = Description::parse(b"name", &s).unwrap();
        let cn = Description::parse(b"commonName", &s).unwrap();
        assert!(cn_de.is_matched_by(&name, &s));
        assert!(cn_de.is_matched_by(&cn, &s));
        assert!(!cn.is_matched_by(&cn_de, &s));
        let e = entry(&s, "uid=jdoe,dc=x", PERSON);
        assert_eq!(e.matching(&name, &s).count(), 3); // cn, sn, cn;lang-de
        assert_eq!(e.matching(&cn_de, &s).count(), 1);
    }

    #[test]
    fn language_ranges_select_every_tag_below_them_and_name_nothing_stored() {
        let s = Schema::builtin().unwrap();
        let sel = |text: &str| Description::parse_selector(text.as_bytes(), &s).unwrap();
        let stored = |text: &str| Description::parse(text.as_bytes(), &s).unwrap();
        let (en, en_us, de) = (
            stored("cn;lang-en"),
            stored("cn;lang-en-US"),
            stored("cn;lang-de"),
        );
        let plain = stored("cn");
        for (range, matched) in [
            ("cn;lang-en-", [true, true, false, false]),
            ("cn;lang-", [true, true, true, false]),
            ("cn;lang-e-", [false, false, false, false]),
            ("name;lang-en-us-", [false, true, false, false]),
        ] {
            let wanted = sel(range);
            let got = [&en, &en_us, &de, &plain].map(|d| d.is_matched_by(&wanted, &s));
            assert_eq!(got, matched, "{range}");
        }
        let err = Description::parse(b"cn;lang-en-", &s).unwrap_err();
        assert_eq!(err.code, ResultCode::UNDEFINED_ATTRIBUTE_TYPE);
        assert!(err.message.contains("language range"), "{}", err.message);
    }

    #[test]
    fn options_are_spelled_lower_case_and_sorted_the_type_as_written() {
        let s = Schema::builtin().unwrap();
        let e = entry(
            &s,
            "uid=jdoe,dc=x",
            &with(("CN;Lang-EN;BINARY", &["Johnny"])),
        );
        let names: Vec<&str> = e.attributes.iter().map(|a| a.name(&s)).collect();
        assert!(names.contains(&"CN;binary;lang-en"), "{names:?}");
    }

    #[test]
    fn missing_rdn_values_are_added_on_request() {
        let s = Schema::builtin().unwrap();
        let e = entry(
            &s,
            "uid=jdoe,ou=People,dc=example,dc=com",
            &with(("uid", &["other"])),
        );
        let e = e.with_rdn_values(&s);
        let uid = s.attribute_id("uid").unwrap();
        assert_eq!(e.get(uid).unwrap().values.len(), 2);
        e.check(&s, WrittenBy::Client).unwrap();
        // Present already (in another spelling): nothing added.
        let e = entry(&s, "uid=JDOE,dc=x", PERSON).with_rdn_values(&s);
        assert_eq!(e.get(uid).unwrap().values.len(), 1);
    }

    #[test]
    fn empty_attributes_are_refused() {
        let s = Schema::builtin().unwrap();
        let dn = Dn::parse(b"cn=x", &s).unwrap();
        let err = Entry::new(dn, [(b"cn".as_slice(), Vec::<&[u8]>::new())], &s).unwrap_err();
        assert_eq!(err.code, ResultCode::PROTOCOL_ERROR);
    }
}
