//! RFC 4512 section 4.1 schema descriptions: `( 2.5.4.3 NAME 'cn' ... )`.
//!
//! One tokenizer and one generic parser for every kind of description:
//! a numeric OID (or an OpenLDAP `objectidentifier` macro) followed by
//! keyword/value pairs. What each keyword means is decided by the caller.

use std::fmt;

/// A syntax error in a description, with the byte offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescriptionError {
    /// Byte offset in the description.
    pub position: usize,
    /// What was wrong.
    pub reason: String,
}

impl fmt::Display for DescriptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: {}", self.position, self.reason)
    }
}

/// The value that follows a keyword.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A keyword without a value (`SINGLE-VALUE`, `OBSOLETE`, `STRUCTURAL`).
    Flag,
    /// One quoted string (`DESC 'x'`).
    Quoted(String),
    /// One or more quoted strings (`NAME ( 'cn' 'commonName' )`).
    QuotedList(Vec<String>),
    /// One bare word (`SUP name`, `SYNTAX 1.2.3{32}`, `USAGE userApplications`).
    Word(String),
    /// A parenthesised `$`-separated list of bare words (`MUST ( cn $ sn )`).
    WordList(Vec<String>),
}

impl Value {
    /// The words of a `Word` or `WordList`.
    pub fn words(&self) -> Vec<String> {
        match self {
            Value::Word(w) => vec![w.clone()],
            Value::WordList(ws) => ws.clone(),
            _ => Vec::new(),
        }
    }

    /// The strings of a `Quoted` or `QuotedList`.
    pub fn quoted(&self) -> Vec<String> {
        match self {
            Value::Quoted(q) => vec![q.clone()],
            Value::QuotedList(qs) => qs.clone(),
            _ => Vec::new(),
        }
    }
}

/// A parsed description: the OID and its fields in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Description {
    /// The numeric OID, or a macro to be expanded by the loader.
    pub oid: String,
    /// `(KEYWORD, value)` pairs; keywords upper-cased.
    pub fields: Vec<(String, Value)>,
}

impl Description {
    /// The value of `keyword`, if present.
    pub fn get(&self, keyword: &str) -> Option<&Value> {
        self.fields
            .iter()
            .find(|(k, _)| k == keyword)
            .map(|(_, v)| v)
    }

    /// True if `keyword` is present.
    pub fn has(&self, keyword: &str) -> bool {
        self.get(keyword).is_some()
    }
}

/// Keywords that take no value.
const FLAGS: &[&str] = &[
    "OBSOLETE",
    "SINGLE-VALUE",
    "COLLECTIVE",
    "NO-USER-MODIFICATION",
    "ABSTRACT",
    "STRUCTURAL",
    "AUXILIARY",
];
/// Keywords whose value is one or more quoted strings.
const QUOTED: &[&str] = &["NAME", "DESC"];
/// Keywords whose value is one or more bare words.
const WORDS: &[&str] = &[
    "SUP", "EQUALITY", "ORDERING", "SUBSTR", "SYNTAX", "USAGE", "MUST", "MAY", "APPLIES", "AUX",
    "NOT", "FORM", "OC",
];

/// Parses one description.
pub fn parse(text: &str) -> Result<Description, DescriptionError> {
    let mut p = Parser {
        s: text.as_bytes(),
        pos: 0,
    };
    p.skip_space();
    p.expect(b'(')?;
    p.skip_space();
    let oid = p
        .word()
        .ok_or_else(|| p.error("expected an OID after '('"))?;
    let mut fields = Vec::new();
    loop {
        p.skip_space();
        match p.peek() {
            Some(b')') => {
                p.pos += 1;
                break;
            }
            None => return Err(p.error("missing ')' at the end")),
            _ => {}
        }
        let at = p.pos;
        let keyword = p
            .word()
            .ok_or_else(|| p.error("expected a keyword"))?
            .to_ascii_uppercase();
        p.skip_space();
        let value = if FLAGS.contains(&keyword.as_str()) {
            Value::Flag
        } else if QUOTED.contains(&keyword.as_str()) || keyword.starts_with("X-") {
            p.quoted_value()?
        } else if WORDS.contains(&keyword.as_str()) {
            p.word_value()?
        } else {
            return Err(DescriptionError {
                position: at,
                reason: format!("unknown keyword {keyword}"),
            });
        };
        if fields.iter().any(|(k, _): &(String, Value)| *k == keyword) {
            return Err(DescriptionError {
                position: at,
                reason: format!("{keyword} appears twice"),
            });
        }
        fields.push((keyword, value));
    }
    p.skip_space();
    if p.pos != p.s.len() {
        return Err(p.error("text after the closing ')'"));
    }
    Ok(Description { oid, fields })
}

struct Parser<'s> {
    s: &'s [u8],
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, reason: &str) -> DescriptionError {
        DescriptionError {
            position: self.pos,
            reason: reason.to_owned(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn skip_space(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_whitespace()) {
            self.pos += 1;
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), DescriptionError> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(&format!("expected '{}'", char::from(c))))
        }
    }

    /// A bare word: OIDs, descriptors, `oid{len}`, macro `name:suffix`.
    fn word(&mut self) -> Option<String> {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || b"-.;:{}_".contains(&c))
        {
            self.pos += 1;
        }
        let word = self.s.get(start..self.pos)?;
        (!word.is_empty()).then(|| String::from_utf8_lossy(word).into_owned())
    }

    fn quoted(&mut self) -> Result<String, DescriptionError> {
        self.expect(b'\'')?;
        let mut out = Vec::new();
        loop {
            match self.peek() {
                None => return Err(self.error("unterminated quoted string")),
                Some(b'\'') => {
                    self.pos += 1;
                    break;
                }
                // RFC 4512 qdstring escapes: \27 for ', \5C for \.
                Some(b'\\') => {
                    let hex = self
                        .s
                        .get(self.pos + 1..self.pos + 3)
                        .and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
                    match hex {
                        Some(b) => {
                            out.push(b);
                            self.pos += 3;
                        }
                        None => {
                            out.push(b'\\');
                            self.pos += 1;
                        }
                    }
                }
                Some(c) => {
                    out.push(c);
                    self.pos += 1;
                }
            }
        }
        String::from_utf8(out).map_err(|_| self.error("quoted string is not UTF-8"))
    }

    fn quoted_value(&mut self) -> Result<Value, DescriptionError> {
        if self.peek() != Some(b'(') {
            return Ok(Value::Quoted(self.quoted()?));
        }
        self.pos += 1;
        let mut list = Vec::new();
        loop {
            self.skip_space();
            if self.peek() == Some(b')') {
                self.pos += 1;
                break;
            }
            list.push(self.quoted()?);
        }
        if list.is_empty() {
            return Err(self.error("empty list"));
        }
        Ok(Value::QuotedList(list))
    }

    fn word_value(&mut self) -> Result<Value, DescriptionError> {
        if self.peek() == Some(b'\'') {
            // Some schema files quote OIDs (`SYNTAX '1.2.3'`); accept it.
            return Ok(Value::Word(self.quoted()?));
        }
        if self.peek() != Some(b'(') {
            return self
                .word()
                .map(Value::Word)
                .ok_or_else(|| self.error("expected a name or OID"));
        }
        self.pos += 1;
        let mut list = Vec::new();
        loop {
            self.skip_space();
            match self.peek() {
                Some(b')') => {
                    self.pos += 1;
                    break;
                }
                Some(b'$') if !list.is_empty() => {
                    self.pos += 1;
                    continue;
                }
                _ => {}
            }
            list.push(
                self.word()
                    .ok_or_else(|| self.error("expected a name or OID in the list"))?,
            );
        }
        if list.is_empty() {
            return Err(self.error("empty list"));
        }
        Ok(Value::WordList(list))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_type_description() {
        let d = parse(
            "( 2.5.4.3 NAME ( 'cn' 'commonName' ) DESC 'RFC4519: common name(s)' SUP name \
             EQUALITY caseIgnoreMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.15{32768} SINGLE-VALUE \
             X-ORIGIN 'RFC 4519' )",
        )
        .unwrap();
        assert_eq!(d.oid, "2.5.4.3");
        assert_eq!(d.get("NAME").unwrap().quoted(), ["cn", "commonName"]);
        assert_eq!(d.get("DESC").unwrap().quoted(), ["RFC4519: common name(s)"]);
        assert_eq!(d.get("SUP").unwrap().words(), ["name"]);
        assert_eq!(
            d.get("SYNTAX").unwrap().words(),
            ["1.3.6.1.4.1.1466.115.121.1.15{32768}"]
        );
        assert!(d.has("SINGLE-VALUE"));
        assert_eq!(d.get("X-ORIGIN").unwrap().quoted(), ["RFC 4519"]);
    }

    #[test]
    fn object_class_lists() {
        let d = parse("( 2.5.6.6 NAME 'person' SUP top STRUCTURAL MUST ( sn $ cn ) MAY ( userPassword $ telephoneNumber ) )").unwrap();
        assert_eq!(d.get("MUST").unwrap().words(), ["sn", "cn"]);
        assert!(d.has("STRUCTURAL"));
    }

    #[test]
    fn errors_have_positions() {
        for bad in [
            "2.5.4.3 NAME 'cn' )",
            "( 2.5.4.3 NAME 'cn'",
            "( 2.5.4.3 NAME cn )",
            "( 2.5.4.3 BOGUS x )",
            "( 2.5.4.3 NAME 'a' NAME 'b' )",
            "( 2.5.4.3 MUST ( ) )",
            "( 2.5.4.3 ) x",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
