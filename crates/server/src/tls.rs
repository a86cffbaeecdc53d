//! TLS for `ldaps://` and StartTLS (RFC 4511 section 4.14, RFC 4513).
//!
//! rustls with ring as its cryptography: ring builds from the crate alone
//! (aws-lc-rs needs cmake, and Go for some targets), and it is what the
//! bench's client already uses. TLS 1.2 and 1.3 only.
//!
//! The certificate chain and key are read from PEM files and can be read
//! again while the server runs ([`Tls::reload`], on SIGHUP and when
//! either file changes): each handshake takes the configuration current
//! when it starts, so connections already under TLS keep theirs and none
//! is dropped. A reload that fails (a half-written file, a key that does
//! not match) keeps the last good configuration and says why.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::SystemTime;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

/// Why a certificate and key could not be used.
#[derive(Debug, thiserror::Error)]
#[error("TLS: {0}")]
pub struct TlsError(String);

/// The server's TLS configuration, replaceable while it runs.
#[derive(Debug)]
pub(crate) struct Tls {
    certificate_file: PathBuf,
    key_file: PathBuf,
    current: RwLock<Arc<rustls::ServerConfig>>,
    /// The files' modification times and sizes at the last load.
    loaded: Mutex<Option<[FileStamp; 2]>>,
}

/// What tells a changed file from the one loaded.
type FileStamp = Option<(SystemTime, u64)>;

impl Tls {
    /// Reads the certificate chain and key; fails with a message naming
    /// the file and what is wrong with it.
    pub(crate) fn load(certificate_file: &Path, key_file: &Path) -> Result<Tls, TlsError> {
        let stamps = [stamp(certificate_file), stamp(key_file)];
        let config = server_config(certificate_file, key_file)?;
        Ok(Tls {
            certificate_file: certificate_file.to_owned(),
            key_file: key_file.to_owned(),
            current: RwLock::new(config),
            loaded: Mutex::new(Some(stamps)),
        })
    }

    /// The configuration a new handshake uses.
    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        let config = self.current.read().unwrap_or_else(PoisonError::into_inner);
        TlsAcceptor::from(Arc::clone(&config))
    }

    /// Reads both files again and, if they make a valid configuration,
    /// uses it for every handshake from now on.
    pub(crate) fn reload(&self) -> Result<(), TlsError> {
        let stamps = [stamp(&self.certificate_file), stamp(&self.key_file)];
        let fresh = server_config(&self.certificate_file, &self.key_file);
        // Recorded even when the files are bad, so a bad pair is reported
        // once, not at every look.
        *self.loaded.lock().unwrap_or_else(PoisonError::into_inner) = Some(stamps);
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = fresh?;
        Ok(())
    }

    /// Reloads if either file changed since the last load (or the last
    /// attempt); `None` when neither did.
    pub(crate) fn reload_if_changed(&self) -> Option<Result<(), TlsError>> {
        let stamps = [stamp(&self.certificate_file), stamp(&self.key_file)];
        let unchanged = *self.loaded.lock().unwrap_or_else(PoisonError::into_inner) == Some(stamps);
        (!unchanged).then(|| self.reload())
    }
}

fn stamp(path: &Path) -> FileStamp {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

/// A rustls server configuration from PEM files: TLS 1.3 and 1.2, no
/// client certificates.
fn server_config(
    certificate_file: &Path,
    key_file: &Path,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let named =
        |path: &Path, e: &dyn std::fmt::Display| TlsError(format!("{}: {e}", path.display()));
    let chain = CertificateDer::pem_file_iter(certificate_file)
        .map_err(|e| named(certificate_file, &e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| named(certificate_file, &e))?;
    if chain.is_empty() {
        return Err(named(certificate_file, &"no CERTIFICATE block"));
    }
    let key = PrivateKeyDer::from_pem_file(key_file).map_err(|e| named(key_file, &e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| TlsError(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| {
            TlsError(format!(
                "{} and {}: {e}",
                certificate_file.display(),
                key_file.display()
            ))
        })?;
    Ok(Arc::new(config))
}
