"""Python ldap3 against the real server: root DSE, binds, and 10,000
pipelined requests on one connection, each answered with its message ID."""

from ldap3 import ALL, ASYNC, BASE, SYNC, Connection, Server

from conftest import ADMIN_DN, ADMIN_PASSWORD


def test_root_dse_is_read_by_ldap3(server):
    host, port = server
    srv = Server(host, port=port, get_info="DSA")
    conn = Connection(srv, client_strategy=SYNC, auto_bind=True)
    info = srv.info
    assert "dc=example,dc=com" in info.naming_contexts
    assert "3" in [str(v) for v in info.supported_ldap_versions]
    assert "Meridian" in info.vendor_name
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
        # ldap3 reads the schema at bind, learns vendorName is SINGLE-VALUE
        # and returns it as a plain string.
        assert response[0]["attributes"]["vendorName"] == "Meridian"
    conn.unbind()


def test_ldap3_reads_and_parses_the_schema(server):
    host, port = server
    srv = Server(host, port=port, get_info=ALL)
    conn = Connection(srv, client_strategy=SYNC, auto_bind=True)
    schema = srv.schema
    assert schema is not None, "ldap3 found no schema through subschemaSubentry"
    assert "inetOrgPerson" in schema.object_classes
    assert "cn" in schema.attribute_types
    assert schema.attribute_types["uidNumber"].syntax == "1.3.6.1.4.1.1466.115.121.1.27"
    assert "caseIgnoreMatch" in schema.matching_rules
    conn.unbind()
