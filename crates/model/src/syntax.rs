//! LDAP syntaxes (RFC 4517 section 3.3) and their value validators.

use crate::time::parse_generalized_time;

/// A syntax Meridian knows how to check. Unknown syntaxes are accepted as
/// octets ([`Syntax::Octets`]), as the issue and RFC 4512 allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)] // variant names are the RFC's syntax names
pub enum Syntax {
    AttributeTypeDescription,
    BitString,
    Boolean,
    CountryString,
    DeliveryMethod,
    DirectoryString,
    Dn,
    EnhancedGuide,
    FacsimileTelephoneNumber,
    GeneralizedTime,
    Guide,
    Ia5String,
    Integer,
    Jpeg,
    NameAndOptionalUid,
    NumericString,
    ObjectClassDescription,
    Oid,
    OtherMailbox,
    OctetString,
    PostalAddress,
    PrintableString,
    SubstringAssertion,
    TelephoneNumber,
    TelexNumber,
    UtcTime,
    Uuid,
    Csn,
    /// Known or unknown, but not checked: any octets are valid.
    Octets,
}

/// One row of the syntax table.
#[derive(Debug, Clone, Copy)]
pub struct SyntaxInfo {
    /// The syntax OID.
    pub oid: &'static str,
    /// RFC 4517 description.
    pub desc: &'static str,
    /// The validator.
    pub syntax: Syntax,
    /// True for syntaxes that are not human-readable (RFC 4522 `;binary`).
    pub binary: bool,
}

const fn row(oid: &'static str, desc: &'static str, syntax: Syntax, binary: bool) -> SyntaxInfo {
    SyntaxInfo {
        oid,
        desc,
        syntax,
        binary,
    }
}

/// Every syntax Meridian publishes in its subschema.
pub const SYNTAXES: &[SyntaxInfo] = &[
    row(
        "1.3.6.1.4.1.1466.115.121.1.3",
        "Attribute Type Description",
        Syntax::AttributeTypeDescription,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.4",
        "Audio",
        Syntax::Octets,
        true,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.5",
        "Binary",
        Syntax::Octets,
        true,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.6",
        "Bit String",
        Syntax::BitString,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.7",
        "Boolean",
        Syntax::Boolean,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.8",
        "Certificate",
        Syntax::Octets,
        true,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.9",
        "Certificate List",
        Syntax::Octets,
        true,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.10",
        "Certificate Pair",
        Syntax::Octets,
        true,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.11",
        "Country String",
        Syntax::CountryString,
        false,
    ),
    row("1.3.6.1.4.1.1466.115.121.1.12", "DN", Syntax::Dn, false),
    row(
        "1.3.6.1.4.1.1466.115.121.1.14",
        "Delivery Method",
        Syntax::DeliveryMethod,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.15",
        "Directory String",
        Syntax::DirectoryString,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.16",
        "DIT Content Rule Description",
        Syntax::Octets,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.17",
        "DIT Structure Rule Description",
        Syntax::Octets,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.19",
        "DSA Quality",
        Syntax::Octets,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.21",
        "Enhanced Guide",
        Syntax::EnhancedGuide,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.22",
        "Facsimile Telephone Number",
        Syntax::FacsimileTelephoneNumber,
        false,
    ),
    row("1.3.6.1.4.1.1466.115.121.1.23", "Fax", Syntax::Octets, true),
    row(
        "1.3.6.1.4.1.1466.115.121.1.24",
        "Generalized Time",
        Syntax::GeneralizedTime,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.25",
        "Guide",
        Syntax::Guide,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.26",
        "IA5 String",
        Syntax::Ia5String,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.27",
        "INTEGER",
        Syntax::Integer,
        false,
    ),
    row("1.3.6.1.4.1.1466.115.121.1.28", "JPEG", Syntax::Jpeg, true),
    row(
        "1.3.6.1.4.1.1466.115.121.1.30",
        "Matching Rule Description",
        Syntax::Octets,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.31",
        "Matching Rule Use Description",
        Syntax::Octets,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.34",
        "Name And Optional UID",
        Syntax::NameAndOptionalUid,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.35",
        "Name Form Description",
        Syntax::Octets,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.36",
        "Numeric String",
        Syntax::NumericString,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.37",
        "Object Class Description",
        Syntax::ObjectClassDescription,
        false,
    ),
    row("1.3.6.1.4.1.1466.115.121.1.38", "OID", Syntax::Oid, false),
    row(
        "1.3.6.1.4.1.1466.115.121.1.39",
        "Other Mailbox",
        Syntax::OtherMailbox,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.40",
        "Octet String",
        Syntax::OctetString,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.41",
        "Postal Address",
        Syntax::PostalAddress,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.42",
        "Protocol Information",
        Syntax::Octets,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.43",
        "Presentation Address",
        Syntax::Octets,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.44",
        "Printable String",
        Syntax::PrintableString,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.49",
        "Supported Algorithm",
        Syntax::Octets,
        true,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.50",
        "Telephone Number",
        Syntax::TelephoneNumber,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.51",
        "Teletex Terminal Identifier",
        Syntax::Octets,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.52",
        "Telex Number",
        Syntax::TelexNumber,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.53",
        "UTC Time",
        Syntax::UtcTime,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.54",
        "LDAP Syntax Description",
        Syntax::Octets,
        false,
    ),
    row(
        "1.3.6.1.4.1.1466.115.121.1.58",
        "Substring Assertion",
        Syntax::SubstringAssertion,
        false,
    ),
    row("1.3.6.1.1.16.1", "UUID", Syntax::Uuid, false),
    row("1.3.6.1.4.1.4203.666.11.2.1", "CSN", Syntax::Csn, false),
    row(
        "1.3.6.1.1.1.0.0",
        "RFC2307 NIS Netgroup Triple",
        Syntax::Ia5String,
        false,
    ),
    row(
        "1.3.6.1.1.1.0.1",
        "RFC2307 Boot Parameter",
        Syntax::Ia5String,
        false,
    ),
];

/// Looks up a syntax by OID.
pub fn find(oid: &str) -> Option<&'static SyntaxInfo> {
    SYNTAXES.iter().find(|s| s.oid == oid)
}

fn printable_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"'()+,-./:? ".contains(&c)
}

fn is_printable(v: &[u8]) -> bool {
    !v.is_empty() && v.iter().all(|&c| printable_char(c))
}

fn is_numericoid(v: &[u8]) -> bool {
    !v.is_empty()
        && v.split(|c| *c == b'.').all(|arc| {
            !arc.is_empty()
                && arc.iter().all(u8::is_ascii_digit)
                && (arc.len() == 1 || arc.first() != Some(&b'0'))
        })
        && v.contains(&b'.')
}

fn is_descr(v: &[u8]) -> bool {
    v.first().is_some_and(u8::is_ascii_alphabetic)
        && v.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
}

/// `numericoid` or `descr` (RFC 4512 `oid`).
pub fn is_oid(v: &[u8]) -> bool {
    is_numericoid(v) || is_descr(v)
}

fn is_integer(v: &[u8]) -> bool {
    let digits = v.strip_prefix(b"-").unwrap_or(v);
    !digits.is_empty()
        && digits.iter().all(u8::is_ascii_digit)
        && (digits == b"0" || digits.first() != Some(&b'0'))
        && v != b"-0"
}

fn is_bit_string(v: &[u8]) -> bool {
    v.len() >= 3
        && v.starts_with(b"'")
        && v.ends_with(b"'B")
        && v.get(1..v.len() - 2)
            .is_some_and(|bits| bits.iter().all(|b| *b == b'0' || *b == b'1'))
}

fn is_uuid(v: &[u8]) -> bool {
    v.len() == 36
        && v.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// UTC Time (RFC 4517 3.3.34): `YYMMDDHHMM[SS](Z|(+|-)HHMM)`.
fn is_utc_time(v: &[u8]) -> bool {
    let num = |at: usize| {
        v.get(at..at + 2)
            .filter(|d| d.iter().all(u8::is_ascii_digit))
            .map(|d| d.iter().fold(0u32, |acc, c| acc * 10 + u32::from(c - b'0')))
    };
    let fields_ok = matches!(
        (num(2), num(4), num(6), num(8)),
        (Some(1..=12), Some(1..=31), Some(0..=23), Some(0..=59))
    ) && num(0).is_some();
    if !fields_ok {
        return false;
    }
    let rest = match num(10) {
        Some(0..=60) => v.get(12..),
        Some(_) => return false,
        None => v.get(10..),
    };
    match rest {
        Some(b"Z") => true,
        Some([b'+' | b'-', zone @ ..]) => {
            zone.len() == 4
                && zone.iter().all(u8::is_ascii_digit)
                && zone.first().is_some_and(|h| *h <= b'2')
        }
        _ => false,
    }
}

/// Postal Address: lines separated by `$`, `\24` and `\5C` escapes.
fn is_postal_address(v: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(v) else {
        return false;
    };
    text.split('$').all(|line| {
        !line.is_empty() && {
            let mut chars = line.chars();
            let mut ok = true;
            while let Some(c) = chars.next() {
                if c == '\\' {
                    let esc: String = chars.by_ref().take(2).collect();
                    ok &= esc.eq_ignore_ascii_case("24") || esc.eq_ignore_ascii_case("5c");
                }
            }
            ok
        }
    })
}

impl Syntax {
    /// Checks one value. Strings must be UTF-8 (RFC 4517 section 3.1).
    pub fn is_valid(self, v: &[u8]) -> bool {
        let utf8 = std::str::from_utf8(v).is_ok();
        match self {
            Syntax::Octets | Syntax::OctetString | Syntax::Jpeg => true,
            Syntax::DirectoryString => utf8 && !v.is_empty(),
            Syntax::Ia5String => v.is_ascii(),
            Syntax::PrintableString => is_printable(v),
            Syntax::CountryString => v.len() == 2 && is_printable(v),
            Syntax::NumericString => {
                !v.is_empty() && v.iter().all(|c| c.is_ascii_digit() || *c == b' ')
            }
            Syntax::Integer => is_integer(v),
            Syntax::Boolean => v == b"TRUE" || v == b"FALSE",
            Syntax::Oid => is_oid(v),
            Syntax::Dn => utf8 && meridian_proto::dn::SyntacticDn::parse_bytes(v).is_ok(),
            Syntax::NameAndOptionalUid => {
                // DN [ "#" BitString ]: the '#' that starts the UID is the last one.
                match v.iter().rposition(|c| *c == b'#') {
                    Some(at) if v.get(at + 1..).is_some_and(is_bit_string) => {
                        meridian_proto::dn::SyntacticDn::parse_bytes(
                            v.get(..at).unwrap_or_default(),
                        )
                        .is_ok()
                    }
                    _ => meridian_proto::dn::SyntacticDn::parse_bytes(v).is_ok(),
                }
            }
            Syntax::GeneralizedTime => parse_generalized_time(v).is_some(),
            Syntax::UtcTime => is_utc_time(v),
            Syntax::TelephoneNumber => is_printable(v),
            Syntax::FacsimileTelephoneNumber => {
                let mut parts = v.split(|c| *c == b'$');
                parts.next().is_some_and(is_printable)
                    && parts.all(|p| {
                        matches!(
                            p,
                            b"twoDimensional"
                                | b"fineResolution"
                                | b"unlimitedLength"
                                | b"b4Length"
                                | b"a3Width"
                                | b"b4Width"
                                | b"uncompressed"
                        )
                    })
            }
            Syntax::TelexNumber => {
                v.split(|c| *c == b'$').count() == 3 && v.split(|c| *c == b'$').all(is_printable)
            }
            Syntax::PostalAddress => is_postal_address(v),
            Syntax::BitString => is_bit_string(v),
            Syntax::Uuid => is_uuid(v),
            Syntax::DeliveryMethod => {
                utf8 && std::str::from_utf8(v)
                    .unwrap_or_default()
                    .split('$')
                    .all(|p| {
                        matches!(
                            p.trim(),
                            "any"
                                | "mhs"
                                | "physical"
                                | "telex"
                                | "teletex"
                                | "g3fax"
                                | "g4fax"
                                | "ia5"
                                | "videotex"
                                | "telephone"
                        )
                    })
            }
            Syntax::OtherMailbox => v.is_ascii() && v.split(|c| *c == b'$').count() == 2,
            Syntax::Csn => v.is_ascii() && v.len() >= 14,
            Syntax::SubstringAssertion => utf8 && !v.is_empty(),
            Syntax::AttributeTypeDescription | Syntax::ObjectClassDescription => {
                utf8 && crate::schema::description::parse(
                    std::str::from_utf8(v).unwrap_or_default(),
                )
                .is_ok()
            }
            Syntax::Guide | Syntax::EnhancedGuide => utf8 && !v.is_empty(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Syntax::*;

    #[test]
    fn table_of_valid_and_invalid_values() {
        let cases: &[(super::Syntax, &[&str], &[&str])] = &[
            (DirectoryString, &["x", "Lučić", " "], &[""]),
            (Ia5String, &["", "abc@x"], &["é"]),
            (PrintableString, &["Acme (UK) Ltd."], &["", "a@b", "é"]),
            (NumericString, &["123 456"], &["", "12a"]),
            (
                Integer,
                &["0", "-5", "123"],
                &["", "-0", "007", "1.5", "+1"],
            ),
            (Boolean, &["TRUE", "FALSE"], &["true", "1", ""]),
            (Oid, &["2.5.4.3", "cn", "x-y"], &["", "2.05", "1x", "2."]),
            (Dn, &["", "cn=a,dc=b", "1.2.3=#0401"], &["cn", "cn=a,"]),
            (
                NameAndOptionalUid,
                &["cn=a", "cn=a#'0101'B", "cn=a\\#x", "#'01'B"],
                &["cn", "cn=a<b#'01'B"],
            ),
            (
                GeneralizedTime,
                &["20261122010203Z", "199412161032.5-0500", "2026112201Z"],
                &["2026112201", "20261322010203Z", "x"],
            ),
            (TelephoneNumber, &["+1 512 315 0280"], &["", "é"]),
            (CountryString, &["US"], &["USA", "u"]),
            (
                UtcTime,
                &["9412161032Z", "941216103245-0500"],
                &["9413161032Z", "9412161032", "94121610Z"],
            ),
            (BitString, &["'0101'B", "''B"], &["'012'B", "0101"]),
            (
                Uuid,
                &["597ae2f6-16a6-1027-98f4-d28b5365dc14"],
                &["597ae2f616a6102798f4d28b5365dc14"],
            ),
            (PostalAddress, &["1 Main St$Anytown\\24"], &["", "a$$b"]),
            (
                FacsimileTelephoneNumber,
                &["+1 555$twoDimensional"],
                &["+1 555$bogus"],
            ),
            (DeliveryMethod, &["telephone", "mhs $ telex"], &["fax"]),
        ];
        for (syntax, good, bad) in cases {
            for v in *good {
                assert!(
                    syntax.is_valid(v.as_bytes()),
                    "{syntax:?} should accept {v:?}"
                );
            }
            for v in *bad {
                assert!(
                    !syntax.is_valid(v.as_bytes()),
                    "{syntax:?} should refuse {v:?}"
                );
            }
        }
    }
}
