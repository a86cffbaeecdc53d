//! The string form of filters (RFC 4515): parse to BER, print from BER.
//!
//! Used by tools, logs and scenario files, never on the request path, so
//! clarity wins over speed here. Parsing writes the BER form directly; wrap
//! the bytes with [`Filter::from_ber`] to get a [`Filter`] view.

use std::fmt::{self, Write as _};

use meridian_ber::{Tag, Writer};

use crate::filter::{Filter, Substring};

/// Why a filter string was refused, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid filter at byte {position}: {reason}")]
pub struct FilterParseError {
    /// Byte offset into the string.
    pub position: usize,
    /// What was expected or found.
    pub reason: &'static str,
}

/// Parses an RFC 4515 filter and appends its BER encoding to `buf`.
///
/// Like `ldapsearch`, a filter without outer parentheses (`uid=jdoe`) is
/// accepted. Nesting deeper than `max_depth` is refused.
pub fn parse_into(s: &str, max_depth: usize, buf: &mut Vec<u8>) -> Result<(), FilterParseError> {
    let mut p = Parser {
        s: s.as_bytes(),
        pos: 0,
        max_depth,
        scratch: Vec::new(),
    };
    let mut w = Writer::new(buf);
    if p.peek() == Some(b'(') {
        p.filter(&mut w, 0)?;
    } else {
        p.component(&mut w, 0)?;
    }
    if p.pos != p.s.len() {
        return Err(p.error("unexpected characters after the filter"));
    }
    Ok(())
}

/// Parses an RFC 4515 filter into a new buffer of BER bytes.
pub fn parse(s: &str, max_depth: usize) -> Result<Vec<u8>, FilterParseError> {
    let mut buf = Vec::with_capacity(s.len() + 8);
    parse_into(s, max_depth, &mut buf)?;
    Ok(buf)
}

struct Parser<'s> {
    s: &'s [u8],
    pos: usize,
    max_depth: usize,
    scratch: Vec<u8>,
}

impl Parser<'_> {
    fn error(&self, reason: &'static str) -> FilterParseError {
        FilterParseError {
            position: self.pos,
            reason,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn eat(&mut self, c: u8, reason: &'static str) -> Result<(), FilterParseError> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(reason))
        }
    }

    fn filter(&mut self, w: &mut Writer<'_>, depth: usize) -> Result<(), FilterParseError> {
        if depth >= self.max_depth {
            return Err(self.error("filter nested too deeply"));
        }
        self.eat(b'(', "expected '('")?;
        self.component(w, depth)?;
        self.eat(b')', "expected ')'")
    }

    fn component(&mut self, w: &mut Writer<'_>, depth: usize) -> Result<(), FilterParseError> {
        match self.peek() {
            Some(op @ (b'&' | b'|')) => {
                self.pos += 1;
                let m = w.start(Tag::context(if op == b'&' { 0 } else { 1 }, true));
                // `(&)` and `(|)` are the absolute TRUE/FALSE of RFC 4526.
                while self.peek() == Some(b'(') {
                    self.filter(w, depth + 1)?;
                }
                w.end(m);
                Ok(())
            }
            Some(b'!') => {
                self.pos += 1;
                let m = w.start(Tag::context(2, true));
                self.filter(w, depth + 1)?;
                w.end(m);
                Ok(())
            }
            Some(_) => self.item(w),
            None => Err(self.error("empty filter")),
        }
    }

    fn attribute(&mut self) -> &[u8] {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c.is_ascii_alphanumeric() || c == b'-' || c == b'.' || c == b';' || c == b'_' {
                self.pos += 1;
            } else {
                break;
            }
        }
        self.s.get(start..self.pos).unwrap_or_default()
    }

    fn item(&mut self, w: &mut Writer<'_>) -> Result<(), FilterParseError> {
        let attr_start = self.pos;
        let attr_len = self.attribute().len();
        let attr_range = attr_start..attr_start + attr_len;
        let attr = |p: &Self| p.s.get(attr_range.clone()).unwrap_or_default().to_vec();
        match self.peek() {
            Some(b':') => return self.extensible(w, attr(self)),
            _ if attr_len == 0 => return Err(self.error("expected an attribute description")),
            _ => {}
        }
        let tag = match (self.peek(), self.s.get(self.pos + 1).copied()) {
            (Some(b'='), _) => {
                self.pos += 1;
                None
            }
            (Some(b'~'), Some(b'=')) => Some(8),
            (Some(b'>'), Some(b'=')) => Some(5),
            (Some(b'<'), Some(b'=')) => Some(6),
            _ => return Err(self.error("expected '=', '~=', '>=' or '<='")),
        };
        let attr = attr(self);
        if let Some(number) = tag {
            self.pos += 2;
            let value = self.value(false)?.0;
            let m = w.start(Tag::context(number, true));
            w.octets(Tag::OCTET_STRING, &attr);
            w.octets(Tag::OCTET_STRING, &value);
            w.end(m);
            return Ok(());
        }
        // '=': equality, presence or substrings.
        if self.s.get(self.pos..self.pos + 2) == Some(b"*)")
            || (self.peek() == Some(b'*') && self.pos + 1 == self.s.len())
        {
            self.pos += 1;
            w.octets(Tag::context(7, false), &attr);
            return Ok(());
        }
        let (first, more) = self.value(true)?;
        if !more {
            let m = w.start(Tag::context(3, true));
            w.octets(Tag::OCTET_STRING, &attr);
            w.octets(Tag::OCTET_STRING, &first);
            w.end(m);
            return Ok(());
        }
        let m = w.start(Tag::context(4, true));
        w.octets(Tag::OCTET_STRING, &attr);
        let parts = w.start(Tag::SEQUENCE);
        if !first.is_empty() {
            w.octets(Tag::context(0, false), &first);
        }
        loop {
            let (segment, more) = self.value(true)?;
            match (segment.is_empty(), more) {
                (true, false) => break,
                (true, true) => return Err(self.error("empty substring between '*'")),
                (false, true) => w.octets(Tag::context(1, false), &segment),
                (false, false) => {
                    w.octets(Tag::context(2, false), &segment);
                    break;
                }
            }
        }
        w.end(parts);
        w.end(m);
        Ok(())
    }

    fn extensible(&mut self, w: &mut Writer<'_>, attr: Vec<u8>) -> Result<(), FilterParseError> {
        let mut dn = false;
        let mut rule: Option<Vec<u8>> = None;
        loop {
            self.eat(b':', "expected ':'")?;
            if self.peek() == Some(b'=') {
                self.pos += 1;
                break;
            }
            let token = self.attribute().to_vec();
            if token.is_empty() {
                return Err(self.error("expected 'dn' or a matching rule"));
            }
            if token.eq_ignore_ascii_case(b"dn") && !dn && rule.is_none() {
                dn = true;
            } else if rule.is_none() {
                rule = Some(token);
            } else {
                return Err(self.error("more than one matching rule"));
            }
        }
        if attr.is_empty() && rule.is_none() {
            return Err(self.error("extensible match needs an attribute or a matching rule"));
        }
        let value = self.value(false)?.0;
        let m = w.start(Tag::context(9, true));
        if let Some(rule) = rule {
            w.octets(Tag::context(1, false), &rule);
        }
        if !attr.is_empty() {
            w.octets(Tag::context(2, false), &attr);
        }
        w.octets(Tag::context(3, false), &value);
        if dn {
            w.boolean(Tag::context(4, false), true);
        }
        w.end(m);
        Ok(())
    }

    /// Reads an escaped value up to ')' (or '*', if `stars`). Returns the
    /// unescaped bytes and whether it stopped at a '*'.
    fn value(&mut self, stars: bool) -> Result<(Vec<u8>, bool), FilterParseError> {
        self.scratch.clear();
        loop {
            match self.peek() {
                None | Some(b')') => return Ok((self.scratch.clone(), false)),
                Some(b'*') if stars => {
                    self.pos += 1;
                    return Ok((self.scratch.clone(), true));
                }
                Some(b'*') => return Err(self.error("unescaped '*' in value")),
                Some(b'(') => return Err(self.error("unescaped '(' in value")),
                Some(0) => return Err(self.error("NUL in value")),
                Some(b'\\') => {
                    let hex = self
                        .s
                        .get(self.pos + 1..self.pos + 3)
                        .and_then(|h| std::str::from_utf8(h).ok())
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                        .ok_or_else(|| self.error("'\\' must be followed by two hex digits"))?;
                    self.scratch.push(hex);
                    self.pos += 3;
                }
                Some(c) => {
                    self.scratch.push(c);
                    self.pos += 1;
                }
            }
        }
    }
}

/// Writes `value` escaped for a filter string: the characters RFC 4515
/// requires (`*()\` and NUL), control characters, and, when the value is
/// not valid UTF-8, every byte above 0x7f become `\XX`.
fn write_escaped(out: &mut impl fmt::Write, value: &[u8]) -> fmt::Result {
    let escape = |out: &mut dyn fmt::Write, b: u32| write!(out, "\\{b:02x}");
    match std::str::from_utf8(value) {
        Ok(text) => {
            for ch in text.chars() {
                match ch {
                    '*' | '(' | ')' | '\\' | '\0'..='\x1f' | '\x7f' => escape(out, ch as u32)?,
                    _ => out.write_char(ch)?,
                }
            }
        }
        Err(_) => {
            for &b in value {
                match b {
                    b'*' | b'(' | b')' | b'\\' | 0..=0x1f | 0x7f..=0xff => {
                        escape(out, u32::from(b))?
                    }
                    _ => out.write_char(char::from(b))?,
                }
            }
        }
    }
    Ok(())
}

fn write_text(out: &mut impl fmt::Write, text: &[u8]) -> fmt::Result {
    out.write_str(&String::from_utf8_lossy(text))
}

impl fmt::Display for Filter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('(')?;
        match self {
            Filter::And(children) | Filter::Or(children) | Filter::Not(children) => {
                f.write_char(match self {
                    Filter::And(_) => '&',
                    Filter::Or(_) => '|',
                    _ => '!',
                })?;
                for child in children.iter() {
                    fmt::Display::fmt(&child, f)?;
                }
            }
            Filter::Equality(a)
            | Filter::GreaterOrEqual(a)
            | Filter::LessOrEqual(a)
            | Filter::Approx(a) => {
                write_text(f, a.attr)?;
                f.write_str(match self {
                    Filter::Equality(_) => "=",
                    Filter::GreaterOrEqual(_) => ">=",
                    Filter::LessOrEqual(_) => "<=",
                    _ => "~=",
                })?;
                write_escaped(f, a.value)?;
            }
            Filter::Present(attr) => {
                write_text(f, attr)?;
                f.write_str("=*")?;
            }
            Filter::Substrings(s) => {
                write_text(f, s.attr)?;
                f.write_char('=')?;
                let mut parts = s.parts.iter().peekable();
                if let Some(Substring::Initial(v)) = parts.peek().copied() {
                    write_escaped(f, v)?;
                    parts.next();
                }
                f.write_char('*')?;
                for part in parts {
                    match part {
                        Substring::Any(v) => {
                            write_escaped(f, v)?;
                            f.write_char('*')?;
                        }
                        // Validation puts `initial` first, so only `final` is left.
                        Substring::Final(v) | Substring::Initial(v) => write_escaped(f, v)?,
                    }
                }
            }
            Filter::Extensible(m) => {
                if let Some(attr) = m.attr {
                    write_text(f, attr)?;
                }
                if m.dn_attributes {
                    f.write_str(":dn")?;
                }
                if let Some(rule) = m.rule {
                    f.write_char(':')?;
                    write_text(f, rule)?;
                }
                f.write_str(":=")?;
                write_escaped(f, m.value)?;
            }
        }
        f.write_char(')')
    }
}
