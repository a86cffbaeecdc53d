//! Identifiers chosen before a command is applied: entryUUID (RFC 4530,
//! random version 4) and entryCSN (OpenLDAP's change sequence number
//! format, `YYYYmmddHHMMSS.uuuuuuZ#counter#sid#mod`, which syncrepl
//! clients and tools parse).

use std::sync::Mutex;
use std::sync::PoisonError;

/// Makes entryCSNs strictly increasing even within one microsecond.
#[derive(Debug, Default)]
pub struct CsnSource {
    last: Mutex<(String, u32)>,
    server_id: u16,
}

impl CsnSource {
    /// A source for server ID `server_id` (0 until replication exists).
    pub fn new(server_id: u16) -> Self {
        CsnSource {
            last: Mutex::new((String::new(), 0)),
            server_id,
        }
    }

    /// The next CSN for the time `(seconds, micros)` from
    /// [`crate::clock::generalized_time`].
    pub fn next(&self, seconds: &str, micros: u32) -> String {
        use std::fmt::Write as _;
        // One allocation: the stamp is written first, compared with the
        // last one in place, and the rest appended.
        let mut csn = String::with_capacity(40);
        let _ = write!(csn, "{}.{micros:06}Z", seconds.trim_end_matches('Z'));
        let counter = {
            let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
            let counter = if last.0 == csn { last.1 + 1 } else { 0 };
            last.0.clone_from(&csn);
            last.1 = counter;
            counter
        };
        let _ = write!(csn, "#{counter:06x}#{:03x}#000000", self.server_id);
        csn
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
