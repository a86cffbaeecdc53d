//! userPassword values: the schemes Meridian verifies and the one it
//! writes.
//!
//! New passwords are stored as `{ARGON2}` (Argon2id, PHC string; by
//! default 19 MiB and 2 passes, the argon2 crate's and OWASP's minimum,
//! about 12 ms of CPU on our benchmark machine; configurable as
//! [`HashCost`], since a server where every operation binds pays it per
//! operation). Verification always uses the cost stored in the hash. Imported data keeps its
//! hashes and still logs in: `{SSHA}`, `{SSHA256}`, `{SSHA512}`, `{SHA}`,
//! `{SHA256}`, `{SHA512}` (OpenLDAP, 389 DS) and `{PBKDF2-SHA256}`
//! (OpenLDAP's pw-pbkdf2 format, `rounds$salt$hash` in adapted base64).
//! `{CRYPT}` goes to the platform's crypt(3) (`crypt.rs`: yescrypt,
//! SHA-crypt, bcrypt, MD5-crypt and DES on Debian), as slapd does. A
//! value without a scheme is a clear-text password and is accepted only
//! when the caller allows it.

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

/// True if `value` already names a scheme (`{...}`), so it is stored as is.
pub fn is_hashed(value: &[u8]) -> bool {
    value.first() == Some(&b'{') && value.iter().skip(1).take(32).any(|b| *b == b'}')
}

/// The cost of new Argon2id hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashCost {
    /// Memory in KiB (at least 8).
    pub memory_kib: u32,
    /// Passes over the memory (at least 1).
    pub iterations: u32,
}

impl Default for HashCost {
    fn default() -> Self {
        HashCost {
            memory_kib: argon2::Params::DEFAULT_M_COST,
            iterations: argon2::Params::DEFAULT_T_COST,
        }
    }
}

/// An Argon2id PHC string (`$argon2id$v=19$m=…`) for `password` at `cost`.
pub fn argon2_phc(password: &[u8], cost: HashCost) -> Result<String, String> {
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).map_err(|e| e.to_string())?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| e.to_string())?;
    let params = argon2::Params::new(cost.memory_kib, cost.iterations, 1, None)
        .map_err(|e| e.to_string())?;
    let hasher = Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params);
    hasher
        .hash_password(password, &salt)
        .map(|phc| phc.to_string())
        .map_err(|e| e.to_string())
}

/// Hashes a clear-text password as `{ARGON2}` at `cost`.
pub fn hash(password: &[u8], cost: HashCost) -> Result<Vec<u8>, String> {
    Ok(format!("{{ARGON2}}{}", argon2_phc(password, cost)?).into_bytes())
}

/// Checks `password` against one stored value.
pub fn verify(stored: &[u8], password: &[u8], allow_cleartext: bool) -> bool {
    let Some(rest) = stored.strip_prefix(b"{") else {
        return allow_cleartext && bool::from(stored.ct_eq(password));
    };
    let Some(end) = rest.iter().position(|b| *b == b'}') else {
        return false;
    };
    let (scheme, value) = (
        rest.get(..end).unwrap_or_default(),
        rest.get(end + 1..).unwrap_or_default(),
    );
    let scheme = scheme.to_ascii_uppercase();
    match scheme.as_slice() {
        b"ARGON2" => std::str::from_utf8(value)
            .ok()
            .and_then(|v| PasswordHash::new(v).ok())
            .is_some_and(|h| Argon2::default().verify_password(password, &h).is_ok()),
        b"SSHA" => salted::<Sha1>(value, password, 20),
        b"SSHA256" => salted::<Sha256>(value, password, 32),
        b"SSHA512" => salted::<Sha512>(value, password, 64),
        b"SHA" => salted::<Sha1>(value, password, 20) && digest_len(value) == Some(20),
        b"SHA256" => salted::<Sha256>(value, password, 32) && digest_len(value) == Some(32),
        b"SHA512" => salted::<Sha512>(value, password, 64) && digest_len(value) == Some(64),
        b"PBKDF2-SHA256" => pbkdf2_sha256(value, password),
        b"CRYPT" => {
            crate::crypt::crypt(password, value).is_some_and(|h| bool::from(h.ct_eq(value)))
        }
        b"CLEARTEXT" => allow_cleartext && bool::from(value.ct_eq(password)),
        _ => false,
    }
}

fn digest_len(value: &[u8]) -> Option<usize> {
    base64::decode(value, base64::STANDARD).map(|d| d.len())
}

/// `base64(digest(password ‖ salt) ‖ salt)`; an empty salt is the
/// unsalted form.
fn salted<D: Digest>(value: &[u8], password: &[u8], digest_len: usize) -> bool {
    let Some(decoded) = base64::decode(value, base64::STANDARD) else {
        return false;
    };
    if decoded.len() < digest_len {
        return false;
    }
    let (expected, salt) = decoded.split_at(digest_len);
    let mut h = D::new();
    h.update(password);
    h.update(salt);
    bool::from(h.finalize().as_slice().ct_eq(expected))
}

/// OpenLDAP pw-pbkdf2: `{PBKDF2-SHA256}<rounds>$<ab64 salt>$<ab64 hash>`.
fn pbkdf2_sha256(value: &[u8], password: &[u8]) -> bool {
    let text = String::from_utf8_lossy(value);
    let mut parts = text.split('$');
    let (Some(rounds), Some(salt), Some(dk), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let (Ok(rounds), Some(salt), Some(dk)) = (
        rounds.parse::<u32>(),
        base64::decode(salt.as_bytes(), base64::ADAPTED),
        base64::decode(dk.as_bytes(), base64::ADAPTED),
    ) else {
        return false;
    };
    // Bound the work an imported value can ask for.
    if rounds == 0 || rounds > 10_000_000 || dk.is_empty() || dk.len() > 64 {
        return false;
    }
    let mut out = vec![0u8; dk.len()];
    pbkdf2::pbkdf2_hmac::<Sha256>(password, &salt, rounds, &mut out);
    bool::from(out.ct_eq(&dk))
}

/// Base64 (RFC 4648) and the "adapted" alphabet (`.` for `+`) of passlib
/// and pw-pbkdf2; padding optional when decoding.
pub mod base64 {
    /// The standard alphabet.
    pub const STANDARD: &[u8; 64] =
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    /// The adapted alphabet.
    pub const ADAPTED: &[u8; 64] =
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789./";

    /// Decodes; `None` on a character outside the alphabet.
    pub fn decode(input: &[u8], alphabet: &[u8; 64]) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(input.len() * 3 / 4);
        let (mut acc, mut bits) = (0u32, 0);
        for &c in input.iter().take_while(|c| **c != b'=') {
            let v = alphabet.iter().position(|a| *a == c)? as u32;
            acc = (acc << 6) | v;
            bits += 6;
            if bits >= 8 {
                bits -= 8;
                out.push((acc >> bits) as u8);
            }
        }
        Some(out)
    }

    /// Encodes with padding.
    pub fn encode(input: &[u8], alphabet: &[u8; 64]) -> String {
        let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
        for chunk in input.chunks(3) {
            let b = [
                chunk.first().copied().unwrap_or(0),
                chunk.get(1).copied().unwrap_or(0),
                chunk.get(2).copied().unwrap_or(0),
            ];
            let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
            for i in 0..4 {
                if i <= chunk.len() {
                    let index = ((n >> (18 - 6 * i)) & 63) as usize;
                    out.push(char::from(alphabet.get(index).copied().unwrap_or(b'A')));
                } else {
                    out.push('=');
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slappasswd_hashes_verify() {
        // Made with Debian's `slappasswd -s secret -h {SSHA}` / `{SHA}`.
        assert!(verify(
            b"{SSHA}32wc5rr3IqrP1z95MfkxoCQFo6LizYES",
            b"secret",
            false
        ));
        assert!(!verify(
            b"{SSHA}32wc5rr3IqrP1z95MfkxoCQFo6LizYES",
            b"Secret",
            false
        ));
        assert!(verify(
            b"{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=",
            b"secret",
            false
        ));
        assert!(!verify(
            b"{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=",
            b"secre",
            false
        ));
    }

    #[test]
    fn sha2_and_pbkdf2_forms() {
        let salt = b"saltsalt";
        let mut h = Sha256::new();
        h.update(b"pw");
        h.update(salt);
        let mut blob = h.finalize().to_vec();
        blob.extend_from_slice(salt);
        let stored = format!("{{SSHA256}}{}", base64::encode(&blob, base64::STANDARD));
        assert!(verify(stored.as_bytes(), b"pw", false));
        assert!(!verify(stored.as_bytes(), b"px", false));

        let mut dk = [0u8; 32];
        pbkdf2::pbkdf2_hmac::<Sha256>(b"pw", b"0123456789abcdef", 1000, &mut dk);
        let stored = format!(
            "{{PBKDF2-SHA256}}1000${}${}",
            base64::encode(b"0123456789abcdef", base64::ADAPTED).trim_end_matches('='),
            base64::encode(&dk, base64::ADAPTED).trim_end_matches('=')
        );
        assert!(verify(stored.as_bytes(), b"pw", false));
        assert!(!verify(stored.as_bytes(), b"pq", false));
    }

    #[test]
    fn argon2_round_trip_and_cleartext_policy() {
        let stored = hash(b"hunter2", HashCost::default()).unwrap();
        assert!(stored.starts_with(b"{ARGON2}$argon2id$v=19$m=19456,t=2,p=1$"));
        assert!(is_hashed(&stored));
        assert!(verify(&stored, b"hunter2", false));
        assert!(!verify(&stored, b"hunter3", false));
        assert!(!verify(b"plain", b"plain", false));
        assert!(verify(b"plain", b"plain", true));
        assert!(!is_hashed(b"plain"));
        assert!(!verify(b"{CRYPT}abcdefgh", b"x", true));
        assert!(!verify(b"{UNKNOWN}x", b"x", true));
    }

    #[test]
    fn the_cost_of_new_hashes_is_configurable_and_old_ones_still_verify() {
        let cheap = HashCost {
            memory_kib: 64,
            iterations: 1,
        };
        let stored = hash(b"pw", cheap).unwrap();
        assert!(stored.starts_with(b"{ARGON2}$argon2id$v=19$m=64,t=1,p=1$"));
        assert!(verify(&stored, b"pw", false));
        assert!(!verify(&stored, b"px", false));
        let refused = HashCost {
            memory_kib: 1,
            iterations: 1,
        };
        assert!(hash(b"pw", refused).is_err());
    }
}
