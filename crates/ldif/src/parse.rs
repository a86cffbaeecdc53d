//! One record's text to a [`Record`]: unfolding, comments, value forms
//! (plain, base64, file URL), and the change record grammar of RFC 2849.

use std::borrow::Cow;
use std::sync::Arc;

use crate::split::{line_content, strip_prefix_ignore_case};
use crate::{DescriptionText, LdifError, Limits, RawRecord, base64};

/// One `description: value` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttrValue {
    /// The attribute description as written (`cn`, `cn;lang-en`, an OID).
    pub description: DescriptionText,
    /// The value, decoded.
    pub value: Vec<u8>,
}

/// A `control:` line of a change record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Control {
    /// The control's OID.
    pub oid: String,
    /// Its criticality (`false` when not written).
    pub critical: bool,
    /// Its value, if any.
    pub value: Option<Vec<u8>>,
}

/// The kind of change of one part of a `changetype: modify` record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModOp {
    /// `add:`
    Add,
    /// `delete:`
    Delete,
    /// `replace:`
    Replace,
    /// `increment:` (RFC 4525).
    Increment,
}

/// One part of a `changetype: modify` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModSpec {
    /// What to do.
    pub op: ModOp,
    /// To which attribute description.
    pub description: String,
    /// With these values (none: the whole attribute, for delete and
    /// replace).
    pub values: Vec<Vec<u8>>,
}

/// What a record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// A content record: an entry.
    Content(Vec<AttrValue>),
    /// `changetype: add`.
    Add(Vec<AttrValue>),
    /// `changetype: delete`.
    Delete,
    /// `changetype: modrdn` or `moddn`.
    ModRdn {
        /// `newrdn:`
        new_rdn: Vec<u8>,
        /// `deleteoldrdn:` 1 or 0.
        delete_old_rdn: bool,
        /// `newsuperior:`, if moving.
        new_superior: Option<Vec<u8>>,
    },
    /// `changetype: modify`.
    Modify(Vec<ModSpec>),
}

/// One LDIF record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The line the record starts on.
    pub line: u64,
    /// The DN, decoded (still to be parsed by the caller).
    pub dn: Vec<u8>,
    /// `control:` lines (change records only).
    pub controls: Vec<Control>,
    /// The rest.
    pub body: Body,
}

impl Record {
    /// The attributes of an entry: a content record or `changetype: add`.
    pub fn entry_attributes(&self) -> Option<&[AttrValue]> {
        match &self.body {
            Body::Content(attrs) | Body::Add(attrs) => Some(attrs),
            _ => None,
        }
    }
}

/// A logical (unfolded) line and where it started.
struct Line<'a> {
    number: u64,
    text: Cow<'a, [u8]>,
}

struct Parser<'a> {
    input: &'a Arc<str>,
    limits: &'a Limits,
}

/// Parses one record. `Ok(None)` when it holds only comments.
pub fn parse_record(
    raw: &RawRecord,
    input: &Arc<str>,
    limits: &Limits,
) -> Result<Option<Record>, LdifError> {
    let parser = Parser { input, limits };
    let lines = parser.unfold(raw)?;
    let mut lines = lines.into_iter().peekable();
    let Some(first) = lines.next() else {
        return Ok(None);
    };
    let (name, spec) = parser.split(&first)?;
    if !name.eq_ignore_ascii_case("dn") {
        return Err(parser.error(
            first.number,
            format!("a record starts with `dn:`, not `{name}:`"),
        ));
    }
    let dn = parser.value(&first, spec)?;

    let mut controls = Vec::new();
    let mut changetype = None;
    while let Some(line) = lines.peek() {
        let (name, spec) = parser.split(line)?;
        if name.eq_ignore_ascii_case("control") {
            controls.push(parser.control(line, spec)?);
        } else if name.eq_ignore_ascii_case("changetype") {
            changetype = Some((line.number, parser.value(line, spec)?));
            lines.next();
            break;
        } else {
            break;
        }
        lines.next();
    }

    let body = match changetype {
        None => {
            if let Some(control) = controls.first() {
                return Err(parser.error(
                    raw.line,
                    format!("control {} on a record without `changetype:`", control.oid),
                ));
            }
            Body::Content(parser.attributes(lines)?)
        }
        Some((number, kind)) => match kind.to_ascii_lowercase().as_slice() {
            b"add" => Body::Add(parser.attributes(lines)?),
            b"delete" => {
                if let Some(extra) = lines.next() {
                    return Err(parser.error(
                        extra.number,
                        "a `changetype: delete` record has no further lines",
                    ));
                }
                Body::Delete
            }
            b"modrdn" | b"moddn" => parser.modrdn(raw.line, lines)?,
            b"modify" => Body::Modify(parser.modify(lines)?),
            other => {
                return Err(parser.error(
                    number,
                    format!(
                        "unknown changetype `{}` (add, delete, modify, modrdn, moddn)",
                        String::from_utf8_lossy(other)
                    ),
                ));
            }
        },
    };
    Ok(Some(Record {
        line: raw.line,
        dn,
        controls,
        body,
    }))
}

impl<'a> Parser<'a> {
    fn error(&self, line: u64, message: impl Into<String>) -> LdifError {
        LdifError::new(self.input, line, message)
    }

    /// Joins continuation lines (a leading space) to the line before and
    /// drops comments (after joining: a comment may be folded too).
    fn unfold<'r>(&self, raw: &'r RawRecord) -> Result<Vec<Line<'r>>, LdifError> {
        // At most one line per newline (and one unterminated): sized once.
        let newlines = raw.text.iter().filter(|b| **b == b'\n').count();
        let mut lines: Vec<Line<'r>> = Vec::with_capacity(newlines + 1);
        let mut in_comment = false;
        for (i, physical) in raw.text.split_inclusive(|b| *b == b'\n').enumerate() {
            let number = raw.line + i as u64;
            let content = line_content(physical);
            if let Some(rest) = content.strip_prefix(b" ") {
                if in_comment {
                    continue;
                }
                let Some(last) = lines.last_mut() else {
                    return Err(self.error(
                        number,
                        "a continuation line (leading space) with no line to continue",
                    ));
                };
                last.text.to_mut().extend_from_slice(rest);
                continue;
            }
            in_comment = content.starts_with(b"#");
            if !in_comment {
                lines.push(Line {
                    number,
                    text: Cow::Borrowed(content),
                });
            }
        }
        Ok(lines)
    }

    /// `description` and the value spec after its first colon.
    fn split<'l>(&self, line: &'l Line<'_>) -> Result<(&'l str, &'l [u8]), LdifError> {
        let text: &[u8] = &line.text;
        let Some(colon) = text.iter().position(|b| *b == b':') else {
            return Err(self.error(
                line.number,
                format!(
                    "expected `description: value`, found `{}`",
                    String::from_utf8_lossy(text)
                ),
            ));
        };
        let (name, spec) = text.split_at(colon);
        let spec = spec.get(1..).unwrap_or_default();
        let valid = !name.is_empty()
            && name
                .iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b';' | b'.' | b'_'));
        match std::str::from_utf8(name) {
            Ok(name) if valid => Ok((name, spec)),
            _ => Err(self.error(
                line.number,
                format!(
                    "`{}` is not an attribute description",
                    String::from_utf8_lossy(name)
                ),
            )),
        }
    }

    /// Decodes a value spec: `: text`, `:: base64` or `:< URL`.
    fn value(&self, line: &Line<'_>, spec: &[u8]) -> Result<Vec<u8>, LdifError> {
        if let Some(coded) = spec.strip_prefix(b":") {
            return base64::decode(coded.trim_ascii()).ok_or_else(|| {
                self.error(
                    line.number,
                    "the base64 value (after `::`) is not valid base64",
                )
            });
        }
        if let Some(url) = spec.strip_prefix(b"<") {
            return self.read_url(line.number, url.trim_ascii());
        }
        // FILL is spaces only: a leading tab belongs to the value.
        let start = spec.iter().position(|b| *b != b' ').unwrap_or(spec.len());
        Ok(spec.get(start..).unwrap_or_default().to_vec())
    }

    fn read_url(&self, number: u64, url: &[u8]) -> Result<Vec<u8>, LdifError> {
        let url = String::from_utf8_lossy(url);
        let Some(rest) = strip_prefix_ignore_case(url.as_bytes(), b"file://") else {
            return Err(self.error(
                number,
                format!("only file:// URLs of local files are read, not `{url}`"),
            ));
        };
        if !self.limits.allow_file_urls {
            return Err(self.error(number, format!("file URLs are not allowed here (`{url}`)")));
        }
        let rest = strip_prefix_ignore_case(rest, b"localhost").unwrap_or(rest);
        if !rest.starts_with(b"/") {
            return Err(self.error(
                number,
                format!("`{url}` does not name a local file (file:///absolute/path)"),
            ));
        }
        let path = percent_decode(rest)
            .ok_or_else(|| self.error(number, format!("bad %-escape in `{url}`")))?;
        let path = std::path::PathBuf::from(
            <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(path),
        );
        let max = self.limits.max_record_bytes;
        let fail =
            |e: std::io::Error| self.error(number, format!("cannot read {}: {e}", path.display()));
        let len = std::fs::metadata(&path).map_err(fail)?.len();
        if len > max as u64 {
            return Err(self.error(
                number,
                format!(
                    "{} holds {len} bytes, over the {max}-byte limit",
                    path.display()
                ),
            ));
        }
        std::fs::read(&path).map_err(fail)
    }

    /// `control: oid [true|false] [value-spec]`.
    fn control(&self, line: &Line<'_>, spec: &[u8]) -> Result<Control, LdifError> {
        let spec = spec.trim_ascii_start();
        let oid_len = spec
            .iter()
            .position(|c| *c == b' ' || *c == b':')
            .unwrap_or(spec.len());
        let (oid, mut rest) = spec.split_at(oid_len);
        let oid_ok = !oid.is_empty() && oid.iter().all(|c| c.is_ascii_digit() || *c == b'.');
        if !oid_ok {
            return Err(self.error(
                line.number,
                format!("`{}` is not a control OID", String::from_utf8_lossy(oid)),
            ));
        }
        rest = rest.trim_ascii_start();
        let mut critical = false;
        if let Some(after) = strip_prefix_ignore_case(rest, b"true") {
            critical = true;
            rest = after.trim_ascii_start();
        } else if let Some(after) = strip_prefix_ignore_case(rest, b"false") {
            rest = after.trim_ascii_start();
        }
        let value = match rest.strip_prefix(b":") {
            Some(spec) => Some(self.value(line, spec)?),
            None if rest.is_empty() => None,
            None => {
                return Err(self.error(
                    line.number,
                    "a control is `control: OID [true|false] [: value]`",
                ));
            }
        };
        Ok(Control {
            oid: String::from_utf8_lossy(oid).into_owned(),
            critical,
            value,
        })
    }

    fn attributes<'l>(
        &self,
        lines: impl Iterator<Item = Line<'l>>,
    ) -> Result<Vec<AttrValue>, LdifError> {
        let mut attrs = Vec::with_capacity(lines.size_hint().0);
        for line in lines {
            let (name, spec) = self.split(&line)?;
            attrs.push(AttrValue {
                description: name.into(),
                value: self.value(&line, spec)?,
            });
        }
        Ok(attrs)
    }

    fn modrdn<'l>(
        &self,
        record_line: u64,
        lines: impl Iterator<Item = Line<'l>>,
    ) -> Result<Body, LdifError> {
        let (mut new_rdn, mut delete_old, mut new_superior) = (None, None, None);
        for line in lines {
            let (name, spec) = self.split(&line)?;
            let value = self.value(&line, spec)?;
            match name.to_ascii_lowercase().as_str() {
                "newrdn" if new_rdn.is_none() => new_rdn = Some(value),
                "deleteoldrdn" if delete_old.is_none() => {
                    delete_old = Some(match value.as_slice() {
                        b"1" => true,
                        b"0" => false,
                        _ => return Err(self.error(line.number, "deleteoldrdn is 0 or 1")),
                    });
                }
                "newsuperior" if new_superior.is_none() => new_superior = Some(value),
                _ => {
                    return Err(self.error(
                        line.number,
                        format!("unexpected `{name}:` in a modrdn record (newrdn, deleteoldrdn, newsuperior, once each)"),
                    ));
                }
            }
        }
        match (new_rdn, delete_old) {
            (Some(new_rdn), Some(delete_old_rdn)) => Ok(Body::ModRdn {
                new_rdn,
                delete_old_rdn,
                new_superior,
            }),
            _ => Err(self.error(
                record_line,
                "a modrdn record needs `newrdn:` and `deleteoldrdn:`",
            )),
        }
    }

    fn modify<'l>(&self, lines: impl Iterator<Item = Line<'l>>) -> Result<Vec<ModSpec>, LdifError> {
        let mut specs: Vec<ModSpec> = Vec::new();
        let mut open = false;
        for line in lines {
            if line.text.as_ref() == b"-" {
                if !open {
                    return Err(self.error(line.number, "`-` with no modification to end"));
                }
                open = false;
                continue;
            }
            let (name, spec) = self.split(&line)?;
            let value = self.value(&line, spec)?;
            if open {
                let current = specs
                    .last_mut()
                    .filter(|s| s.description.eq_ignore_ascii_case(name));
                match current {
                    Some(current) => current.values.push(value),
                    None => {
                        return Err(self.error(
                            line.number,
                            format!("`{name}:` inside a modification of another attribute (end it with `-`)"),
                        ));
                    }
                }
                continue;
            }
            let op = match name.to_ascii_lowercase().as_str() {
                "add" => ModOp::Add,
                "delete" => ModOp::Delete,
                "replace" => ModOp::Replace,
                "increment" => ModOp::Increment,
                _ => {
                    return Err(self.error(
                        line.number,
                        format!("expected add:, delete:, replace: or increment:, found `{name}:`"),
                    ));
                }
            };
            let description = String::from_utf8(value)
                .ok()
                .filter(|d| !d.is_empty())
                .ok_or_else(|| self.error(line.number, format!("`{name}:` names no attribute")))?;
            specs.push(ModSpec {
                op,
                description,
                values: Vec::new(),
            });
            open = true;
        }
        // The last `-` is required by the RFC; OpenLDAP's tools accept a
        // record without it, and so do we.
        Ok(specs)
    }
}

fn percent_decode(text: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len());
    let mut bytes = text.iter();
    while let Some(&b) = bytes.next() {
        if b == b'%' {
            let hi = char::from(*bytes.next()?).to_digit(16)?;
            let lo = char::from(*bytes.next()?).to_digit(16)?;
            out.push((hi * 16 + lo) as u8);
        } else {
            out.push(b);
        }
    }
    Some(out)
}
