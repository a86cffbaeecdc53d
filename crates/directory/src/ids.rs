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
        let stamp = format!("{}.{micros:06}Z", seconds.trim_end_matches('Z'));
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let counter = if last.0 == stamp { last.1 + 1 } else { 0 };
        *last = (stamp.clone(), counter);
        format!("{stamp}#{counter:06x}#{:03x}#000000", self.server_id)
    }
}

/// A random (version 4) UUID in its string form.
pub fn uuid_v4() -> Result<String, getrandom::Error> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b)?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        hex.get(0..8).unwrap_or_default(),
        hex.get(8..12).unwrap_or_default(),
        hex.get(12..16).unwrap_or_default(),
        hex.get(16..20).unwrap_or_default(),
        hex.get(20..32).unwrap_or_default()
    ))
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
