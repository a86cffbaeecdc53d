//! Search filters (RFC 4511 section 4.5.1.7) in their BER form.
//!
//! A decoded [`Filter`] borrows from the message; the children of `and`,
//! `or` and `not` stay encoded until iterated. The string form of RFC 4515
//! lives in [`crate::filter_str`].

use meridian_ber::{Error, Reader, Result, Tag, Writer, decode_boolean};

use crate::limits::Depth;
use crate::seq::{Element, Seq};

/// Filter CHOICE tags.
mod tags {
    use meridian_ber::Tag;
    pub(super) const AND: Tag = Tag::context(0, true);
    pub(super) const OR: Tag = Tag::context(1, true);
    pub(super) const NOT: Tag = Tag::context(2, true);
    pub(super) const EQUALITY: Tag = Tag::context(3, true);
    pub(super) const SUBSTRINGS: Tag = Tag::context(4, true);
    pub(super) const GREATER_OR_EQUAL: Tag = Tag::context(5, true);
    pub(super) const LESS_OR_EQUAL: Tag = Tag::context(6, true);
    pub(super) const PRESENT: Tag = Tag::context(7, false);
    pub(super) const APPROX: Tag = Tag::context(8, true);
    pub(super) const EXTENSIBLE: Tag = Tag::context(9, true);
}

/// An LDAP search filter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Filter<'a> {
    /// `(&...)`: every child TRUE; the empty `(&)` is absolute TRUE.
    And(Seq<'a, Filter<'a>>),
    /// `(|...)`: some child TRUE; the empty `(|)` is absolute FALSE.
    Or(Seq<'a, Filter<'a>>),
    /// `(!...)`: exactly one child (checked when decoding).
    Not(Seq<'a, Filter<'a>>),
    /// `(attr=value)`.
    Equality(Ava<'a>),
    /// `(attr=ini*any*fin)`.
    Substrings(SubstringFilter<'a>),
    /// `(attr>=value)`.
    GreaterOrEqual(Ava<'a>),
    /// `(attr<=value)`.
    LessOrEqual(Ava<'a>),
    /// `(attr=*)`.
    Present(&'a [u8]),
    /// `(attr~=value)`.
    Approx(Ava<'a>),
    /// `(attr:dn:rule:=value)`.
    Extensible(MatchingRuleAssertion<'a>),
}

/// AttributeValueAssertion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ava<'a> {
    /// AttributeDescription.
    pub attr: &'a [u8],
    /// AssertionValue.
    pub value: &'a [u8],
}

/// SubstringFilter: an attribute and at least one part, with at most one
/// `Initial` (first) and at most one `Final` (last).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SubstringFilter<'a> {
    /// AttributeDescription.
    pub attr: &'a [u8],
    /// The parts, in order.
    pub parts: Seq<'a, Substring<'a>>,
}

/// One part of a substring filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Substring<'a> {
    /// `[0] initial`.
    Initial(&'a [u8]),
    /// `[1] any`.
    Any(&'a [u8]),
    /// `[2] final`.
    Final(&'a [u8]),
}

/// MatchingRuleAssertion (extensible match).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatchingRuleAssertion<'a> {
    /// `[1] matchingRule`.
    pub rule: Option<&'a [u8]>,
    /// `[2] type`.
    pub attr: Option<&'a [u8]>,
    /// `[3] matchValue`.
    pub value: &'a [u8],
    /// `[4] dnAttributes`, DEFAULT FALSE.
    pub dn_attributes: bool,
}

impl<'a> Filter<'a> {
    /// Decodes and fully validates one filter TLV, within `depth`.
    pub fn decode_checked(reader: &mut Reader<'a>, depth: Depth) -> Result<Self> {
        let filter = Self::decode(reader)?;
        filter.validate(depth)?;
        Ok(filter)
    }

    /// Decodes and validates a complete encoded filter (for example the
    /// value of an assertion control or a filter made by [`crate::filter_str`]).
    pub fn from_ber(bytes: &'a [u8], depth: Depth) -> Result<Self> {
        let mut r = Reader::new(bytes);
        let filter = Self::decode_checked(&mut r, depth)?;
        r.finish("trailing bytes after filter")?;
        Ok(filter)
    }

    /// Writes the BER encoding to `buf`.
    pub fn to_ber(&self, buf: &mut Vec<u8>) {
        self.encode(&mut Writer::new(buf));
    }

    /// How many filters this one is made of, itself included (`(&(a=1)(b=2))`
    /// is three): the measure of `directory.max_filter_items`. The
    /// recursion is bounded by the depth checked at decoding.
    pub fn items(&self) -> usize {
        match self {
            Filter::And(children) | Filter::Or(children) | Filter::Not(children) => {
                1 + children.iter().map(|c| c.items()).sum::<usize>()
            }
            _ => 1,
        }
    }
}

impl<'a> Element<'a> for Filter<'a> {
    fn decode(reader: &mut Reader<'a>) -> Result<Self> {
        let tlv = reader.read()?;
        let c = tlv.contents;
        Ok(match tlv.tag {
            tags::AND => Filter::And(Seq::from_encoded_unchecked(c)),
            tags::OR => Filter::Or(Seq::from_encoded_unchecked(c)),
            tags::NOT => Filter::Not(Seq::from_encoded_unchecked(c)),
            tags::EQUALITY => Filter::Equality(Ava::decode_contents(c)?),
            tags::SUBSTRINGS => Filter::Substrings(SubstringFilter::decode_contents(c)?),
            tags::GREATER_OR_EQUAL => Filter::GreaterOrEqual(Ava::decode_contents(c)?),
            tags::LESS_OR_EQUAL => Filter::LessOrEqual(Ava::decode_contents(c)?),
            tags::PRESENT => Filter::Present(c),
            tags::APPROX => Filter::Approx(Ava::decode_contents(c)?),
            tags::EXTENSIBLE => Filter::Extensible(MatchingRuleAssertion::decode_contents(c)?),
            _ => return Err(Error::Malformed("unknown filter choice")),
        })
    }

    fn validate(&self, depth: Depth) -> Result<()> {
        let depth = depth.descend()?;
        match self {
            Filter::And(children) | Filter::Or(children) => children.validate_all(depth)?,
            Filter::Not(child) => {
                child.validate_all(depth)?;
                if child.len() != 1 {
                    return Err(Error::Malformed(
                        "'not' filter must hold exactly one filter",
                    ));
                }
            }
            Filter::Substrings(s) => s.validate_parts(depth)?,
            _ => {}
        }
        Ok(())
    }

    fn encode(&self, w: &mut Writer<'_>) {
        match self {
            Filter::And(children) => encode_set(w, tags::AND, children),
            Filter::Or(children) => encode_set(w, tags::OR, children),
            Filter::Not(child) => encode_set(w, tags::NOT, child),
            Filter::Equality(ava) => ava.encode(w, tags::EQUALITY),
            Filter::GreaterOrEqual(ava) => ava.encode(w, tags::GREATER_OR_EQUAL),
            Filter::LessOrEqual(ava) => ava.encode(w, tags::LESS_OR_EQUAL),
            Filter::Approx(ava) => ava.encode(w, tags::APPROX),
            Filter::Present(attr) => w.octets(tags::PRESENT, attr),
            Filter::Substrings(s) => {
                let m = w.start(tags::SUBSTRINGS);
                w.octets(Tag::OCTET_STRING, s.attr);
                let parts = w.start(Tag::SEQUENCE);
                s.parts.encode_elements(w);
                w.end(parts);
                w.end(m);
            }
            Filter::Extensible(mra) => {
                let m = w.start(tags::EXTENSIBLE);
                if let Some(rule) = mra.rule {
                    w.octets(Tag::context(1, false), rule);
                }
                if let Some(attr) = mra.attr {
                    w.octets(Tag::context(2, false), attr);
                }
                w.octets(Tag::context(3, false), mra.value);
                if mra.dn_attributes {
                    w.boolean(Tag::context(4, false), true);
                }
                w.end(m);
            }
        }
    }
}

fn encode_set<'a>(w: &mut Writer<'_>, tag: Tag, children: &Seq<'a, Filter<'a>>) {
    let m = w.start(tag);
    children.encode_elements(w);
    w.end(m);
}

impl<'a> Ava<'a> {
    pub(crate) fn decode_contents(contents: &'a [u8]) -> Result<Self> {
        let mut r = Reader::new(contents);
        let attr = r.expect(Tag::OCTET_STRING, "expected attributeDesc")?;
        let value = r.expect(Tag::OCTET_STRING, "expected assertionValue")?;
        r.finish("trailing bytes in AttributeValueAssertion")?;
        Ok(Ava { attr, value })
    }

    /// Writes the AVA with the given (implicit) tag.
    pub(crate) fn encode(&self, w: &mut Writer<'_>, tag: Tag) {
        let m = w.start(tag);
        w.octets(Tag::OCTET_STRING, self.attr);
        w.octets(Tag::OCTET_STRING, self.value);
        w.end(m);
    }
}

impl<'a> SubstringFilter<'a> {
    fn decode_contents(contents: &'a [u8]) -> Result<Self> {
        let mut r = Reader::new(contents);
        let attr = r.expect(Tag::OCTET_STRING, "expected substring filter type")?;
        let parts = r.expect(Tag::SEQUENCE, "expected substrings SEQUENCE")?;
        r.finish("trailing bytes in SubstringFilter")?;
        Ok(SubstringFilter {
            attr,
            parts: Seq::from_encoded_unchecked(parts),
        })
    }

    fn validate_parts(&self, depth: Depth) -> Result<()> {
        self.parts.validate_all(depth)?;
        let mut count = 0usize;
        let mut seen_final = false;
        for part in self.parts.iter() {
            if seen_final {
                return Err(Error::Malformed("'final' must be the last substring"));
            }
            match part {
                Substring::Initial(_) if count > 0 => {
                    return Err(Error::Malformed("'initial' must be the first substring"));
                }
                Substring::Final(_) => seen_final = true,
                _ => {}
            }
            count += 1;
        }
        if count == 0 {
            return Err(Error::Malformed("substring filter without substrings"));
        }
        Ok(())
    }
}

impl<'a> Element<'a> for Substring<'a> {
    fn decode(reader: &mut Reader<'a>) -> Result<Self> {
        let tlv = reader.read()?;
        match tlv.tag.0 {
            0x80 => Ok(Substring::Initial(tlv.contents)),
            0x81 => Ok(Substring::Any(tlv.contents)),
            0x82 => Ok(Substring::Final(tlv.contents)),
            _ => Err(Error::Malformed("unknown substring choice")),
        }
    }

    fn encode(&self, w: &mut Writer<'_>) {
        match self {
            Substring::Initial(v) => w.octets(Tag::context(0, false), v),
            Substring::Any(v) => w.octets(Tag::context(1, false), v),
            Substring::Final(v) => w.octets(Tag::context(2, false), v),
        }
    }
}

impl<'a> MatchingRuleAssertion<'a> {
    fn decode_contents(contents: &'a [u8]) -> Result<Self> {
        let mut r = Reader::new(contents);
        let rule = r.optional(Tag::context(1, false))?;
        let attr = r.optional(Tag::context(2, false))?;
        let value = r.expect(Tag::context(3, false), "expected matchValue")?;
        let dn_attributes = match r.optional(Tag::context(4, false))? {
            Some(b) => decode_boolean(b)?,
            None => false,
        };
        r.finish("trailing bytes in MatchingRuleAssertion")?;
        if rule.is_none() && attr.is_none() {
            // RFC 4511 4.5.1.7.7: without a type, the rule must be present.
            return Err(Error::Malformed(
                "extensible match needs a matchingRule or a type",
            ));
        }
        Ok(MatchingRuleAssertion {
            rule,
            attr,
            value,
            dn_attributes,
        })
    }
}
