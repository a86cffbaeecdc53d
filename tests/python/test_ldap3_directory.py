"""Directory operations through Python ldap3, synchronous and asynchronous
strategies: add, search, modify, compare, modify DN, delete, with result
codes and matched DN."""

import pytest
from ldap3 import (
    ASYNC,
    BASE,
    LEVEL,
    MODIFY_INCREMENT,
    MODIFY_REPLACE,
    SUBTREE,
    SYNC,
)

from conftest import connect, wait

SUFFIX = "dc=example,dc=com"


@pytest.mark.parametrize("strategy", [SYNC, ASYNC])
def test_every_operation(server, strategy):
    host, port = server
    conn = connect(host, port, strategy)
    r = wait(conn, conn.add(SUFFIX, ["dcObject", "organization"], {"dc": "example", "o": "Example"}))
    assert r["result"] == 0, r
    r = wait(conn, conn.add(f"ou=People,{SUFFIX}", ["organizationalUnit"], {"ou": "People"}))
    assert r["result"] == 0, r
    ids = [
        conn.add(
            f"uid=user{i},ou=People,{SUFFIX}",
            ["inetOrgPerson", "posixAccount"],
            {"uid": f"user{i}", "cn": f"User {i}", "sn": "User", "uidNumber": 1000 + i, "gidNumber": 100, "homeDirectory": f"/home/user{i}"},
        )
        for i in range(20)
    ]
    for message_id in ids:
        assert wait(conn, message_id)["result"] == 0

    # Search by uid and by uidNumber, as a Linux NSS lookup would.
    if conn.strategy.sync:
        conn.search(SUFFIX, "(&(objectClass=posixAccount)(uid=user7))", SUBTREE, attributes=["uidNumber", "homeDirectory"])
        entries = conn.response
    else:
        entries, _ = conn.get_response(conn.search(SUFFIX, "(&(objectClass=posixAccount)(uid=user7))", SUBTREE, attributes=["uidNumber", "homeDirectory"]))
    assert len(entries) == 1
    assert entries[0]["attributes"]["uidNumber"] == 1007
    if conn.strategy.sync:
        conn.search(f"ou=People,{SUFFIX}", "(uidNumber>=1015)", LEVEL, attributes=["1.1"])
        assert len(conn.response) == 5

    # Paged results: ldap3's paged_search follows the cookies.
    if conn.strategy.sync:
        paged = list(conn.extend.standard.paged_search(f"ou=People,{SUFFIX}", "(uid=*)", LEVEL, attributes=["uid"], paged_size=7, generator=True))
        assert len(paged) == 20
        assert len({e["dn"] for e in paged}) == 20

    # Modify (replace and increment), then compare.
    r = wait(conn, conn.modify(f"uid=user3,ou=People,{SUFFIX}", {"sn": [(MODIFY_REPLACE, ["Three"])], "uidNumber": [(MODIFY_INCREMENT, [100])]}))
    assert r["result"] == 0, r
    r = wait(conn, conn.compare(f"uid=user3,ou=People,{SUFFIX}", "uidNumber", "1103"))
    assert r["result"] == 6, r
    r = wait(conn, conn.compare(f"uid=user3,ou=People,{SUFFIX}", "sn", "user"))
    assert r["result"] == 5, r

    # Modify DN, delete, and the result codes of mistakes.
    r = wait(conn, conn.modify_dn(f"uid=user4,ou=People,{SUFFIX}", "uid=four"))
    assert r["result"] == 0, r
    r = wait(conn, conn.delete(f"uid=four,ou=People,{SUFFIX}"))
    assert r["result"] == 0, r
    r = wait(conn, conn.delete(f"uid=four,ou=People,{SUFFIX}"))
    assert r["result"] == 32 and r["dn"] == f"ou=People,{SUFFIX}", r
    r = wait(conn, conn.delete(f"ou=People,{SUFFIX}"))
    assert r["result"] == 66, r
    r = wait(conn, conn.add(f"uid=user5,ou=People,{SUFFIX}", ["account"], {"uid": "user5"}))
    assert r["result"] == 68, r
    conn.unbind()


def test_aliases_and_referrals(server):
    """ldap3 dereferences aliases by default (derefAlways); referral
    objects come back as continuation references and referral results
    (ldap3 told not to chase them: they point at hosts that do not
    exist), and ManageDsaIT reads the referral object itself."""
    from ldap3 import DEREF_ALWAYS, DEREF_NEVER, Connection, Server

    from conftest import ADMIN_DN, ADMIN_PASSWORD

    host, port = server
    conn = Connection(Server(host, port=port), ADMIN_DN, ADMIN_PASSWORD, auto_referrals=False)
    assert conn.bind(), conn.result
    assert conn.add(SUFFIX, ["dcObject", "organization"], {"dc": "example", "o": "Example"}), conn.result
    assert conn.add(f"ou=People,{SUFFIX}", ["organizationalUnit"], {"ou": "People"}), conn.result
    alice = f"uid=alice,ou=People,{SUFFIX}"
    assert conn.add(alice, ["account"], {"uid": "alice"}), conn.result
    alias = f"cn=to-alice,{SUFFIX}"
    assert conn.add(alias, ["alias", "extensibleObject"], {"cn": "to-alice", "aliasedObjectName": alice}), conn.result
    remote = f"ou=Remote,{SUFFIX}"
    url = "ldap://other.example.net/ou=Far,dc=example,dc=net"
    assert conn.add(remote, ["referral", "extensibleObject"], {"ou": "Remote", "ref": url}), conn.result

    # ldap3's default follows the alias; neverDerefAliases does not.
    assert conn.search(alias, "(objectClass=*)", BASE)
    assert [e["dn"] for e in conn.response] == [alice]
    assert conn.search(alias, "(objectClass=*)", BASE, dereference_aliases=DEREF_NEVER)
    assert [e["dn"] for e in conn.response] == [alias]

    # A subtree search: the alias is replaced by alice (returned once),
    # the referral object by a continuation reference.
    conn.search(SUFFIX, "(objectClass=*)", SUBTREE, dereference_aliases=DEREF_ALWAYS)
    entries = [e["dn"] for e in conn.response if e["type"] == "searchResEntry"]
    refs = [e["uri"] for e in conn.response if e["type"] == "searchResRef"]
    assert sorted(entries) == sorted([SUFFIX, f"ou=People,{SUFFIX}", alice]), conn.response
    assert refs == [[url + "??sub"]], conn.response

    # An update below the referral object: referral, with the target's
    # place at the other server.
    conn.modify(f"uid=bob,{remote}", {"description": [(MODIFY_REPLACE, ["x"])]})
    assert conn.result["result"] == 10, conn.result
    assert conn.result["dn"] == remote, conn.result
    assert conn.result["referrals"] == ["ldap://other.example.net/uid=bob,ou=Far,dc=example,dc=net"], conn.result

    # ManageDsaIT: the referral object is an entry like any other.
    manage = [("2.16.840.1.113730.3.4.2", True, None)]
    assert conn.search(remote, "(objectClass=*)", BASE, attributes=["ref"], controls=manage), conn.result
    assert conn.response[0]["attributes"]["ref"] == [url]
    assert conn.delete(remote, controls=manage), conn.result
    conn.unbind()
