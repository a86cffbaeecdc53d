//! `server.user`: after the listening sockets and the TLS key are taken
//! (as root, for ports below 1024 and a key only root reads), `serve`
//! becomes that user, with its primary group and no others, before it
//! opens anything in the data directory (which that user must own).

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
    meridian_server::ldapi::user_ids(user)
        .with_context(|| format!("server.user: looking up {user:?}"))
}
