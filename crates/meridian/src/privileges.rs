//! `server.user`: after the listening sockets and the TLS key are taken
//! (as root, for ports below 1024 and a key only root reads), `serve`
//! becomes that user, with its primary group and no others, before it
//! opens anything in the data directory (which that user must own).

use std::ffi::{CStr, CString};

use anyhow::{Context as _, bail};

/// Becomes `user` for good. Refuses when not started as root (unless
/// already that user), and checks that root cannot be regained.
pub(crate) fn become_user(user: &str) -> anyhow::Result<()> {
    let (uid, gid) = lookup(user)?;
    // SAFETY: getuid has no preconditions and cannot fail.
    #[allow(unsafe_code)]
    let current = unsafe { libc::getuid() };
    if current == uid {
        return Ok(());
    }
    if current != 0 {
        bail!("server.user = {user:?}: only a server started as root can become another user");
    }
    // SAFETY: plain system calls on integers; each result is checked. The
    // order matters: groups and gid first, while still root.
    #[allow(unsafe_code)]
    unsafe {
        if libc::setgroups(1, &gid) != 0 {
            return Err(std::io::Error::last_os_error()).context("setgroups");
        }
        if libc::setgid(gid) != 0 {
            return Err(std::io::Error::last_os_error()).context("setgid");
        }
        if libc::setuid(uid) != 0 {
            return Err(std::io::Error::last_os_error()).context("setuid");
        }
        // Root must be gone for good: setuid(0) now fails.
        if libc::setuid(0) == 0 {
            bail!("server.user = {user:?}: root could be regained after dropping it");
        }
    }
    tracing::info!(user, uid, gid, "running as server.user from now on");
    Ok(())
}

/// The user's ID and primary group ID.
fn lookup(user: &str) -> anyhow::Result<(libc::uid_t, libc::gid_t)> {
    let name = CString::new(user).context("server.user holds a NUL byte")?;
    let mut entry = std::mem::MaybeUninit::<libc::passwd>::uninit();
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call: the name is a
    // NUL-terminated string, `entry` and `buf` are writable and `buf`'s
    // length is passed; getpwnam_r fills `entry` (pointing into `buf`)
    // and sets `found` to it on success, and we read them only then.
    #[allow(unsafe_code)]
    let (uid, gid) = unsafe {
        let rc = libc::getpwnam_r(
            name.as_ptr(),
            entry.as_mut_ptr(),
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        );
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc))
                .with_context(|| format!("server.user: looking up {user:?}"));
        }
        if found.is_null() {
            bail!("server.user: there is no user {user:?}");
        }
        let entry = entry.assume_init();
        debug_assert!(!CStr::from_ptr(entry.pw_name).to_bytes().is_empty());
        (entry.pw_uid, entry.pw_gid)
    };
    Ok((uid, gid))
}
