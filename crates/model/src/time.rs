//! Generalized Time (RFC 4517 section 3.3.13), parsed to a UTC instant so
//! that `generalizedTimeMatch` and `generalizedTimeOrderingMatch` compare
//! instants, not spellings: `199412161032.5-0500` equals
//! `19941216153230Z`.

/// A UTC instant: seconds since 1970-01-01 and nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Instant {
    /// Seconds since the Unix epoch (negative before 1970).
    pub secs: i64,
    /// Nanoseconds, 0..1e9.
    pub nanos: u32,
}

fn digits(v: &[u8], at: usize, n: usize) -> Option<i64> {
    let d = v.get(at..at + n)?;
    if !d.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(d.iter().fold(0i64, |acc, c| acc * 10 + i64::from(c - b'0')))
}

/// Days from 1970-01-01 to the given civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date (proleptic Gregorian year, month, day) of a count of
/// days since 1970-01-01; the inverse of `days_from_civil` (Howard
/// Hinnant's algorithm: days counted from 0000-03-01, so that the leap
/// day ends each 400-year era of 146,097 days).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Parses `YYYYMMDDHH[MM[SS]][(.|,)fraction](Z|(+|-)HH[MM])`.
pub fn parse_generalized_time(v: &[u8]) -> Option<Instant> {
    let year = digits(v, 0, 4)?;
    let month = digits(v, 4, 2)?;
    let day = digits(v, 6, 2)?;
    let hour = digits(v, 8, 2)?;
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) || hour > 23 {
        return None;
    }
    let mut pos = 10;
    // The unit (in nanoseconds) of the last component given, for a fraction.
    let mut unit: i64 = 3_600_000_000_000;
    let mut minute = 0;
    let mut second = 0;
    if let Some(m) = digits(v, pos, 2) {
        minute = m;
        pos += 2;
        unit = 60_000_000_000;
        if let Some(s) = digits(v, pos, 2) {
            second = s;
            pos += 2;
            unit = 1_000_000_000;
        }
    }
    // 60 is a leap second.
    if minute > 59 || second > 60 {
        return None;
    }
    let mut fraction_nanos: i64 = 0;
    if matches!(v.get(pos), Some(b'.' | b',')) {
        pos += 1;
        let start = pos;
        while v.get(pos).is_some_and(u8::is_ascii_digit) {
            pos += 1;
        }
        let frac = v.get(start..pos)?;
        if frac.is_empty() {
            return None;
        }
        // Value of the fraction times the unit, with 18 digits of room.
        let mut scale = unit;
        for &c in frac.iter().take(18) {
            scale /= 10;
            fraction_nanos += i64::from(c - b'0') * scale;
        }
    }
    let offset_secs = match v.get(pos) {
        Some(b'Z') if pos + 1 == v.len() => 0,
        Some(sign @ (b'+' | b'-')) => {
            let hh = digits(v, pos + 1, 2)?;
            let (mm, end) = match digits(v, pos + 3, 2) {
                Some(mm) => (mm, pos + 5),
                None => (0, pos + 3),
            };
            if end != v.len() || hh > 23 || mm > 59 {
                return None;
            }
            let offset = hh * 3600 + mm * 60;
            if *sign == b'+' { offset } else { -offset }
        }
        _ => return None,
    };
    let secs = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
        - offset_secs
        + fraction_nanos.div_euclid(1_000_000_000);
    Some(Instant {
        secs,
        nanos: u32::try_from(fraction_nanos.rem_euclid(1_000_000_000)).ok()?,
    })
}

impl Instant {
    /// A fixed-width key whose byte order is the instant's order, for
    /// years 0 to 9999: `YYYYMMDDHHMMSS` and nine digits of nanoseconds.
    pub fn key(&self) -> String {
        let mut key = self.canonical();
        let (seconds, frac) = key
            .trim_end_matches('Z')
            .split_once('.')
            .unwrap_or((key.trim_end_matches('Z'), ""));
        let fixed = format!("{seconds}{frac:0<9}");
        key.clear();
        key.push_str(&fixed);
        key
    }

    /// This instant with its fraction of a second dropped: slapd's
    /// ppolicy writes pwdChangedTime and pwdAccountLockedTime in whole
    /// seconds, and scripts parse them with `%Y%m%d%H%M%SZ`.
    pub fn whole_seconds(&self) -> Instant {
        Instant {
            secs: self.secs,
            nanos: 0,
        }
    }

    /// The canonical `YYYYMMDDHHMMSS[.fff]Z` spelling in UTC.
    pub fn canonical(&self) -> String {
        let (y, m, d) = civil_from_days(self.secs.div_euclid(86_400));
        let rem = self.secs.rem_euclid(86_400);
        let mut out = format!(
            "{y:04}{m:02}{d:02}{:02}{:02}{:02}",
            rem / 3600,
            rem % 3600 / 60,
            rem % 60
        );
        if self.nanos > 0 {
            let frac = format!("{:09}", self.nanos);
            out.push('.');
            out.push_str(frac.trim_end_matches('0'));
        }
        out.push('Z');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(s: &str) -> String {
        parse_generalized_time(s.as_bytes()).unwrap().canonical()
    }

    #[test]
    fn every_day_of_four_centuries_has_its_date() {
        let mut days = 0;
        for year in 1970..2370 {
            for month in 1..=12 {
                for day in 1..=days_in_month(year, month) {
                    assert_eq!(civil_from_days(days), (year, month, day));
                    assert_eq!(days_from_civil(year, month, day), days);
                    days += 1;
                }
            }
        }
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }

    #[test]
    fn rfc4517_examples_and_time_zones() {
        assert_eq!(canon("199412161032Z"), "19941216103200Z");
        assert_eq!(canon("199412160532-0500"), "19941216103200Z");
        assert_eq!(canon("199412161032.5-0500"), "19941216153230Z");
        assert_eq!(canon("2026112201Z"), "20261122010000Z");
        assert_eq!(canon("20261122010203.250Z"), "20261122010203.25Z");
        assert_eq!(canon("20261231233000-0100"), "20270101003000Z");
        assert_eq!(canon("19700101000000Z"), "19700101000000Z");
        assert_eq!(canon("19691231235959Z"), "19691231235959Z");
        assert_eq!(canon("20240229120000+1200"), "20240229000000Z");
    }

    #[test]
    fn invalid_times() {
        for bad in [
            "2026",
            "2026112201",
            "20260230120000Z",
            "20261122246000Z",
            "20261122010203",
            "20261122010203.Z",
            "20261122010203Z0",
            "20261122010203+2500",
        ] {
            assert!(parse_generalized_time(bad.as_bytes()).is_none(), "{bad}");
        }
    }

    #[test]
    fn order_follows_instants() {
        let a = parse_generalized_time(b"20261122010203Z").unwrap();
        let b = parse_generalized_time(b"20261122020203+0100").unwrap();
        let c = parse_generalized_time(b"20261122010203.1Z").unwrap();
        assert_eq!(a, b);
        assert!(c > a);
        assert!(a.key() < c.key());
        let d = parse_generalized_time(b"20261122010204Z").unwrap();
        assert!(c.key() < d.key());
        assert_eq!(a.key(), "20261122010203000000000");
    }
}
