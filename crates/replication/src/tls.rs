//! TLS between peers: every link encrypted, both ends authenticated.
//!
//! Each node presents its certificate (`cluster.tls_certificate_file`,
//! `cluster.tls_key_file`) as a server to the nodes that connect to it and
//! as a client to the nodes it connects to; both sides verify the other's
//! chain against `cluster.tls_ca_file`, and the connecting side also the
//! name (or IP address) of the `peer` address it dialled. A node refuses
//! a peer it cannot verify, before a byte of the peer protocol is read.
//! rustls with ring, TLS 1.3 only (every node is ours).

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// The files of a node's peer TLS.
#[derive(Debug, Clone)]
pub struct PeerTlsFiles {
    /// The node's certificate chain, PEM.
    pub certificate: std::path::PathBuf,
    /// Its private key, PEM.
    pub key: std::path::PathBuf,
    /// The CA certificates that sign every node's certificate, PEM.
    pub ca: std::path::PathBuf,
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

fn named(path: &Path, e: &dyn std::fmt::Display) -> String {
    format!("{}: {e}", path.display())
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let chain = CertificateDer::pem_file_iter(path)
        .map_err(|e| named(path, &e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| named(path, &e))?;
    if chain.is_empty() {
        return Err(named(path, &"no CERTIFICATE block"));
    }
    Ok(chain)
}

impl PeerTls {
    /// Reads the files; the message names the file and what is wrong.
    pub(crate) fn load(files: &PeerTlsFiles) -> Result<PeerTls, String> {
        let chain = certificates(&files.certificate)?;
        let key = || PrivateKeyDer::from_pem_file(&files.key).map_err(|e| named(&files.key, &e));
        let mut roots = rustls::RootCertStore::empty();
        for cert in certificates(&files.ca)? {
            roots.add(cert).map_err(|e| named(&files.ca, &e))?;
        }
        let roots = Arc::new(roots);
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::clone(&roots), provider())
            .build()
            .map_err(|e| named(&files.ca, &e))?;
        let server = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| e.to_string())?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain.clone(), key()?)
            .map_err(|e| named(&files.certificate, &e))?;
        let client = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key()?)
            .map_err(|e| named(&files.certificate, &e))?;
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
