"""LDAP transactions (RFC 5805) through Python ldap3, which has no
transaction API of its own: Start and End Transaction as raw extended
operations, the transaction specification control on each update, as a
provisioning script would send them."""

from ldap3 import MODIFY_ADD, SUBTREE, SYNC, Server
from pyasn1.codec.ber import decoder, encoder
from pyasn1.type import namedtype, univ

from conftest import connect

SUFFIX = "dc=example,dc=com"
PEOPLE = f"ou=People,{SUFFIX}"
GROUPS = f"ou=Groups,{SUFFIX}"
START = "1.3.6.1.1.21.1"
END = "1.3.6.1.1.21.3"
SPEC = "1.3.6.1.1.21.2"


class TxnEndReq(univ.Sequence):
    componentType = namedtype.NamedTypes(
        namedtype.DefaultedNamedType("commit", univ.Boolean(True)),
        namedtype.NamedType("identifier", univ.OctetString()),
    )


def start(conn):
    assert conn.extended(START), conn.result
    assert conn.result["result"] == 0, conn.result
    return conn.result["responseValue"]


def end(conn, txn, commit=True):
    request = TxnEndReq()
    request["commit"] = commit
    request["identifier"] = txn
    conn.extended(END, encoder.encode(request))
    return conn.result


def failed_message_id(result):
    """The message ID an End Transaction response names, if any."""
    value = result.get("responseValue")
    if not value:
        return None
    decoded, _ = decoder.decode(value)
    return int(decoded[0]) if len(decoded) else None


def spec(txn):
    return [(SPEC, True, txn)]


def exists(conn, dn):
    return conn.search(dn, "(objectClass=*)", attributes=["1.1"]) and len(conn.entries) == 1


def base(conn):
    assert conn.add(SUFFIX, ["dcObject", "organization"], {"dc": "example", "o": "Example"})
    assert conn.add(PEOPLE, ["organizationalUnit"], {"ou": "People"})
    assert conn.add(GROUPS, ["organizationalUnit"], {"ou": "Groups"})


def test_commit_applies_every_update_and_abort_none(server):
    host, port = server
    conn = connect(host, port, SYNC)
    base(conn)
    txn = start(conn)
    assert txn, "an identifier"
    # A user, a group with it, and a change to it: each answered at once,
    # none visible before the commit.
    assert conn.add(f"uid=tx1,{PEOPLE}", ["inetOrgPerson"], {"uid": "tx1", "cn": "tx1", "sn": "tx1"}, controls=spec(txn))
    assert conn.add(f"cn=tx-group,{GROUPS}", ["groupOfNames"], {"cn": "tx-group", "member": [f"uid=tx1,{PEOPLE}"]}, controls=spec(txn))
    assert conn.modify(f"uid=tx1,{PEOPLE}", {"mail": [(MODIFY_ADD, ["tx1@example.com"])]}, controls=spec(txn))
    assert not exists(conn, f"uid=tx1,{PEOPLE}")
    result = end(conn, txn)
    assert result["result"] == 0, result
    assert conn.search(f"uid=tx1,{PEOPLE}", "(objectClass=*)", attributes=["mail", "memberOf"])
    assert [str(v) for v in conn.entries[0].mail.values] == ["tx1@example.com"]
    assert [str(v) for v in conn.entries[0].memberOf.values] == [f"cn=tx-group,{GROUPS}"]

    # Abort: nothing of it, and the identifier is spent.
    txn = start(conn)
    assert conn.add(f"uid=tx2,{PEOPLE}", ["inetOrgPerson"], {"uid": "tx2", "cn": "tx2", "sn": "tx2"}, controls=spec(txn))
    result = end(conn, txn, commit=False)
    assert result["result"] == 0, result
    assert not exists(conn, f"uid=tx2,{PEOPLE}")


def test_a_failing_update_fails_the_whole_and_is_named(server):
    host, port = server
    conn = connect(host, port, SYNC)
    base(conn)
    assert conn.add(f"uid=taken,{PEOPLE}", ["inetOrgPerson"], {"uid": "taken", "cn": "t", "sn": "t"})
    txn = start(conn)
    assert conn.add(f"uid=fresh,{PEOPLE}", ["inetOrgPerson"], {"uid": "fresh", "cn": "f", "sn": "f"}, controls=spec(txn))
    assert conn.add(f"uid=taken,{PEOPLE}", ["inetOrgPerson"], {"uid": "taken", "cn": "t", "sn": "t"}, controls=spec(txn))
    # ldap3 numbers requests from one counter of its Server class.
    conflicting = Server._message_counter
    assert conn.modify(f"uid=fresh,{PEOPLE}", {"mail": [(MODIFY_ADD, ["f@example.com"])]}, controls=spec(txn))
    result = end(conn, txn)
    # entryAlreadyExists, the second update named, nothing applied.
    assert result["result"] == 68, result
    assert failed_message_id(result) == conflicting, result
    assert not exists(conn, f"uid=fresh,{PEOPLE}")


def test_refusals_follow_slapd(server):
    host, port = server
    conn = connect(host, port, SYNC)
    base(conn)
    txn = start(conn)
    # One transaction at a time per connection.
    assert not conn.extended(START) or conn.result["result"] == 51, conn.result
    assert conn.result["result"] == 51, conn.result
    # (An identifier this connection did not get is txnIdInvalid, 16673,
    # OpenLDAP's code, which ldap3 cannot decode: tested with our client.)
    # The control must be critical.
    conn.add(f"uid=x,{PEOPLE}", ["inetOrgPerson"], {"uid": "x", "cn": "x", "sn": "x"}, controls=[(SPEC, False, txn)])
    assert conn.result["result"] == 2, conn.result
    # No pre-read or post-read inside a transaction.
    conn.add(
        f"uid=x,{PEOPLE}",
        ["inetOrgPerson"],
        {"uid": "x", "cn": "x", "sn": "x"},
        controls=spec(txn) + [("1.3.6.1.1.13.2", True, encoder.encode(univ.SequenceOf(componentType=univ.OctetString())))],
    )
    assert conn.result["result"] == 53, conn.result
    # An update refused when checked (schema) is not held; the others are.
    conn.add(f"uid=bad,{PEOPLE}", ["inetOrgPerson"], {"uid": "bad"}, controls=spec(txn))
    assert conn.result["result"] == 65, conn.result
    assert conn.add(f"uid=ok,{PEOPLE}", ["inetOrgPerson"], {"uid": "ok", "cn": "o", "sn": "o"}, controls=spec(txn))
    assert end(conn, txn)["result"] == 0
    assert exists(conn, f"uid=ok,{PEOPLE}")
    assert not exists(conn, f"uid=bad,{PEOPLE}")
    # Commit with nothing held: operationsError, as slapd.
    txn = start(conn)
    assert end(conn, txn)["result"] == 1
    # Both operations are listed in the root DSE.
    assert conn.search("", "(objectClass=*)", "BASE", attributes=["supportedExtension", "supportedControl"])
    dse = conn.entries[0]
    assert {START, END} <= {str(v) for v in dse.supportedExtension.values}
    assert SPEC in {str(v) for v in dse.supportedControl.values}


def test_a_transaction_is_bounded(server_with):
    host, port = server_with("[server]\nmax_transaction_updates = 2\n")
    conn = connect(host, port, SYNC)
    base(conn)
    txn = start(conn)
    for name in ["b1", "b2"]:
        assert conn.add(f"uid={name},{PEOPLE}", ["inetOrgPerson"], {"uid": name, "cn": name, "sn": name}, controls=spec(txn))
    conn.add(f"uid=b3,{PEOPLE}", ["inetOrgPerson"], {"uid": "b3", "cn": "b3", "sn": "b3"}, controls=spec(txn))
    assert conn.result["result"] == 11, conn.result
    assert "max_transaction_updates" in conn.result["message"]
    assert end(conn, txn)["result"] == 0
    assert conn.search(PEOPLE, "(uid=b*)", SUBTREE, attributes=["uid"])
    assert sorted(str(e.uid) for e in conn.entries) == ["b1", "b2"]
