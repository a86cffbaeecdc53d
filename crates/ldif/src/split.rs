//! Cutting a stream into records: the only part of reading that must be
//! sequential, so it does as little as possible.

use std::io::BufRead;
use std::sync::Arc;

use crate::{LdifError, Limits, Record, parse_record};

/// One record's text as it appeared in the input (folded, comments and
/// all; no blank lines), and the line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRecord {
    /// The record's lines, each ending in `\n` (or `\r\n`) but perhaps
    /// the last.
    pub text: Vec<u8>,
    /// The 1-based input line of the record's first line.
    pub line: u64,
}

/// Splits an LDIF stream into [`RawRecord`]s at blank lines and consumes
/// the `version: 1` line. It holds at most one record in memory, and no
/// record (or line) may exceed [`Limits::max_record_bytes`].
#[derive(Debug)]
pub struct Splitter<R> {
    input: R,
    name: Arc<str>,
    limits: Limits,
    /// Lines consumed so far.
    line: u64,
    /// No record line seen yet: a `version:` line is still allowed.
    at_start: bool,
    /// An error ended the stream; the rest cannot be trusted to line up.
    failed: bool,
    /// The length of the last record: the next one's buffer starts a
    /// little larger (the records of a file tend to be alike, and the
    /// blank line after a record is read into its buffer too). Grown
    /// line by line from empty, a short record's buffer was reallocated
    /// three or four times (a twentieth of a bulk load's reading).
    last_len: usize,
}

/// The most a record's buffer starts with, however long the last record
/// was: one large record must not make every later buffer large.
const MAX_START_CAPACITY: usize = 4096;

impl<R: BufRead> Splitter<R> {
    /// A splitter over `input`, which errors call `name`.
    pub fn new(input: R, name: impl Into<Arc<str>>, limits: Limits) -> Splitter<R> {
        Splitter {
            input,
            name: name.into(),
            limits,
            line: 0,
            at_start: true,
            failed: false,
            last_len: 0,
        }
    }

    /// The input's name.
    pub fn name(&self) -> &Arc<str> {
        &self.name
    }

    /// The input (to see, for example, whether a buffered reader has
    /// more data at hand before it would block).
    pub fn get_ref(&self) -> &R {
        &self.input
    }

    /// The limits this splitter enforces (and its records' parser should).
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The next record's text; `None` at the end of the input. After an
    /// error every call returns `None`.
    pub fn next_raw(&mut self) -> Result<Option<RawRecord>, LdifError> {
        if self.failed {
            return Ok(None);
        }
        let result = self.read_record();
        if result.is_err() {
            self.failed = true;
        }
        result
    }

    fn read_record(&mut self) -> Result<Option<RawRecord>, LdifError> {
        let max = self.limits.max_record_bytes;
        let room = self.last_len + self.last_len / 8 + 16;
        let mut text = Vec::with_capacity(room.min(MAX_START_CAPACITY));
        let mut first_line = 0;
        loop {
            let start = text.len();
            let room = (max - start.min(max)) as u64 + 1;
            let n = std::io::Read::take(&mut self.input, room)
                .read_until(b'\n', &mut text)
                .map_err(|e| {
                    LdifError::new(&self.name, self.line + 1, format!("read error: {e}"))
                })?;
            if n == 0 {
                break;
            }
            self.line += 1;
            if text.len() > max {
                return Err(LdifError::new(
                    &self.name,
                    if first_line == 0 {
                        self.line
                    } else {
                        first_line
                    },
                    format!("record longer than the {max}-byte limit"),
                ));
            }
            let content = line_content(text.get(start..).unwrap_or_default());
            if content.is_empty() {
                text.truncate(start);
                if text.is_empty() {
                    continue;
                }
                break;
            }
            if self.at_start && !content.starts_with(b"#") && !content.starts_with(b" ") {
                self.at_start = false;
                if let Some(version) = strip_prefix_ignore_case(content, b"version:") {
                    if version.trim_ascii() != b"1" {
                        return Err(LdifError::new(
                            &self.name,
                            self.line,
                            format!(
                                "unsupported LDIF version `{}` (only version 1 exists)",
                                String::from_utf8_lossy(version.trim_ascii())
                            ),
                        ));
                    }
                    text.truncate(start);
                    continue;
                }
            }
            if first_line == 0 {
                first_line = self.line;
            }
        }
        if text.is_empty() {
            return Ok(None);
        }
        self.last_len = text.len();
        Ok(Some(RawRecord {
            text,
            line: first_line,
        }))
    }
}

/// A line without its `\n` or `\r\n`.
pub(crate) fn line_content(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

pub(crate) fn strip_prefix_ignore_case<'a>(text: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| text.get(prefix.len()..).unwrap_or_default())
}

/// Records one after another from one input: a [`Splitter`] and
/// [`parse_record`] on the same thread. Records holding only comments
/// are skipped.
#[derive(Debug)]
pub struct RecordReader<R> {
    splitter: Splitter<R>,
}

impl<R: BufRead> RecordReader<R> {
    /// A reader over `input`, which errors call `name`.
    pub fn new(input: R, name: impl Into<Arc<str>>, limits: Limits) -> RecordReader<R> {
        RecordReader {
            splitter: Splitter::new(input, name, limits),
        }
    }
}

impl<R: BufRead> Iterator for RecordReader<R> {
    type Item = Result<Record, LdifError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let raw = match self.splitter.next_raw() {
                Ok(Some(raw)) => raw,
                Ok(None) => return None,
                Err(e) => return Some(Err(e)),
            };
            let limits = self.splitter.limits();
            match parse_record(&raw, self.splitter.name(), &limits) {
                Ok(Some(record)) => return Some(Ok(record)),
                Ok(None) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}
