//! Distinguished names with schema-aware normalisation.
//!
//! `CN=Babs  Jensen, O=Acme` and `2.5.4.3=babs jensen,o=acme` are the same
//! DN: attribute types are resolved through the schema to their primary
//! name, values reduced with each attribute's equality rule, and the
//! values of a multi-valued RDN sorted. The normalised form is itself a
//! valid RFC 4514 string, so it can be stored, indexed and compared.

use meridian_proto::ResultCode;
use meridian_proto::dn::{DnValue, SyntacticDn, write_text_value};

use std::sync::Arc;

use smallvec::SmallVec;

use crate::ModelError;
use crate::schema::{AttrId, Schema};

/// A DN: the form the client gave and its normalised RDNs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dn {
    original: String,
    /// The normalised DN: its RDNs, leftmost (most specific) first,
    /// joined by `,`. One buffer, not one string per RDN: a bulk load
    /// builds and frees millions of DNs, and RDN strings shared between
    /// entries had their reference counts written on every thread that
    /// copied or dropped one, while the writer read them.
    normalized: String,
    /// Where each RDN of `normalized` ends, leftmost first (the next
    /// begins one byte later, after its `,`). Four inline, the depth of
    /// most DNs.
    rdn_ends: SmallVec<[u32; 4]>,
    /// The attribute values of each RDN as given (for `dnAttributes`
    /// matching and for checking that RDN values are in the entry).
    /// Shared: a child reuses its parent's (`parse_child`, `parent`).
    avas: Vec<RdnValues>,
}

/// Parses DNs that mostly share their parent, as a bulk load's records
/// and a client's requests on sibling entries do: each DN that is one RDN
/// below the parent of the last one parsed is made with
/// [`Dn::parse_child`], so only its own RDN is parsed and the parent's
/// normalised RDNs are reused. Most of a DN parse's cost was its
/// allocations (a string per RDN type and value, a list per RDN), each a
/// cache miss in the allocator under load (perf).
#[derive(Debug, Default)]
pub struct RecentParent {
    /// The parent of the last DN, spelled as it was written.
    parent: Option<Dn>,
}

impl RecentParent {
    /// [`Dn::parse`] of `text`: the same DN, made more cheaply when its
    /// parent is the last one's.
    pub fn parse(&mut self, text: &[u8], schema: &Schema) -> Result<Dn, ModelError> {
        let (dn, reused) = match &self.parent {
            Some(parent) => Dn::parse_child(text, parent, schema)?,
            None => (Dn::parse(text, schema)?, false),
        };
        if !reused {
            self.parent = dn.parent_as_written();
        }
        Ok(dn)
    }
}

/// The attribute values of one RDN, as given.
pub type RdnValues = Arc<[(AttrId, Vec<u8>)]>;

impl Dn {
    /// Parses and normalises `text`. Errors are invalidDNSyntax with the
    /// reason.
    pub fn parse(text: &[u8], schema: &Schema) -> Result<Dn, ModelError> {
        let original = std::str::from_utf8(text)
            .map_err(|_| ModelError::new(ResultCode::INVALID_DN_SYNTAX, "DN is not valid UTF-8"))?
            .to_owned();
        let parsed = SyntacticDn::parse_bytes(text).map_err(|e| {
            ModelError::new(
                ResultCode::INVALID_DN_SYNTAX,
                format!("invalid DN {original:?}: {e}"),
            )
        })?;
        let mut normalized = String::with_capacity(text.len());
        let mut rdn_ends = SmallVec::with_capacity(parsed.rdns.len());
        let mut avas = Vec::with_capacity(parsed.rdns.len());
        // Taken apart by value: each value moves into `avas` uncopied.
        for rdn in parsed.rdns {
            if !normalized.is_empty() {
                normalized.push(',');
            }
            avas.push(normalize_rdn(rdn, schema, &original, &mut normalized)?);
            rdn_ends.push(offset(normalized.len())?);
        }
        Ok(Dn {
            original,
            normalized,
            rdn_ends,
            avas,
        })
    }

    /// [`Dn::parse`] for a DN that is likely a child of `parent`, whose
    /// text a bulk load repeats for every child: when `text` is one RDN,
    /// a separator and exactly `parent`'s text, only that RDN is parsed
    /// and `parent`'s normalised RDNs are reused (`true` in the answer).
    /// Otherwise `text` is parsed whole. The result is the same either
    /// way: the syntactic parser carries no state across a separator.
    pub fn parse_child(
        text: &[u8],
        parent: &Dn,
        schema: &Schema,
    ) -> Result<(Dn, bool), ModelError> {
        let Some((rdn, original)) = first_rdn_above(text, parent) else {
            return Dn::parse(text, schema).map(|dn| (dn, false));
        };
        let original = original.to_owned();
        let mut normalized = String::with_capacity(text.len());
        let values = normalize_rdn(rdn, schema, &original, &mut normalized)?;
        let own = offset(normalized.len())?;
        normalized.push(',');
        normalized.push_str(&parent.normalized);
        let mut rdn_ends = SmallVec::with_capacity(parent.rdn_ends.len() + 1);
        rdn_ends.push(own);
        rdn_ends.extend(parent.rdn_ends.iter().map(|end| end + own + 1));
        let mut avas = Vec::with_capacity(parent.avas.len() + 1);
        avas.push(values);
        avas.extend(parent.avas.iter().cloned());
        let dn = Dn {
            original,
            normalized,
            rdn_ends,
            avas,
        };
        Ok((dn, true))
    }

    /// The parent, its text exactly as it is written in this DN (where
    /// [`Dn::parent`] re-escapes it): what [`Dn::parse_child`] matches.
    pub fn parent_as_written(&self) -> Option<Dn> {
        let (_, rest) = SyntacticDn::split_first_rdn(self.original.as_bytes())?;
        let original = self.original.get(rest..)?.to_owned();
        self.above_first_rdn(original)
    }

    /// This DN without its first RDN, spelled `original`.
    fn above_first_rdn(&self, original: String) -> Option<Dn> {
        let rest = self.rdn_ends.get(1..)?;
        let cut = self.rdn_start(1)?;
        Some(Dn {
            original,
            normalized: self.normalized.get(cut..).unwrap_or_default().to_owned(),
            // `cut` is an RDN's start, so it fits the ends' u32.
            rdn_ends: rest.iter().map(|end| end - cut as u32).collect(),
            avas: self.avas.get(1..).unwrap_or_default().to_vec(),
        })
    }

    /// The empty DN (the root DSE).
    pub fn root() -> Dn {
        Dn {
            original: String::new(),
            normalized: String::new(),
            rdn_ends: SmallVec::new(),
            avas: Vec::new(),
        }
    }

    /// The DN as the client wrote it.
    pub fn original(&self) -> &str {
        &self.original
    }

    /// The normalised string: the RDNs, leftmost first, joined by `,`.
    pub fn normalized(&self) -> &str {
        &self.normalized
    }

    /// Normalised RDNs, leftmost first.
    pub fn rdns(&self) -> Rdns<'_> {
        Rdns {
            dn: self,
            front: 0,
            back: self.rdn_ends.len(),
        }
    }

    /// How many RDNs: the depth below the root.
    pub fn rdn_count(&self) -> usize {
        self.rdn_ends.len()
    }

    /// The attribute values of every RDN, leftmost first, as given.
    pub fn rdn_values(&self) -> &[RdnValues] {
        &self.avas
    }

    /// True for the empty DN.
    pub fn is_root(&self) -> bool {
        self.rdn_ends.is_empty()
    }

    /// The normalised leftmost RDN.
    pub fn rdn(&self) -> Option<&str> {
        self.rdns().next()
    }

    /// The normalised RDN at `index` (0 is the leftmost).
    fn rdn_at(&self, index: usize) -> Option<&str> {
        let end = *self.rdn_ends.get(index)? as usize;
        self.normalized.get(self.rdn_start(index)?..end)
    }

    /// Where the RDN at `index` begins in `normalized` (one past the `,`
    /// that ends the RDN before it); `index` may be the RDN count (then
    /// it is where a root would begin, past the end).
    fn rdn_start(&self, index: usize) -> Option<usize> {
        match index.checked_sub(1) {
            Some(before) => Some(*self.rdn_ends.get(before)? as usize + 1),
            None => Some(0),
        }
    }

    /// The parent, or `None` for the root. Its original form keeps the
    /// client's spelling of the remaining RDNs (re-escaped per RFC 4514).
    pub fn parent(&self) -> Option<Dn> {
        let rest = self
            .normalized
            .get(self.rdn_start(1)?..)
            .unwrap_or_default();
        let original = SyntacticDn::parse(&self.original)
            .ok()
            .filter(|d| d.rdns.len() == self.rdn_count())
            .map(|d| {
                SyntacticDn {
                    rdns: d.rdns.into_iter().skip(1).collect(),
                }
                .to_string()
            })
            .unwrap_or_else(|| rest.to_owned());
        self.above_first_rdn(original)
    }

    /// The RDNs of `self` above `ancestor` in the client's spelling
    /// (re-escaped per RFC 4514): `uid=zed` for `uid=zed,ou=Remote,o=x`
    /// relative to `ou=Remote,o=x`. `None` unless `self` is strictly
    /// below `ancestor`. Referrals and aliases graft it onto another DN.
    pub fn relative_to(&self, ancestor: &Dn) -> Option<String> {
        if !self.is_descendant_of(ancestor) {
            return None;
        }
        let keep = self.rdn_count() - ancestor.rdn_count();
        let spelled = SyntacticDn::parse(&self.original)
            .ok()
            .filter(|d| d.rdns.len() == self.rdn_count())
            .map(|d| {
                SyntacticDn {
                    rdns: d.rdns.into_iter().take(keep).collect(),
                }
                .to_string()
            });
        spelled.or_else(|| {
            let end = *self.rdn_ends.get(keep.checked_sub(1)?)? as usize;
            Some(self.normalized.get(..end)?.to_owned())
        })
    }

    /// True if both name the same entry (equal normalised forms; `==`
    /// also compares the spelling). Compares without allocating.
    pub fn same_entry(&self, other: &Dn) -> bool {
        self.normalized == other.normalized
    }

    /// True if `self` is directly below `parent`.
    pub fn is_child_of(&self, parent: &Dn) -> bool {
        self.rdn_count() == parent.rdn_count() + 1 && self.is_within(parent)
    }

    /// True if `self` is `ancestor` or below it: `ancestor`'s normalised
    /// form is a suffix of `self`'s that begins at one of its RDNs.
    pub fn is_within(&self, ancestor: &Dn) -> bool {
        let Some(above) = self.rdn_count().checked_sub(ancestor.rdn_count()) else {
            return false;
        };
        ancestor.is_root()
            || self
                .rdn_start(above)
                .and_then(|start| self.normalized.get(start..))
                == Some(ancestor.normalized.as_str())
    }

    /// True if `self` is strictly below `ancestor`.
    pub fn is_descendant_of(&self, ancestor: &Dn) -> bool {
        self.rdn_count() > ancestor.rdn_count() && self.is_within(ancestor)
    }
}

/// The normalised RDNs of a [`Dn`], leftmost first ([`Dn::rdns`]); from
/// the back, the root's child first.
#[derive(Debug, Clone)]
pub struct Rdns<'d> {
    dn: &'d Dn,
    front: usize,
    back: usize,
}

impl<'d> Iterator for Rdns<'d> {
    type Item = &'d str;

    fn next(&mut self) -> Option<&'d str> {
        if self.front == self.back {
            return None;
        }
        self.front += 1;
        self.dn.rdn_at(self.front - 1)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.back - self.front;
        (left, Some(left))
    }
}

impl DoubleEndedIterator for Rdns<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.front == self.back {
            return None;
        }
        self.back -= 1;
        self.dn.rdn_at(self.back)
    }
}

impl ExactSizeIterator for Rdns<'_> {}

/// A byte offset into a normalised DN. DNs are far below 4 GiB (the
/// protocol's DN limit); a longer one is refused, not truncated.
fn offset(len: usize) -> Result<u32, ModelError> {
    u32::try_from(len)
        .map_err(|_| ModelError::new(ResultCode::INVALID_DN_SYNTAX, "the DN is too long"))
}

/// Normalises a DN to its string key.
pub fn normalize(text: &[u8], schema: &Schema) -> Result<String, ModelError> {
    Dn::parse(text, schema).map(|dn| dn.normalized)
}

/// The first RDN of `text` (parsed) and `text` as a string, when the
/// rest of `text` is exactly `parent`'s text.
fn first_rdn_above<'t>(text: &'t [u8], parent: &Dn) -> Option<(meridian_proto::dn::Rdn, &'t str)> {
    let tail = parent.original.as_bytes();
    if parent.is_root() || !text.ends_with(tail) {
        return None;
    }
    let (rdn, rest) = SyntacticDn::split_first_rdn(text)?;
    if rest != text.len() - tail.len() {
        return None;
    }
    Some((rdn, std::str::from_utf8(text).ok()?))
}

/// One RDN normalised: its RFC 4514 string (types by primary name in
/// lower case, values reduced by their equality rule, several values
/// sorted), appended to `out`, and its values as given. `original` (the
/// whole DN) is for error messages.
fn normalize_rdn(
    rdn: meridian_proto::dn::Rdn,
    schema: &Schema,
    original: &str,
    out: &mut String,
) -> Result<RdnValues, ModelError> {
    let single = rdn.avas.len() == 1;
    // Several values are sorted: each is written alone first.
    let mut parts = Vec::new();
    let mut values: SmallVec<[(AttrId, Vec<u8>); 1]> = SmallVec::new();
    for ava in rdn.avas {
        let attr_id = schema.attribute_id(&ava.ty).ok_or_else(|| {
            ModelError::new(
                ResultCode::INVALID_DN_SYNTAX,
                format!(
                    "invalid DN {original:?}: attribute type {:?} is not defined",
                    ava.ty
                ),
            )
        })?;
        let attr = schema
            .attr(attr_id)
            .ok_or_else(|| ModelError::internal(format!("attribute ID {attr_id:?} has no type")))?;
        let raw = match ava.value {
            DnValue::Text(v) => v,
            DnValue::Ber(ber) => ber_string_contents(&ber).unwrap_or(ber),
        };
        let mut own = String::new();
        let part = if single { &mut *out } else { &mut own };
        part.extend(attr.name().chars().map(|c| c.to_ascii_lowercase()));
        part.push('=');
        match attr.equality {
            Some(rule) => {
                let key = rule.key_cow(&raw, schema).ok_or_else(|| {
                    ModelError::new(
                        ResultCode::INVALID_DN_SYNTAX,
                        format!(
                            "invalid DN {original:?}: value of {} is not valid for {}",
                            attr.name(),
                            rule.name
                        ),
                    )
                })?;
                let _ = write_text_value(part, &key);
            }
            None => {
                let _ = write_text_value(part, &raw);
            }
        }
        values.push((attr_id, raw));
        if !single {
            parts.push(own);
        }
    }
    if !single {
        parts.sort();
        out.push_str(&parts.join("+"));
    }
    // One value (nearly always) goes straight into its shared slice.
    Ok(match values.into_inner() {
        Ok(one) => Arc::new(one),
        Err(several) => several.into_vec().into(),
    })
}

/// The contents of a BER-encoded string value (`#04024869` is "Hi").
fn ber_string_contents(ber: &[u8]) -> Option<Vec<u8>> {
    let mut r = meridian_ber::Reader::new(ber);
    let tlv = r.read().ok()?;
    r.finish("").ok()?;
    // OCTET STRING, UTF8String, PrintableString, IA5String, TeletexString.
    matches!(tlv.tag.0, 0x04 | 0x0c | 0x13 | 0x16 | 0x14).then(|| tlv.contents.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_entry_ignores_spelling_and_is_child_of_means_one_level() {
        let schema = Schema::builtin().unwrap();
        let parse = |t: &str| Dn::parse(t.as_bytes(), &schema).unwrap();
        let people = parse("ou=People,dc=example,dc=com");
        let alice = parse("UID=Alice , OU=people,DC=Example,DC=com");
        assert!(alice.same_entry(&parse("uid=alice,ou=People,dc=example,dc=com")));
        assert!(alice != parse("uid=alice,ou=People,dc=example,dc=com"));
        assert!(alice.is_child_of(&people) && !alice.is_child_of(&parse("dc=example,dc=com")));
        assert!(!people.is_child_of(&people));
    }

    fn dn(s: &str) -> Dn {
        Dn::parse(s.as_bytes(), &Schema::builtin().unwrap()).unwrap()
    }

    #[test]
    fn values_that_are_not_utf8_keep_their_bytes_in_the_key() {
        // userPassword matches with octetStringMatch: its key is the
        // bytes as they are. Two values differing only in bytes that are
        // not UTF-8 were both written U+FFFD, so two DNs shared one key.
        let schema = Schema::builtin().unwrap();
        let parse = |t: &[u8]| Dn::parse(t, &schema).unwrap();
        let a = parse(b"userPassword=#0402ff41,dc=example,dc=com");
        let b = parse(b"userPassword=#0402fe41,dc=example,dc=com");
        assert!(
            !a.same_entry(&b),
            "{} vs {}",
            a.normalized(),
            b.normalized()
        );
        assert_eq!(a.normalized(), "userpassword=\\ffA,dc=example,dc=com");
    }

    #[test]
    fn a_child_parsed_with_its_parents_parse_equals_a_whole_parse() {
        let schema = Schema::builtin().unwrap();
        let cases = [
            // (DN, the DN whose parent_as_written is offered)
            (
                "uid=a,ou=People,dc=example,dc=com",
                "uid=b,ou=People,dc=example,dc=com",
            ),
            (
                "cn=x+sn=y;ou=People,dc=example,dc=com",
                "uid=b;ou=People,dc=example,dc=com",
            ),
            (
                r"cn=a\\,ou=People,dc=example,dc=com",
                "uid=b,ou=People,dc=example,dc=com",
            ),
            (
                r"cn=a\,ou=People,dc=example,dc=com",
                "uid=b,ou=People,dc=example,dc=com",
            ),
            (
                r"cn=a\2C,ou=People,dc=example,dc=com",
                "uid=b,ou=People,dc=example,dc=com",
            ),
            (
                "uid=a , ou=People,dc=example,dc=com",
                "uid=b , ou=People,dc=example,dc=com",
            ),
            (
                "uid=a,  ou=People,dc=example,dc=com",
                "uid=b, ou=People,dc=example,dc=com",
            ),
            (
                "cn=#04024869,ou=People,dc=example,dc=com",
                "uid=b,ou=People,dc=example,dc=com",
            ),
            (
                "uid=a,ou=Other,dc=example,dc=com",
                "uid=b,ou=People,dc=example,dc=com",
            ),
            (
                "ou=People,dc=example,dc=com",
                "uid=b,ou=People,dc=example,dc=com",
            ),
            ("dc=com", "dc=example,dc=com"),
        ];
        for (text, sibling) in cases {
            let parent = Dn::parse(sibling.as_bytes(), &schema)
                .unwrap()
                .parent_as_written()
                .unwrap();
            let whole = Dn::parse(text.as_bytes(), &schema);
            let child = Dn::parse_child(text.as_bytes(), &parent, &schema);
            match (whole, child) {
                (Ok(whole), Ok((child, _))) => {
                    assert_eq!(whole, child, "{text}");
                }
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{text}"),
                (whole, child) => panic!("{text}: {whole:?} against {child:?}"),
            }
        }
        // The common case takes the short way.
        let parent = dn("uid=b,ou=People,dc=example,dc=com")
            .parent_as_written()
            .unwrap();
        assert_eq!(parent.original(), "ou=People,dc=example,dc=com");
        let (_, reused) =
            Dn::parse_child(b"uid=a,ou=People,dc=example,dc=com", &parent, &schema).unwrap();
        assert!(reused);
        // An unknown type in the first RDN reads as it does parsed whole.
        let err =
            Dn::parse_child(b"nosuch=a,ou=People,dc=example,dc=com", &parent, &schema).unwrap_err();
        let whole = Dn::parse(b"nosuch=a,ou=People,dc=example,dc=com", &schema).unwrap_err();
        assert_eq!(err.to_string(), whole.to_string());
    }

    #[test]
    fn recent_parents_give_what_a_whole_parse_gives() {
        let schema = Schema::builtin().unwrap();
        let mut recent = RecentParent::default();
        // Siblings, a cousin, the parent itself, an error between two
        // siblings, another spelling of the parent, a suffix, siblings.
        let stream = [
            "uid=a,ou=People,dc=example,dc=com",
            "uid=b,ou=People,dc=example,dc=com",
            "uid=c,ou=Other,dc=example,dc=com",
            "ou=Other,dc=example,dc=com",
            "uid=d,ou=Other,dc=example,dc=com",
            "nosuch=e,ou=Other,dc=example,dc=com",
            "uid=f,ou=Other,dc=example,dc=com",
            "uid=g,OU=other,dc=example,dc=com",
            "dc=com",
            "uid=h\\,x,ou=People,dc=example,dc=com",
            "uid=i,ou=People,dc=example,dc=com",
        ];
        for text in stream {
            let whole = Dn::parse(text.as_bytes(), &schema);
            match (whole, recent.parse(text.as_bytes(), &schema)) {
                (Ok(whole), Ok(recent)) => {
                    assert_eq!(whole, recent, "{text}");
                    assert_eq!(recent.original(), text);
                }
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{text}"),
                (whole, recent) => panic!("{text}: {whole:?} against {recent:?}"),
            }
        }
    }

    #[test]
    fn normalisation() {
        assert_eq!(
            dn("CN=Babs  Jensen , O=Acme").normalized(),
            "cn=babs jensen,o=acme"
        );
        assert_eq!(dn("2.5.4.3=X,commonName=Y").normalized(), "cn=x,cn=y");
        assert_eq!(
            dn("SN=B+CN=A,dc=Example").normalized(),
            "cn=a+sn=b,dc=example"
        );
        assert_eq!(
            dn("uid=John.Smith,dc=x").normalized(),
            "uid=john.smith,dc=x"
        );
        assert_eq!(dn("cn=#04024869").normalized(), "cn=hi");
        assert_eq!(dn(r"cn=a\,b").normalized(), r"cn=a\,b");
        // `=` needs no escape in a value (RFC 4514), so the normalised
        // form, which writes it as it is, parses back to the same DN.
        for spelling in ["cn=A=B", r"cn=a\=b", r"cn=a\3Db"] {
            assert_eq!(dn(spelling).normalized(), "cn=a=b", "{spelling}");
        }
        assert_eq!(dn(dn("cn=A=B").normalized()).normalized(), "cn=a=b");
        assert_eq!(dn(r"CN=Lu\C4\8Di\C4\87").normalized(), "cn=lučić");
        assert_eq!(dn("").normalized(), "");
    }

    #[test]
    fn hierarchy() {
        let base = dn("dc=example,dc=com");
        let user = dn("uid=a,ou=People,DC=Example,DC=com");
        assert!(user.is_descendant_of(&base));
        assert!(user.is_within(&base));
        assert!(base.is_within(&base));
        assert!(!base.is_descendant_of(&base));
        assert!(!base.is_descendant_of(&user));
        assert_eq!(
            user.parent().unwrap().normalized(),
            "ou=people,dc=example,dc=com"
        );
        assert_eq!(user.rdn(), Some("uid=a"));
        assert!(Dn::root().is_root());
        assert!(dn("dc=com").parent().unwrap().is_root());
        assert!(!dn("dc=xexample,dc=com").is_within(&dn("dc=example,dc=com")));
    }

    #[test]
    fn rdns_and_ancestors_follow_rdn_boundaries_not_commas() {
        let d = dn(r"CN=a\,b,dc=Example,DC=com");
        assert_eq!(
            d.rdns().collect::<Vec<_>>(),
            [r"cn=a\,b", "dc=example", "dc=com"]
        );
        assert_eq!(
            d.rdns().rev().collect::<Vec<_>>(),
            ["dc=com", "dc=example", r"cn=a\,b"]
        );
        assert_eq!((d.rdn_count(), d.rdns().len()), (3, 3));
        assert!(d.is_within(&dn("dc=example,dc=com")) && d.is_within(&dn("dc=com")));
        assert!(d.is_within(&Dn::root()) && d.is_within(&d) && !d.is_descendant_of(&d));
        // The normalised text ends in `,dc=com`, but that is not an RDN.
        let one = dn(r"cn=a\,dc\=com");
        assert_eq!(one.normalized(), r"cn=a\,dc=com");
        assert_eq!(one.rdn_count(), 1);
        assert!(!one.is_within(&dn("dc=com")));
        let parent = d.parent().unwrap();
        assert_eq!(parent.normalized(), "dc=example,dc=com");
        assert_eq!(parent.rdns().collect::<Vec<_>>(), ["dc=example", "dc=com"]);
        assert_eq!(parent, dn("dc=Example,DC=com"));
        assert!(d.is_child_of(&parent));
        assert_eq!(
            d.relative_to(&dn("dc=com")).as_deref(),
            Some(r"CN=a\,b,dc=Example")
        );
        assert_eq!(dn("dc=com").parent(), Some(Dn::root()));
    }

    #[test]
    fn invalid_dns_say_why() {
        let s = Schema::builtin().unwrap();
        for (text, why) in [
            ("cn", "expected '='"),
            ("nosuchattr=x", "not defined"),
            ("cn=a,", "attribute type"),
        ] {
            let err = Dn::parse(text.as_bytes(), &s).unwrap_err();
            assert_eq!(err.code, ResultCode::INVALID_DN_SYNTAX);
            assert!(err.message.contains(why), "{text}: {}", err.message);
        }
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn normalising_twice_equals_once(values in proptest::collection::vec("[ -~]{1,12}", 1..4)) {
                let s = Schema::builtin().unwrap();
                let text: String = values
                    .iter()
                    .map(|v| {
                        let mut part = String::from("cn=");
                        write_text_value(&mut part, v.as_bytes()).unwrap();
                        part
                    })
                    .collect::<Vec<_>>()
                    .join(",");
                if let Ok(once) = Dn::parse(text.as_bytes(), &s) {
                    let twice = Dn::parse(once.normalized().as_bytes(), &s).unwrap();
                    prop_assert_eq!(once.normalized(), twice.normalized());
                }
            }
        }
    }
}
