"""Python ldap3 against a follower of a real three-node cluster, started by
`meridian cluster local` in one command: its writes are forwarded to the
leader and read back on the same connection."""

import os
import signal
import socket
import subprocess
import tempfile
import time

import pytest
from ldap3 import BASE, MODIFY_REPLACE, SYNC, Connection, Server

from conftest import ADMIN_DN, ADMIN_PASSWORD, meridian_binary


def free_base_port():
    """A port P with P..P+2 and P+100..P+102 free (LDAP and peers)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = probe.getsockname()[1]
        if base > 60000:
            continue
        ports = [base + i for i in range(3)] + [base + 100 + i for i in range(3)]
        try:
            held = []
            for port in ports:
                s = socket.socket()
                held.append(s)
                s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
        return base
    raise RuntimeError("no free ports for a local cluster")


@pytest.fixture
def cluster():
    with tempfile.TemporaryDirectory(prefix="meridian-py-cluster-") as data_dir:
        base = free_base_port()
        env = dict(os.environ, MERIDIAN_ADMIN_PASSWORD=ADMIN_PASSWORD, RUST_LOG="warn")
        proc = subprocess.Popen(
            [meridian_binary(), "cluster", "local", "--nodes", "3",
             "--data-dir", data_dir, "--base-port", str(base)],
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        try:
            for line in proc.stdout:
                if line.startswith("cluster of 3 voters"):
                    break
            else:
                raise RuntimeError("meridian cluster local exited before the cluster was up")
            yield [base + i for i in range(3)]
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)


def role(port):
    conn = Connection(Server("127.0.0.1", port=port), auto_bind=True)
    conn.search("", "(objectClass=*)", search_scope=BASE, attributes=["meridianClusterRole"])
    values = conn.entries[0].entry_attributes_as_dict.get("meridianClusterRole", [])
    conn.unbind()
    return values[0] if values else None


def test_writes_at_a_follower_are_forwarded_and_read_back_on_the_same_connection(cluster):
    deadline = time.time() + 30
    while True:
        roles = {port: role(port) for port in cluster}
        leaders = [p for p, r in roles.items() if r == "leader"]
        if len(leaders) == 1 and all(r in ("leader", "follower") for r in roles.values()):
            break
        assert time.time() < deadline, f"no stable leader: {roles}"
        time.sleep(0.2)
    follower = next(p for p, r in roles.items() if r == "follower")

    conn = Connection(Server("127.0.0.1", port=follower), ADMIN_DN, ADMIN_PASSWORD,
                      client_strategy=SYNC, auto_bind=True)
    assert conn.add("dc=example,dc=com", ["dcObject", "organization"],
                    {"dc": "example", "o": "Example"}), conn.result
    assert conn.add("ou=people,dc=example,dc=com", "organizationalUnit",
                    {"ou": "people"}), conn.result
    for n in range(20):
        dn = f"uid=py{n},ou=people,dc=example,dc=com"
        assert conn.add(dn, "account", {"uid": f"py{n}"}), conn.result
        assert conn.modify(dn, {"description": [(MODIFY_REPLACE, [f"written at the follower {n}"])]}), \
            conn.result
        # Read back at once, on the same connection: the answer came
        # only once the write was applied here.
        conn.search(dn, "(objectClass=*)", search_scope=BASE, attributes=["description"])
        assert conn.entries[0].description.value == f"written at the follower {n}"
    conn.unbind()

    # Every node holds them.
    for port in cluster:
        other = Connection(Server("127.0.0.1", port=port), ADMIN_DN, ADMIN_PASSWORD, auto_bind=True)
        deadline = time.time() + 20
        while True:
            other.search("ou=people,dc=example,dc=com", "(uid=py*)", attributes=["uid"])
            if len(other.entries) == 20:
                break
            assert time.time() < deadline, f"node on {port} holds {len(other.entries)} of 20"
            time.sleep(0.2)
        other.unbind()
