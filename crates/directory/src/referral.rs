//! Named subordinate references (RFC 3296).
//!
//! A `referral` object marks a part of the tree held by another server;
//! its `ref` values are LDAP URLs naming it there. Unless the client
//! sends ManageDsaIT, an operation on the object or below it answers
//! `referral` with those URLs, and a search that reaches one sends a
//! SearchResultReference instead of the entry. With ManageDsaIT the
//! object is a plain entry that can be read, changed and deleted.
//!
//! The URLs are rewritten as slapd rewrites them, so a client follows the
//! same references from either server: for a target below the referral
//! object its relative RDNs are grafted onto the URL's DN, a URL without
//! a DN gets the target's (or, in a continuation reference, the referral
//! object's), and a search's URLs carry its scope (one-level searches
//! continue with a base search of the referenced object).

use meridian_ber::{Tag, Writer};
use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_model::entry::Entry;
use meridian_proto::message::tags;
use meridian_proto::{ResultCode, Scope};
use meridian_store::{Snapshot, StoreError};

use crate::presence::Special;
use crate::{Directory, Outcome};

/// True if `entry` is of object class `class` (by name, any case).
pub(crate) fn has_class(entry: &Entry, schema: &Schema, class: &str) -> bool {
    let Some(oc) = schema.object_class_attr() else {
        return false;
    };
    entry
        .attributes
        .iter()
        .filter(|a| a.desc.attr == oc)
        .flat_map(|a| a.values.iter())
        .any(|v| v.eq_ignore_ascii_case(class.as_bytes()))
}

/// True for a referral object.
pub(crate) fn is_referral(entry: &Entry, schema: &Schema) -> bool {
    has_class(entry, schema, "referral")
}

/// The URLs of a referral object's `ref` values. A value is a
/// labeledURI (RFC 3296 section 2.2, RFC 2079): the URI, then optionally
/// a space and a label for people, which is not part of the URL.
fn refs(entry: &Entry, schema: &Schema) -> Vec<String> {
    let Some(attr) = schema.attribute_id("ref") else {
        return Vec::new();
    };
    entry
        .attributes
        .iter()
        .filter(|a| a.desc.attr == attr)
        .flat_map(|a| a.values.iter())
        .map(|v| {
            let text = String::from_utf8_lossy(v);
            let uri = text.trim_start().split(' ').next().unwrap_or_default();
            uri.to_owned()
        })
        .collect()
}

/// The URL parameter for a search scope (RFC 4516).
fn scope_name(scope: Scope) -> &'static str {
    match scope {
        Scope::Base => "base",
        Scope::OneLevel => "one",
        Scope::Subtree => "sub",
        // RFC 4516 has no name for it; OpenLDAP's "subordinate".
        Scope::Subordinate => "subordinate",
    }
}

/// Characters a DN may keep unescaped in an LDAP URL: RFC 3986's
/// unreserved and sub-delims, ':' and '@'. Everything else ('?' above
/// all, which ends the DN) is percent-encoded.
fn url_safe(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@".contains(&b)
}

fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if url_safe(b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub(crate) fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b, hex) {
            (b'%', Some(decoded)) => {
                out.push(decoded);
                i += 3;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Rewrites one `ref` value of the referral object `referral` for an
/// operation on `below` (a DN under the object; `None`: the object
/// itself) and, for a search, its `scope`. A value that is not an LDAP
/// URL is returned unchanged.
pub(crate) fn rewrite(
    url: &str,
    referral: &Dn,
    below: Option<&Dn>,
    scope: Option<Scope>,
) -> String {
    let Some(scheme_end) = ["ldap://", "ldaps://", "ldapi://"]
        .iter()
        .find_map(|scheme| {
            url.get(..scheme.len())
                .filter(|s| s.eq_ignore_ascii_case(scheme))
                .map(|_| scheme.len())
        })
    else {
        return url.to_owned();
    };
    let (head, rest) = url.split_at(scheme_end);
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut parts = path.split('?');
    let url_dn = percent_decode(parts.next().unwrap_or_default());
    // attributes, scope, filter, extensions.
    let mut params: Vec<String> = parts.map(str::to_owned).collect();
    let dn = match below {
        Some(target) => match (url_dn.is_empty(), target.relative_to(referral)) {
            (false, Some(relative)) => format!("{relative},{url_dn}"),
            _ => target.original().to_owned(),
        },
        None if url_dn.is_empty() => referral.original().to_owned(),
        None => url_dn,
    };
    if let Some(scope) = scope {
        params.resize(params.len().max(2), String::new());
        if let Some(slot) = params.get_mut(1) {
            *slot = scope_name(scope).to_owned();
        }
    }
    let mut out = format!("{head}{host}/{}", percent_encode(&dn));
    for p in &params {
        out.push('?');
        out.push_str(p);
    }
    out
}

/// Appends a SearchResultReference carrying `urls`.
pub(crate) fn encode_reference(buf: &mut Vec<u8>, message_id: i32, urls: &[String]) {
    let mut w = Writer::new(buf);
    let msg = w.start(Tag::SEQUENCE);
    w.integer(Tag::INTEGER, i64::from(message_id));
    let op = w.start(tags::SEARCH_RESULT_REFERENCE);
    for url in urls {
        w.octets(Tag::OCTET_STRING, url.as_bytes());
    }
    w.end(op);
    w.end(msg);
}

impl Directory {
    /// The continuation reference URLs of the referral object `entry`,
    /// met by a search of `scope` (RFC 3296 section 5.3).
    pub(crate) fn continuation(&self, entry: &Entry, scope: Scope) -> Vec<String> {
        let scope = if scope == Scope::OneLevel {
            Scope::Base
        } else {
            Scope::Subtree
        };
        refs(entry, &self.schema)
            .iter()
            .map(|url| rewrite(url, &entry.dn, None, Some(scope)))
            .collect()
    }

    /// The `referral` answer to an operation on `target` made without
    /// ManageDsaIT (RFC 3296 section 5.2): when `target` is a referral
    /// object, or does not exist and its nearest existing ancestor is
    /// one. `search_scope` is the scope of a search (its URLs carry it).
    /// `None` when the operation goes ahead; an unparsable DN also gives
    /// `None`, the operation reports it.
    pub fn referral(&self, target: &[u8], search_scope: Option<Scope>) -> Option<Outcome> {
        if !self.presence.may_hold(Special::Referral) {
            return None;
        }
        let dn = self.parse_dn(target).ok()?;
        self.referral_of(&dn, search_scope).ok().flatten()
    }

    /// [`Directory::referral`] for a parsed `target`, with the store's
    /// errors. A read transaction is opened only where a referral object
    /// may exist: under a stream of base searches one per request was a
    /// tenth of a search's time.
    pub(crate) fn referral_of(
        &self,
        target: &Dn,
        search_scope: Option<Scope>,
    ) -> Result<Option<Outcome>, StoreError> {
        if target.is_root() || !self.presence.may_hold(Special::Referral) {
            return Ok(None);
        }
        let snapshot = self.store_for(target).snapshot()?;
        self.referral_at(&snapshot, target, search_scope)
    }

    fn referral_at(
        &self,
        snapshot: &Snapshot<'_>,
        target: &Dn,
        search_scope: Option<Scope>,
    ) -> Result<Option<Outcome>, StoreError> {
        let (entry, below) = match snapshot.get(target)? {
            Some((_, entry)) => (entry, false),
            None => {
                let matched = snapshot.matched(target)?;
                if matched.is_empty() {
                    return Ok(None);
                }
                let Ok(matched) = Dn::parse(matched.as_bytes(), &self.schema) else {
                    return Ok(None);
                };
                match snapshot.get(&matched)? {
                    Some((_, entry)) => (entry, true),
                    None => return Ok(None),
                }
            }
        };
        if !is_referral(&entry, &self.schema) {
            return Ok(None);
        }
        let referrals: Vec<String> = refs(&entry, &self.schema)
            .iter()
            .map(|url| match (below, search_scope) {
                // An update or compare of the object itself: its values
                // as they are, as slapd sends them.
                (false, None) => url.clone(),
                (false, scope) => rewrite(url, &entry.dn, None, scope),
                (true, scope) => rewrite(url, &entry.dn, Some(target), scope),
            })
            .collect();
        if referrals.is_empty() {
            return Ok(None);
        }
        Ok(Some(Outcome {
            code: ResultCode::REFERRAL,
            matched: entry.dn.original().to_owned(),
            message: format!(
                "\"{}\" is a referral object: the entry is held where its ref URLs point (send ManageDsaIT to act on the referral object itself)",
                entry.dn.original()
            ),
            referrals,
            password_error: None,
        }))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn dn(text: &str) -> Dn {
        Dn::parse(text.as_bytes(), &Schema::builtin().unwrap()).unwrap()
    }

    #[test]
    fn urls_are_rewritten_as_slapd_rewrites_them() {
        let referral = dn("ou=Remote,dc=example,dc=com");
        let far = "ldap://other.example.net/ou=Far,dc=example,dc=net";
        let below = dn("uid=zed,ou=Remote,dc=example,dc=com");
        assert_eq!(
            rewrite(far, &referral, Some(&below), Some(Scope::OneLevel)),
            "ldap://other.example.net/uid=zed,ou=Far,dc=example,dc=net??one"
        );
        assert_eq!(
            rewrite(far, &referral, Some(&below), None),
            "ldap://other.example.net/uid=zed,ou=Far,dc=example,dc=net"
        );
        assert_eq!(
            rewrite(far, &referral, None, Some(Scope::Base)),
            "ldap://other.example.net/ou=Far,dc=example,dc=net??base"
        );
        // No DN in the URL: the target's, or the referral object's.
        let bare = "ldap://nodn.example.net/";
        assert_eq!(
            rewrite(bare, &referral, Some(&below), Some(Scope::Subtree)),
            "ldap://nodn.example.net/uid=zed,ou=Remote,dc=example,dc=com??sub"
        );
        assert_eq!(
            rewrite(
                "ldap://nodn.example.net",
                &referral,
                None,
                Some(Scope::Subtree)
            ),
            "ldap://nodn.example.net/ou=Remote,dc=example,dc=com??sub"
        );
        // The URL's own parameters are kept, its scope replaced; a DN
        // that needs it is percent-encoded.
        let spaced = dn("cn=A B?,ou=Remote,dc=example,dc=com");
        assert_eq!(
            rewrite(
                "LDAP://h/o=x?cn?base?(cn=*)",
                &referral,
                Some(&spaced),
                Some(Scope::Subtree)
            ),
            "LDAP://h/cn=A%20B%3F,o=x?cn?sub?(cn=*)"
        );
        assert_eq!(
            rewrite("ldap://h/o=%3Fx", &referral, None, None),
            "ldap://h/o=%3Fx"
        );
        // Anything but an LDAP URL passes through.
        assert_eq!(
            rewrite(
                "https://example.net/x",
                &referral,
                Some(&below),
                Some(Scope::Base)
            ),
            "https://example.net/x"
        );
    }

    #[test]
    fn percent_decoding_leaves_broken_escapes_alone() {
        assert_eq!(percent_decode("a%2Cb%zz%4"), "a,b%zz%4");
        assert_eq!(percent_encode("cn=é x"), "cn=%C3%A9%20x");
    }
}
