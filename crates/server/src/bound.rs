//! What the server takes before it may give up privileges: its listening
//! sockets (port 389 and 636 need root or `CAP_NET_BIND_SERVICE`) and
//! its TLS certificate and key (often readable by root alone).
//!
//! The sockets are bound here, or taken from systemd when it started the
//! server with socket activation (`LISTEN_FDS`, sd_listen_fds(3)), each
//! by its name in `LISTEN_FDNAMES` (`ldap`, `ldaps`, `peer`, `metrics`);
//! unnamed, the first is the plain listener and the second the TLS one.
//! A socket passed in is never released between two runs of the server,
//! so a restart cannot find its port taken.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

use meridian_config::Config;
use meridian_directory::certificate::CertificateMap;

use crate::StartError;
use crate::tls::{ClientAuth, Tls};

/// The listening sockets and the certificate, ready for [`crate::Server::start`].
#[derive(Debug)]
pub struct Bound {
    pub(crate) listener: TcpListener,
    pub(crate) tls_listener: Option<TcpListener>,
    /// `cluster.peer_listen`, when systemd passed it.
    pub(crate) peer_listener: Option<TcpListener>,
    /// `server.metrics_listen`.
    pub(crate) metrics_listener: Option<TcpListener>,
    /// `server.listen_ldapi`.
    pub(crate) ldapi_listener: Option<std::os::unix::net::UnixListener>,
    pub(crate) tls: Option<Arc<Tls>>,
    pub(crate) certificate_map: Option<CertificateMap>,
}

impl Bound {
    /// Binds `server.listen` and `server.listen_tls` (or takes systemd's
    /// sockets) and loads the TLS certificate, key and client CAs.
    pub fn new(config: &Config) -> Result<Bound, StartError> {
        let (tls, certificate_map) = load_tls(config)?;
        let s = &config.server;
        let (listener, tls_listener, peer_listener, metrics_listener) = match from_systemd()? {
            Some(Inherited {
                ldap: Some(ldap),
                ldaps,
                peer,
                metrics,
            }) => {
                let metrics = match metrics {
                    Some(socket) => Some(socket),
                    None => listen_on(&s.metrics_listen, "server.metrics_listen")?,
                };
                (ldap, ldaps, peer, metrics)
            }
            _ => (
                listen_on(&s.listen, "server.listen")?.ok_or_else(|| {
                    StartError::Config("server.listen is empty: there is nothing to serve".into())
                })?,
                listen_on(&s.listen_tls, "server.listen_tls")?,
                None,
                listen_on(&s.metrics_listen, "server.metrics_listen")?,
            ),
        };
        if tls_listener.is_some() && tls.is_none() {
            return Err(StartError::Config(
                "server.listen_tls needs security.tls_certificate_file and security.tls_key_file"
                    .into(),
            ));
        }
        let ldapi_listener = crate::ldapi::bind(s)?;
        Ok(Bound {
            listener,
            tls_listener,
            peer_listener,
            metrics_listener,
            ldapi_listener,
            tls,
            certificate_map,
        })
    }

    /// The socket systemd passed for `cluster.peer_listen` (named `peer`),
    /// which the cluster takes instead of binding its own.
    pub fn take_peer_listener(&mut self) -> Option<TcpListener> {
        self.peer_listener.take()
    }

    /// The plain listener's address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

/// The TLS configuration and the certificate map, checked together:
/// flags may give what the config file lacks, so this is where keys
/// that only make sense together are checked.
fn load_tls(config: &Config) -> Result<(Option<Arc<Tls>>, Option<CertificateMap>), StartError> {
    let sec = &config.security;
    let client_auth = match (sec.client_certificates.as_str(), &sec.tls_ca_file) {
        ("none", _) => ClientAuth::None,
        (_, None) => {
            return Err(StartError::Config(format!(
                "security.client_certificates = {:?} needs security.tls_ca_file, the CAs client certificates are checked against",
                sec.client_certificates
            )));
        }
        ("required", Some(ca)) => ClientAuth::Required(ca.clone()),
        (_, Some(ca)) => ClientAuth::Optional(ca.clone()),
    };
    let certificate_map = match client_auth {
        ClientAuth::None => None,
        _ => Some(
            CertificateMap::parse(&sec.certificate_map)
                .map_err(|e| StartError::Config(format!("security.certificate_map: {e}")))?,
        ),
    };
    let tls = match (&sec.tls_certificate_file, &sec.tls_key_file) {
        (Some(cert), Some(key)) => Some(Arc::new(Tls::load(cert, key, client_auth)?)),
        (Some(_), None) => {
            return Err(StartError::Config(
                "security.tls_certificate_file is set without security.tls_key_file".into(),
            ));
        }
        (None, Some(_)) => {
            return Err(StartError::Config(
                "security.tls_key_file is set without security.tls_certificate_file".into(),
            ));
        }
        (None, None) if certificate_map.is_some() => {
            return Err(StartError::Config(
                "security.client_certificates needs a server certificate: security.tls_certificate_file and security.tls_key_file".into(),
            ));
        }
        (None, None) if sec.require_tls => {
            return Err(StartError::Config(
                "security.require_tls needs a certificate: security.tls_certificate_file and security.tls_key_file".into(),
            ));
        }
        (None, None) => None,
    };
    Ok((tls, certificate_map))
}

/// A listening socket on the address `text` of config key `key`, or
/// none when `text` is empty.
fn listen_on(text: &str, key: &str) -> Result<Option<TcpListener>, StartError> {
    if text.is_empty() {
        return Ok(None);
    }
    let addr: SocketAddr = text
        .parse()
        .map_err(|e| StartError::Address(format!("{key} {text:?}: {e}")))?;
    listen(addr)
        .map(Some)
        .map_err(|source| StartError::Bind { addr, source })
}

/// A listening socket on `addr`.
fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    // Restart on the same port without waiting out TIME_WAIT.
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    // A deep backlog absorbs connection bursts (seed 002 reconnects for
    // every operation; seed 003 opens 5,000 connections).
    socket.listen(4096)?;
    Ok(socket.into())
}

/// The first descriptor systemd passes (sd_listen_fds(3)).
const FIRST_SYSTEMD_FD: i32 = 3;

/// The names a passed socket may carry in `LISTEN_FDNAMES`
/// (`FileDescriptorName=` of its systemd socket unit).
const SOCKET_NAMES: [&str; 4] = ["ldap", "ldaps", "peer", "metrics"];

/// The sockets systemd (or a test harness acting as it) passed this
/// process, each by the listener it stands in for.
#[derive(Debug, Default)]
struct Inherited {
    ldap: Option<TcpListener>,
    ldaps: Option<TcpListener>,
    peer: Option<TcpListener>,
    metrics: Option<TcpListener>,
}

impl Inherited {
    fn slot(&mut self, name: &str) -> Option<&mut Option<TcpListener>> {
        match name {
            "ldap" => Some(&mut self.ldap),
            "ldaps" => Some(&mut self.ldaps),
            "peer" => Some(&mut self.peer),
            "metrics" => Some(&mut self.metrics),
            _ => None,
        }
    }
}

/// The sockets systemd passed this process, if it did. Each is placed by
/// its name in `LISTEN_FDNAMES` (`ldap`, `ldaps`, `peer` for
/// `cluster.peer_listen`, `metrics` for `server.metrics_listen`); the
/// others by their order: the plain listener, then the TLS one.
fn from_systemd() -> Result<Option<Inherited>, StartError> {
    let ours = std::env::var("LISTEN_PID")
        .ok()
        .and_then(|pid| pid.parse::<u32>().ok())
        .is_some_and(|pid| pid == std::process::id());
    let count = std::env::var("LISTEN_FDS")
        .ok()
        .and_then(|n| n.parse::<i32>().ok())
        .unwrap_or(0);
    if !ours || count < 1 {
        return Ok(None);
    }
    if count > SOCKET_NAMES.len() as i32 {
        return Err(StartError::Config(format!(
            "systemd passed {count} sockets; Meridian takes at most {} ({})",
            SOCKET_NAMES.len(),
            SOCKET_NAMES.join(", ")
        )));
    }
    let names: Vec<String> = std::env::var("LISTEN_FDNAMES")
        .map(|n| n.split(':').map(str::to_owned).collect())
        .unwrap_or_default();
    let mut inherited = Inherited::default();
    let mut unnamed = Vec::new();
    for i in 0..count {
        let fd = FIRST_SYSTEMD_FD + i;
        // SAFETY: systemd passed descriptors FIRST_SYSTEMD_FD.. to this
        // process (LISTEN_PID is ours, LISTEN_FDS counts them), each an
        // open socket nothing else in the process owns. `serve` builds
        // its `Bound` once, so each is taken once. (The variables stay
        // set, as sd_listen_fds(0) leaves them: Meridian starts no other
        // program that could take the sockets.)
        #[allow(unsafe_code)]
        let socket = unsafe { <TcpListener as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        socket
            .set_nonblocking(true)
            .map_err(|source| StartError::Bind {
                addr: SocketAddr::from(([0, 0, 0, 0], 0)),
                source,
            })?;
        let name = names.get(i as usize).map_or("", String::as_str);
        match inherited.slot(name) {
            Some(slot) if slot.is_none() => *slot = Some(socket),
            Some(_) => {
                return Err(StartError::Config(format!(
                    "systemd passed two sockets named {name:?}"
                )));
            }
            None => unnamed.push(socket),
        }
    }
    // A socket without one of our names (systemd names every socket of a
    // unit after the unit unless `FileDescriptorName=` says otherwise)
    // stands in by its position: the plain listener, then the TLS one.
    for socket in unnamed {
        match (&inherited.ldap, &inherited.ldaps) {
            (None, _) => inherited.ldap = Some(socket),
            (Some(_), None) => inherited.ldaps = Some(socket),
            (Some(_), Some(_)) => {
                return Err(StartError::Config(format!(
                    "systemd passed {count} sockets, more than two without a name Meridian knows ({}): give each its name with FileDescriptorName=",
                    SOCKET_NAMES.join(", ")
                )));
            }
        }
    }
    if inherited.ldap.is_none() {
        return Err(StartError::Config(
            "systemd passed no plain LDAP socket (one named `ldap`, or the first unnamed)".into(),
        ));
    }
    tracing::info!(
        tls = inherited.ldaps.is_some(),
        peer = inherited.peer.is_some(),
        metrics = inherited.metrics.is_some(),
        "listening on the sockets systemd passed"
    );
    Ok(Some(inherited))
}
