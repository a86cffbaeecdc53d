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
