"""Python ldap3 over TLS: LDAPS and StartTLS, with a CA and a certificate
made here by openssl; a client trusting another CA is refused."""

import os
import ssl
import subprocess
import tempfile

import pytest
from ldap3 import Connection, Server, Tls
from ldap3.core.exceptions import LDAPSocketOpenError, LDAPStartTLSError

from conftest import ADMIN_DN, ADMIN_PASSWORD, meridian_binary


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_ca(folder, name):
    key, cert = os.path.join(folder, f"{name}.key"), os.path.join(folder, f"{name}.pem")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
            "-days", "2", "-subj", f"/CN=Meridian test CA {name}",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign")
    return key, cert


@pytest.fixture
def tls_server():
    with tempfile.TemporaryDirectory(prefix="meridian-py-tls-") as folder:
        ca_key, ca_cert = make_ca(folder, "good")
        _, other_cert = make_ca(folder, "other")
        key, csr, cert = (os.path.join(folder, n) for n in ("server.key", "server.csr", "server.pem"))
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
                "-subj", "/CN=localhost")
        extensions = os.path.join(folder, "san.cnf")
        with open(extensions, "w") as f:
            f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
        openssl("x509", "-req", "-in", csr, "-CA", ca_cert, "-CAkey", ca_key, "-CAcreateserial",
                "-out", cert, "-days", "2", "-extfile", extensions)
        data_dir = os.path.join(folder, "data")
        env = dict(os.environ, MERIDIAN_ADMIN_PASSWORD=ADMIN_PASSWORD, RUST_LOG="warn")
        proc = subprocess.Popen(
            [meridian_binary(), "serve", "--listen", "127.0.0.1:0", "--listen-tls", "127.0.0.1:0",
             "--tls-cert", cert, "--tls-key", key, "--data-dir", data_dir],
            stdout=subprocess.PIPE, env=env, text=True,
        )
        try:
            ports = {}
            for line in proc.stdout:
                if line.startswith("meridian listening for ldaps on "):
                    ports["ldaps"] = int(line.split()[-1].rsplit(":", 1)[1])
                elif line.startswith("meridian listening on "):
                    ports["ldap"] = int(line.split()[-1].rsplit(":", 1)[1])
                    break
            else:
                raise RuntimeError("meridian exited before listening")
            yield ports, ca_cert, other_cert
        finally:
            proc.terminate()
            assert proc.wait(timeout=20) == 0, "meridian did not stop cleanly on SIGTERM"


def tls_config(ca_file):
    return Tls(ca_certs_file=ca_file, validate=ssl.CERT_REQUIRED)


def test_ldaps_with_the_right_ca(tls_server):
    ports, ca, _ = tls_server
    server = Server("127.0.0.1", port=ports["ldaps"], use_ssl=True, tls=tls_config(ca))
    conn = Connection(server, ADMIN_DN, ADMIN_PASSWORD)
    assert conn.bind(), conn.result
    assert conn.extend.standard.who_am_i() == f"dn:{ADMIN_DN}"
    conn.unbind()


def test_starttls_then_bind(tls_server):
    ports, ca, _ = tls_server
    server = Server("127.0.0.1", port=ports["ldap"], tls=tls_config(ca))
    conn = Connection(server, ADMIN_DN, ADMIN_PASSWORD)
    conn.open()
    assert conn.start_tls(), conn.result
    assert conn.bind(), conn.result
    assert conn.extend.standard.who_am_i() == f"dn:{ADMIN_DN}"
    conn.unbind()


def test_a_client_trusting_another_ca_is_refused(tls_server):
    ports, _, other = tls_server
    with pytest.raises(LDAPSocketOpenError):
        server = Server("127.0.0.1", port=ports["ldaps"], use_ssl=True, tls=tls_config(other))
        Connection(server, ADMIN_DN, ADMIN_PASSWORD).bind()
    conn = Connection(Server("127.0.0.1", port=ports["ldap"], tls=tls_config(other)))
    conn.open()
    with pytest.raises((LDAPStartTLSError, LDAPSocketOpenError, ssl.SSLError)):
        conn.start_tls()
