//! Matching rules (RFC 4517 section 4.2): how values are compared.
//!
//! Every rule reduces a value to a *key* ([`RuleInfo::key`]): equal keys
//! mean equal values, and for ordering rules the key order (see
//! [`RuleInfo::compare_keys`]) is the value order. The store indexes these
//! keys, and filter evaluation compares them, so the two always agree.

use std::borrow::Cow;
use std::cmp::Ordering;

use crate::prep::{self, Part, Spaces};
use crate::schema::Schema;

/// What a rule is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleKind {
    /// EQUALITY.
    Equality,
    /// ORDERING.
    Ordering,
    /// SUBSTR.
    Substrings,
}

impl RuleKind {
    pub(crate) fn article_name(self) -> &'static str {
        match self {
            RuleKind::Equality => "n equality",
            RuleKind::Ordering => "n ordering",
            RuleKind::Substrings => " substrings",
        }
    }
}

/// How values are reduced to keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Norm {
    /// RFC 4518 with case folding.
    CaseIgnore,
    /// RFC 4518 without case folding.
    CaseExact,
    /// IA5 values (ASCII), case folded.
    CaseIgnoreIa5,
    /// IA5 values, exact case.
    CaseExactIa5,
    /// Numeric String: spaces removed.
    Numeric,
    /// Telephone Number: spaces and hyphens removed, case folded.
    Telephone,
    /// Postal Address lines, each case-ignore prepared.
    CaseIgnoreList,
    /// INTEGER, compared as numbers.
    Integer,
    /// Boolean.
    Boolean,
    /// OID: descriptors resolved to numeric OIDs through the schema.
    Oid,
    /// DN, normalised through the schema.
    Dn,
    /// Name And Optional UID.
    UniqueMember,
    /// Generalized Time, compared as instants.
    GeneralizedTime,
    /// Octets as given (octetString, bitString, CSN and the rules that
    /// Meridian recognises but does not interpret, such as certificate
    /// matching: exact octets are the conservative answer).
    Octets,
    /// UUID, compared as 16 bytes.
    Uuid,
    /// The first component (`( 2.5.4.3 ...` → `2.5.4.3`) of a description,
    /// compared as an OID.
    OidFirstComponent,
    /// The first component compared as an INTEGER.
    IntegerFirstComponent,
}

/// One matching rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleInfo {
    /// OID.
    pub oid: &'static str,
    /// Name.
    pub name: &'static str,
    /// The assertion syntax OID.
    pub syntax: &'static str,
    /// Equality, ordering or substrings.
    pub kind: RuleKind,
    /// How values become keys.
    pub norm: Norm,
}

const fn rule(
    oid: &'static str,
    name: &'static str,
    syntax: &'static str,
    kind: RuleKind,
    norm: Norm,
) -> RuleInfo {
    RuleInfo {
        oid,
        name,
        syntax,
        kind,
        norm,
    }
}

use Norm as N;
use RuleKind::{Equality as EQ, Ordering as ORD, Substrings as SUB};

const DIR_STRING: &str = "1.3.6.1.4.1.1466.115.121.1.15";
const SUBSTRING_ASSERTION: &str = "1.3.6.1.4.1.1466.115.121.1.58";
const IA5: &str = "1.3.6.1.4.1.1466.115.121.1.26";
const INTEGER: &str = "1.3.6.1.4.1.1466.115.121.1.27";
const OID: &str = "1.3.6.1.4.1.1466.115.121.1.38";
const OCTETS: &str = "1.3.6.1.4.1.1466.115.121.1.40";

/// Every matching rule Meridian implements.
pub const RULES: &[RuleInfo] = &[
    rule("2.5.13.0", "objectIdentifierMatch", OID, EQ, N::Oid),
    rule(
        "2.5.13.1",
        "distinguishedNameMatch",
        "1.3.6.1.4.1.1466.115.121.1.12",
        EQ,
        N::Dn,
    ),
    rule("2.5.13.2", "caseIgnoreMatch", DIR_STRING, EQ, N::CaseIgnore),
    rule(
        "2.5.13.3",
        "caseIgnoreOrderingMatch",
        DIR_STRING,
        ORD,
        N::CaseIgnore,
    ),
    rule(
        "2.5.13.4",
        "caseIgnoreSubstringsMatch",
        SUBSTRING_ASSERTION,
        SUB,
        N::CaseIgnore,
    ),
    rule("2.5.13.5", "caseExactMatch", DIR_STRING, EQ, N::CaseExact),
    rule(
        "2.5.13.6",
        "caseExactOrderingMatch",
        DIR_STRING,
        ORD,
        N::CaseExact,
    ),
    rule(
        "2.5.13.7",
        "caseExactSubstringsMatch",
        SUBSTRING_ASSERTION,
        SUB,
        N::CaseExact,
    ),
    rule(
        "2.5.13.8",
        "numericStringMatch",
        "1.3.6.1.4.1.1466.115.121.1.36",
        EQ,
        N::Numeric,
    ),
    rule(
        "2.5.13.9",
        "numericStringOrderingMatch",
        "1.3.6.1.4.1.1466.115.121.1.36",
        ORD,
        N::Numeric,
    ),
    rule(
        "2.5.13.10",
        "numericStringSubstringsMatch",
        SUBSTRING_ASSERTION,
        SUB,
        N::Numeric,
    ),
    rule(
        "2.5.13.11",
        "caseIgnoreListMatch",
        "1.3.6.1.4.1.1466.115.121.1.41",
        EQ,
        N::CaseIgnoreList,
    ),
    rule(
        "2.5.13.12",
        "caseIgnoreListSubstringsMatch",
        SUBSTRING_ASSERTION,
        SUB,
        N::CaseIgnoreList,
    ),
    rule(
        "2.5.13.13",
        "booleanMatch",
        "1.3.6.1.4.1.1466.115.121.1.7",
        EQ,
        N::Boolean,
    ),
    rule("2.5.13.14", "integerMatch", INTEGER, EQ, N::Integer),
    rule(
        "2.5.13.15",
        "integerOrderingMatch",
        INTEGER,
        ORD,
        N::Integer,
    ),
    rule(
        "2.5.13.16",
        "bitStringMatch",
        "1.3.6.1.4.1.1466.115.121.1.6",
        EQ,
        N::Octets,
    ),
    rule("2.5.13.17", "octetStringMatch", OCTETS, EQ, N::Octets),
    rule(
        "2.5.13.18",
        "octetStringOrderingMatch",
        OCTETS,
        ORD,
        N::Octets,
    ),
    rule(
        "2.5.13.20",
        "telephoneNumberMatch",
        "1.3.6.1.4.1.1466.115.121.1.50",
        EQ,
        N::Telephone,
    ),
    rule(
        "2.5.13.21",
        "telephoneNumberSubstringsMatch",
        SUBSTRING_ASSERTION,
        SUB,
        N::Telephone,
    ),
    rule(
        "2.5.13.22",
        "presentationAddressMatch",
        "1.3.6.1.4.1.1466.115.121.1.43",
        EQ,
        N::Octets,
    ),
    rule(
        "2.5.13.23",
        "uniqueMemberMatch",
        "1.3.6.1.4.1.1466.115.121.1.34",
        EQ,
        N::UniqueMember,
    ),
    rule(
        "2.5.13.24",
        "protocolInformationMatch",
        "1.3.6.1.4.1.1466.115.121.1.42",
        EQ,
        N::Octets,
    ),
    rule(
        "2.5.13.27",
        "generalizedTimeMatch",
        "1.3.6.1.4.1.1466.115.121.1.24",
        EQ,
        N::GeneralizedTime,
    ),
    rule(
        "2.5.13.28",
        "generalizedTimeOrderingMatch",
        "1.3.6.1.4.1.1466.115.121.1.24",
        ORD,
        N::GeneralizedTime,
    ),
    rule(
        "2.5.13.29",
        "integerFirstComponentMatch",
        INTEGER,
        EQ,
        N::IntegerFirstComponent,
    ),
    rule(
        "2.5.13.30",
        "objectIdentifierFirstComponentMatch",
        OID,
        EQ,
        N::OidFirstComponent,
    ),
    rule(
        "2.5.13.34",
        "certificateExactMatch",
        "1.3.6.1.1.15.1",
        EQ,
        N::Octets,
    ),
    rule(
        "2.5.13.45",
        "attributeCertificateExactMatch",
        "1.3.6.1.4.1.4203.666.11.10.2.1",
        EQ,
        N::Octets,
    ),
    rule(
        "1.3.6.1.4.1.1466.109.114.1",
        "caseExactIA5Match",
        IA5,
        EQ,
        N::CaseExactIa5,
    ),
    rule(
        "1.3.6.1.4.1.1466.109.114.2",
        "caseIgnoreIA5Match",
        IA5,
        EQ,
        N::CaseIgnoreIa5,
    ),
    rule(
        "1.3.6.1.4.1.1466.109.114.3",
        "caseIgnoreIA5SubstringsMatch",
        SUBSTRING_ASSERTION,
        SUB,
        N::CaseIgnoreIa5,
    ),
    rule(
        "1.3.6.1.4.1.4203.1.2.1",
        "caseExactIA5SubstringsMatch",
        SUBSTRING_ASSERTION,
        SUB,
        N::CaseExactIa5,
    ),
    rule("1.3.6.1.1.16.2", "UUIDMatch", "1.3.6.1.1.16.1", EQ, N::Uuid),
    rule(
        "1.3.6.1.1.16.3",
        "UUIDOrderingMatch",
        "1.3.6.1.1.16.1",
        ORD,
        N::Uuid,
    ),
    rule(
        "1.3.6.1.4.1.4203.666.11.2.2",
        "CSNMatch",
        "1.3.6.1.4.1.4203.666.11.2.1",
        EQ,
        N::Octets,
    ),
    rule(
        "1.3.6.1.4.1.4203.666.11.2.3",
        "CSNOrderingMatch",
        "1.3.6.1.4.1.4203.666.11.2.1",
        ORD,
        N::Octets,
    ),
    rule(
        "1.3.6.1.4.1.4203.666.4.12",
        "authzMatch",
        "1.3.6.1.4.1.4203.666.2.7",
        EQ,
        N::Octets,
    ),
];

/// A rule by name or OID (names case-insensitive).
pub fn find(name: &str) -> Option<&'static RuleInfo> {
    RULES
        .iter()
        .find(|r| r.oid == name || r.name.eq_ignore_ascii_case(name))
}

fn first_component(v: &[u8]) -> Option<&[u8]> {
    let text = std::str::from_utf8(v).ok()?.trim();
    let inner = text.strip_prefix('(')?.trim_start();
    let end = inner.find(char::is_whitespace).unwrap_or(inner.len());
    inner.get(..end).map(str::as_bytes)
}

/// objectIdentifierMatch's key: the numeric OID of the name (or OID)
/// `value` holds, borrowed from the schema; a numeric OID the schema
/// does not know is its own key. `None` if `value` is not an OID.
fn oid_key<'a>(value: &'a [u8], schema: &'a Schema) -> Option<Cow<'a, [u8]>> {
    let text = std::str::from_utf8(value).ok()?.trim();
    // A name the schema knows is a valid OID already: the syntax is
    // checked only for the others.
    if let Some(oid) = schema.oid_of(text) {
        return Some(Cow::Borrowed(oid.as_bytes()));
    }
    crate::syntax::is_oid(text.as_bytes())
        .then(|| Cow::Owned(text.to_ascii_lowercase().into_bytes()))
}

/// INTEGER values and assertions must be in the syntax's canonical form
/// (RFC 4517 section 3.3.16: no leading zeros, no '+', no "-0"), so the
/// text itself is the key; slapd refuses "0101" the same way.
fn integer_key(v: &[u8]) -> Option<Vec<u8>> {
    crate::syntax::Syntax::Integer
        .is_valid(v)
        .then(|| v.to_vec())
}

impl Norm {
    fn fold_spaces(self) -> Option<(bool, Spaces)> {
        match self {
            N::CaseIgnore | N::CaseIgnoreIa5 => Some((true, Spaces::Collapse)),
            N::CaseExact | N::CaseExactIa5 => Some((false, Spaces::Collapse)),
            N::Numeric => Some((false, Spaces::RemoveAll)),
            N::Telephone => Some((true, Spaces::RemoveAllAndHyphens)),
            _ => None,
        }
    }

    fn ia5(self) -> bool {
        matches!(self, N::CaseIgnoreIa5 | N::CaseExactIa5)
    }

    /// The key of `value`; `None` when the value is not valid for the rule
    /// (matching against it is Undefined).
    pub fn key(self, value: &[u8], schema: &Schema) -> Option<Vec<u8>> {
        self.key_of_part(value, Part::Whole, schema)
    }

    /// [`Norm::key`], borrowing `value` when it is its own key (the
    /// usual case for strings): filters test every candidate's values,
    /// and a copy of each cost more than the comparison. An OID's key is
    /// borrowed from the schema when the value names something in it
    /// (every entry's `objectClass`: a copy of the class's OID per value
    /// was a twentieth of a bulk load's writer).
    pub fn key_cow<'a>(self, value: &'a [u8], schema: &'a Schema) -> Option<Cow<'a, [u8]>> {
        if let Some((fold, Spaces::Collapse)) = self.fold_spaces()
            && prep::is_prepared_ascii(value, fold)
        {
            return Some(Cow::Borrowed(value));
        }
        if self == N::Oid {
            return oid_key(value, schema);
        }
        self.key(value, schema).map(Cow::Owned)
    }

    fn key_of_part(self, value: &[u8], part: Part, schema: &Schema) -> Option<Vec<u8>> {
        if let Some((fold, spaces)) = self.fold_spaces() {
            if self.ia5() && !value.is_ascii() {
                return None;
            }
            // Room for the usual case (preparing adds at most a space at
            // each end): one allocation, not a growth per doubling.
            let mut out = String::with_capacity(value.len() + 2);
            prep::prepare(value, fold, spaces, part, &mut out).ok()?;
            return Some(out.into_bytes());
        }
        match self {
            N::CaseIgnoreList => {
                let text = std::str::from_utf8(value).ok()?;
                let mut out = Vec::new();
                let mut line = String::new();
                for (i, raw) in text.split('$').enumerate() {
                    let unescaped = raw
                        .replace("\\24", "$")
                        .replace("\\5C", "\\")
                        .replace("\\5c", "\\");
                    prep::prepare(
                        unescaped.as_bytes(),
                        true,
                        Spaces::Collapse,
                        part,
                        &mut line,
                    )
                    .ok()?;
                    if i > 0 {
                        out.push(b'$');
                    }
                    out.extend_from_slice(line.as_bytes());
                }
                Some(out)
            }
            N::Integer => integer_key(value),
            N::Boolean => matches!(value, b"TRUE" | b"FALSE").then(|| value.to_vec()),
            N::Oid => oid_key(value, schema).map(Cow::into_owned),
            N::Dn => crate::dn::normalize(value, schema)
                .ok()
                .map(String::into_bytes),
            N::UniqueMember => {
                let (dn, uid) = match value.iter().rposition(|c| *c == b'#') {
                    Some(at)
                        if value
                            .get(at + 1..)
                            .is_some_and(|u| u.starts_with(b"'") && u.ends_with(b"'B")) =>
                    {
                        (value.get(..at)?, value.get(at..))
                    }
                    _ => (value, None),
                };
                let mut key = crate::dn::normalize(dn, schema).ok()?.into_bytes();
                if let Some(uid) = uid {
                    key.extend_from_slice(uid);
                }
                Some(key)
            }
            N::GeneralizedTime => {
                crate::time::parse_generalized_time(value).map(|t| t.key().into_bytes())
            }
            N::Octets => Some(value.to_vec()),
            N::Uuid => {
                let hex: Vec<u8> = value
                    .iter()
                    .filter(|c| **c != b'-')
                    .map(u8::to_ascii_lowercase)
                    .collect();
                (hex.len() == 32 && hex.iter().all(u8::is_ascii_hexdigit)).then_some(hex)
            }
            N::OidFirstComponent => {
                let first = first_component(value).unwrap_or(value);
                N::Oid.key(first, schema)
            }
            N::IntegerFirstComponent => integer_key(first_component(value).unwrap_or(value)),
            N::CaseIgnore
            | N::CaseExact
            | N::CaseIgnoreIa5
            | N::CaseExactIa5
            | N::Numeric
            | N::Telephone => None,
        }
    }

    /// Orders two keys made by [`Norm::key`].
    pub fn compare_keys(self, a: &[u8], b: &[u8]) -> Ordering {
        match self {
            N::Integer | N::IntegerFirstComponent => {
                let (an, bn) = (a.first() == Some(&b'-'), b.first() == Some(&b'-'));
                match (an, bn) {
                    (true, false) => Ordering::Less,
                    (false, true) => Ordering::Greater,
                    // Canonical digits: longer is larger in magnitude.
                    (false, false) => a.len().cmp(&b.len()).then_with(|| a.cmp(b)),
                    (true, true) => b.len().cmp(&a.len()).then_with(|| b.cmp(a)),
                }
            }
            _ => a.cmp(b),
        }
    }

    /// `key` (made by [`Norm::key`]) in a form whose plain byte order is
    /// the order of [`Norm::compare_keys`]: what an ordering index
    /// stores, so that a range of values is a range of index keys.
    /// Borrowed where the key's bytes already sort so (every rule but
    /// INTEGER's).
    pub fn sortable_key(self, key: &[u8]) -> Cow<'_, [u8]> {
        match self {
            N::Integer | N::IntegerFirstComponent => Cow::Owned(sortable_integer(key)),
            _ => Cow::Borrowed(key),
        }
    }
}

/// A canonical INTEGER (`0`, `42`, `-7`) as bytes that sort as numbers:
/// a sign byte (negatives first), the number of digits (more digits sort
/// later for a positive number, earlier for a negative one), then the
/// digits (inverted for a negative number, whose larger magnitude is the
/// smaller number).
fn sortable_integer(key: &[u8]) -> Vec<u8> {
    const NEGATIVE: u8 = 1;
    const POSITIVE: u8 = 2;
    let (negative, digits) = match key.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, key),
    };
    // A value never has 2^32 digits: the PDU limit is far below that.
    let len = u32::try_from(digits.len()).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(1 + 4 + digits.len());
    if negative {
        out.push(NEGATIVE);
        out.extend_from_slice(&(!len).to_be_bytes());
        out.extend(digits.iter().map(|d| !d));
    } else {
        out.push(POSITIVE);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(digits);
    }
    out
}

impl RuleInfo {
    /// The key of a value (or assertion value) under this rule.
    pub fn key(&self, value: &[u8], schema: &Schema) -> Option<Vec<u8>> {
        self.norm.key(value, schema)
    }

    /// [`RuleInfo::key`] without a copy when the value is its own key.
    pub fn key_cow<'a>(&self, value: &'a [u8], schema: &'a Schema) -> Option<Cow<'a, [u8]>> {
        self.norm.key_cow(value, schema)
    }

    /// Orders two keys.
    pub fn compare_keys(&self, a: &[u8], b: &[u8]) -> Ordering {
        self.norm.compare_keys(a, b)
    }

    /// [`Norm::sortable_key`] of this rule.
    pub fn sortable_key<'k>(&self, key: &'k [u8]) -> Cow<'k, [u8]> {
        self.norm.sortable_key(key)
    }

    /// Prepares the parts of a substring assertion; `None` if one is
    /// invalid for the rule.
    pub fn substring_parts(
        &self,
        parts: &[(Part, &[u8])],
        schema: &Schema,
    ) -> Option<Vec<(Part, Vec<u8>)>> {
        parts
            .iter()
            .map(|(part, v)| self.norm.key_of_part(v, *part, schema).map(|k| (*part, k)))
            .collect()
    }
}

/// Substring match of a prepared value against prepared parts.
pub fn substrings_match(value: &[u8], parts: &[(Part, Vec<u8>)]) -> bool {
    let mut rest = value;
    for (part, p) in parts {
        match part {
            Part::Initial => match rest.strip_prefix(p.as_slice()) {
                Some(r) => rest = r,
                None => return false,
            },
            Part::Any | Part::Whole => {
                if p.is_empty() {
                    continue;
                }
                match rest.windows(p.len()).position(|w| w == p.as_slice()) {
                    Some(at) => rest = rest.get(at + p.len()..).unwrap_or_default(),
                    None => return false,
                }
            }
            Part::Final => return rest.ends_with(p),
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Schema {
        Schema::builtin().unwrap()
    }

    fn eq(rule: &str, a: &str, b: &str) -> bool {
        let s = schema();
        let r = find(rule).unwrap();
        r.key(a.as_bytes(), &s).unwrap() == r.key(b.as_bytes(), &s).unwrap()
    }

    /// The borrowed key is the key: every short string over an alphabet
    /// of the cases that matter (capitals, spaces, a control character, a
    /// tab, a multi-byte character, a hyphen) under every string rule.
    #[test]
    fn borrowed_keys_equal_prepared_keys() {
        let s = schema();
        let alphabet: [&[u8]; 7] = [b"a", b"B", b" ", b"\t", b"\x7f", "\u{e9}".as_bytes(), b"-"];
        let mut level: Vec<Vec<u8>> = vec![Vec::new()];
        let mut strings = level.clone();
        for _ in 0..4 {
            level = level
                .iter()
                .flat_map(|v| alphabet.iter().map(move |c| [v.as_slice(), c].concat()))
                .collect();
            strings.extend(level.iter().cloned());
        }
        for rule in [
            "caseIgnoreMatch",
            "caseExactMatch",
            "caseIgnoreIA5Match",
            "caseExactIA5Match",
            "numericStringMatch",
            "telephoneNumberMatch",
        ] {
            let r = find(rule).unwrap();
            for v in &strings {
                assert_eq!(
                    r.key_cow(v, &s).map(Cow::into_owned),
                    r.key(v, &s),
                    "{rule} {:?}",
                    String::from_utf8_lossy(v)
                );
            }
        }
    }

    /// objectIdentifierMatch keys are numeric OIDs, borrowed from the
    /// schema for the names (and OIDs) it defines.
    #[test]
    fn oid_keys_are_the_schemas_oids() {
        let s = schema();
        let r = find("objectIdentifierMatch").unwrap();
        let person = "2.16.840.1.113730.3.2.2";
        for (value, key) in [
            ("inetOrgPerson", Some(person)),
            (" INETORGPERSON ", Some(person)),
            (person, Some(person)),
            ("cn", Some("2.5.4.3")),
            ("caseIgnoreMatch", Some("2.5.13.2")),
            ("1.2.3.4", Some("1.2.3.4")),
            ("NotInTheSchema", Some("notintheschema")),
            ("not an oid", None),
        ] {
            let borrowed = r.key_cow(value.as_bytes(), &s);
            assert_eq!(borrowed.as_deref(), key.map(str::as_bytes), "{value:?}");
            assert_eq!(
                r.key(value.as_bytes(), &s).as_deref(),
                key.map(str::as_bytes)
            );
            let defined = !matches!(value, "1.2.3.4" | "NotInTheSchema" | "not an oid");
            assert_eq!(
                matches!(borrowed, Some(Cow::Borrowed(_))),
                defined,
                "{value:?} borrowed"
            );
        }
    }

    #[test]
    fn equality_rules() {
        assert!(eq("caseIgnoreMatch", "  Babs  Jensen", "babs jensen"));
        assert!(!eq("caseExactMatch", "Babs", "babs"));
        assert!(eq("caseExactMatch", " Babs  J ", "Babs J"));
        assert!(eq("numericStringMatch", "12 34", "1234"));
        assert!(eq(
            "telephoneNumberMatch",
            "+1 512-315-0280",
            "+15123150280"
        ));
        assert!(eq(
            "caseIgnoreIA5Match",
            "User@Example.COM",
            "user@example.com"
        ));
        assert!(eq("integerMatch", "7", "7"));
        assert!(eq("objectIdentifierMatch", "cn", "2.5.4.3"));
        assert!(eq(
            "objectIdentifierMatch",
            "inetOrgPerson",
            "2.16.840.1.113730.3.2.2"
        ));
        assert!(eq(
            "distinguishedNameMatch",
            "CN=Babs  Jensen, O=Acme",
            "cn=babs jensen,o=acme"
        ));
        assert!(eq(
            "distinguishedNameMatch",
            "2.5.4.3=x,dc=Example",
            "cn=X,DC=example"
        ));
        assert!(eq(
            "uniqueMemberMatch",
            "CN=A,O=B#'0101'B",
            "cn=a,o=b#'0101'B"
        ));
        assert!(eq(
            "generalizedTimeMatch",
            "199412161032.5-0500",
            "19941216153230Z"
        ));
        assert!(eq(
            "UUIDMatch",
            "597AE2F6-16A6-1027-98F4-D28B5365DC14",
            "597ae2f6-16a6-1027-98f4-d28b5365dc14"
        ));
        assert!(eq(
            "caseIgnoreListMatch",
            "1 Main  St$Anytown",
            "1 main st$ANYTOWN"
        ));
        assert!(eq(
            "objectIdentifierFirstComponentMatch",
            "( 2.5.4.3 NAME 'cn' )",
            "cn"
        ));
    }

    #[test]
    fn invalid_values_have_no_key() {
        let s = schema();
        for (rule, value) in [
            ("integerMatch", "1.5"),
            ("integerMatch", "007"),
            ("integerMatch", "-0"),
            ("booleanMatch", "yes"),
            ("generalizedTimeMatch", "yesterday"),
            ("caseIgnoreIA5Match", "é"),
            ("distinguishedNameMatch", "cn"),
            ("UUIDMatch", "1234"),
            ("caseIgnoreMatch", "\u{FFFD}"),
        ] {
            assert!(
                find(rule).unwrap().key(value.as_bytes(), &s).is_none(),
                "{rule} {value}"
            );
        }
    }

    #[test]
    fn ordering_rules() {
        let s = schema();
        let ord = |rule: &str, a: &str, b: &str| {
            let r = find(rule).unwrap();
            r.compare_keys(
                &r.key(a.as_bytes(), &s).unwrap(),
                &r.key(b.as_bytes(), &s).unwrap(),
            )
        };
        assert_eq!(ord("integerOrderingMatch", "9", "10"), Ordering::Less);
        assert_eq!(ord("integerOrderingMatch", "-10", "-9"), Ordering::Less);
        assert_eq!(ord("integerOrderingMatch", "-1", "0"), Ordering::Less);
        assert_eq!(ord("integerOrderingMatch", "100", "100"), Ordering::Equal);
        assert_eq!(ord("integerOrderingMatch", "99", "100"), Ordering::Less);
        assert_eq!(
            ord("caseIgnoreOrderingMatch", "apple", "Banana"),
            Ordering::Less
        );
        assert_eq!(
            ord(
                "generalizedTimeOrderingMatch",
                "20261122010203Z",
                "20261122020202+0100"
            ),
            Ordering::Greater
        );
    }

    #[test]
    fn sortable_keys_sort_as_the_rule_orders() {
        let s = schema();
        let cases: &[(&str, &[&str])] = &[
            (
                "integerOrderingMatch",
                &[
                    "-1000",
                    "-999",
                    "-12",
                    "-10",
                    "-9",
                    "-1",
                    "0",
                    "1",
                    "9",
                    "10",
                    "12",
                    "99",
                    "100",
                    "1000",
                    "123456789012345678901234567890",
                ],
            ),
            (
                "generalizedTimeOrderingMatch",
                &[
                    "19991231235959Z",
                    "20261122010203Z",
                    "20261122020202+0100",
                    "20261122010203.5Z",
                    "202611220103Z",
                ],
            ),
            ("caseIgnoreOrderingMatch", &["", "a", "A b", "ab", "B", "é"]),
            (
                "UUIDOrderingMatch",
                &[
                    "00000000-0000-0000-0000-000000000001",
                    "ffffffff-0000-0000-0000-000000000000",
                ],
            ),
        ];
        for (rule, values) in cases {
            let r = find(rule).unwrap();
            let keys: Vec<Vec<u8>> = values
                .iter()
                .map(|v| r.key(v.as_bytes(), &s).unwrap())
                .collect();
            for a in &keys {
                for b in &keys {
                    assert_eq!(
                        r.sortable_key(a).cmp(&r.sortable_key(b)),
                        r.compare_keys(a, b),
                        "{rule}: {:?} against {:?}",
                        String::from_utf8_lossy(a),
                        String::from_utf8_lossy(b)
                    );
                }
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn sortable_integers_sort_as_numbers(a in proptest::num::i128::ANY, b in proptest::num::i128::ANY) {
            let r = find("integerOrderingMatch").unwrap();
            let s = schema();
            let (ka, kb) = (
                r.key(a.to_string().as_bytes(), &s).unwrap(),
                r.key(b.to_string().as_bytes(), &s).unwrap(),
            );
            proptest::prop_assert_eq!(r.sortable_key(&ka).cmp(&r.sortable_key(&kb)), a.cmp(&b));
        }
    }

    #[test]
    fn substrings() {
        let s = schema();
        let r = find("caseIgnoreSubstringsMatch").unwrap();
        let m = |value: &str, parts: &[(Part, &str)]| {
            let parts: Vec<(Part, &[u8])> = parts.iter().map(|(p, v)| (*p, v.as_bytes())).collect();
            let prepared = r.substring_parts(&parts, &s).unwrap();
            substrings_match(&r.key(value.as_bytes(), &s).unwrap(), &prepared)
        };
        assert!(m(
            "Babs Jensen",
            &[(Part::Initial, "babs"), (Part::Final, "SEN")]
        ));
        assert!(m("Babs Jensen", &[(Part::Initial, "babs ")]));
        assert!(m("Babs   Jensen", &[(Part::Any, "s j")]));
        assert!(!m("Babs Jensen", &[(Part::Initial, "jensen")]));
        assert!(!m("abc", &[(Part::Initial, "ab"), (Part::Final, "bc")]));
        assert!(m(
            "univ of mich",
            &[
                (Part::Initial, "univ"),
                (Part::Any, "of"),
                (Part::Any, "mich")
            ]
        ));
        let t = find("telephoneNumberSubstringsMatch").unwrap();
        let key = t.key(b"+1 512-315-0280", &s).unwrap();
        let parts = t.substring_parts(&[(Part::Any, b"315 0280")], &s).unwrap();
        assert!(substrings_match(&key, &parts));
    }
}
