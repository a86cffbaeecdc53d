//! Value templates: text with placeholders, rendered once per request
//! (bench) or per entry (gen).
//!
//! | placeholder | renders |
//! |---|---|
//! | `{key}`, `{key:W}` | the request's key (bench), zero-padded to W digits |
//! | `{seq}`, `{seq:W}`, `{seq+N}`, `{seq+N:W}` | the running sequence number (+ N) |
//! | `{unique}` | 8 characters unique to the session and request (seed 000) |
//! | `{run}` | 8 characters telling this run from others (new DNs that a second run of a scenario does not collide with) |
//! | `{num:MIN:MAX}` | a random integer in MIN..=MAX |
//! | `{alpha:N}`, `{digits:N}`, `{alnum:N}` | N random letters, digits, or both |
//! | `{pick:a\|b\|c}` | one of the listed values, at random |
//! | `{{`, `}}` | a literal brace |
//!
//! A template is parsed once into parts; rendering appends bytes to a
//! buffer and allocates nothing.

use std::fmt;

use crate::rng::Rng;

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(Vec<u8>),
    Key { width: usize },
    Seq { offset: u64, width: usize },
    Unique,
    Run,
    Number { min: u64, max: u64 },
    Random { alphabet: &'static [u8], len: usize },
    Pick(Vec<Vec<u8>>),
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
}

/// A piece of a template's text (see [`Template::split`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// Literal text.
    Text(String),
    /// One placeholder.
    Placeholder(Template),
}

/// What a rendering draws its variable parts from.
#[derive(Debug)]
pub struct Values<'r> {
    /// `{key}`.
    pub key: u64,
    /// `{seq}`.
    pub seq: u64,
    /// `{unique}`, before its 8-character rendering.
    pub unique: u64,
    /// `{run}`, before its 8-character rendering.
    pub run: u64,
    /// Random parts.
    pub rng: &'r mut Rng,
}

/// A template that does not parse, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    /// The template text.
    pub template: String,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "template {:?}: {}", self.template, self.reason)
    }
}

impl std::error::Error for TemplateError {}

const ALPHA: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
const DIGITS: &[u8] = b"0123456789";
const ALNUM: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// Longest random string or padding a placeholder may ask for: a typo such
/// as `{alpha:10000000000}` is refused rather than allocating gigabytes.
const MAX_PLACEHOLDER_LEN: usize = 1 << 20;

impl Template {
    /// Parses `text`.
    pub fn parse(text: &str) -> Result<Template, TemplateError> {
        let error = |reason: String| TemplateError {
            template: text.to_owned(),
            reason,
        };
        let mut parts = Vec::new();
        let mut literal = Vec::new();
        let mut rest = text;
        while let Some(i) = rest.find(['{', '}']) {
            let (before, at) = rest.split_at(i);
            literal.extend_from_slice(before.as_bytes());
            if let Some(after) = at.strip_prefix("{{") {
                literal.push(b'{');
                rest = after;
            } else if let Some(after) = at.strip_prefix("}}") {
                literal.push(b'}');
                rest = after;
            } else if at.starts_with('}') {
                return Err(error("a lone '}' (write '}}' for a literal brace)".into()));
            } else {
                let end = at.find('}').ok_or_else(|| {
                    error("a '{' without its '}' (write '{{' for a literal brace)".into())
                })?;
                let inner = at.get(1..end).unwrap_or("");
                if !literal.is_empty() {
                    parts.push(Part::Literal(std::mem::take(&mut literal)));
                }
                parts.push(parse_placeholder(inner).map_err(error)?);
                rest = at.get(end + 1..).unwrap_or("");
            }
        }
        literal.extend_from_slice(rest.as_bytes());
        if !literal.is_empty() {
            parts.push(Part::Literal(literal));
        }
        Ok(Template { parts })
    }

    /// `text` cut into its literal runs (braces unescaped) and one
    /// single-placeholder template per placeholder, in order.
    pub fn split(text: &str) -> Result<Vec<Segment>, TemplateError> {
        Ok(Template::parse(text)?
            .parts
            .into_iter()
            .map(|part| match part {
                Part::Literal(bytes) => Segment::Text(String::from_utf8_lossy(&bytes).into_owned()),
                other => Segment::Placeholder(Template { parts: vec![other] }),
            })
            .collect())
    }

    /// A template of fixed text (braces taken literally).
    pub fn literal(text: &str) -> Template {
        Template {
            parts: vec![Part::Literal(text.as_bytes().to_vec())],
        }
    }

    /// True when the template uses `{seq}`.
    pub fn uses_seq(&self) -> bool {
        self.parts.iter().any(|p| matches!(p, Part::Seq { .. }))
    }

    /// True when the rendering never changes.
    pub fn is_constant(&self) -> bool {
        self.parts.iter().all(|p| matches!(p, Part::Literal(_)))
    }

    /// Appends the rendering to `out`.
    pub fn render(&self, values: &mut Values<'_>, out: &mut Vec<u8>) {
        for part in &self.parts {
            match part {
                Part::Literal(bytes) => out.extend_from_slice(bytes),
                Part::Key { width } => push_decimal(out, values.key, *width),
                Part::Seq { offset, width } => {
                    push_decimal(out, values.seq.wrapping_add(*offset), *width);
                }
                Part::Unique => push_unique(out, values.unique),
                Part::Run => push_unique(out, values.run),
                Part::Number { min, max } => {
                    let span = max - min;
                    let n = if span == u64::MAX {
                        values.rng.next_u64()
                    } else {
                        min + values.rng.below(span + 1)
                    };
                    push_decimal(out, n, 0);
                }
                Part::Random { alphabet, len } => {
                    for _ in 0..*len {
                        let i = values.rng.below(alphabet.len() as u64) as usize;
                        out.push(alphabet.get(i).copied().unwrap_or(b'x'));
                    }
                }
                Part::Pick(choices) => {
                    let i = values.rng.below(choices.len() as u64) as usize;
                    if let Some(choice) = choices.get(i) {
                        out.extend_from_slice(choice);
                    }
                }
            }
        }
    }

    /// The rendering as a new string (for tests and error messages).
    pub fn render_to_string(&self, values: &mut Values<'_>) -> String {
        let mut out = Vec::new();
        self.render(values, &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }
}

fn parse_placeholder(inner: &str) -> Result<Part, String> {
    let (name, arg) = match inner.split_once(':') {
        Some((name, arg)) => (name, Some(arg)),
        None => (inner, None),
    };
    let width = |arg: Option<&str>| -> Result<usize, String> {
        arg.map_or(Ok(0), |a| parse_len(a, "a width"))
    };
    match name {
        "key" => Ok(Part::Key { width: width(arg)? }),
        "unique" if arg.is_none() => Ok(Part::Unique),
        "run" if arg.is_none() => Ok(Part::Run),
        "num" => {
            let (min, max) = arg
                .and_then(|a| a.split_once(':'))
                .ok_or("{num:MIN:MAX} needs both bounds")?;
            let min: u64 = min
                .parse()
                .map_err(|_| format!("{min:?} is not a number"))?;
            let max: u64 = max
                .parse()
                .map_err(|_| format!("{max:?} is not a number"))?;
            if min > max {
                return Err(format!(
                    "{{num:{min}:{max}}}: the minimum is above the maximum"
                ));
            }
            Ok(Part::Number { min, max })
        }
        "alpha" | "digits" | "alnum" => {
            let len = parse_len(
                arg.ok_or(format!("{{{name}:N}} needs a length"))?,
                "a length",
            )?;
            let alphabet = match name {
                "alpha" => ALPHA,
                "digits" => DIGITS,
                _ => ALNUM,
            };
            Ok(Part::Random { alphabet, len })
        }
        "pick" => {
            let list = arg.ok_or("{pick:a|b|c} needs values")?;
            Ok(Part::Pick(
                list.split('|').map(|v| v.as_bytes().to_vec()).collect(),
            ))
        }
        _ => {
            if let Some(offset) = name.strip_prefix("seq") {
                let offset = match offset.strip_prefix('+') {
                    Some(n) => n.parse().map_err(|_| format!("{n:?} is not a number"))?,
                    None if offset.is_empty() => 0,
                    None => return Err(format!("unknown placeholder {{{inner}}}")),
                };
                return Ok(Part::Seq {
                    offset,
                    width: width(arg)?,
                });
            }
            Err(format!(
                "unknown placeholder {{{inner}}} (known: key, seq, seq+N, unique, run, num:MIN:MAX, alpha:N, digits:N, alnum:N, pick:a|b)"
            ))
        }
    }
}

fn parse_len(text: &str, what: &str) -> Result<usize, String> {
    let n: usize = text
        .parse()
        .map_err(|_| format!("{text:?} is not {what}"))?;
    if n > MAX_PLACEHOLDER_LEN {
        return Err(format!(
            "{what} of {n} is above the limit of {MAX_PLACEHOLDER_LEN}"
        ));
    }
    Ok(n)
}

/// Appends `n` in decimal, left-padded with zeros to `width`.
pub fn push_decimal(out: &mut Vec<u8>, mut n: u64, width: usize) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        if let Some(d) = digits.get_mut(i) {
            *d = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 || i == 0 {
            break;
        }
    }
    let used = digits.len() - i;
    out.extend(std::iter::repeat_n(b'0', width.saturating_sub(used)));
    out.extend_from_slice(digits.get(i..).unwrap_or(&[]));
}

/// Appends the 8-character rendering of a unique value: base 62, so the
/// 8 bytes of seed 000's modify value tell 62^8 (2.2e14) requests apart.
pub fn push_unique(out: &mut Vec<u8>, mut n: u64) {
    let mut chars = [b'0'; 8];
    for c in chars.iter_mut().rev() {
        *c = ALNUM.get((n % 62) as usize).copied().unwrap_or(b'0');
        n /= 62;
    }
    out.extend_from_slice(&chars);
}

/// The unique value of request `request` of session `session`: sessions
/// below 50,000 and 2^32 requests each stay within 62^8.
pub fn unique_value(session: u32, request: u64) -> u64 {
    (u64::from(session) << 32) | (request & 0xffff_ffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(text: &str, key: u64, seq: u64) -> String {
        let mut rng = Rng::new(7);
        let mut values = Values {
            key,
            seq,
            unique: 0,
            run: 0,
            rng: &mut rng,
        };
        Template::parse(text).unwrap().render_to_string(&mut values)
    }

    #[test]
    fn placeholders_render() {
        assert_eq!(
            render("uid=user{key},ou=People", 42, 0),
            "uid=user42,ou=People"
        );
        assert_eq!(render("{key:8}", 42, 0), "00000042");
        assert_eq!(render("{seq+1000}/{seq:3}", 0, 5), "1005/005");
        assert_eq!(render("{{literal}} {{", 0, 0), "{literal} {");
        let s = render("{alpha:5}-{digits:4}-{alnum:3}", 0, 0);
        assert_eq!(s.len(), 14);
        assert!(s[..5].bytes().all(|b| b.is_ascii_alphabetic()));
        assert!(s[6..10].bytes().all(|b| b.is_ascii_digit()));
        let n: u64 = render("{num:10:12}", 0, 0).parse().unwrap();
        assert!((10..=12).contains(&n));
        assert!(["a", "b"].contains(&render("{pick:a|b}", 0, 0).as_str()));
    }

    #[test]
    fn bad_templates_are_refused_with_reasons() {
        for (text, needle) in [
            ("{nope}", "unknown placeholder"),
            ("{key", "without its '}'"),
            ("a}b", "lone '}'"),
            ("{num:5:1}", "above the maximum"),
            ("{alpha:x}", "not a length"),
            ("{alpha:99999999999}", "limit"),
            ("{seq-3}", "unknown placeholder"),
        ] {
            let err = Template::parse(text).unwrap_err();
            assert!(err.to_string().contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn unique_values_differ_and_have_eight_bytes() {
        let mut seen = std::collections::HashSet::new();
        for session in 0..50 {
            for request in 0..200 {
                let mut out = Vec::new();
                push_unique(&mut out, unique_value(session, request));
                assert_eq!(out.len(), 8);
                assert!(seen.insert(out));
            }
        }
        let mut out = Vec::new();
        push_unique(&mut out, unique_value(49_999, u64::from(u32::MAX)));
        assert_eq!(out.len(), 8);
    }

    #[test]
    fn decimal_padding() {
        let mut out = Vec::new();
        push_decimal(&mut out, 0, 0);
        push_decimal(&mut out, u64::MAX, 0);
        push_decimal(&mut out, 7, 3);
        assert_eq!(out, b"018446744073709551615007");
    }
}
