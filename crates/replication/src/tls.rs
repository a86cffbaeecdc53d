//! TLS between peers: every link encrypted, both ends authenticated.
//!
//! Each node presents its certificate (`cluster.tls_certificate_file`,
//! `cluster.tls_key_file`) as a server to the nodes that connect to it and
//! as a client to the nodes it connects to; both sides verify the other's
//! chain against `cluster.tls_ca_file`, and the connecting side also the
//! name (or IP address) of the `peer` address it dialled. A node refuses
//! a peer it cannot verify, before a byte of the peer protocol is read.
//! rustls with ring, TLS 1.3 only (every node is ours).

use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// A node's peer TLS material, read from its PEM files by the binary
/// (with the server's one reader of certificate files, so both speak of
/// a bad file alike).
pub struct PeerCredentials {
    /// The node's certificate chain (`cluster.tls_certificate_file`).
    pub chain: Vec<CertificateDer<'static>>,
    /// Its private key (`cluster.tls_key_file`).
    pub key: PrivateKeyDer<'static>,
    /// The CA certificates that sign every node's certificate
    /// (`cluster.tls_ca_file`).
    pub ca: Vec<CertificateDer<'static>>,
}

impl Clone for PeerCredentials {
    fn clone(&self) -> PeerCredentials {
        PeerCredentials {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
            ca: self.ca.clone(),
        }
    }
}

impl std::fmt::Debug for PeerCredentials {
    /// Never the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerCredentials")
            .field("chain", &self.chain.len())
            .field("ca", &self.ca.len())
            .finish_non_exhaustive()
    }
}

/// Both ends of TLS for peer links.
#[derive(Clone)]
pub(crate) struct PeerTls {
    pub(crate) connector: TlsConnector,
    pub(crate) acceptor: TlsAcceptor,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn keyed(key: &str, e: &dyn std::fmt::Display) -> String {
    format!("cluster.{key}: {e}")
}

impl PeerTls {
    /// Both configurations; the message names the key whose file is
    /// wrong.
    pub(crate) fn new(credentials: &PeerCredentials) -> Result<PeerTls, String> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in &credentials.ca {
            roots
                .add(cert.clone())
                .map_err(|e| keyed("tls_ca_file", &e))?;
        }
        let roots = Arc::new(roots);
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::clone(&roots), provider())
            .build()
            .map_err(|e| keyed("tls_ca_file", &e))?;
        let server = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| e.to_string())?
            .with_client_cert_verifier(verifier)
            .with_single_cert(credentials.chain.clone(), credentials.key.clone_key())
            .map_err(|e| keyed("tls_certificate_file", &e))?;
        let client = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_client_auth_cert(credentials.chain.clone(), credentials.key.clone_key())
            .map_err(|e| keyed("tls_certificate_file", &e))?;
        Ok(PeerTls {
            connector: TlsConnector::from(Arc::new(client)),
            acceptor: TlsAcceptor::from(Arc::new(server)),
        })
    }
}

/// The name a peer's certificate must carry: the host of its address.
pub(crate) fn server_name(addr: &str) -> Result<ServerName<'static>, String> {
    let host = match addr.rsplit_once(':') {
        Some((host, _port)) => host.trim_start_matches('[').trim_end_matches(']'),
        None => addr,
    };
    ServerName::try_from(host.to_owned()).map_err(|e| format!("peer address {addr}: {e}"))
}
