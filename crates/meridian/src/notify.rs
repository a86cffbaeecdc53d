//! systemd's readiness protocol (sd_notify(3)) without libsystemd: one
//! datagram to the socket `$NOTIFY_SOCKET` names, when systemd set it
//! (`Type=notify`). `READY=1` once the server listens, so units ordered
//! after it start when it answers; `RELOADING=1` and `READY=1` around a
//! SIGHUP's reread; `STOPPING=1` when it begins to stop.

use std::os::unix::net::UnixDatagram;

/// Sends `state` to systemd, if it asked (`$NOTIFY_SOCKET`); a failure
/// is logged, never fatal: the server serves either way.
pub(crate) fn notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    if let Err(e) = send(&path, state) {
        tracing::warn!(
            socket = %path.to_string_lossy(),
            "cannot tell systemd {state:?}: {e}"
        );
    }
}

fn send(path: &std::ffi::OsStr, state: &str) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt as _;
    let socket = UnixDatagram::unbound()?;
    let bytes = path.as_bytes();
    // A name starting with '@' is in Linux's abstract namespace.
    match bytes.strip_prefix(b"@") {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt as _;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            socket.send_to_addr(state.as_bytes(), &addr)?;
        }
        None => {
            socket.send_to(state.as_bytes(), path)?;
        }
    }
    Ok(())
}
