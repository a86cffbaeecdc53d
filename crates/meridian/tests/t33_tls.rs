//! TLS: `ldaps://` and StartTLS with OpenLDAP's tools and a rustls
//! client, certificates made here by a test CA (rcgen): the right CA is
//! trusted, a wrong one and an expired certificate refused, StartTLS's
//! rules (not twice, not with requests behind it, unavailable without a
//! certificate), `security.require_tls`, and a certificate reloaded
//! (SIGHUP, then a changed file) without dropping a connection.

// Tests time out their waits: they read the clock directly.
#![allow(clippy::disallowed_methods)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use meridian_proto::message::tags;
use meridian_proto::{DecodeLimits, LdapMessage, ProtocolOp};
use support::{ADMIN_DN, ADMIN_PASSWORD, Client, Server, signal, temp_dir};

const START_TLS: &str = "1.3.6.1.4.1.1466.20037";

/// A certificate authority of the test.
struct Ca {
    issuer: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
    pem_file: PathBuf,
}

impl Ca {
    fn new(dir: &Path, name: &str) -> Ca {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.distinguished_name.push(
            rcgen::DnType::CommonName,
            format!("Meridian test CA {name}"),
        );
        let issuer =
            rcgen::CertifiedIssuer::self_signed(params, rcgen::KeyPair::generate().unwrap())
                .unwrap();
        let pem_file = dir.join(format!("ca-{name}.pem"));
        std::fs::write(&pem_file, issuer.pem()).unwrap();
        Ca { issuer, pem_file }
    }

    /// Writes a server certificate for 127.0.0.1 and localhost, signed
    /// by this CA, to `cert` and `key`; `expired` makes one whose
    /// validity ended in 2021.
    /// Writes a client certificate whose subject is `subject` (X.509
    /// order: the root first), signed by this CA.
    fn issue_client(&self, cert: &Path, key: &Path, subject: &[(rcgen::DnType, &str)]) {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        for (ty, value) in subject {
            params.distinguished_name.push(ty.clone(), *value);
        }
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let pair = rcgen::KeyPair::generate().unwrap();
        let signed = params.signed_by(&pair, &self.issuer).unwrap();
        std::fs::write(key, pair.serialize_pem()).unwrap();
        std::fs::write(cert, signed.pem()).unwrap();
    }

    fn issue(&self, cert: &Path, key: &Path, expired: bool) {
        let mut params =
            rcgen::CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
                .unwrap();
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let pair = rcgen::KeyPair::generate().unwrap();
        let signed = params.signed_by(&pair, &self.issuer).unwrap();
        // The key first: a reload that sees the new certificate must not
        // pair it with the old key.
        std::fs::write(key, pair.serialize_pem()).unwrap();
        std::fs::write(cert, signed.pem()).unwrap();
    }
}

/// A server with a certificate from `ca`, an `ldaps://` listener too,
/// and `config` (TOML).
fn tls_server(dir: &Path, ca: &Ca, config: &str) -> (Server, SocketAddr, PathBuf, PathBuf) {
    let (cert, key) = (dir.join("server.pem"), dir.join("server.key"));
    ca.issue(&cert, &key, false);
    let server = Server::start_with_args(
        config,
        &[
            "--listen-tls",
            "127.0.0.1:0",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    let ldaps = server
        .stdout_lines
        .iter()
        .find_map(|l| l.strip_prefix("meridian listening for ldaps on "))
        .expect("the ldaps listener is announced")
        .parse()
        .unwrap();
    (server, ldaps, cert, key)
}

/// An OpenLDAP tool trusting `ca_file`: exit code and output.
fn tool(ca_file: &Path, name: &str, args: &[&str]) -> (i32, String) {
    tool_with_certificate(ca_file, None, name, args)
}

/// [`tool`] presenting a client certificate (`cert`, `key`) if given.
fn tool_with_certificate(
    ca_file: &Path,
    client: Option<(&Path, &Path)>,
    name: &str,
    args: &[&str],
) -> (i32, String) {
    let mut command = Command::new(name);
    if let Some((cert, key)) = client {
        command.env("LDAPTLS_CERT", cert).env("LDAPTLS_KEY", key);
    }
    let out = command
        .args(args)
        // Not LDAPNOINIT, which would make the tools ignore the
        // LDAPTLS_* variables too.
        .env("LDAPTLS_CACERT", ca_file)
        .env("LDAPTLS_REQCERT", "demand")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {name} (install ldap-utils): {e}"));
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// `ldapwhoami` as the administrator at `url`, with `-ZZ` (StartTLS) if
/// asked.
fn whoami(ca_file: &Path, url: &str, start_tls: bool) -> (i32, String) {
    let mut args = vec!["-x", "-H", url, "-D", ADMIN_DN, "-w", ADMIN_PASSWORD];
    if start_tls {
        args.push("-ZZ");
    }
    tool(ca_file, "ldapwhoami", &args)
}

#[test]
fn ldaps_and_starttls_serve_openldap_clients_that_trust_the_ca() {
    let dir = temp_dir("tls-clients");
    let ca = Ca::new(&dir, "good");
    let other = Ca::new(&dir, "other");
    let (server, ldaps, _, _) = tls_server(&dir, &ca, "");
    let plain = server.url();
    let ldaps = format!("ldaps://{ldaps}");

    let (rc, out) = whoami(&ca.pem_file, &plain, true);
    assert_eq!(rc, 0, "StartTLS: {out}");
    assert!(out.contains(&format!("dn:{ADMIN_DN}")), "{out}");
    let (rc, out) = whoami(&ca.pem_file, &ldaps, false);
    assert_eq!(rc, 0, "ldaps: {out}");

    // A client that trusts another CA refuses the server, both ways.
    let (rc, out) = whoami(&other.pem_file, &plain, true);
    assert_ne!(rc, 0, "StartTLS trusted a certificate of another CA: {out}");
    let (rc, out) = whoami(&other.pem_file, &ldaps, false);
    assert_ne!(rc, 0, "ldaps trusted a certificate of another CA: {out}");

    // StartTLS on a connection already under TLS: operationsError.
    let (rc, out) = whoami(&ca.pem_file, &ldaps, true);
    assert_eq!(rc, 1, "{out}");
    assert!(out.contains("already established"), "{out}");

    // The root DSE offers StartTLS, read over TLS.
    let (rc, out) = root_dse_over_starttls(&ca.pem_file, &plain, "supportedExtension");
    assert_eq!(rc, 0, "{out}");
    assert!(
        out.contains(&format!("supportedExtension: {START_TLS}")),
        "{out}"
    );
}

#[test]
fn an_expired_certificate_is_refused_by_clients() {
    let dir = temp_dir("tls-expired");
    let ca = Ca::new(&dir, "expiring");
    let (server, ldaps, cert, key) = tls_server(&dir, &ca, "");
    ca.issue(&cert, &key, true);
    signal(server.pid(), "HUP");
    // The reload is logged; wait until a handshake sees the new
    // certificate: the expired one is refused from then on.
    let refused = wait_for(|| whoami(&ca.pem_file, &format!("ldaps://{ldaps}"), false).0 != 0);
    assert!(refused, "a client accepted an expired certificate");
    let (rc, out) = whoami(&ca.pem_file, &server.url(), true);
    assert_ne!(rc, 0, "StartTLS accepted an expired certificate: {out}");
}

#[test]
fn starttls_is_refused_without_a_certificate_twice_or_with_requests_behind_it() {
    // No certificate: unavailable, and the connection goes on in clear.
    let server = Server::start("");
    let mut client = Client::connect(server.addr);
    client.send(&start_tls_request(1));
    assert_eq!(extended_code(&mut client), 52, "unavailable");
    assert_root_dse_answers(&mut client, 2);
    drop(server);

    // A request sent behind StartTLS, before its answer: operationsError,
    // and both are answered in clear.
    let dir = temp_dir("tls-pipelined");
    let ca = Ca::new(&dir, "pipelined");
    let (server, _, _, _) = tls_server(&dir, &ca, "");
    let mut client = Client::connect(server.addr);
    let mut bytes = start_tls_request(1);
    bytes.extend_from_slice(&root_dse_request(2));
    client.send(&bytes);
    assert_eq!(extended_code(&mut client), 1, "operationsError");
    let mut entries = 0;
    client.read_until(|m| match &m.op {
        ProtocolOp::SearchResultEntry(_) => {
            entries += 1;
            false
        }
        ProtocolOp::SearchResultDone(done) => {
            assert_eq!(done.code.0, 0);
            true
        }
        other => panic!("{other:?}"),
    });
    assert_eq!(entries, 1);
}

#[test]
fn require_tls_refuses_binds_and_writes_in_clear_and_allows_them_under_tls() {
    let dir = temp_dir("tls-required");
    let ca = Ca::new(&dir, "required");
    let (server, _, _, _) = tls_server(&dir, &ca, "[security]\nrequire_tls = true\n");
    let plain = server.url();
    let (rc, out) = whoami(&ca.pem_file, &plain, false);
    assert_eq!(rc, 13, "a bind in clear: {out}");
    assert!(out.contains("security.require_tls"), "{out}");
    let ldif = "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n";
    let file = dir.join("add.ldif");
    std::fs::write(&file, ldif).unwrap();
    let add = |start_tls: bool| add_as(&ca.pem_file, &plain, ADMIN_DN, &file, start_tls);
    let (rc, out) = add(false);
    assert_eq!(rc, 13, "a write in clear: {out}");
    // Anonymous reads stay open in clear.
    let (rc, out) = tool(
        &ca.pem_file,
        "ldapsearch",
        &["-x", "-H", &plain, "-b", "", "-s", "base", "namingContexts"],
    );
    assert_eq!(rc, 0, "{out}");
    let (rc, out) = add(true);
    assert_eq!(rc, 0, "a write under StartTLS: {out}");
    let (rc, out) = whoami(&ca.pem_file, &plain, true);
    assert_eq!(rc, 0, "a bind under StartTLS: {out}");
}

#[test]
fn a_reloaded_certificate_serves_new_handshakes_and_drops_no_connection_under_load() {
    let dir = temp_dir("tls-reload");
    let (first, second, third) = (
        Ca::new(&dir, "first"),
        Ca::new(&dir, "second"),
        Ca::new(&dir, "third"),
    );
    let (server, ldaps, cert, key) = tls_server(&dir, &first, "");
    let url = format!("ldaps://{ldaps}");
    // A connection under TLS with the first certificate, kept open.
    let mut open = TlsClient::connect(ldaps, &first.pem_file);
    open.root_dse(1);
    // And load throughout: four more such connections searching without
    // pause; none may fail or be dropped by the reloads.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load: Vec<_> = (0..4)
        .map(|_| {
            // Connected here, before any reload.
            let mut client = TlsClient::connect(ldaps, &first.pem_file);
            client.root_dse(1);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut searches = 1;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    searches += 1;
                    client.root_dse(searches);
                }
                searches
            })
        })
        .collect();

    // SIGHUP: the second certificate for new handshakes.
    second.issue(&cert, &key, false);
    signal(server.pid(), "HUP");
    assert!(
        wait_for(|| whoami(&second.pem_file, &url, false).0 == 0),
        "the second certificate was not served after SIGHUP"
    );
    assert_ne!(whoami(&first.pem_file, &url, false).0, 0);
    open.root_dse(2);

    // A changed file alone: the third, within a few seconds.
    std::thread::sleep(Duration::from_millis(1100));
    third.issue(&cert, &key, false);
    assert!(
        wait_for(|| whoami(&third.pem_file, &url, false).0 == 0),
        "the third certificate was not served after its file changed"
    );
    open.root_dse(3);

    // A broken pair is refused and the last good one stays.
    std::fs::write(&key, "not a key").unwrap();
    signal(server.pid(), "HUP");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(whoami(&third.pem_file, &url, false).0, 0);
    open.root_dse(4);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for connection in load {
        // A dropped connection panics its thread (`read_pdu`).
        let searches = connection.join().expect("a loaded connection failed");
        assert!(searches > 10, "{searches} searches");
    }
}

/// `attribute` of the root DSE, read under StartTLS.
fn root_dse_over_starttls(ca_file: &Path, url: &str, attribute: &str) -> (i32, String) {
    let args = ["-x", "-ZZ", "-H", url, "-b", "", "-s", "base", attribute];
    tool(ca_file, "ldapsearch", &args)
}

/// `ldapadd` of `ldif` at `url` as `admin`, under StartTLS if asked.
fn add_as(ca_file: &Path, url: &str, admin: &str, ldif: &Path, start_tls: bool) -> (i32, String) {
    let mut args = vec!["-x", "-H", url, "-D", admin, "-w", ADMIN_PASSWORD, "-f"];
    args.push(ldif.to_str().unwrap());
    if start_tls {
        args.push("-ZZ");
    }
    tool(ca_file, "ldapadd", &args)
}

/// Polls `f` for up to 15 seconds.
fn wait_for(mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

fn start_tls_request(id: i32) -> Vec<u8> {
    let mut bytes = Vec::new();
    LdapMessage {
        message_id: id,
        op: ProtocolOp::ExtendedRequest(meridian_proto::ExtendedRequest {
            name: START_TLS.as_bytes(),
            value: None,
        }),
        controls: meridian_proto::Seq::empty(),
    }
    .encode(&mut bytes);
    bytes
}

fn root_dse_request(id: i32) -> Vec<u8> {
    let ber = meridian_proto::filter_str::parse("(objectClass=*)", 8).unwrap();
    let filter = meridian_proto::Filter::from_ber(&ber, meridian_proto::Depth::new(8)).unwrap();
    let mut bytes = Vec::new();
    LdapMessage {
        message_id: id,
        op: ProtocolOp::SearchRequest(meridian_proto::SearchRequest {
            base: b"",
            scope: meridian_proto::Scope::Base,
            deref: meridian_proto::DerefAliases::Never,
            size_limit: 0,
            time_limit: 0,
            types_only: false,
            filter,
            attributes: meridian_proto::Seq::empty(),
        }),
        controls: meridian_proto::Seq::empty(),
    }
    .encode(&mut bytes);
    bytes
}

/// The result code of the next ExtendedResponse.
fn extended_code(client: &mut Client) -> u32 {
    let mut code = None;
    client.read_until(|m| match &m.op {
        ProtocolOp::ExtendedResponse(r) => {
            code = Some(r.result.code.0);
            true
        }
        other => panic!("{other:?}"),
    });
    code.unwrap()
}

fn assert_root_dse_answers(client: &mut Client, id: i32) {
    client.send(&root_dse_request(id));
    client.read_until(|m| match &m.op {
        ProtocolOp::SearchResultDone(done) => {
            assert_eq!(done.code.0, 0);
            true
        }
        _ => false,
    });
}

/// A connection under TLS (rustls, trusting one CA file) speaking our
/// codec.
struct TlsClient {
    stream: rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
    buf: Vec<u8>,
}

impl TlsClient {
    fn connect(addr: SocketAddr, ca_file: &Path) -> TlsClient {
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::CertificateDer::pem_file_iter(ca_file).unwrap() {
            roots.add(cert.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let connection = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
        let socket = TcpStream::connect(addr).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        TlsClient {
            stream: rustls::StreamOwned::new(connection, socket),
            buf: Vec::new(),
        }
    }

    /// Reads the root DSE (message `id`) and checks it is answered.
    fn root_dse(&mut self, id: i32) {
        self.stream.write_all(&root_dse_request(id)).unwrap();
        loop {
            let pdu = self.read_pdu();
            let msg = LdapMessage::decode(&pdu, &DecodeLimits::default()).unwrap();
            assert_eq!(msg.message_id, id);
            if msg.op.tag() == tags::SEARCH_RESULT_DONE {
                return;
            }
        }
    }

    fn read_pdu(&mut self) -> Vec<u8> {
        loop {
            match meridian_ber::frame::pdu_length(&self.buf, 1 << 26) {
                Ok(len) => return self.buf.drain(..len).collect(),
                Err(e) if e.is_incomplete() => {}
                Err(e) => panic!("server sent malformed BER: {e}"),
            }
            let mut chunk = [0u8; 16384];
            let n = self
                .stream
                .read(&mut chunk)
                .expect("the TLS connection was dropped");
            assert!(n > 0, "the TLS connection was closed");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

#[test]
fn sasl_external_maps_a_client_certificate_by_its_subject() {
    let dir = temp_dir("tls-external-subject");
    let ca = Ca::new(&dir, "clients");
    let config = format!(
        "[directory]\nsuffix = \"o=example\"\nadmin_dn = \"cn=admin,o=example\"\n\
         [security]\nclient_certificates = \"required\"\ntls_ca_file = \"{}\"\n",
        ca.pem_file.display()
    );
    let (server, ldaps, _, _) = tls_server(&dir, &ca, &config);
    let ldif = "dn: o=example\nobjectClass: organization\no: example\n\n\
                dn: cn=alice,o=example\nobjectClass: person\ncn: alice\nsn: A\n";
    let file = dir.join("entries.ldif");
    std::fs::write(&file, ldif).unwrap();
    let (rc, out) = add_as(
        &ca.pem_file,
        &server.url(),
        "cn=admin,o=example",
        &file,
        false,
    );
    assert_eq!(rc, 0, "{out}");
    let (cert, key) = (dir.join("alice.pem"), dir.join("alice.key"));
    ca.issue_client(
        &cert,
        &key,
        &[
            (rcgen::DnType::OrganizationName, "example"),
            (rcgen::DnType::CommonName, "alice"),
        ],
    );
    let url = format!("ldaps://{ldaps}");
    let external = ["-Q", "-Y", "EXTERNAL", "-H", url.as_str()];
    let (rc, out) =
        tool_with_certificate(&ca.pem_file, Some((&cert, &key)), "ldapwhoami", &external);
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("dn:cn=alice,o=example"), "{out}");

    // Required: no handshake without a certificate.
    let (rc, out) = tool(&ca.pem_file, "ldapwhoami", &["-x", "-H", &url]);
    assert_ne!(rc, 0, "a handshake without a client certificate: {out}");

    // A certificate whose subject names no entry binds no one.
    let (stranger, stranger_key) = (dir.join("bob.pem"), dir.join("bob.key"));
    ca.issue_client(
        &stranger,
        &stranger_key,
        &[
            (rcgen::DnType::OrganizationName, "example"),
            (rcgen::DnType::CommonName, "bob"),
        ],
    );
    let (rc, out) = tool_with_certificate(
        &ca.pem_file,
        Some((&stranger, &stranger_key)),
        "ldapwhoami",
        &external,
    );
    assert_eq!(rc, 49, "{out}");
}

#[test]
fn sasl_external_maps_a_client_certificate_by_a_search() {
    let dir = temp_dir("tls-external-search");
    let ca = Ca::new(&dir, "clients");
    let config = format!(
        "[security]\nclient_certificates = \"optional\"\ntls_ca_file = \"{}\"\n\
         certificate_map = \"(uid={{cn}})\"\n",
        ca.pem_file.display()
    );
    let (server, _, _, _) = tls_server(&dir, &ca, &config);
    let ldif = "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\n\
                dn: uid=carol,dc=example,dc=com\nobjectClass: account\nuid: carol\n";
    let file = dir.join("entries.ldif");
    std::fs::write(&file, ldif).unwrap();
    let plain = server.url();
    let (rc, out) = add_as(&ca.pem_file, &plain, ADMIN_DN, &file, false);
    assert_eq!(rc, 0, "{out}");
    let (cert, key) = (dir.join("carol.pem"), dir.join("carol.key"));
    ca.issue_client(&cert, &key, &[(rcgen::DnType::CommonName, "carol")]);
    let external = ["-Q", "-Y", "EXTERNAL", "-ZZ", "-H", plain.as_str()];
    let (rc, out) =
        tool_with_certificate(&ca.pem_file, Some((&cert, &key)), "ldapwhoami", &external);
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("dn:uid=carol,dc=example,dc=com"), "{out}");

    // Without a certificate (OpenLDAP's tools do not even offer
    // EXTERNAL then): inappropriateAuthentication.
    let mut client = Client::connect(server.addr);
    let mut bind = Vec::new();
    LdapMessage {
        message_id: 1,
        op: ProtocolOp::BindRequest(meridian_proto::BindRequest {
            version: 3,
            name: b"",
            auth: meridian_proto::Authentication::Sasl {
                mechanism: b"EXTERNAL",
                credentials: None,
            },
        }),
        controls: meridian_proto::Seq::empty(),
    }
    .encode(&mut bind);
    client.send(&bind);
    client.read_until(|m| match &m.op {
        ProtocolOp::BindResponse(r) => {
            assert_eq!(r.result.code.0, 48, "inappropriateAuthentication");
            true
        }
        other => panic!("{other:?}"),
    });
    let (rc, out) = root_dse_over_starttls(&ca.pem_file, &plain, "supportedSASLMechanisms");
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("supportedSASLMechanisms: EXTERNAL"), "{out}");
}

#[test]
fn the_unboundid_sdk_searches_over_starttls_and_ldaps_trusting_the_ca() {
    use std::io::Write as _;
    // scripts/test.sh fetches the jar; without it, say so where it shows.
    let jar = std::env::var_os("MERIDIAN_UNBOUNDID_JAR")
        .map(PathBuf::from)
        .filter(|jar| jar.is_file());
    let Some(jar) = jar else {
        let _ = writeln!(
            std::io::stderr(),
            "the UnboundID LDAP SDK is not here (MERIDIAN_UNBOUNDID_JAR, set by scripts/test.sh): this test did not run"
        );
        return;
    };
    let dir = temp_dir("tls-unboundid");
    let ca = Ca::new(&dir, "unboundid");
    let other = Ca::new(&dir, "stranger");
    let (server, ldaps, _, _) = tls_server(&dir, &ca, "");
    // Java reads PKCS #12 trust stores: keytool makes them from the CAs.
    let trust_store = |ca: &Ca, name: &str| {
        let path = dir.join(format!("{name}.p12"));
        let status = Command::new("keytool")
            .args([
                "-importcert",
                "-noprompt",
                "-alias",
                "ca",
                "-storetype",
                "PKCS12",
            ])
            .args(["-storepass", "changeit", "-file"])
            .arg(&ca.pem_file)
            .arg("-keystore")
            .arg(&path)
            .output()
            .expect("keytool (a Java runtime) is needed")
            .status;
        assert!(status.success());
        path
    };
    let (good, bad) = (trust_store(&ca, "good"), trust_store(&other, "bad"));
    let search = |port: u16, tls: &str, store: &Path| {
        let out = Command::new("java")
            .arg("-cp")
            .arg(&jar)
            .arg("com.unboundid.ldap.sdk.unboundidds.tools.LDAPSearch")
            .args(["--hostname", "127.0.0.1", "--port", &port.to_string(), tls])
            .arg("--trustStorePath")
            .arg(store)
            .args(["--trustStorePassword", "changeit"])
            .args(["--bindDN", ADMIN_DN, "--bindPassword", ADMIN_PASSWORD])
            .args([
                "--baseDN",
                "",
                "--scope",
                "base",
                "(objectClass=*)",
                "vendorName",
            ])
            .output()
            .expect("java");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code().unwrap_or(-1), text)
    };
    let plain = server.addr.port();
    let (rc, out) = search(plain, "--useStartTLS", &good);
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("vendorName: Meridian"), "{out}");
    let (rc, out) = search(ldaps.port(), "--useSSL", &good);
    assert_eq!(rc, 0, "{out}");
    let (rc, out) = search(plain, "--useStartTLS", &bad);
    assert_ne!(rc, 0, "trusted a certificate of another CA: {out}");
}
