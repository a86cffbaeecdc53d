//! TLS for `ldaps://` and StartTLS (RFC 4511 section 4.14, RFC 4513).
//!
//! rustls with ring as its cryptography: ring builds from the crate alone
//! (aws-lc-rs needs cmake, and Go for some targets), and it is what the
//! bench's client already uses. TLS 1.2 and 1.3 only.
//!
//! Client certificates (`security.client_certificates`) are verified
//! against `security.tls_ca_file` by rustls (webpki); a verified one
//! lets the client bind with SASL EXTERNAL.
//!
//! The certificate chain, key and client CAs are read from PEM files and
//! can be read again while the server runs ([`Tls::reload`], on SIGHUP
//! and when a file changes): each handshake takes the configuration
//! current when it starts, so connections already under TLS keep theirs
//! and none is dropped. A reload that fails (a half-written file, a key
//! that does not match) keeps the last good configuration and says why.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::SystemTime;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use tokio_rustls::TlsAcceptor;

/// Why a certificate and key could not be used.
#[derive(Debug, thiserror::Error)]
#[error("TLS: {0}")]
pub struct TlsError(String);

/// Whether the handshake asks for a client certificate, and the CAs
/// that sign acceptable ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ClientAuth {
    /// Not asked for.
    None,
    /// Asked for; a client without one goes on unauthenticated.
    Optional(PathBuf),
    /// A handshake without one fails.
    Required(PathBuf),
}

impl ClientAuth {
    fn ca_file(&self) -> Option<&Path> {
        match self {
            ClientAuth::None => None,
            ClientAuth::Optional(path) | ClientAuth::Required(path) => Some(path),
        }
    }
}

/// The server's TLS configuration, replaceable while it runs.
#[derive(Debug)]
pub(crate) struct Tls {
    certificate_file: PathBuf,
    key_file: PathBuf,
    client_auth: ClientAuth,
    current: RwLock<Arc<rustls::ServerConfig>>,
    /// The files' modification times and sizes at the last load.
    loaded: Mutex<[FileStamp; 3]>,
}

/// What tells a changed file from the one loaded.
type FileStamp = Option<(SystemTime, u64)>;

impl Tls {
    /// Reads the certificate chain, key and client CAs; fails with a
    /// message naming the file and what is wrong with it.
    pub(crate) fn load(
        certificate_file: &Path,
        key_file: &Path,
        client_auth: ClientAuth,
    ) -> Result<Tls, TlsError> {
        let stamps = stamps(certificate_file, key_file, &client_auth);
        let config = server_config(certificate_file, key_file, &client_auth)?;
        Ok(Tls {
            certificate_file: certificate_file.to_owned(),
            key_file: key_file.to_owned(),
            client_auth,
            current: RwLock::new(config),
            loaded: Mutex::new(stamps),
        })
    }

    /// The configuration a new handshake uses.
    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        let config = self.current.read().unwrap_or_else(PoisonError::into_inner);
        TlsAcceptor::from(Arc::clone(&config))
    }

    /// Reads the files again and, if they make a valid configuration,
    /// uses it for every handshake from now on.
    pub(crate) fn reload(&self) -> Result<(), TlsError> {
        let stamps = self.stamps();
        let fresh = server_config(&self.certificate_file, &self.key_file, &self.client_auth);
        // Recorded even when the files are bad, so a bad set is reported
        // once, not at every look.
        *self.loaded.lock().unwrap_or_else(PoisonError::into_inner) = stamps;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = fresh?;
        Ok(())
    }

    /// Reloads if a file changed since the last load (or the last
    /// attempt); `None` when none did.
    pub(crate) fn reload_if_changed(&self) -> Option<Result<(), TlsError>> {
        let unchanged =
            *self.loaded.lock().unwrap_or_else(PoisonError::into_inner) == self.stamps();
        (!unchanged).then(|| self.reload())
    }

    fn stamps(&self) -> [FileStamp; 3] {
        stamps(&self.certificate_file, &self.key_file, &self.client_auth)
    }
}

fn stamps(certificate_file: &Path, key_file: &Path, client_auth: &ClientAuth) -> [FileStamp; 3] {
    [
        stamp(certificate_file),
        stamp(key_file),
        client_auth.ca_file().and_then(stamp),
    ]
}

/// A rustls server configuration from the files: TLS 1.3 and 1.2, client
/// certificates as configured.
fn server_config(
    certificate_file: &Path,
    key_file: &Path,
    client_auth: &ClientAuth,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let chain = read_certificates(certificate_file)?;
    let key = read_private_key(key_file)?;
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| TlsError(e.to_string()))?;
    let builder = match client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        ClientAuth::Optional(ca) | ClientAuth::Required(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in read_certificates(ca)? {
                roots.add(cert).map_err(|e| named(ca, &e))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider());
            let verifier = match client_auth {
                ClientAuth::Optional(_) => verifier.allow_unauthenticated(),
                _ => verifier,
            };
            builder.with_client_cert_verifier(verifier.build().map_err(|e| named(ca, &e))?)
        }
    };
    let config = builder.with_single_cert(chain, key).map_err(|e| {
        TlsError(format!(
            "{} and {}: {e}",
            certificate_file.display(),
            key_file.display()
        ))
    })?;
    Ok(Arc::new(config))
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn named(path: &Path, e: &dyn std::fmt::Display) -> TlsError {
    TlsError(format!("{}: {e}", path.display()))
}

/// Every CERTIFICATE block of a PEM file; at least one. The one reader
/// of certificate files: the binary reads the cluster's peer
/// certificates with it too.
pub fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let chain = CertificateDer::pem_file_iter(path)
        .map_err(|e| named(path, &e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| named(path, &e))?;
    if chain.is_empty() {
        return Err(named(path, &"no CERTIFICATE block"));
    }
    Ok(chain)
}

/// The private key of a PEM file (PKCS #8, PKCS #1 or SEC1).
pub fn read_private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| named(path, &e))
}

fn stamp(path: &Path) -> FileStamp {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}
