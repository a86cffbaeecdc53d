"""Python ldap3 against the real server: root DSE, binds, and 10,000
pipelined requests on one connection, each answered with its message ID."""

from ldap3 import ASYNC, BASE, SYNC, Connection, Server

from conftest import ADMIN_DN, ADMIN_PASSWORD


def test_root_dse_is_read_by_ldap3(server):
    host, port = server
    srv = Server(host, port=port, get_info="DSA")
    conn = Connection(srv, client_strategy=SYNC, auto_bind=True)
    info = srv.info
    assert "dc=example,dc=com" in info.naming_contexts
    assert "3" in [str(v) for v in info.supported_ldap_versions]
    assert info.vendor_name == ["Meridian"]
    conn.unbind()


def test_admin_bind_and_who_am_i(server):
    host, port = server
    conn = Connection(Server(host, port=port), ADMIN_DN, ADMIN_PASSWORD, client_strategy=SYNC)
    assert conn.bind(), conn.result
    assert conn.extend.standard.who_am_i() == f"dn:{ADMIN_DN}"
    conn.unbind()

    bad = Connection(Server(host, port=port), ADMIN_DN, "wrong", client_strategy=SYNC)
    assert not bad.bind()
    assert bad.result["result"] == 49


def test_ten_thousand_pipelined_requests(server):
    host, port = server
    conn = Connection(Server(host, port=port), client_strategy=ASYNC, auto_bind=True)
    ids = [
        conn.search("", "(objectClass=*)", search_scope=BASE, attributes=["vendorName"])
        for _ in range(10_000)
    ]
    assert len(set(ids)) == 10_000
    # ldap3 files each response under the message ID the server put on it,
    # so an answer with a wrong or missing ID makes get_response time out.
    for message_id in ids:
        response, result = conn.get_response(message_id, timeout=60)
        assert result["result"] == 0, result
        assert len(response) == 1
        assert response[0]["attributes"]["vendorName"] == ["Meridian"]
    conn.unbind()
