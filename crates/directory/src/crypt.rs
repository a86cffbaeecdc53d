//! `{CRYPT}` passwords: the platform's crypt(3), as slapd verifies them.
//!
//! On Linux this is libxcrypt (Debian's `libcrypt.so.1`), which knows
//! yescrypt (`$y$`), SHA-crypt (`$6$`, `$5$`), bcrypt (`$2b$`), MD5-crypt
//! (`$1$`) and DES. `crypt_rn` takes its work area from the caller, so
//! calls on several threads do not share state, and reports failure as
//! NULL. Elsewhere `{CRYPT}` values do not verify.
//!
//! Stored values come from whoever may write userPassword, so their cost
//! parameters are bounded before hashing: a value asking for hours of CPU
//! per bind fails instead.

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
/// if the platform cannot compute it (unknown method, bad setting, or a
/// cost over the bounds).
pub(crate) fn crypt(password: &[u8], setting: &[u8]) -> Option<Vec<u8>> {
    if !within_bounds(setting) {
        return None;
    }
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

/// Most SHA-crypt rounds accepted (the default is 5,000).
const MAX_SHA_ROUNDS: u64 = 2_000_000;
/// Highest bcrypt cost accepted (2^cost rounds; 12 is usual).
const MAX_BCRYPT_COST: u32 = 16;

/// Whether hashing with `setting` costs a bounded amount of work.
fn within_bounds(setting: &[u8]) -> bool {
    let text = String::from_utf8_lossy(setting);
    if let Some(rest) = text
        .strip_prefix("$5$")
        .or_else(|| text.strip_prefix("$6$"))
    {
        return match rest.strip_prefix("rounds=") {
            Some(r) => r
                .split('$')
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|n| n <= MAX_SHA_ROUNDS),
            None => true,
        };
    }
    for prefix in ["$2a$", "$2b$", "$2y$"] {
        if let Some(rest) = text.strip_prefix(prefix) {
            return rest
                .get(..2)
                .and_then(|c| c.parse::<u32>().ok())
                .is_some_and(|c| c <= MAX_BCRYPT_COST);
        }
    }
    // yescrypt's parameters are encoded; libxcrypt caps them itself and
    // the system default is what `mkpasswd`/`passwd` write. MD5-crypt and
    // DES are cheap.
    true
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
        assert!(within_bounds(b"$6$rounds=5000$salt$x"));
        assert!(!within_bounds(b"$6$rounds=999999999$salt$x"));
        assert!(!within_bounds(b"$2b$31$abcdefghijklmnopqrstuu"));
        assert!(crypt(b"x", b"$6$rounds=999999999$salt$").is_none());
        assert!(crypt(b"x", b"not a setting").is_none());
    }
}
