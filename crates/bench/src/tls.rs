//! TLS for `ldaps://` targets (rustls, ring as the crypto provider).
//!
//! The server's certificate is verified against the CA certificates of
//! `target.tls_ca_file` (PEM), or, when none is given, against nothing:
//! a bench has no system trust store to lean on and usually measures a
//! server with a test certificate, so `tls_insecure = true` must then be
//! said explicitly (it skips verification of the chain and the name, not
//! of the handshake's signatures).

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::TlsConnector;

/// What a session needs to open TLS.
#[derive(Clone)]
pub struct Tls {
    /// The configured connector.
    pub connector: TlsConnector,
    /// The name the certificate must carry.
    pub server_name: ServerName<'static>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl Tls {
    /// A client for `host` trusting `ca_file`, or trusting anything when
    /// `insecure`; `server_name` overrides the name checked.
    pub fn new(
        host: &str,
        ca_file: Option<&Path>,
        insecure: bool,
        server_name: Option<&str>,
    ) -> anyhow::Result<Tls> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .context("TLS protocol versions")?;
        let config = match (ca_file, insecure) {
            (Some(path), _) => {
                let mut roots = RootCertStore::empty();
                let certs = CertificateDer::pem_file_iter(path).with_context(|| {
                    format!("cannot read CA certificates from {}", path.display())
                })?;
                for cert in certs {
                    let cert =
                        cert.with_context(|| format!("{}: not a PEM certificate", path.display()))?;
                    roots
                        .add(cert)
                        .with_context(|| format!("{}: unusable CA certificate", path.display()))?;
                }
                if roots.is_empty() {
                    bail!("{}: no certificate in it", path.display());
                }
                builder.with_root_certificates(roots).with_no_client_auth()
            }
            (None, true) => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
                .with_no_client_auth(),
            (None, false) => bail!(
                "an ldaps:// target needs target.tls_ca_file (the CA that signed the server's certificate), \
                 or target.tls_insecure = true to accept any certificate"
            ),
        };
        let name = server_name
            .unwrap_or(host)
            .trim_start_matches('[')
            .trim_end_matches(']');
        let server_name = ServerName::try_from(name.to_owned())
            .with_context(|| format!("{name:?} is not a server name for TLS"))?;
        Ok(Tls {
            connector: TlsConnector::from(Arc::new(config)),
            server_name,
        })
    }
}

/// Accepts any certificate chain and name (`tls_insecure`), still
/// checking that the server holds the key of the certificate it sent.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
