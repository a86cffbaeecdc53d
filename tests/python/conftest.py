"""Starts the real meridian binary for the Python client tests."""

import contextlib
import os
import subprocess
import tempfile

import pytest

ADMIN_DN = "cn=admin,dc=example,dc=com"
ADMIN_PASSWORD = "python-secret"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def meridian_binary():
    path = os.environ.get("MERIDIAN_BIN", os.path.join(ROOT, "target", "debug", "meridian"))
    if not os.path.exists(path):
        raise RuntimeError(f"{path} not found: run `cargo build` first or set MERIDIAN_BIN")
    return path


@contextlib.contextmanager
def serve(config="", with_pid=False):
    """A server on a port of its own choosing, with `config` (TOML) as its
    config file: `(host, port)` while it runs (`(host, port, pid)` with
    `with_pid`)."""
    with tempfile.TemporaryDirectory(prefix="meridian-py-") as data_dir:
        env = dict(os.environ, MERIDIAN_ADMIN_PASSWORD=ADMIN_PASSWORD, RUST_LOG="warn")
        config_file = os.path.join(data_dir, "test-config.toml")
        with open(config_file, "w") as f:
            f.write(config)
        proc = subprocess.Popen(
            [meridian_binary(), "serve", "--listen", "127.0.0.1:0", "--data-dir", data_dir, "--config", config_file],
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        try:
            for line in proc.stdout:
                if line.startswith("meridian listening on "):
                    host, port = line.split()[-1].rsplit(":", 1)
                    break
            else:
                raise RuntimeError("meridian exited before listening")
            yield (host, int(port), proc.pid) if with_pid else (host, int(port))
        finally:
            proc.terminate()
            assert proc.wait(timeout=20) == 0, "meridian did not stop cleanly on SIGTERM"


@pytest.fixture
def server():
    with serve() as address:
        yield address


@pytest.fixture
def server_with():
    """Starts a server with the config (TOML) given: `server_with(text)`."""
    with contextlib.ExitStack() as servers:
        yield lambda config: servers.enter_context(serve(config))


def connect(host, port, strategy, dn=ADMIN_DN, password=ADMIN_PASSWORD):
    """An ldap3 connection with `strategy`, bound (as the administrator by default)."""
    from ldap3 import Connection, Server

    conn = Connection(Server(host, port=port), dn, password, client_strategy=strategy)
    assert conn.bind(), conn.result
    return conn


def wait(conn, message_id):
    """The result of an operation, for either strategy."""
    if conn.strategy.sync:
        return conn.result
    _, result = conn.get_response(message_id, timeout=30)
    return result
