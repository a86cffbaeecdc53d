//! SASL EXTERNAL with a TLS client certificate (RFC 4513 section 5.2.3):
//! the certificate's subject, read from its DER with our BER reader, and
//! the rule that maps it to an entry (`security.certificate_map`).
//!
//! Only the subject is read; the chain was verified by the TLS layer
//! against `security.tls_ca_file` before any of this runs.

use std::fmt::Write as _;

use meridian_ber::{Reader, Tag};
use meridian_model::dn::Dn;
use meridian_proto::ResultCode;
use meridian_proto::Scope;
use meridian_proto::dn::write_text_value;

use crate::{Directory, Identity, Outcome};

/// What a client certificate says about its holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCertificate {
    /// The subject as an LDAP DN string (RFC 4514: most specific RDN
    /// first), e.g. `uid=alice,ou=people,dc=example,dc=com`.
    pub subject: String,
    /// The subject's attributes in certificate order, by their LDAP
    /// short name in lower case (`cn`, `uid`, `mail` for
    /// emailAddress…), with their text values.
    pub attributes: Vec<(String, String)>,
}

/// A DER X.509 certificate that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("client certificate: {0}")]
pub struct CertificateError(&'static str);

impl ClientCertificate {
    /// Reads the subject of a DER certificate.
    pub fn from_der(der: &[u8]) -> Result<ClientCertificate, CertificateError> {
        let bad = |what| move |_| CertificateError(what);
        let certificate = Reader::new(der)
            .expect(Tag::SEQUENCE, "not a SEQUENCE")
            .map_err(bad("not a certificate"))?;
        let mut tbs = Reader::new(
            Reader::new(certificate)
                .expect(Tag::SEQUENCE, "no tbsCertificate")
                .map_err(bad("no tbsCertificate"))?,
        );
        // [0] version (optional), serialNumber, signature, issuer,
        // validity, then the subject.
        if tbs.peek_tag() == Some(Tag::context(0, true)) {
            tbs.read().map_err(bad("bad version"))?;
        }
        for what in [
            "no serial number",
            "no signature",
            "no issuer",
            "no validity",
        ] {
            tbs.read().map_err(bad(what))?;
        }
        let subject = tbs
            .expect(Tag::SEQUENCE, "no subject")
            .map_err(bad("no subject"))?;
        let mut rdns = Vec::new();
        let mut attributes = Vec::new();
        let mut names = Reader::new(subject);
        while !names.is_empty() {
            let set = names.expect(Tag::SET, "RDN").map_err(bad("bad RDN"))?;
            let mut avas = Reader::new(set);
            let mut rdn = Vec::new();
            while !avas.is_empty() {
                let ava = avas
                    .expect(Tag::SEQUENCE, "AVA")
                    .map_err(bad("bad attribute of the subject"))?;
                let mut ava = Reader::new(ava);
                let oid = ava
                    .expect(Tag(0x06), "OID")
                    .map_err(bad("bad attribute type"))?;
                let value = ava.read().map_err(bad("bad attribute value"))?;
                let oid = dotted(oid).ok_or(CertificateError("bad attribute type"))?;
                let name = short_name(&oid);
                let mut text = String::new();
                match (name, string_value(value.tag, value.contents)) {
                    (Some(name), Some(value)) => {
                        let _ = write!(text, "{name}=");
                        let _ = write_text_value(&mut text, value.as_bytes());
                        attributes.push((name.to_ascii_lowercase(), value));
                    }
                    // RFC 4514 2.4: the dotted type and the value's BER
                    // in hex.
                    _ => {
                        let _ = write!(text, "{oid}=#");
                        for byte in tlv_bytes(value.tag, value.contents) {
                            let _ = write!(text, "{byte:02x}");
                        }
                    }
                }
                rdn.push(text);
            }
            rdns.push(rdn.join("+"));
        }
        // X.509 names run from the root down; LDAP strings the other way.
        rdns.reverse();
        Ok(ClientCertificate {
            subject: rdns.join(","),
            attributes,
        })
    }

    /// The first value of the subject attribute `name` (lower case).
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// `security.certificate_map`: how a certificate names its entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertificateMap {
    /// The subject is the entry's DN.
    Subject,
    /// A search filter with `{name}` placeholders for subject attributes
    /// (`(uid={cn})`, `(mail={mail})`); exactly one entry must match.
    Search(String),
}

impl CertificateMap {
    /// Parses the config value: `subject`, or a filter in parentheses.
    pub fn parse(text: &str) -> Result<CertificateMap, String> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("subject") {
            return Ok(CertificateMap::Subject);
        }
        if !text.starts_with('(') {
            return Err(format!(
                "{text:?}: `subject`, or a search filter such as \"(uid={{cn}})\""
            ));
        }
        // Checked once with a harmless value for every placeholder.
        let sample = fill(text, |_| Some("x".into())).map_err(|e| format!("{text:?}: {e}"))?;
        meridian_proto::filter_str::parse(&sample, 32)
            .map_err(|e| format!("{text:?} is not a valid filter: {e}"))?;
        Ok(CertificateMap::Search(text.to_owned()))
    }
}

/// `template` with each `{name}` replaced by `value(name)`, escaped for a
/// filter (RFC 4515 section 3).
fn fill(template: &str, value: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(rest.get(..open).unwrap_or_default());
        let after = rest.get(open + 1..).unwrap_or_default();
        let close = after
            .find('}')
            .ok_or_else(|| "a `{` without its `}`".to_owned())?;
        let name = after.get(..close).unwrap_or_default();
        let text = value(name).ok_or_else(|| format!("the certificate has no {name:?}"))?;
        for c in text.chars() {
            match c {
                '*' | '(' | ')' | '\\' | '\0' => {
                    let mut buf = [0u8; 4];
                    for byte in c.encode_utf8(&mut buf).bytes() {
                        let _ = write!(out, "\\{byte:02x}");
                    }
                }
                c => out.push(c),
            }
        }
        rest = after.get(close + 1..).unwrap_or_default();
    }
    out.push_str(rest);
    Ok(out)
}

impl Directory {
    /// The identity a SASL EXTERNAL bind with `certificate` proves, by
    /// `map`: invalidCredentials (49) when no entry, or more than one,
    /// answers to it.
    pub fn certificate_identity(
        &self,
        map: &CertificateMap,
        certificate: &ClientCertificate,
    ) -> Result<Identity, Outcome> {
        let refused = |why: String| Outcome::new(ResultCode::INVALID_CREDENTIALS, why);
        let dn = match map {
            CertificateMap::Subject => {
                let dn = Dn::parse(certificate.subject.as_bytes(), &self.schema).map_err(|e| {
                    refused(format!(
                        "the client certificate's subject {:?} is not a DN here: {}",
                        certificate.subject, e.message
                    ))
                })?;
                let snapshot = self.store_for(&dn).snapshot().map_err(Outcome::from)?;
                match snapshot.get(&dn).map_err(Outcome::from)? {
                    // The entry's DN as it is stored, not as the
                    // certificate spells it.
                    Some((_, entry)) => entry.dn,
                    None => {
                        return Err(refused(format!(
                            "the client certificate's subject {:?} names no entry",
                            certificate.subject
                        )));
                    }
                }
            }
            CertificateMap::Search(template) => {
                let text = fill(template, |name| {
                    if name == "subject" {
                        return Some(certificate.subject.clone());
                    }
                    certificate.attribute(name).map(str::to_owned)
                })
                .map_err(|e| refused(format!("security.certificate_map: {e}")))?;
                self.the_one_match(&text).map_err(refused)?
            }
        };
        Ok(self.identity_for(dn))
    }

    /// The one entry of any naming context matching `filter`.
    fn the_one_match(&self, filter: &str) -> Result<Dn, String> {
        let ber = meridian_proto::filter_str::parse(filter, 32).map_err(|e| e.to_string())?;
        let parsed = meridian_proto::Filter::from_ber(&ber, meridian_proto::Depth::new(32))
            .map_err(|e| e.to_string())?;
        let mut found: Vec<Dn> = Vec::new();
        for store in self.stores() {
            let snapshot = store.snapshot().map_err(|e| e.to_string())?;
            for suffix in store.suffixes() {
                snapshot
                    .search(suffix, Scope::Subtree, &parsed, |_, entry| {
                        found.push(entry.dn.clone());
                        found.len() < 2
                    })
                    .map_err(|e| e.to_string())?;
            }
        }
        match found.len() {
            1 => Ok(found.remove(0)),
            0 => Err(format!(
                "no entry matches {filter} (security.certificate_map)"
            )),
            _ => Err(format!(
                "more than one entry matches {filter} (security.certificate_map)"
            )),
        }
    }
}

/// An OID's dotted form.
fn dotted(bytes: &[u8]) -> Option<String> {
    let (&first, rest) = bytes.split_first()?;
    let mut out = format!("{}.{}", first / 40, first % 40);
    let mut arc: u64 = 0;
    for &b in rest {
        arc = arc.checked_mul(128)? | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            let _ = write!(out, ".{arc}");
            arc = 0;
        }
    }
    Some(out)
}

/// The LDAP name of the subject attribute types certificates use.
fn short_name(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.4" => "SN",
        "2.5.4.5" => "serialNumber",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "STREET",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.12" => "title",
        "2.5.4.42" => "givenName",
        "0.9.2342.19200300.100.1.1" => "UID",
        "0.9.2342.19200300.100.1.25" => "DC",
        // PKCS #9 emailAddress: `mail` in LDAP terms.
        "1.2.840.113549.1.9.1" => "mail",
        _ => return None,
    })
}

/// The text of a DirectoryString (or IA5String) value; `None` for other
/// types, which are written as hex.
fn string_value(tag: Tag, contents: &[u8]) -> Option<String> {
    match tag.0 {
        // UTF8String, PrintableString, IA5String.
        0x0c | 0x13 | 0x16 => String::from_utf8(contents.to_vec()).ok(),
        // TeletexString, taken as Latin-1 (as most writers mean it).
        0x14 => Some(contents.iter().map(|&b| char::from(b)).collect()),
        // BMPString: UTF-16, big-endian.
        0x1e => {
            let units: Vec<u16> = contents
                .chunks_exact(2)
                .map(|pair| match *pair {
                    [high, low] => u16::from_be_bytes([high, low]),
                    _ => 0,
                })
                .collect();
            String::from_utf16(&units).ok()
        }
        _ => None,
    }
}

/// A value's whole encoding (tag, definite length, contents) again.
fn tlv_bytes(tag: Tag, contents: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(contents.len() + 6);
    meridian_ber::Writer::new(&mut out).octets(tag, contents);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_and_escaped_for_a_filter() {
        let filled = fill("(&(uid={cn})(o={o}))", |n| match n {
            "cn" => Some("a*b(c)".into()),
            "o" => Some("x\\y".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(filled, "(&(uid=a\\2ab\\28c\\29)(o=x\\5cy))");
        assert!(fill("(uid={mail})", |_| None).is_err());
        assert!(fill("(uid={cn)", |_| Some("x".into())).is_err());
    }

    #[test]
    fn the_map_is_subject_or_a_valid_filter() {
        assert_eq!(
            CertificateMap::parse("subject"),
            Ok(CertificateMap::Subject)
        );
        assert!(matches!(
            CertificateMap::parse("(uid={cn})"),
            Ok(CertificateMap::Search(_))
        ));
        assert!(CertificateMap::parse("uid={cn}").is_err());
        assert!(CertificateMap::parse("(uid={cn}").is_err());
    }

    #[test]
    fn oids_print_dotted() {
        assert_eq!(dotted(&[0x55, 0x04, 0x03]).as_deref(), Some("2.5.4.3"));
        assert_eq!(
            dotted(&[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01]).as_deref(),
            Some("1.2.840.113549.1.9.1")
        );
    }
}
