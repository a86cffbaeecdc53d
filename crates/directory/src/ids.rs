//! Identifiers chosen before a command is applied: entryUUID (RFC 4530,
//! random version 4) and entryCSN (OpenLDAP's change sequence number
//! format, `YYYYmmddHHMMSS.uuuuuuZ#counter#sid#mod`, which syncrepl
//! clients and tools parse).

use std::sync::Mutex;
use std::sync::PoisonError;

/// Makes entryCSNs strictly increasing: a hybrid logical clock. Within
/// one microsecond the counter rises; when the wall clock goes back (a
/// step of NTP, or, with replication, a node whose clock is behind
/// taking over), the CSN keeps the last time and raises the counter
/// instead of going back with it. [`CsnSource::observe`] raises the
/// floor to a CSN made elsewhere.
#[derive(Debug, Default)]
pub struct CsnSource {
    /// The time part (`YYYYmmddHHMMSS.uuuuuuZ`, which sorts as time) and
    /// counter of the last CSN made or observed.
    last: Mutex<(String, u32)>,
    server_id: u16,
}

impl CsnSource {
    /// A source for server ID `server_id` (OpenLDAP's serverID, 0..4095:
    /// `directory.server_id`).
    pub fn new(server_id: u16) -> Self {
        CsnSource {
            last: Mutex::new((String::new(), 0)),
            server_id,
        }
    }

    /// Never makes a CSN at or below `csn` (one applied from elsewhere,
    /// or the highest the store holds).
    pub fn observe(&self, csn: &str) {
        let mut parts = csn.split('#');
        let (Some(time), Some(counter)) = (parts.next(), parts.next()) else {
            return;
        };
        let Ok(counter) = u32::from_str_radix(counter, 16) else {
            return;
        };
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if (time, counter) > (last.0.as_str(), last.1) {
            *last = (time.to_owned(), counter);
        }
    }

    /// The next CSN for the time `(seconds, micros)` from
    /// [`crate::clock::generalized_time`].
    pub fn next(&self, seconds: &str, micros: u32) -> String {
        // One allocation: the stamp is written first, compared with the
        // last one in place, and the rest appended. Digits are pushed by
        // hand: `write!` was most of the cost of stamping an entry.
        let mut csn = String::with_capacity(40);
        csn.push_str(seconds.trim_end_matches('Z'));
        csn.push('.');
        push_padded(&mut csn, u64::from(micros), 6, 10);
        csn.push('Z');
        let counter = {
            let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
            // Stamps of one width compare as the times they spell.
            let counter = match csn.as_str().cmp(last.0.as_str()) {
                std::cmp::Ordering::Greater => 0,
                std::cmp::Ordering::Equal => last.1 + 1,
                // The clock went back: keep the last time.
                std::cmp::Ordering::Less => {
                    csn.clone_from(&last.0);
                    last.1 + 1
                }
            };
            last.0.clone_from(&csn);
            last.1 = counter;
            counter
        };
        csn.push('#');
        push_padded(&mut csn, u64::from(counter), 6, 16);
        csn.push('#');
        push_padded(&mut csn, u64::from(self.server_id), 3, 16);
        csn.push_str("#000000");
        csn
    }
}

/// Appends `value` in `radix` (10 or 16, lower case), zero-padded to at
/// least `width` digits, as `{value:0width$}` / `{value:0width$x}` would.
fn push_padded(out: &mut String, value: u64, width: usize, radix: u64) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut buf = [b'0'; 20];
    let mut at = buf.len();
    let mut rest = value;
    loop {
        at -= 1;
        if let (Some(slot), Some(&digit)) = (buf.get_mut(at), DIGITS.get((rest % radix) as usize)) {
            *slot = digit;
        }
        rest /= radix;
        if rest == 0 || at == 0 {
            break;
        }
    }
    let start = at.min(buf.len().saturating_sub(width));
    for &b in buf.get(start..).unwrap_or_default() {
        out.push(char::from(b));
    }
}

/// Random bytes drawn from the OS 4 KiB at a time: one getrandom call
/// per 256 UUIDs instead of one each (a bulk load makes millions).
struct RandomPool {
    bytes: [u8; 4096],
    used: usize,
}

impl RandomPool {
    fn take(&mut self, out: &mut [u8]) -> Result<(), getrandom::Error> {
        if self.used + out.len() > self.bytes.len() {
            getrandom::fill(&mut self.bytes)?;
            self.used = 0;
        }
        let end = self.used + out.len();
        out.copy_from_slice(self.bytes.get(self.used..end).unwrap_or_default());
        // Never hand out the same bytes twice.
        if let Some(taken) = self.bytes.get_mut(self.used..end) {
            taken.fill(0);
        }
        self.used = end;
        Ok(())
    }
}

thread_local! {
    static POOL: std::cell::RefCell<RandomPool> = const {
        std::cell::RefCell::new(RandomPool { bytes: [0; 4096], used: 4096 })
    };
}

/// A random (version 4) UUID in its string form.
pub fn uuid_v4() -> Result<String, getrandom::Error> {
    let mut b = [0u8; 16];
    POOL.with(|pool| pool.borrow_mut().take(&mut b))?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(36);
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        for nibble in [byte >> 4, byte & 15] {
            out.push(char::from(
                HEX.get(usize::from(nibble)).copied().unwrap_or(b'0'),
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_model::syntax::Syntax;

    #[test]
    fn padded_digits_are_those_of_format() {
        for value in [
            0u64,
            7,
            42,
            999_999,
            1_000_000,
            0xff_ffff,
            0x100_0000,
            u64::MAX,
        ] {
            let mut decimal = String::new();
            push_padded(&mut decimal, value, 6, 10);
            assert_eq!(decimal, format!("{value:06}"));
            let mut hex = String::new();
            push_padded(&mut hex, value, 3, 16);
            assert_eq!(hex, format!("{value:03x}"));
        }
    }

    #[test]
    fn csns_have_openldaps_layout_and_increase() {
        let source = CsnSource::new(0x2a);
        let first = source.next("20261124090000Z", 42);
        assert_eq!(first, "20261124090000.000042Z#000000#02a#000000");
        let second = source.next("20261124090000Z", 42);
        assert_eq!(second, "20261124090000.000042Z#000001#02a#000000");
        assert!(second > first);
    }

    #[test]
    fn csns_never_go_back_with_the_clock_or_below_one_observed() {
        let s = CsnSource::new(7);
        let first = s.next("20261126120000Z", 500);
        // The clock steps back a minute: the CSN still rises.
        let second = s.next("20261126115900Z", 0);
        assert!(second > first, "{second} after {first}");
        assert!(
            second.starts_with("20261126120000.000500Z#000001#007"),
            "{second}"
        );
        // A CSN made elsewhere, ahead of this clock, raises the floor.
        s.observe("20261126130000.000000Z#000004#001#000000");
        let third = s.next("20261126120001Z", 0);
        assert!(
            third.starts_with("20261126130000.000000Z#000005#007"),
            "{third}"
        );
        // The clock catches up: its own time again.
        let fourth = s.next("20261126130001Z", 0);
        assert!(
            fourth.starts_with("20261126130001.000000Z#000000"),
            "{fourth}"
        );
    }

    #[test]
    fn uuids_are_valid_and_distinct() {
        let a = uuid_v4().unwrap();
        let b = uuid_v4().unwrap();
        assert!(Syntax::Uuid.is_valid(a.as_bytes()), "{a}");
        assert_ne!(a, b);
        assert_eq!(a.as_bytes()[14], b'4');
        let dashes: Vec<usize> = a.match_indices('-').map(|(i, _)| i).collect();
        assert_eq!((a.len(), dashes), (36, vec![8, 13, 18, 23]));
    }

    #[test]
    fn many_uuids_are_distinct_across_pool_refills() {
        let all: std::collections::HashSet<String> =
            (0..1000).map(|_| uuid_v4().unwrap()).collect();
        assert_eq!(all.len(), 1000);
    }

    #[test]
    fn csns_increase_within_one_microsecond() {
        let s = CsnSource::new(0);
        let a = s.next("20261122010203Z", 5);
        let b = s.next("20261122010203Z", 5);
        assert_eq!(a, "20261122010203.000005Z#000000#000#000000");
        assert!(b > a);
    }
}
