//! The root DSE (RFC 4512 section 5.1): what a client reads first to learn
//! what this server supports.

use meridian_ber::{Tag, Writer};
use meridian_proto::controls::oid as control_oid;
use meridian_proto::extended::oid as extended_oid;
use meridian_proto::message::tags;
use meridian_proto::{Filter, Seq, Substring};

/// "All operational attributes" (`+`, RFC 3673).
const FEATURE_ALL_OPERATIONAL: &[u8] = b"1.3.6.1.4.1.4203.1.5.1";
/// Absolute true and false filters `(&)` and `(|)` (RFC 4526).
const FEATURE_TRUE_FALSE_FILTERS: &[u8] = b"1.3.6.1.4.1.4203.1.5.3";

/// One attribute of the root DSE.
#[derive(Debug, Clone)]
struct Attribute {
    name: &'static str,
    operational: bool,
    values: Vec<Vec<u8>>,
}

/// The root DSE's attributes, built once at start.
#[derive(Debug, Clone)]
pub(crate) struct RootDse {
    attributes: Vec<Attribute>,
}

impl RootDse {
    /// The controls a client may mark critical and get served.
    pub(crate) const SUPPORTED_CONTROLS: &'static [&'static [u8]] = &[control_oid::QUEUE_LENGTH];
    /// The extended operations served.
    pub(crate) const SUPPORTED_EXTENSIONS: &'static [&'static [u8]] = &[extended_oid::WHO_AM_I];

    pub(crate) fn new(suffix: &str) -> Self {
        let list = |values: &[&[u8]]| values.iter().map(|v| v.to_vec()).collect();
        let operational = |name, values| Attribute {
            name,
            operational: true,
            values,
        };
        RootDse {
            attributes: vec![
                Attribute {
                    name: "objectClass",
                    operational: false,
                    values: vec![b"top".to_vec()],
                },
                operational("namingContexts", vec![suffix.as_bytes().to_vec()]),
                operational("supportedLDAPVersion", vec![b"3".to_vec()]),
                operational("supportedControl", list(Self::SUPPORTED_CONTROLS)),
                operational("supportedExtension", list(Self::SUPPORTED_EXTENSIONS)),
                operational(
                    "supportedFeatures",
                    list(&[FEATURE_ALL_OPERATIONAL, FEATURE_TRUE_FALSE_FILTERS]),
                ),
                operational("vendorName", vec![b"Meridian".to_vec()]),
                operational(
                    "vendorVersion",
                    vec![format!("Meridian {}", env!("CARGO_PKG_VERSION")).into_bytes()],
                ),
            ],
        }
    }

    fn get(&self, name: &[u8]) -> Option<&Attribute> {
        // Attribute options (`;lang-x`) never apply to the root DSE.
        let base = name.split(|b| *b == b';').next().unwrap_or(name);
        self.attributes
            .iter()
            .find(|a| a.name.as_bytes().eq_ignore_ascii_case(base))
    }

    /// Evaluates `filter` against the root DSE. Every value here is an
    /// ASCII string compared case-insensitively; ordering, approximate and
    /// extensible matches are Undefined, which RFC 4511 treats as not TRUE.
    pub(crate) fn matches(&self, filter: &Filter<'_>) -> Option<bool> {
        let values = |attr: &[u8]| self.get(attr).map(|a| a.values.as_slice());
        match filter {
            Filter::And(children) => children
                .iter()
                .try_fold(true, |acc, f| Some(acc && self.matches(&f)?)),
            Filter::Or(children) => {
                let mut undefined = false;
                for f in children.iter() {
                    match self.matches(&f) {
                        Some(true) => return Some(true),
                        None => undefined = true,
                        Some(false) => {}
                    }
                }
                if undefined { None } else { Some(false) }
            }
            Filter::Not(child) => child
                .iter()
                .next()
                .and_then(|f| self.matches(&f))
                .map(|b| !b),
            Filter::Present(attr) => Some(self.get(attr).is_some()),
            Filter::Equality(ava) => {
                values(ava.attr).map(|vs| vs.iter().any(|v| v.eq_ignore_ascii_case(ava.value)))
            }
            Filter::Substrings(s) => values(s.attr).map(|vs| {
                vs.iter()
                    .any(|v| substring_match(&v.to_ascii_lowercase(), &s.parts))
            }),
            Filter::GreaterOrEqual(_)
            | Filter::LessOrEqual(_)
            | Filter::Approx(_)
            | Filter::Extensible(_) => None,
        }
    }

    /// Appends the SearchResultEntry for the requested attribute selection.
    pub(crate) fn encode_entry(
        &self,
        buf: &mut Vec<u8>,
        message_id: i32,
        selection: &Seq<'_, &[u8]>,
        types_only: bool,
    ) {
        let all_user = selection.is_empty() || selection.iter().any(|a| a == b"*");
        let all_operational = selection.iter().any(|a| a == b"+");
        let mut w = Writer::new(buf);
        let msg = w.start(Tag::SEQUENCE);
        w.integer(Tag::INTEGER, i64::from(message_id));
        let op = w.start(tags::SEARCH_RESULT_ENTRY);
        w.octets(Tag::OCTET_STRING, b"");
        let attrs = w.start(Tag::SEQUENCE);
        for attribute in &self.attributes {
            let named = selection
                .iter()
                .any(|a| a.eq_ignore_ascii_case(attribute.name.as_bytes()));
            let wanted = named
                || (attribute.operational && all_operational)
                || (!attribute.operational && all_user);
            if !wanted {
                continue;
            }
            let m = w.start(Tag::SEQUENCE);
            w.octets(Tag::OCTET_STRING, attribute.name.as_bytes());
            let set = w.start(Tag::SET);
            if !types_only {
                for value in &attribute.values {
                    w.octets(Tag::OCTET_STRING, value);
                }
            }
            w.end(set);
            w.end(m);
        }
        w.end(attrs);
        w.end(op);
        w.end(msg);
    }
}

/// caseIgnore substring match on a lowercased value.
fn substring_match(value: &[u8], parts: &Seq<'_, Substring<'_>>) -> bool {
    let mut rest = value;
    for part in parts.iter() {
        match part {
            Substring::Initial(p) => {
                let p = p.to_ascii_lowercase();
                match rest.strip_prefix(p.as_slice()) {
                    Some(r) => rest = r,
                    None => return false,
                }
            }
            Substring::Any(p) => {
                let p = p.to_ascii_lowercase();
                match find(rest, &p) {
                    Some(at) => rest = rest.get(at + p.len()..).unwrap_or_default(),
                    None => return false,
                }
            }
            Substring::Final(p) => return rest.ends_with(&p.to_ascii_lowercase()),
        }
    }
    true
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_proto::filter_str;
    use meridian_proto::{Depth, LdapMessage, ProtocolOp};

    fn eval(filter: &str) -> Option<bool> {
        let ber = filter_str::parse(filter, 32).unwrap();
        let f = Filter::from_ber(&ber, Depth::new(32)).unwrap();
        RootDse::new("dc=example,dc=com").matches(&f)
    }

    #[test]
    fn filters_on_the_root_dse() {
        assert_eq!(eval("(objectClass=*)"), Some(true));
        assert_eq!(eval("(objectclass=TOP)"), Some(true));
        assert_eq!(eval("(supportedLDAPVersion=2)"), Some(false));
        assert_eq!(eval("(vendorName=mer*)"), Some(true));
        assert_eq!(eval("(vendorName=*idi*n)"), Some(true));
        assert_eq!(eval("(!(cn=*))"), Some(true));
        assert_eq!(eval("(&)"), Some(true));
        assert_eq!(eval("(|)"), Some(false));
        assert_eq!(eval("(vendorName>=a)"), None);
        assert_eq!(eval("(|(vendorName>=a)(objectClass=*))"), Some(true));
    }

    fn entry_attributes(selection: &[&[u8]]) -> Vec<String> {
        let mut buf = Vec::new();
        RootDse::new("dc=example,dc=com").encode_entry(
            &mut buf,
            1,
            &Seq::from_items(selection),
            false,
        );
        let msg = LdapMessage::decode(&buf, &Default::default()).unwrap();
        let ProtocolOp::SearchResultEntry(entry) = msg.op else {
            panic!()
        };
        entry
            .attributes
            .iter()
            .map(|a| String::from_utf8(a.ty.to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn attribute_selection_follows_rfc_4511_and_3673() {
        assert_eq!(entry_attributes(&[]), ["objectClass"]);
        assert_eq!(entry_attributes(&[b"1.1"]), Vec::<String>::new());
        assert_eq!(entry_attributes(&[b"namingcontexts"]), ["namingContexts"]);
        let all = entry_attributes(&[b"*", b"+"]);
        assert!(all.contains(&"supportedControl".to_string()));
        assert!(all.contains(&"objectClass".to_string()));
    }
}
