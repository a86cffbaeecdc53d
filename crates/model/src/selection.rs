//! Which attributes a search returns (RFC 4511 section 4.5.1.8, RFC 3673).
//!
//! No attributes or `*`: all user attributes. `+`: all operational
//! attributes. `1.1` alone: none. A named type also returns its subtypes
//! (`name` returns `cn` and `sn`), and a name with options only the
//! attributes carrying them. Unknown names are ignored, as RFC 4511 says.

use crate::entry::{Attribute, Description};
use crate::schema::Schema;

/// A parsed attribute selection.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    all_user: bool,
    all_operational: bool,
    named: Vec<Description>,
}

impl Selection {
    /// Parses the attribute list of a SearchRequest.
    pub fn parse<'a>(attributes: impl IntoIterator<Item = &'a [u8]>, schema: &Schema) -> Selection {
        let mut selection = Selection::default();
        let mut any = false;
        for name in attributes {
            any = true;
            match name {
                b"*" => selection.all_user = true,
                b"+" => selection.all_operational = true,
                b"1.1" => continue,
                _ => {
                    if let Ok(desc) = Description::parse_selector(name, schema) {
                        selection.named.push(desc);
                    }
                }
            }
        }
        if !any {
            selection.all_user = true;
        }
        selection
    }

    /// True if `attribute` is to be returned.
    pub fn wants(&self, attribute: &Attribute, schema: &Schema) -> bool {
        self.wants_description(&attribute.desc, schema)
    }

    /// [`Selection::wants`] of an attribute described by `desc`.
    pub fn wants_description(&self, desc: &Description, schema: &Schema) -> bool {
        let operational = schema
            .attr(desc.attr)
            .is_some_and(|a| a.usage.is_operational());
        (if operational {
            self.all_operational
        } else {
            self.all_user
        }) || self.named.iter().any(|n| desc.is_matched_by(n, schema))
    }

    /// True if the selection may name an operational attribute: `+`, or
    /// any type by name (no computed attribute is asked for otherwise).
    pub fn names_any(&self) -> bool {
        self.all_operational || !self.named.is_empty()
    }

    /// True if the selection names `attr` explicitly (used for operational
    /// attributes that are computed only when asked for).
    pub fn names(&self, attr: crate::schema::AttrId, schema: &Schema) -> bool {
        self.all_operational || self.named.iter().any(|n| schema.is_subtype(attr, n.attr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dn::Dn;
    use crate::entry::Entry;

    fn names(selection: &[&str]) -> Vec<String> {
        let s = Schema::builtin().unwrap();
        let dn = Dn::parse(b"cn=x", &s).unwrap();
        let attrs: &[(&str, &[&str])] = &[
            ("objectClass", &["person"]),
            ("cn", &["x"]),
            ("cn;lang-de", &["y"]),
            ("sn", &["z"]),
            ("createTimestamp", &["20260101000000Z"]),
        ];
        let e = Entry::new(
            dn,
            attrs
                .iter()
                .map(|(n, vs)| (n.as_bytes(), vs.iter().map(|v| v.as_bytes()))),
            &s,
        )
        .unwrap();
        let sel = Selection::parse(selection.iter().map(|n| n.as_bytes()), &s);
        e.attributes
            .iter()
            .filter(|a| sel.wants(a, &s))
            .map(|a| a.name(&s).to_owned())
            .collect()
    }

    #[test]
    fn rfc4511_and_3673_selection() {
        assert_eq!(names(&[]), ["objectClass", "cn", "cn;lang-de", "sn"]);
        assert_eq!(names(&["*"]), ["objectClass", "cn", "cn;lang-de", "sn"]);
        assert_eq!(names(&["+"]), ["createTimestamp"]);
        assert_eq!(names(&["*", "+"]).len(), 5);
        assert_eq!(names(&["1.1"]), Vec::<String>::new());
        assert_eq!(names(&["name"]), ["cn", "cn;lang-de", "sn"]);
        assert_eq!(names(&["CN;LANG-DE"]), ["cn;lang-de"]);
        assert_eq!(names(&["createtimestamp", "nosuch"]), ["createTimestamp"]);
        assert_eq!(names(&["1.1", "sn"]), ["sn"]);
    }
}
