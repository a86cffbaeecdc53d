//! Distinguished names in their string form (RFC 4514): parse and print.
//!
//! This is the syntactic layer only. Whether two DNs are *equal* depends on
//! each attribute's equality matching rule, which the schema knows:
//! `meridian_model::dn` normalises DNs.

use std::fmt::{self, Write as _};

/// Why a DN string was refused (answered as invalidDNSyntax).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid DN at byte {position}: {reason}")]
pub struct DnParseError {
    /// Byte offset into the string.
    pub position: usize,
    /// What was expected or found.
    pub reason: &'static str,
}

/// A DN as its string spells it, parsed into RDNs but not normalised
/// (that needs the schema: `meridian_model::dn::Dn`); `rdns[0]` is the
/// leftmost (most specific) RDN.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SyntacticDn {
    /// The RDNs, leftmost first.
    pub rdns: Vec<Rdn>,
}

/// A relative distinguished name: one or more type-value pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rdn {
    /// The pairs, in the order given.
    pub avas: Vec<TypeAndValue>,
}

/// One `type=value` pair of an RDN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeAndValue {
    /// The attribute type as written (a descriptor or a numeric OID).
    pub ty: String,
    /// The value.
    pub value: DnValue,
}

/// An attribute value in a DN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DnValue {
    /// A string value, with escapes resolved.
    Text(Vec<u8>),
    /// The `#hex` form: the BER encoding of the value.
    Ber(Vec<u8>),
}

/// Largest DN string we parse; longer DNs are refused rather than walked.
/// 64 KiB is far beyond any real DN and bounds the work per DN.
pub const MAX_DN_BYTES: usize = 64 * 1024;

impl SyntacticDn {
    /// Parses an RFC 4514 string. Spaces around `,`, `+` and `=` are
    /// tolerated, as OpenLDAP and RFC 2253 parsers do.
    pub fn parse(s: &str) -> Result<SyntacticDn, DnParseError> {
        Self::parse_bytes(s.as_bytes())
    }

    /// Parses a DN from the bytes of an LDAPDN (which must be UTF-8).
    pub fn parse_bytes(s: &[u8]) -> Result<SyntacticDn, DnParseError> {
        if s.len() > MAX_DN_BYTES {
            return Err(DnParseError {
                position: MAX_DN_BYTES,
                reason: "DN longer than 64 KiB",
            });
        }
        if std::str::from_utf8(s).is_err() {
            return Err(DnParseError {
                position: 0,
                reason: "DN is not valid UTF-8",
            });
        }
        let mut p = DnParser { s, pos: 0 };
        let mut rdns = Vec::new();
        p.skip_spaces();
        if p.pos == s.len() {
            return Ok(SyntacticDn { rdns });
        }
        loop {
            rdns.push(p.rdn()?);
            match p.peek() {
                None => break,
                Some(b',' | b';') => p.pos += 1,
                Some(_) => return Err(p.error("expected ',' or '+' after a value")),
            }
        }
        Ok(SyntacticDn { rdns })
    }

    /// The first RDN of `s` and the offset where the rest of the DN
    /// begins (just after the `,` or `;` that ends the RDN); `None` if
    /// `s` is a single RDN or does not start with a valid one. Parsing
    /// `s` whole gives this RDN followed by the RDNs of `s[offset..]`
    /// parsed alone: the parser carries no state across a separator.
    pub fn split_first_rdn(s: &[u8]) -> Option<(Rdn, usize)> {
        if s.len() > MAX_DN_BYTES {
            return None;
        }
        let mut p = DnParser { s, pos: 0 };
        let rdn = p.rdn().ok()?;
        match p.peek() {
            Some(b',' | b';') => Some((rdn, p.pos + 1)),
            _ => None,
        }
    }

    /// True for the empty DN (the root DSE).
    pub fn is_root(&self) -> bool {
        self.rdns.is_empty()
    }

    /// The parent DN, or `None` for the root.
    pub fn parent(&self) -> Option<SyntacticDn> {
        self.rdns.split_first().map(|(_, rest)| SyntacticDn {
            rdns: rest.to_vec(),
        })
    }
}

struct DnParser<'s> {
    s: &'s [u8],
    pos: usize,
}

impl DnParser<'_> {
    fn error(&self, reason: &'static str) -> DnParseError {
        DnParseError {
            position: self.pos,
            reason,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.pos += 1;
        }
    }

    /// One RDN: values joined by `+`, up to the separator or the end.
    fn rdn(&mut self) -> Result<Rdn, DnParseError> {
        let mut avas = vec![self.type_and_value()?];
        while self.peek() == Some(b'+') {
            self.pos += 1;
            avas.push(self.type_and_value()?);
        }
        Ok(Rdn { avas })
    }

    fn type_and_value(&mut self) -> Result<TypeAndValue, DnParseError> {
        self.skip_spaces();
        let start = self.pos;
        while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == b'-' || c == b'.')
        {
            self.pos += 1;
        }
        let ty = self.s.get(start..self.pos).unwrap_or_default();
        if !valid_attribute_type(ty) {
            return Err(DnParseError {
                position: start,
                reason: "expected an attribute type (a descriptor or a numeric OID)",
            });
        }
        let ty = String::from_utf8_lossy(ty).into_owned();
        self.skip_spaces();
        if self.peek() != Some(b'=') {
            return Err(self.error("expected '=' after the attribute type"));
        }
        self.pos += 1;
        self.skip_spaces();
        let value = if self.peek() == Some(b'#') {
            self.pos += 1;
            self.hex_value()?
        } else {
            self.text_value()?
        };
        self.skip_spaces();
        Ok(TypeAndValue { ty, value })
    }

    fn hex_value(&mut self) -> Result<DnValue, DnParseError> {
        let mut bytes = Vec::new();
        while let Some(c) = self.peek().filter(u8::is_ascii_hexdigit) {
            let lo = self
                .s
                .get(self.pos + 1)
                .copied()
                .filter(u8::is_ascii_hexdigit)
                .ok_or_else(|| self.error("odd number of hex digits"))?;
            bytes.push(hex_digit(c) << 4 | hex_digit(lo));
            self.pos += 2;
        }
        if bytes.is_empty() {
            return Err(self.error("'#' must be followed by hex digits"));
        }
        Ok(DnValue::Ber(bytes))
    }

    fn text_value(&mut self) -> Result<DnValue, DnParseError> {
        // Most values hold no escape, quote or space: up to the separator
        // (or the end) they are taken in one piece, as the loop below
        // would take them byte by byte.
        let rest = self.s.get(self.pos..).unwrap_or_default();
        let plain = rest
            .iter()
            .take_while(|&&c| {
                !matches!(
                    c,
                    b',' | b';' | b'+' | b'"' | b'<' | b'>' | b'\\' | b' ' | 0
                )
            })
            .count();
        if rest
            .get(plain)
            .is_none_or(|c| matches!(c, b',' | b';' | b'+'))
        {
            let value = rest.get(..plain).unwrap_or_default().to_vec();
            self.pos += plain;
            if std::str::from_utf8(&value).is_err() {
                return Err(self.error("escaped value is not valid UTF-8"));
            }
            return Ok(DnValue::Text(value));
        }
        let mut value = Vec::new();
        // Length of `value` up to its last escaped or non-space byte, so
        // unescaped trailing spaces can be dropped.
        let mut significant = 0;
        while let Some(c) = self.peek() {
            match c {
                b',' | b';' | b'+' => break,
                b'"' | b'<' | b'>' => {
                    return Err(self.error("unescaped special character in value"));
                }
                0 => return Err(self.error("NUL in value")),
                b'\\' => {
                    self.pos += 1;
                    match self.peek() {
                        Some(h) if h.is_ascii_hexdigit() => {
                            let lo = self
                                .s
                                .get(self.pos + 1)
                                .copied()
                                .filter(u8::is_ascii_hexdigit)
                                .ok_or_else(|| self.error("'\\' must be followed by a special character or two hex digits"))?;
                            value.push(hex_digit(h) << 4 | hex_digit(lo));
                            self.pos += 2;
                        }
                        Some(
                            s @ (b' ' | b'"' | b'#' | b'+' | b',' | b';' | b'<' | b'=' | b'>'
                            | b'\\'),
                        ) => {
                            value.push(s);
                            self.pos += 1;
                        }
                        _ => {
                            return Err(self.error(
                                "'\\' must be followed by a special character or two hex digits",
                            ));
                        }
                    }
                    significant = value.len();
                }
                _ => {
                    value.push(c);
                    self.pos += 1;
                    if c != b' ' {
                        significant = value.len();
                    }
                }
            }
        }
        value.truncate(significant);
        if std::str::from_utf8(&value).is_err() {
            return Err(self.error("escaped value is not valid UTF-8"));
        }
        Ok(DnValue::Text(value))
    }
}

fn hex_digit(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        b'A'..=b'F' => c - b'A' + 10,
        _ => 0,
    }
}

/// `descr` (a letter then letters, digits and hyphens) or `numericoid`.
fn valid_attribute_type(ty: &[u8]) -> bool {
    match ty.first() {
        Some(c) if c.is_ascii_alphabetic() => {
            ty.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        }
        Some(c) if c.is_ascii_digit() => ty.split(|c| *c == b'.').all(|arc| {
            !arc.is_empty()
                && arc.iter().all(u8::is_ascii_digit)
                && (arc.len() == 1 || arc.first() != Some(&b'0'))
        }),
        _ => false,
    }
}

fn write_hex(out: &mut String, bytes: &[u8]) {
    out.push('#');
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
}

/// Escapes a value as RFC 4514 section 2.4 requires. Bytes that are not
/// UTF-8 are written as `\XX` hex pairs (section 2.4 allows any byte so
/// escaped), never replaced: two values that differ only in such bytes
/// must never be written alike (this is how DNs are normalised into
/// keys).
pub fn write_text_value(out: &mut impl fmt::Write, value: &[u8]) -> fmt::Result {
    // Most values need no escape at all: written in one piece.
    let plain = |b: u8| !matches!(b, b'"' | b'+' | b',' | b';' | b'<' | b'>' | b'\\' | 0);
    if let Ok(text) = std::str::from_utf8(value)
        && text.bytes().all(plain)
        && !text.starts_with(['#', ' '])
        && !text.ends_with(' ')
    {
        return out.write_str(text);
    }
    let last = value.len().saturating_sub(1);
    let mut at = 0;
    for chunk in value.utf8_chunks() {
        for ch in chunk.valid().chars() {
            match ch {
                '"' | '+' | ',' | ';' | '<' | '>' | '\\' => {
                    out.write_char('\\')?;
                    out.write_char(ch)?;
                }
                '#' if at == 0 => out.write_str("\\#")?,
                ' ' if at == 0 || at == last => out.write_str("\\ ")?,
                '\0' => out.write_str("\\00")?,
                _ => out.write_char(ch)?,
            }
            at += ch.len_utf8();
        }
        for b in chunk.invalid() {
            write!(out, "\\{b:02x}")?;
            at += 1;
        }
    }
    Ok(())
}

impl fmt::Display for SyntacticDn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, rdn) in self.rdns.iter().enumerate() {
            if i > 0 {
                f.write_char(',')?;
            }
            for (j, ava) in rdn.avas.iter().enumerate() {
                if j > 0 {
                    f.write_char('+')?;
                }
                f.write_str(&ava.ty)?;
                f.write_char('=')?;
                match &ava.value {
                    DnValue::Text(v) => write_text_value(f, v)?,
                    DnValue::Ber(v) => {
                        let mut s = String::new();
                        write_hex(&mut s, v);
                        f.write_str(&s)?;
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_that_are_not_utf8_are_written_as_hex_pairs() {
        let write = |v: &[u8]| {
            let mut out = String::new();
            write_text_value(&mut out, v).unwrap();
            out
        };
        assert_eq!(write(b"a\xffb"), "a\\ffb");
        assert_ne!(write(b"a\xff"), write(b"a\xfe"));
        // Escapes around them still apply by byte position.
        assert_eq!(write(b" \xff "), "\\ \\ff\\ ");
        assert_eq!(write(b"#\xc3"), "\\#\\c3");
        assert_eq!(write("Müller".as_bytes()), "Müller");
    }

    fn text(s: &str) -> DnValue {
        DnValue::Text(s.as_bytes().to_vec())
    }

    /// The examples of RFC 4514 section 4.
    #[test]
    fn rfc4514_section4_examples() {
        let dn = SyntacticDn::parse("UID=jsmith,DC=example,DC=net").unwrap();
        assert_eq!(dn.rdns.len(), 3);
        assert_eq!(dn.rdns[0].avas[0].ty, "UID");
        assert_eq!(dn.rdns[0].avas[0].value, text("jsmith"));

        let dn = SyntacticDn::parse("OU=Sales+CN=J.  Smith,DC=example,DC=net").unwrap();
        assert_eq!(dn.rdns[0].avas.len(), 2);
        assert_eq!(dn.rdns[0].avas[1].value, text("J.  Smith"));

        let dn = SyntacticDn::parse(r#"CN=James \"Jim\" Smith\, III,DC=example,DC=net"#).unwrap();
        assert_eq!(dn.rdns[0].avas[0].value, text(r#"James "Jim" Smith, III"#));
        assert_eq!(dn.rdns.len(), 3);

        let dn = SyntacticDn::parse(r"CN=Before\0dAfter,DC=example,DC=net").unwrap();
        assert_eq!(dn.rdns[0].avas[0].value, text("Before\rAfter"));

        let dn = SyntacticDn::parse("1.3.6.1.4.1.1466.0=#04024869").unwrap();
        assert_eq!(
            dn.rdns[0].avas[0].value,
            DnValue::Ber(vec![0x04, 0x02, 0x48, 0x69])
        );

        let dn = SyntacticDn::parse(r"CN=Lu\C4\8Di\C4\87").unwrap();
        assert_eq!(dn.rdns[0].avas[0].value, text("Lučić"));
    }

    #[test]
    fn print_then_parse_is_identity() {
        for s in [
            "UID=jsmith,DC=example,DC=net",
            "OU=Sales+CN=J.  Smith,DC=example,DC=net",
            r#"CN=James \"Jim\" Smith\, III,DC=example,DC=net"#,
            r"CN=\#1\ lead\ ,O=x",
            "1.3.6.1.4.1.1466.0=#04024869",
            r"CN=Lu\C4\8Di\C4\87",
            "cn=a=b,o=x",
            "",
        ] {
            let dn = SyntacticDn::parse(s).unwrap();
            let printed = dn.to_string();
            assert_eq!(
                SyntacticDn::parse(&printed).unwrap(),
                dn,
                "{s} -> {printed}"
            );
        }
    }

    proptest::proptest! {
        /// Any value, written as RFC 4514 escapes it, parses back to
        /// itself: plain values (taken whole) and those with escapes,
        /// quotes and spaces (taken byte by byte) alike, in any RDN of
        /// a DN and beside other values.
        #[test]
        fn any_value_printed_parses_back(
            values in proptest::collection::vec(
                proptest::collection::vec(
                    proptest::prop_oneof![
                        proptest::sample::select(b"az09 ,;+=\"<>#\\".to_vec()),
                        proptest::num::u8::ANY,
                    ],
                    0..12,
                ),
                1..4,
            ),
            separator in proptest::sample::select(vec![",", ";", "+"]),
        ) {
            let mut text = String::new();
            for (i, value) in values.iter().enumerate() {
                if i > 0 {
                    text.push_str(separator);
                }
                text.push_str(&format!("cn{i}="));
                write_text_value(&mut text, value).unwrap();
            }
            let dn = SyntacticDn::parse(&text);
            // A value that is not UTF-8 is written with `\XX` pairs,
            // which must make UTF-8 on the way back in: refused.
            if values.iter().any(|v| std::str::from_utf8(v).is_err()) {
                proptest::prop_assert!(dn.is_err(), "{}", text);
                return Ok(());
            }
            let dn = dn.unwrap();
            let parsed: Vec<&DnValue> =
                dn.rdns.iter().flat_map(|rdn| rdn.avas.iter().map(|ava| &ava.value)).collect();
            proptest::prop_assert_eq!(parsed.len(), values.len());
            for (value, parsed) in values.iter().zip(parsed) {
                proptest::prop_assert_eq!(parsed, &DnValue::Text(value.clone()), "{}", text);
            }
        }
    }

    #[test]
    fn an_equals_sign_in_a_value_may_stand_unescaped() {
        // RFC 4514 section 3: `=` (%x3D) is in LUTF1, SUTF1 and TUTF1,
        // so a value may hold it as it is; `\=` and `\3D` are the same
        // value. slapd accepts all three as one DN.
        let expected = SyntacticDn::parse(r"cn=a\=b=,o=x=y").unwrap();
        for s in ["cn=a=b=,o=x=y", r"cn=a\3Db\3D,o=x\3dy", "cn = a=b= , o=x=y"] {
            assert_eq!(SyntacticDn::parse(s).unwrap(), expected, "{s}");
        }
        assert_eq!(expected.rdns[0].avas[0].value, text("a=b="));
        // The first `=` of a pair still ends its type.
        let first = SyntacticDn::parse("cn==a").unwrap();
        assert_eq!(first.rdns[0].avas[0].value, text("=a"));
    }

    #[test]
    fn invalid_dns_are_refused_with_a_position() {
        for s in [
            "cn", "cn=a,", "=a", "cn=a\\", "cn=a\\zz", "1cn=a", "cn=a\"b", "cn=#zz", "cn=a<b",
        ] {
            assert!(SyntacticDn::parse(s).is_err(), "{s}");
        }
    }
}
