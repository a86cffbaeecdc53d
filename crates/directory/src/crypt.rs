//! `{CRYPT}` passwords: the platform's crypt(3), as slapd verifies them.
//!
//! On Linux this is libxcrypt (Debian's `libcrypt.so.1`), which knows
//! yescrypt (`$y$`), SHA-crypt (`$6$`, `$5$`), bcrypt (`$2b$`), MD5-crypt
//! (`$1$`) and DES. `crypt_rn` takes its work area from the caller, so
//! calls on several threads do not share state, and reports failure as
//! NULL. Elsewhere `{CRYPT}` values do not verify.
//!
//! Stored values come from whoever may write userPassword, so a value
//! reaches crypt(3) only if its method is allowed and its cost bounded
//! ([`within_bounds`]): a value asking for hours of CPU or gigabytes of
//! memory per bind is refused instead.

use crate::password::HashBounds;

/// libxcrypt's `sizeof(struct crypt_data)`; `crypt_rn` checks the size
/// it is given against it.
#[cfg(target_os = "linux")]
const WORK_AREA_BYTES: usize = 32768;

#[cfg(target_os = "linux")]
#[link(name = "libcrypt.so.1", kind = "dylib", modifiers = "+verbatim")]
#[allow(unsafe_code)]
unsafe extern "C" {
    fn crypt_rn(
        phrase: *const std::ffi::c_char,
        setting: *const std::ffi::c_char,
        data: *mut std::ffi::c_void,
        size: std::ffi::c_int,
    ) -> *mut std::ffi::c_char;
}

/// `crypt(password, setting)`: the hash in the setting's method, or `None`
/// if the platform cannot compute it. The caller has held the setting to
/// [`within_bounds`] first.
pub(crate) fn crypt(password: &[u8], setting: &[u8]) -> Option<Vec<u8>> {
    platform_crypt(password, setting)
}

#[cfg(target_os = "linux")]
fn platform_crypt(password: &[u8], setting: &[u8]) -> Option<Vec<u8>> {
    let phrase = std::ffi::CString::new(password).ok()?;
    let setting = std::ffi::CString::new(setting).ok()?;
    let mut work = vec![0u8; WORK_AREA_BYTES];
    // SAFETY: `phrase` and `setting` are NUL-terminated and outlive the
    // call; `work` is a zeroed, writable buffer of the size passed, which
    // libxcrypt requires to be at least its `struct crypt_data`.
    #[allow(unsafe_code)]
    let out = unsafe {
        crypt_rn(
            phrase.as_ptr(),
            setting.as_ptr(),
            work.as_mut_ptr().cast(),
            WORK_AREA_BYTES as std::ffi::c_int,
        )
    };
    if out.is_null() {
        return None;
    }
    // SAFETY: on success `crypt_rn` returns a NUL-terminated string inside
    // `work`, which is still alive here.
    #[allow(unsafe_code)]
    let hashed = unsafe { std::ffi::CStr::from_ptr(out) }.to_bytes();
    // A leading `*` is libxcrypt's failure token.
    (!hashed.starts_with(b"*")).then(|| hashed.to_vec())
}

#[cfg(not(target_os = "linux"))]
fn platform_crypt(_password: &[u8], _setting: &[u8]) -> Option<Vec<u8>> {
    None
}

/// The crypt(3) methods, by the prefix of their settings.
const METHODS: [Method; 8] = [
    Method::new("$y$", "yescrypt", Cost::Yescrypt),
    Method::new("$6$", "SHA-512-crypt", Cost::ShaRounds),
    Method::new("$5$", "SHA-256-crypt", Cost::ShaRounds),
    Method::new("$2b$", "bcrypt", Cost::Bcrypt),
    Method::new("$2a$", "bcrypt", Cost::Bcrypt),
    Method::new("$2y$", "bcrypt", Cost::Bcrypt),
    // 1,000 rounds, always.
    Method::new("$1$", "MD5-crypt", Cost::Fixed),
    // Traditional DES has no prefix: two salt characters, then the hash.
    Method::new("des", "DES", Cost::Fixed),
];

/// One crypt(3) method: how its settings start, its name in messages,
/// and where its cost is written.
#[derive(Debug, Clone, Copy)]
struct Method {
    prefix: &'static str,
    name: &'static str,
    cost: Cost,
}

impl Method {
    const fn new(prefix: &'static str, name: &'static str, cost: Cost) -> Method {
        Method { prefix, name, cost }
    }
}

/// Where a method's cost is written, and so how it is bounded.
#[derive(Debug, Clone, Copy)]
enum Cost {
    /// `rounds=N$`, optional (SHA-crypt).
    ShaRounds,
    /// Two digits, the log2 of the rounds (bcrypt).
    Bcrypt,
    /// N and r in the parameter field (yescrypt).
    Yescrypt,
    /// Not in the setting: the method's own.
    Fixed,
}

/// A set of crypt(3) methods (`security.password_crypt_methods`): which
/// `{CRYPT}` values may reach the platform's crypt. An allow-list, so a
/// method the platform adds later (with costs we do not bound) is refused
/// until someone names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Methods(u16);

impl Default for Methods {
    /// All of them: each has its cost bounded below, or a fixed cost.
    fn default() -> Self {
        Methods((1 << METHODS.len()) - 1)
    }
}

impl Methods {
    /// The prefixes the config may name (`des` for traditional DES).
    pub fn known() -> impl Iterator<Item = &'static str> {
        METHODS.iter().map(|m| m.prefix)
    }

    /// The set of the named prefixes; `Err` names one that is unknown.
    pub fn from_prefixes<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Methods, String> {
        let mut bits = 0u16;
        for name in names {
            let index = METHODS
                .iter()
                .position(|m| m.prefix == name)
                .ok_or_else(|| format!("unknown crypt method {name:?}"))?;
            bits |= 1 << index;
        }
        Ok(Methods(bits))
    }

    fn allows(self, index: usize) -> bool {
        self.0 & (1 << index) != 0
    }
}

/// Which method a setting uses: its index in [`METHODS`].
fn method_of(setting: &str) -> Option<usize> {
    if let Some(index) = METHODS
        .iter()
        .position(|m| m.prefix.starts_with('$') && setting.starts_with(m.prefix))
    {
        return Some(index);
    }
    let des = setting.len() == 13
        && setting
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'/');
    des.then_some(METHODS.len() - 1)
}

/// Whether hashing with `setting` is allowed and costs a bounded amount
/// of work; `Err` says why not.
pub(crate) fn within_bounds(setting: &[u8], bounds: &HashBounds) -> Result<(), String> {
    let text =
        std::str::from_utf8(setting).map_err(|_| "the {CRYPT} value is not ASCII".to_owned())?;
    let index = method_of(text).ok_or_else(|| {
        format!(
            "the {{CRYPT}} value uses no method this server knows; known: {}",
            Methods::known().collect::<Vec<_>>().join(" ")
        )
    })?;
    let Some(&Method { prefix, name, cost }) = METHODS.get(index) else {
        return Err("the {CRYPT} method was lost".into());
    };
    if !bounds.crypt_methods.allows(index) {
        return Err(format!(
            "{{CRYPT}} {name} ({prefix}) is not among security.password_crypt_methods"
        ));
    }
    let rest = text.get(prefix.len()..).unwrap_or_default();
    let over = |what: String| Err(format!("the {{CRYPT}} {name} hash asks for {what}"));
    match cost {
        Cost::ShaRounds => match rest.strip_prefix("rounds=") {
            Some(r) => match r.split('$').next().and_then(|n| n.parse::<u64>().ok()) {
                Some(n) if n <= u64::from(bounds.max_crypt_sha_rounds) => Ok(()),
                Some(n) => over(format!(
                    "{n} rounds, more than the {} allowed (security.password_max_crypt_sha_rounds)",
                    bounds.max_crypt_sha_rounds
                )),
                None => Err(format!("the {{CRYPT}} {name} rounds are malformed")),
            },
            None => Ok(()),
        },
        Cost::Bcrypt => match rest.get(..2).and_then(|c| c.parse::<u32>().ok()) {
            Some(c) if c <= bounds.max_bcrypt_cost => Ok(()),
            Some(c) => over(format!(
                "cost {c}, more than the {} allowed (security.password_max_bcrypt_cost)",
                bounds.max_bcrypt_cost
            )),
            None => Err("the {CRYPT} bcrypt cost is malformed".into()),
        },
        Cost::Yescrypt => {
            let kib = yescrypt_memory_kib(rest).ok_or_else(|| {
                "the {CRYPT} yescrypt parameters are malformed or unsupported".to_owned()
            })?;
            if kib <= u64::from(bounds.max_memory_kib) {
                Ok(())
            } else {
                over(format!(
                    "{kib} KiB of memory, more than the {} allowed (security.password_max_memory_kib)",
                    bounds.max_memory_kib
                ))
            }
        }
        Cost::Fixed => Ok(()),
    }
}

/// The memory (KiB) a yescrypt setting asks for: 128 · r · N bytes.
///
/// The parameters after `$y$` are variable-length integers in crypt's
/// base-64 alphabet: the flavor, then log2(N) - 1, then r - 1. A
/// setting with further parameters (p, t, g or a ROM, which `mkpasswd`
/// and PAM do not write) is not accepted: `None`.
fn yescrypt_memory_kib(params: &str) -> Option<u64> {
    let field = params.split('$').next()?;
    let mut digits = field.bytes();
    let _flavor = crypt64_uint(&mut digits, 0)?;
    let n_log2 = crypt64_uint(&mut digits, 1)?;
    let r = crypt64_uint(&mut digits, 1)?;
    if digits.next().is_some() || !(1..=63).contains(&n_log2) {
        return None;
    }
    // 2^n_log2 blocks of 128 · r bytes; saturating, so a huge N is "a lot".
    let bytes = 128u64
        .saturating_mul(u64::from(r))
        .saturating_mul(1u64.checked_shl(n_log2).unwrap_or(u64::MAX));
    Some(bytes / 1024)
}

/// One of yescrypt's variable-length integers: the first digit's value
/// says how many digits follow (below 48: none), each further digit adds
/// six bits, and `min` is added.
fn crypt64_uint(digits: &mut impl Iterator<Item = u8>, min: u32) -> Option<u32> {
    const ALPHABET: &[u8; 64] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let digit = |b: u8| ALPHABET.iter().position(|a| *a == b).map(|i| i as u32);
    let first = digit(digits.next()?)?;
    let (mut value, mut start, mut end, mut extra, mut bits) = (min, 0u32, 47u32, 0u32, 0u32);
    while first > end {
        value = value.checked_add((end + 1 - start).checked_shl(bits)?)?;
        start = end + 1;
        end = start + (62 - end) / 2;
        extra += 1;
        bits += 6;
    }
    value = value.checked_add((first - start).checked_shl(bits)?)?;
    for _ in 0..extra {
        bits -= 6;
        value = value.checked_add(digit(digits.next()?)?.checked_shl(bits)?)?;
    }
    Some(value)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn known_hashes_verify_and_costs_are_bounded() {
        // `openssl passwd -6 -salt saltsalt secret`, `-5`, `-1`.
        for stored in [
            &b"$6$saltsalt$TVLlQcbpFVof5W3Yz4DTP6gRstiNuHwwTt6GLc1E5n0U0aDehy0S5knV8wiOQSpT0Y77vwPZN.Pq.H91p5hVO1"[..],
            b"$5$saltsalt$0IyaXrmV7.sGNS6tirgqHLqX/G.FBvgkYA.lpPdS5sA",
            b"$1$saltsalt$9xy1btjgzLYfb7hivXtC//",
        ] {
            assert_eq!(crypt(b"secret", stored).as_deref(), Some(stored), "{}", String::from_utf8_lossy(stored));
            assert_ne!(crypt(b"Secret", stored).as_deref(), Some(stored));
        }
        let bounds = HashBounds::default();
        assert!(within_bounds(b"$6$rounds=5000$salt$x", &bounds).is_ok());
        assert!(within_bounds(b"$6$rounds=999999999$salt$x", &bounds).is_err());
        assert!(within_bounds(b"$2b$31$abcdefghijklmnopqrstuu", &bounds).is_err());
        assert!(within_bounds(b"$2b$10$abcdefghijklmnopqrstuu", &bounds).is_ok());
        assert!(within_bounds(b"not a setting", &bounds).is_err());
        assert!(within_bounds(b"$7$C6..../....SodiumChloride$x", &bounds).is_err());
        assert!(within_bounds(b"saHW9GdxihkGQ", &bounds).is_ok(), "DES");
        assert!(crypt(b"x", b"not a setting").is_none());
    }

    #[test]
    fn yescrypt_memory_is_read_from_the_setting() {
        // Debian's default (`mkpasswd -m yescrypt`): N = 4096, r = 32.
        assert_eq!(yescrypt_memory_kib("j9T$salt$hash"), Some(16_384));
        // "F" is digit 17: log2(N) = 18, 1 GiB.
        assert_eq!(yescrypt_memory_kib("jFT$salt"), Some(1 << 20));
        // N = 2^48 saturates instead of wrapping, and is refused.
        let bounds = HashBounds::default();
        assert!(within_bounds(b"$y$jjT$salt$hash", &bounds).is_err());
        assert!(within_bounds(b"$y$jFT$salt$hash", &bounds).is_err());
        // A multi-digit field runs past the end: malformed.
        assert!(within_bounds(b"$y$jzT$salt$hash", &bounds).is_err());
        assert!(within_bounds(b"$y$j9T$salt$hash", &bounds).is_ok());
        // Further parameters (p, t, ...) are not accepted.
        assert_eq!(yescrypt_memory_kib("j9T..$salt"), None);
        assert_eq!(yescrypt_memory_kib(""), None);
        let only_sha = Methods::from_prefixes(["$6$"]).unwrap();
        let narrow = HashBounds {
            crypt_methods: only_sha,
            ..HashBounds::default()
        };
        assert!(within_bounds(b"$1$saltsalt$9xy1btjgzLYfb7hivXtC//", &narrow).is_err());
        assert!(Methods::from_prefixes(["$9$"]).is_err());
    }
}
