//! userPassword values: the schemes Meridian verifies and the one it
//! writes.
//!
//! New passwords are stored as `{ARGON2}` (Argon2id, PHC string; by
//! default 19 MiB and 2 passes, the argon2 crate's and OWASP's minimum,
//! about 12 ms of CPU on our benchmark machine; configurable as
//! [`HashCost`], since a server where every operation binds pays it per
//! operation). Verification always uses the cost stored in the hash. Imported data keeps its
//! hashes and still logs in: `{SSHA}`, `{SSHA256}`, `{SSHA384}`,
//! `{SSHA512}`, `{SHA}`, `{SHA256}`, `{SHA384}`, `{SHA512}`, `{SMD5}`,
//! `{MD5}` (OpenLDAP and its pw-sha2 module, 389 DS) and `{PBKDF2-SHA256}`
//! (OpenLDAP's pw-pbkdf2 format, `rounds$salt$hash` in adapted base64).
//! `{CRYPT}` goes to the platform's crypt(3) (`crypt.rs`: yescrypt,
//! SHA-crypt, bcrypt, MD5-crypt and DES on Debian), as slapd does. A
//! value without a scheme is a clear-text password and is accepted only
//! when the caller allows it.
//!
//! Whoever may write a userPassword chooses the cost its binds will pay,
//! so every stored hash is held to [`HashBounds`] twice: a pre-hashed
//! value whose scheme is unknown or whose cost is over the bounds is
//! refused when written ([`check_stored`]), and one that is stored anyway
//! (imported, or written before the bounds were lowered) never reaches
//! the hash function: [`verify`] answers [`Verdict::OverBounds`].

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use md5::Md5;
use meridian_ldif::base64::{self, Alphabet};
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha384, Sha512};
use subtle::ConstantTimeEq;

pub use crate::crypt::Methods as CryptMethods;

/// True if `value` already names a scheme (`{...}`), so it is stored as is.
pub fn is_hashed(value: &[u8]) -> bool {
    value.first() == Some(&b'{') && value.iter().skip(1).take(32).any(|b| *b == b'}')
}

/// True if `value` is stored in `scheme` (`{SCHEME}...`, the scheme's
/// name compared without regard to case).
pub fn is_scheme(value: &[u8], scheme: &[u8]) -> bool {
    split_scheme(value).is_some_and(|(name, _)| name.eq_ignore_ascii_case(scheme))
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

/// A new random password: 20 characters from a 64-symbol alphabet (120
/// bits), without modulo bias. For the administrator's first start and
/// Password Modify without a new password (genPasswd).
pub fn generate() -> Result<String, String> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut random = [0u8; 20];
    getrandom::fill(&mut random).map_err(|e| format!("no randomness: {e}"))?;
    Ok(random
        .iter()
        .filter_map(|b| ALPHABET.get(usize::from(b & 63)).copied().map(char::from))
        .collect())
}

/// Hashes a clear-text password as `{ARGON2}` at `cost`.
pub fn hash(password: &[u8], cost: HashCost) -> Result<Vec<u8>, String> {
    Ok(format!("{{ARGON2}}{}", argon2_phc(password, cost)?).into_bytes())
}

/// The most work a stored hash may ask of one password check. Every
/// field has a config key in `[security]`; the defaults admit what
/// OpenLDAP, 389 DS, `mkpasswd` and the argon2 libraries write by default
/// with room to spare, and keep a check under about a second of CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashBounds {
    /// Most memory (KiB) of an Argon2 or yescrypt hash.
    pub max_memory_kib: u32,
    /// Most Argon2 passes (t).
    pub max_iterations: u32,
    /// Most Argon2 lanes (p); they run one after another here.
    pub max_lanes: u32,
    /// Most PBKDF2 rounds.
    pub max_pbkdf2_rounds: u32,
    /// Most SHA-crypt (`$5$`, `$6$`) rounds.
    pub max_crypt_sha_rounds: u32,
    /// Highest bcrypt cost (2^cost rounds).
    pub max_bcrypt_cost: u32,
    /// The crypt(3) methods a `{CRYPT}` value may use.
    pub crypt_methods: CryptMethods,
    /// Most userPassword values an entry may hold, and a bind tries
    /// (`security.max_password_values`): each is a hash to compute.
    pub max_values: usize,
}

impl Default for HashBounds {
    fn default() -> Self {
        HashBounds {
            // 64 MiB: RFC 9106's second recommended setting, argon2-cffi's
            // default; three times what Meridian writes.
            max_memory_kib: 65_536,
            max_iterations: 16,
            max_lanes: 8,
            // Twice OWASP's 2023 advice for PBKDF2-SHA256.
            max_pbkdf2_rounds: 1_200_000,
            // 200 times glibc's default of 5,000.
            max_crypt_sha_rounds: 1_000_000,
            // 2^14 rounds: about a second; 10 to 12 is usual.
            max_bcrypt_cost: 14,
            crypt_methods: CryptMethods::default(),
            // slapd's users hold one or two (a hash, perhaps a second
            // scheme kept for an old client).
            max_values: 8,
        }
    }
}

/// What checking a password against one stored value found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The password is the one stored.
    Matched,
    /// It is not (or the value is malformed, or clear text not allowed).
    Mismatched,
    /// The stored value asks for more work than [`HashBounds`] allow, or
    /// names an unknown scheme or crypt method: it was not computed.
    OverBounds(String),
}

impl Verdict {
    /// True for [`Verdict::Matched`].
    pub fn matched(&self) -> bool {
        matches!(self, Verdict::Matched)
    }
}

/// Splits `{SCHEME}value` into the upper-cased scheme and the value.
fn split_scheme(stored: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    let rest = stored.strip_prefix(b"{")?;
    let end = rest.iter().position(|b| *b == b'}')?;
    Some((
        rest.get(..end)?.to_ascii_uppercase(),
        rest.get(end + 1..).unwrap_or_default(),
    ))
}

/// Whether checking a password against `stored` is deliberately slow:
/// `{ARGON2}`, `{PBKDF2-*}` and `{CRYPT}` (whose rounds may be many) are;
/// the digest schemes (`{SSHA}`, `{SHA256}`, `{MD5}` ...) and clear text
/// cost about a microsecond. The server checks the cheap ones where the
/// bind is read and sends only the slow ones to its password pool.
pub fn is_slow(stored: &[u8]) -> bool {
    match split_scheme(stored) {
        Some((scheme, _)) => {
            scheme == b"ARGON2" || scheme == b"CRYPT" || scheme.starts_with(b"PBKDF2")
        }
        None => false,
    }
}

/// Whether a stored value may be kept and checked: clear text (no
/// scheme) always may; a hash only if its scheme is known, it is well
/// formed, and its cost is within `bounds`. `Err` says why not, in words
/// for the client (a write) or the log (a bind).
pub fn check_stored(stored: &[u8], bounds: &HashBounds) -> Result<(), String> {
    match split_scheme(stored) {
        Some((scheme, value)) => Stored::parse(&scheme, value, bounds).map(|_| ()),
        None if stored.first() == Some(&b'{') => {
            Err("a userPassword value starting with '{' must be {SCHEME}hash".into())
        }
        None => Ok(()),
    }
}

/// A stored `{SCHEME}value`, parsed once and held to the bounds: what a
/// write checks and a bind then computes, without parsing it again.
enum Stored<'a> {
    Argon2(PasswordHash<'a>),
    /// `{SSHA*}`, `{SHA*}`, `{SMD5}` and `{MD5}`: the decoded digest
    /// (and salt).
    Salted {
        digest: DigestKind,
        decoded: Vec<u8>,
    },
    Pbkdf2(Pbkdf2),
    Crypt(&'a [u8]),
    Cleartext(&'a [u8]),
}

/// The digests of the salted (and unsalted) SHA and MD5 schemes (those
/// of OpenLDAP's core and its pw-sha2 module; MD5 only to verify what
/// migrated data holds).
#[derive(Clone, Copy)]
enum DigestKind {
    Md5,
    Sha1,
    Sha256,
    Sha384,
    Sha512,
}

impl DigestKind {
    fn len(self) -> usize {
        match self {
            DigestKind::Md5 => 16,
            DigestKind::Sha1 => 20,
            DigestKind::Sha256 => 32,
            DigestKind::Sha384 => 48,
            DigestKind::Sha512 => 64,
        }
    }

    /// `digest(password ‖ salt)` equals `expected`, in constant time.
    fn matches(self, password: &[u8], salt: &[u8], expected: &[u8]) -> bool {
        fn of<D: Digest>(password: &[u8], salt: &[u8], expected: &[u8]) -> bool {
            let mut h = D::new();
            h.update(password);
            h.update(salt);
            bool::from(h.finalize().as_slice().ct_eq(expected))
        }
        match self {
            DigestKind::Md5 => of::<Md5>(password, salt, expected),
            DigestKind::Sha1 => of::<Sha1>(password, salt, expected),
            DigestKind::Sha256 => of::<Sha256>(password, salt, expected),
            DigestKind::Sha384 => of::<Sha384>(password, salt, expected),
            DigestKind::Sha512 => of::<Sha512>(password, salt, expected),
        }
    }
}

impl<'a> Stored<'a> {
    fn parse(scheme: &[u8], value: &'a [u8], bounds: &HashBounds) -> Result<Stored<'a>, String> {
        let malformed = || {
            format!(
                "the {{{}}} value is malformed",
                String::from_utf8_lossy(scheme)
            )
        };
        // (digest, whether a salt may follow it)
        let digest = |digest: DigestKind, salted: bool| {
            let decoded = base64::decode(value).ok_or_else(malformed)?;
            let fits = if salted {
                decoded.len() >= digest.len()
            } else {
                decoded.len() == digest.len()
            };
            if fits {
                Ok(Stored::Salted { digest, decoded })
            } else {
                Err(malformed())
            }
        };
        match scheme {
            b"ARGON2" => argon2_within(value, bounds).map(Stored::Argon2),
            b"SMD5" => digest(DigestKind::Md5, true),
            b"SSHA" => digest(DigestKind::Sha1, true),
            b"SSHA256" => digest(DigestKind::Sha256, true),
            b"SSHA384" => digest(DigestKind::Sha384, true),
            b"SSHA512" => digest(DigestKind::Sha512, true),
            b"MD5" => digest(DigestKind::Md5, false),
            b"SHA" => digest(DigestKind::Sha1, false),
            b"SHA256" => digest(DigestKind::Sha256, false),
            b"SHA384" => digest(DigestKind::Sha384, false),
            b"SHA512" => digest(DigestKind::Sha512, false),
            b"PBKDF2-SHA256" => {
                let parsed = Pbkdf2::parse(value).ok_or_else(|| {
                    "the {PBKDF2-SHA256} value is malformed: rounds$salt$hash".to_owned()
                })?;
                parsed.within(bounds)?;
                Ok(Stored::Pbkdf2(parsed))
            }
            b"CRYPT" => crate::crypt::within_bounds(value, bounds).map(|()| Stored::Crypt(value)),
            b"CLEARTEXT" => Ok(Stored::Cleartext(value)),
            _ => Err(format!(
                "unknown password scheme {{{}}}; known: ARGON2, SSHA, SSHA256, SSHA512, SHA, \
                 SHA256, SHA512, PBKDF2-SHA256, CRYPT",
                String::from_utf8_lossy(scheme)
            )),
        }
    }

    /// Whether `password` is the one stored. Slow by design for Argon2,
    /// PBKDF2 and crypt.
    fn matches(&self, password: &[u8], allow_cleartext: bool) -> bool {
        match self {
            // The algorithm, version and cost are the hash's own, bounded.
            Stored::Argon2(hash) => Argon2::default().verify_password(password, hash).is_ok(),
            Stored::Salted { digest, decoded } => {
                let (expected, salt) = decoded.split_at(digest.len().min(decoded.len()));
                digest.matches(password, salt, expected)
            }
            Stored::Pbkdf2(parsed) => parsed.verify(password),
            Stored::Crypt(setting) => crate::crypt::crypt(password, setting)
                .is_some_and(|h| bool::from(h.ct_eq(*setting))),
            Stored::Cleartext(value) => allow_cleartext && bool::from(value.ct_eq(password)),
        }
    }
}

/// The parameters of an `{ARGON2}` PHC string, held to `bounds`.
fn argon2_within<'a>(value: &'a [u8], bounds: &HashBounds) -> Result<PasswordHash<'a>, String> {
    let malformed = || "the {ARGON2} value is not an Argon2 PHC string".to_owned();
    let text = std::str::from_utf8(value).map_err(|_| malformed())?;
    let hash = PasswordHash::new(text).map_err(|_| malformed())?;
    argon2::Algorithm::try_from(hash.algorithm).map_err(|_| malformed())?;
    let params = argon2::Params::try_from(&hash).map_err(|_| malformed())?;
    let limits = [
        (
            "memory (KiB)",
            params.m_cost(),
            bounds.max_memory_kib,
            "password_max_memory_kib",
        ),
        (
            "passes",
            params.t_cost(),
            bounds.max_iterations,
            "password_max_iterations",
        ),
        (
            "lanes",
            params.p_cost(),
            bounds.max_lanes,
            "password_max_lanes",
        ),
    ];
    for (what, value, most, key) in limits {
        if value > most {
            return Err(format!(
                "the {{ARGON2}} hash asks for {what} {value}, more than the {most} \
                 allowed (security.{key})"
            ));
        }
    }
    Ok(hash)
}

/// Checks `password` against one stored value, never computing a hash
/// whose cost is over `bounds`.
pub fn verify(
    stored: &[u8],
    password: &[u8],
    allow_cleartext: bool,
    bounds: &HashBounds,
) -> Verdict {
    let Some((scheme, value)) = split_scheme(stored) else {
        let plain =
            stored.first() != Some(&b'{') && allow_cleartext && bool::from(stored.ct_eq(password));
        return if plain {
            Verdict::Matched
        } else {
            Verdict::Mismatched
        };
    };
    match Stored::parse(&scheme, value, bounds) {
        Err(why) => Verdict::OverBounds(why),
        Ok(parsed) if parsed.matches(password, allow_cleartext) => Verdict::Matched,
        Ok(_) => Verdict::Mismatched,
    }
}

/// OpenLDAP pw-pbkdf2: `{PBKDF2-SHA256}<rounds>$<ab64 salt>$<ab64 hash>`.
struct Pbkdf2 {
    rounds: u32,
    salt: Vec<u8>,
    derived: Vec<u8>,
}

impl Pbkdf2 {
    fn parse(value: &[u8]) -> Option<Pbkdf2> {
        let text = std::str::from_utf8(value).ok()?;
        let mut parts = text.split('$');
        let (Some(rounds), Some(salt), Some(dk), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        let parsed = Pbkdf2 {
            rounds: rounds.parse().ok()?,
            salt: base64::decode_with(salt.as_bytes(), Alphabet::Adapted)?,
            derived: base64::decode_with(dk.as_bytes(), Alphabet::Adapted)?,
        };
        // One SHA-256 block or two: a longer key multiplies the rounds.
        (parsed.rounds > 0 && !parsed.derived.is_empty() && parsed.derived.len() <= 64)
            .then_some(parsed)
    }

    fn within(&self, bounds: &HashBounds) -> Result<(), String> {
        if self.rounds > bounds.max_pbkdf2_rounds {
            return Err(format!(
                "the {{PBKDF2-SHA256}} hash asks for {} rounds, more than the {} allowed \
                 (security.password_max_pbkdf2_rounds)",
                self.rounds, bounds.max_pbkdf2_rounds
            ));
        }
        Ok(())
    }

    fn verify(&self, password: &[u8]) -> bool {
        let mut out = vec![0u8; self.derived.len()];
        pbkdf2::pbkdf2_hmac::<Sha256>(password, &self.salt, self.rounds, &mut out);
        bool::from(out.ct_eq(&self.derived))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks with the default bounds.
    fn verifies(stored: &[u8], password: &[u8], allow_cleartext: bool) -> bool {
        verify(stored, password, allow_cleartext, &HashBounds::default()).matched()
    }

    fn refusal(stored: &[u8]) -> String {
        check_stored(stored, &HashBounds::default()).unwrap_err()
    }

    #[test]
    fn only_the_deliberately_slow_schemes_are_slow() {
        for slow in [
            &b"{ARGON2}$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA"[..],
            b"{argon2}x",
            b"{CRYPT}$6$salt$hash",
            b"{PBKDF2-SHA256}10000$c2FsdA$aGFzaA",
        ] {
            assert!(is_slow(slow), "{}", String::from_utf8_lossy(slow));
        }
        for cheap in [
            &b"{SSHA}abcd"[..],
            b"{SHA256}abcd",
            b"{SSHA512}abcd",
            b"{MD5}abcd",
            b"{SMD5}abcd",
            b"clear text",
            b"{UNKNOWN}x",
        ] {
            assert!(!is_slow(cheap), "{}", String::from_utf8_lossy(cheap));
        }
    }

    #[test]
    fn md5_and_sha384_schemes_of_migrated_data_verify() {
        // Made with Python's hashlib for "secret" and the salt "saltsalt".
        for stored in [
            "{MD5}Xr4ilOzQ4PCOq3aQ0qbuaQ==",
            "{SMD5}VAfQ6nCkaw9o3u+x706wnXNhbHRzYWx0",
            "{SHA384}WKd1ukESvjAFrkQHznV9iP2nHUBJe7gCbsrFTU4//HIyzo3jq1rLMK45dg/ufFPt",
            "{SSHA384}xZjeLqA5S5k50pfYWOduoMpyOadNQ2hKzVUikzLgZ/JSGpE4X/aVRUUuwOH25+Urc2FsdHNhbHQ=",
        ] {
            assert!(verifies(stored.as_bytes(), b"secret", false), "{stored}");
            assert!(!verifies(stored.as_bytes(), b"Secret", false), "{stored}");
        }
        // An unsalted value of the wrong length is malformed.
        assert!(refusal(b"{MD5}c2hvcnQ=").contains("malformed"));
    }

    #[test]
    fn hashes_asking_for_too_much_work_are_refused_and_never_computed() {
        // The value of the robustness issue: 4 TB of memory per bind.
        let huge =
            b"{ARGON2}$argon2id$v=19$m=4000000000,t=1,p=1$c29tZXNhbHQ$aGFzaGhhc2hoYXNoaGFzaA";
        assert!(
            refusal(huge).contains("security.password_max_memory_kib"),
            "{}",
            refusal(huge)
        );
        assert!(matches!(
            verify(huge, b"x", false, &HashBounds::default()),
            Verdict::OverBounds(_)
        ));
        let slow = b"{ARGON2}$argon2id$v=19$m=64,t=1000,p=1$c29tZXNhbHQ$aGFzaGhhc2hoYXNoaGFzaA";
        assert!(refusal(slow).contains("password_max_iterations"));
        let wide = b"{ARGON2}$argon2id$v=19$m=1024,t=1,p=64$c29tZXNhbHQ$aGFzaGhhc2hoYXNoaGFzaA";
        assert!(refusal(wide).contains("password_max_lanes"));
        assert!(refusal(b"{PBKDF2-SHA256}999999999$c2FsdA$aGFzaA").contains("rounds"));
        assert!(refusal(b"{CRYPT}$6$rounds=999999999$salt$x").contains("rounds"));
        assert!(refusal(b"{CRYPT}$2b$20$abcdefghijklmnopqrstuu").contains("cost 20"));
        assert!(refusal(b"{MADEUP}abc").contains("unknown password scheme"));
        assert!(
            refusal(b"{ARGON2}not a phc string").contains("malformed")
                || refusal(b"{ARGON2}not a phc string").contains("not an Argon2")
        );
        assert!(refusal(b"{SSHA}!!!").contains("malformed"));
        assert!(refusal(b"{unterminated").contains("{SCHEME}"));
        // What Meridian itself writes, and clear text, pass.
        let ours = hash(b"pw", HashCost::default()).unwrap();
        assert_eq!(check_stored(&ours, &HashBounds::default()), Ok(()));
        assert_eq!(check_stored(b"clear text", &HashBounds::default()), Ok(()));
        // Lower bounds refuse what the defaults allow, at verify time too.
        let tight = HashBounds {
            max_memory_kib: 1024,
            ..HashBounds::default()
        };
        assert!(matches!(
            verify(&ours, b"pw", false, &tight),
            Verdict::OverBounds(_)
        ));
        assert!(verify(&ours, b"pw", false, &HashBounds::default()).matched());
    }

    #[test]
    fn slappasswd_hashes_verifies() {
        // Made with Debian's `slappasswd -s secret -h {SSHA}` / `{SHA}`.
        assert!(verifies(
            b"{SSHA}32wc5rr3IqrP1z95MfkxoCQFo6LizYES",
            b"secret",
            false
        ));
        assert!(!verifies(
            b"{SSHA}32wc5rr3IqrP1z95MfkxoCQFo6LizYES",
            b"Secret",
            false
        ));
        assert!(verifies(
            b"{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=",
            b"secret",
            false
        ));
        assert!(!verifies(
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
        let stored = format!("{{SSHA256}}{}", base64::encode(&blob));
        assert!(verifies(stored.as_bytes(), b"pw", false));
        assert!(!verifies(stored.as_bytes(), b"px", false));

        let mut dk = [0u8; 32];
        pbkdf2::pbkdf2_hmac::<Sha256>(b"pw", b"0123456789abcdef", 1000, &mut dk);
        let stored = format!(
            "{{PBKDF2-SHA256}}1000${}${}",
            base64::encode_with(b"0123456789abcdef", Alphabet::Adapted).trim_end_matches('='),
            base64::encode_with(&dk, Alphabet::Adapted).trim_end_matches('=')
        );
        assert!(verifies(stored.as_bytes(), b"pw", false));
        assert!(!verifies(stored.as_bytes(), b"pq", false));
    }

    #[test]
    fn argon2_round_trip_and_cleartext_policy() {
        let stored = hash(b"hunter2", HashCost::default()).unwrap();
        assert!(stored.starts_with(b"{ARGON2}$argon2id$v=19$m=19456,t=2,p=1$"));
        assert!(is_hashed(&stored));
        assert!(verifies(&stored, b"hunter2", false));
        assert!(!verifies(&stored, b"hunter3", false));
        assert!(!verifies(b"plain", b"plain", false));
        assert!(verifies(b"plain", b"plain", true));
        assert!(!is_hashed(b"plain"));
        assert!(!verifies(b"{CRYPT}abcdefgh", b"x", true));
        assert!(!verifies(b"{UNKNOWN}x", b"x", true));
    }

    #[test]
    fn the_cost_of_new_hashes_is_configurable_and_old_ones_still_verifies() {
        let cheap = HashCost {
            memory_kib: 64,
            iterations: 1,
        };
        let stored = hash(b"pw", cheap).unwrap();
        assert!(stored.starts_with(b"{ARGON2}$argon2id$v=19$m=64,t=1,p=1$"));
        assert!(verifies(&stored, b"pw", false));
        assert!(!verifies(&stored, b"px", false));
        let refused = HashCost {
            memory_kib: 1,
            iterations: 1,
        };
        assert!(hash(b"pw", refused).is_err());
    }
}
