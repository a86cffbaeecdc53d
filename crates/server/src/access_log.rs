//! The access log: a line per operation, and per connection opened and
//! closed (target `meridian::access`, switched by `log.access`), in the
//! layout `tracing`'s formatter gives every other line of the log:
//!
//! ```text
//! 2026-11-27T14:01:54.240378Z  INFO meridian::access: conn=1 msgid=1 op="BIND" dn= result=0 etime_us=9
//! ```
//!
//! A line is formatted here, by hand, into a buffer the thread keeps, and
//! handed whole to the [`LineSink`] the binary installs (its log writer).
//! Not through `tracing::info!`: its formatter visits each field through
//! `dyn Debug`, formats the timestamp from scratch and styles the names,
//! and took a quarter of the server's time under pipelined base searches
//! (perf). `log.level` still decides: a line is written only when
//! `tracing` would have logged it.
//!
//! A DN comes from the client. Its control characters and bytes that are
//! not UTF-8 are written as RFC 4514 hex pairs (`\0a`), so a DN cannot
//! break a line or forge one.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

/// Where finished lines go: the binary's log writer. It must not block,
/// as its caller is answering a request.
pub trait LineSink: Send + Sync {
    /// Takes one whole line, its newline included.
    fn line(&self, line: &[u8]);
}

/// The installed sink, and whether the log goes to a terminal that shows
/// the other lines styled.
struct Installed {
    sink: Box<dyn LineSink>,
    ansi: bool,
}

static SINK: OnceLock<Installed> = OnceLock::new();

/// Sends access lines to `sink` from now on; once per process, a later
/// call is ignored. Until then (a library user without one) the lines go
/// through `tracing` as their message.
pub fn install(sink: Box<dyn LineSink>, ansi: bool) {
    let _ = SINK.set(Installed { sink, ansi });
}

/// The target an access line is logged under, for `log.level`.
pub const TARGET: &str = "meridian::access";

/// Formats one line with `fields` and writes it, when `log.level` lets
/// `meridian::access` through at info.
pub(crate) fn write(fields: impl FnOnce(&mut Line)) {
    if !tracing::enabled!(target: TARGET, tracing::Level::INFO) {
        return;
    }
    LINE.with(|line| {
        // Taken only if a sink wrote an access line of its own; skip it.
        let Ok(mut line) = line.try_borrow_mut() else {
            return;
        };
        match SINK.get() {
            Some(installed) => {
                line.begin(wall_clock(), installed.ansi);
                fields(&mut line);
                line.bytes.push(b'\n');
                installed.sink.line(&line.bytes);
                if line.bytes.capacity() > KEEP_BYTES {
                    // A line with a huge DN passed: do not keep its room.
                    line.bytes = Vec::new();
                }
            }
            None => {
                line.bytes.clear();
                line.fields_start = 0;
                fields(&mut line);
                let text = String::from_utf8_lossy(&line.bytes);
                tracing::info!(target: TARGET, "{text}");
            }
        }
    });
}

/// The room a thread's line buffer keeps between lines.
const KEEP_BYTES: usize = 16 * 1024;

thread_local! {
    static LINE: RefCell<Line> = const { RefCell::new(Line::new()) };
}

/// The time a line is stamped with: a record of when, not an input to
/// anything the directory stores.
#[allow(clippy::disallowed_methods)]
fn wall_clock() -> Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

/// One access line being written. Each field method writes ` name=value`
/// (no space before the first).
pub(crate) struct Line {
    bytes: Vec<u8>,
    /// Where the fields begin, after the prefix.
    fields_start: usize,
    /// The second `stamp` spells (`u64::MAX` before the first line).
    second: u64,
    /// `YYYY-MM-DDTHH:MM:SS` of `second`: most lines of a busy server
    /// share their second with the line before.
    stamp: Vec<u8>,
}

impl Line {
    const fn new() -> Line {
        Line {
            bytes: Vec::new(),
            fields_start: 0,
            second: u64::MAX,
            stamp: Vec::new(),
        }
    }

    /// Starts a line stamped `now` (since the Unix epoch).
    fn begin(&mut self, now: Duration, ansi: bool) {
        let second = now.as_secs();
        if second != self.second {
            self.second = second;
            self.stamp.clear();
            push_date_time(&mut self.stamp, second);
        }
        self.bytes.clear();
        if ansi {
            self.bytes.extend_from_slice(b"\x1b[2m");
        }
        self.bytes.extend_from_slice(&self.stamp);
        self.bytes.push(b'.');
        push_decimal(&mut self.bytes, u64::from(now.subsec_micros()), 6);
        self.bytes.push(b'Z');
        self.bytes.extend_from_slice(if ansi {
            b"\x1b[0m \x1b[32m INFO\x1b[0m \x1b[2mmeridian::access:\x1b[0m "
        } else {
            b"  INFO meridian::access: "
        });
        self.fields_start = self.bytes.len();
    }

    fn name(&mut self, name: &str) {
        if self.bytes.len() > self.fields_start {
            self.bytes.push(b' ');
        }
        self.bytes.extend_from_slice(name.as_bytes());
        self.bytes.push(b'=');
    }

    pub(crate) fn number(&mut self, name: &str, value: u64) -> &mut Line {
        self.name(name);
        push_decimal(&mut self.bytes, value, 1);
        self
    }

    pub(crate) fn signed(&mut self, name: &str, value: i64) -> &mut Line {
        self.name(name);
        if value < 0 {
            self.bytes.push(b'-');
        }
        push_decimal(&mut self.bytes, value.unsigned_abs(), 1);
        self
    }

    pub(crate) fn flag(&mut self, name: &str, value: bool) -> &mut Line {
        self.name(name);
        self.bytes
            .extend_from_slice(if value { b"true" } else { b"false" });
        self
    }

    /// A word of ours (an operation's name, a reason), quoted.
    pub(crate) fn word(&mut self, name: &str, value: &str) -> &mut Line {
        self.name(name);
        self.bytes.push(b'"');
        for c in value.chars() {
            if c == '"' || c == '\\' {
                self.bytes.push(b'\\');
            }
            push_char(&mut self.bytes, c);
        }
        self.bytes.push(b'"');
        self
    }

    /// A value written by its `Display`, quoted and escaped as
    /// [`Line::word`] writes one, straight into the line (no string in
    /// between: a search's filter is formatted for every search) and cut
    /// after `most` bytes with `...`.
    pub(crate) fn shown(
        &mut self,
        name: &str,
        value: &dyn std::fmt::Display,
        most: usize,
    ) -> &mut Line {
        use std::fmt::Write as _;
        self.name(name);
        self.bytes.push(b'"');
        let mut quoted = Quoted {
            out: &mut self.bytes,
            left: most,
            cut: false,
        };
        // Writing into a Vec cannot fail; a cut ends the formatting early.
        let _ = write!(quoted, "{value}");
        if quoted.cut {
            self.bytes.extend_from_slice(b"...");
        }
        self.bytes.push(b'"');
        self
    }

    pub(crate) fn address(&mut self, name: &str, value: &SocketAddr) -> &mut Line {
        use std::io::Write as _;
        self.name(name);
        // Writing into a Vec cannot fail.
        let _ = write!(self.bytes, "{value}");
        self
    }

    /// A DN as the client sent it, unquoted: printable UTF-8 as it is,
    /// anything else as hex pairs.
    pub(crate) fn dn(&mut self, name: &str, dn: &[u8]) -> &mut Line {
        self.name(name);
        if dn.iter().all(|&b| (0x20..0x7f).contains(&b)) {
            self.bytes.extend_from_slice(dn);
            return self;
        }
        for chunk in dn.utf8_chunks() {
            for c in chunk.valid().chars() {
                if c.is_control() {
                    let mut utf8 = [0; 4];
                    for &b in c.encode_utf8(&mut utf8).as_bytes() {
                        push_hex_pair(&mut self.bytes, b);
                    }
                } else {
                    push_char(&mut self.bytes, c);
                }
            }
            for &b in chunk.invalid() {
                push_hex_pair(&mut self.bytes, b);
            }
        }
        self
    }
}

/// The quoting writer of [`Line::shown`]: `"` and `\` escaped, at most
/// `left` bytes, then an error that ends the formatting.
struct Quoted<'b> {
    out: &'b mut Vec<u8>,
    left: usize,
    cut: bool,
}

impl std::fmt::Write for Quoted<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        for c in s.chars() {
            if self.left < c.len_utf8() {
                self.cut = true;
                return Err(std::fmt::Error);
            }
            self.left -= c.len_utf8();
            if c == '"' || c == '\\' {
                self.out.push(b'\\');
            }
            push_char(self.out, c);
        }
        Ok(())
    }
}

fn push_char(out: &mut Vec<u8>, c: char) {
    let mut utf8 = [0; 4];
    out.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
}

/// `\` and two lower-case hex digits, as RFC 4514 escapes a byte.
fn push_hex_pair(out: &mut Vec<u8>, b: u8) {
    let digit = |d: u8| char::from_digit(u32::from(d), 16).map_or(b'?', |c| c as u8);
    out.extend_from_slice(&[b'\\', digit(b >> 4), digit(b & 0xf)]);
}

/// `value` in decimal, padded with zeros to at least `width` digits.
fn push_decimal(out: &mut Vec<u8>, mut value: u64, width: usize) {
    // u64::MAX has 20 digits.
    let mut digits = [b'0'; 20];
    let mut used = 0;
    for slot in digits.iter_mut().rev() {
        *slot = b'0' + (value % 10) as u8;
        value /= 10;
        used += 1;
        if value == 0 {
            break;
        }
    }
    let used = used.max(width.min(digits.len()));
    out.extend_from_slice(digits.get(digits.len() - used..).unwrap_or(&digits));
}

/// `YYYY-MM-DDTHH:MM:SS` (UTC) of `second` since the Unix epoch.
fn push_date_time(out: &mut Vec<u8>, second: u64) {
    let days = i64::try_from(second / 86_400).unwrap_or(i64::MAX / 2);
    let (year, month, day) = meridian_model::time::civil_from_days(days);
    let of_day = second % 86_400;
    push_decimal(out, year.unsigned_abs(), 4);
    out.push(b'-');
    push_decimal(out, month.unsigned_abs(), 2);
    out.push(b'-');
    push_decimal(out, day.unsigned_abs(), 2);
    out.push(b'T');
    push_decimal(out, of_day / 3600, 2);
    out.push(b':');
    push_decimal(out, of_day / 60 % 60, 2);
    out.push(b':');
    push_decimal(out, of_day % 60, 2);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(second: u64) -> String {
        let mut out = Vec::new();
        push_date_time(&mut out, second);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_shown_value_is_quoted_escaped_and_cut() {
        let mut line = Line::new();
        line.shown("filter", &"(cn=\"a\\b\")", 100)
            .shown("long", &"x".repeat(20), 8);
        let text = String::from_utf8(line.bytes).unwrap();
        assert_eq!(text, "filter=\"(cn=\\\"a\\\\b\\\")\" long=\"xxxxxxxx...\"");
    }

    #[test]
    fn dates_and_times_are_spelled_in_utc() {
        assert_eq!(stamp(0), "1970-01-01T00:00:00");
        assert_eq!(stamp(951_782_400), "2000-02-29T00:00:00");
        assert_eq!(stamp(951_868_799), "2000-02-29T23:59:59");
        assert_eq!(stamp(951_868_800), "2000-03-01T00:00:00");
        assert_eq!(stamp(1_709_164_800 + 3661), "2024-02-29T01:01:01");
        assert_eq!(stamp(4_102_444_800), "2100-01-01T00:00:00");
        assert_eq!(stamp(1_795_788_114), "2026-11-27T14:01:54");
    }

    fn line(fill: impl FnOnce(&mut Line)) -> String {
        let mut line = Line::new();
        line.begin(Duration::new(1_795_788_114, 240_378_999), false);
        fill(&mut line);
        String::from_utf8(line.bytes).unwrap()
    }

    #[test]
    fn a_line_reads_as_tracing_writes_one() {
        let text = line(|l| {
            l.number("conn", 1)
                .signed("msgid", 2)
                .word("op", "SRCH")
                .dn("dn", b"uid=u1,ou=People,dc=example,dc=com")
                .signed("result", 0)
                .number("nentries", 1)
                .number("etime_us", 21);
        });
        assert_eq!(
            text,
            "2026-11-27T14:01:54.240378Z  INFO meridian::access: conn=1 msgid=2 op=\"SRCH\" \
             dn=uid=u1,ou=People,dc=example,dc=com result=0 nentries=1 etime_us=21"
        );
        let text = line(|l| {
            l.number("conn", u64::MAX)
                .signed("msgid", i64::MIN)
                .signed("result", -1)
                .dn("dn", b"")
                .flag("tls", false)
                .address("from", &"127.0.0.1:58328".parse().unwrap())
                .word("reason", "a \"quoted\\\" word");
        });
        assert!(text.ends_with(
            ": conn=18446744073709551615 msgid=-9223372036854775808 result=-1 dn= tls=false \
             from=127.0.0.1:58328 reason=\"a \\\"quoted\\\\\\\" word\""
        ));
        // Micros padded to six digits.
        let mut early = Line::new();
        early.begin(Duration::new(0, 7_000), false);
        assert!(
            early
                .bytes
                .starts_with(b"1970-01-01T00:00:00.000007Z  INFO")
        );
    }

    #[test]
    fn a_dn_cannot_break_the_line() {
        let text = line(|l| {
            l.dn(
                "dn",
                "cn=Ünïcode\n2026-11-27T00:00:00Z  INFO forged,\x7fo=\u{85}x".as_bytes(),
            )
            .dn("dn", b"cn=\xff\xfe,o=x\r");
        });
        assert!(!text.contains('\n') && !text.contains('\r'));
        assert!(text.ends_with(
            ": dn=cn=Ünïcode\\0a2026-11-27T00:00:00Z  INFO forged,\\7fo=\\c2\\85x dn=cn=\\ff\\fe,o=x\\0d"
        ));
    }
}
