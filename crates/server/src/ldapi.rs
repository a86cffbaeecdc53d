//! `ldapi://`: LDAP on a Unix domain socket (`server.listen_ldapi`),
//! where the kernel tells who the client is. A client there may bind
//! with SASL EXTERNAL as its user and group, which slapd names
//! `gidNumber=G+uidNumber=U,cn=peercred,cn=external,cn=auth` and access
//! rules can name too; root is the administrator unless
//! `server.ldapi_root_is_admin` is off. StartTLS is not offered there:
//! the socket never leaves the host.
//!
//! Also the account lookups by name that the socket's owner and group
//! (`server.ldapi_owner`, `server.ldapi_group`) and `server.user` need.

use std::ffi::CString;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

use meridian_config::ServerConfig;

use crate::StartError;

/// Who the kernel says is at the other end of an `ldapi://` connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCredentials {
    /// Its user ID.
    pub uid: u32,
    /// Its group ID.
    pub gid: u32,
}

impl PeerCredentials {
    /// The authentication DN slapd gives this peer on a SASL EXTERNAL
    /// bind over `ldapi://`.
    pub fn dn(&self) -> String {
        format!(
            "gidNumber={}+uidNumber={},cn=peercred,cn=external,cn=auth",
            self.gid, self.uid
        )
    }
}

/// Binds `server.listen_ldapi`: a stale socket of an earlier run is
/// replaced, a socket another server still answers on is not, nor is
/// anything else at that path. Then the mode, owner and group.
pub(crate) fn bind(s: &ServerConfig) -> Result<Option<UnixListener>, StartError> {
    if s.listen_ldapi.is_empty() {
        return Ok(None);
    }
    let path = Path::new(&s.listen_ldapi);
    let fail = |what: &str, e: std::io::Error| {
        StartError::Config(format!("server.listen_ldapi = {path:?}: {what}: {e}"))
    };
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(StartError::Config(format!(
                "server.listen_ldapi = {path:?}: something other than a socket is there"
            )));
        }
        if UnixStream::connect(path).is_ok() {
            return Err(StartError::Config(format!(
                "server.listen_ldapi = {path:?}: a server is listening there already"
            )));
        }
        std::fs::remove_file(path).map_err(|e| fail("removing the stale socket", e))?;
    }
    let listener = UnixListener::bind(path).map_err(|e| fail("binding", e))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(s.ldapi_mode))
        .map_err(|e| fail("setting server.ldapi_mode", e))?;
    let owner = match s.ldapi_owner.as_str() {
        "" => None,
        number if number.parse::<u32>().is_ok() => number.parse().ok(),
        name => Some(user_ids(name).map_err(|e| fail("server.ldapi_owner", e))?.0),
    };
    let group = match s.ldapi_group.as_str() {
        "" => None,
        name => Some(group_id(name).map_err(|e| fail("server.ldapi_group", e))?),
    };
    if owner.is_some() || group.is_some() {
        std::os::unix::fs::chown(path, owner, group).map_err(|e| fail("changing its owner", e))?;
    }
    listener
        .set_nonblocking(true)
        .map_err(|e| fail("setting it non-blocking", e))?;
    Ok(Some(listener))
}

/// The user ID and primary group ID of the user named `user`.
pub fn user_ids(user: &str) -> std::io::Result<(libc::uid_t, libc::gid_t)> {
    let name = CString::new(user).map_err(|_| not_found("a user name holds a NUL byte"))?;
    let mut entry = std::mem::MaybeUninit::<libc::passwd>::uninit();
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call: the name is a
    // NUL-terminated string, `entry` and `buf` are writable and `buf`'s
    // length is passed; getpwnam_r fills `entry` (pointing into `buf`)
    // and sets `found` to it on success, and we read them only then.
    #[allow(unsafe_code)]
    unsafe {
        let rc = libc::getpwnam_r(
            name.as_ptr(),
            entry.as_mut_ptr(),
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        );
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc));
        }
        if found.is_null() {
            return Err(not_found(&format!("there is no user {user:?}")));
        }
        let entry = entry.assume_init();
        Ok((entry.pw_uid, entry.pw_gid))
    }
}

/// The group ID of `group`, a name or a number.
pub fn group_id(group: &str) -> std::io::Result<libc::gid_t> {
    if let Ok(gid) = group.parse::<libc::gid_t>() {
        return Ok(gid);
    }
    let name = CString::new(group).map_err(|_| not_found("a group name holds a NUL byte"))?;
    let mut entry = std::mem::MaybeUninit::<libc::group>::uninit();
    let mut buf = vec![0 as libc::c_char; 64 * 1024];
    let mut found: *mut libc::group = std::ptr::null_mut();
    // SAFETY: as in `user_ids`, for getgrnam_r.
    #[allow(unsafe_code)]
    unsafe {
        let rc = libc::getgrnam_r(
            name.as_ptr(),
            entry.as_mut_ptr(),
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        );
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc));
        }
        if found.is_null() {
            return Err(not_found(&format!("there is no group {group:?}")));
        }
        Ok(entry.assume_init().gr_gid)
    }
}

fn not_found(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::NotFound, what.to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn peers_are_named_as_slapd_names_them() {
        let root = PeerCredentials { uid: 0, gid: 0 };
        assert_eq!(
            root.dn(),
            "gidNumber=0+uidNumber=0,cn=peercred,cn=external,cn=auth"
        );
    }

    #[test]
    fn accounts_are_found_by_name_or_number() {
        assert_eq!(user_ids("root").unwrap(), (0, 0));
        assert_eq!(group_id("root").unwrap(), 0);
        assert!(user_ids("no-such-user-here").is_err());
    }
}
