"""Controls and extended operations through Python ldap3 (synchronous and
asynchronous strategies), with their values BER-encoded by hand as an
application would: post-read on add and modify (RFC 4527), proxied
authorization (RFC 4370), Refresh of a dynamic entry (RFC 2589)."""

import pytest
from ldap3 import ASYNC, BASE, MODIFY_REPLACE, SYNC

from conftest import connect, wait

SUFFIX = "dc=example,dc=com"
POST_READ = "1.3.6.1.1.13.2"
PROXIED_AUTHZ = "2.16.840.1.113730.3.4.18"
REFRESH = "1.3.6.1.4.1.1466.101.119.1"


def tlv(tag, body):
    assert len(body) < 128
    return bytes([tag, len(body)]) + body


def attribute_selection(*names):
    """AttributeSelection ::= SEQUENCE OF LDAPString."""
    return tlv(0x30, b"".join(tlv(0x04, n.encode()) for n in names))


def response_control(result, oid):
    controls = result.get("controls") or {}
    assert oid in controls, result
    return controls[oid]["value"]


@pytest.mark.parametrize("strategy", [SYNC, ASYNC])
def test_post_read_proxied_authorization_and_refresh(server, strategy):
    host, port = server
    admin = connect(host, port, strategy)
    r = wait(admin, admin.add(SUFFIX, ["dcObject", "organization"], {"dc": "example", "o": "x"}))
    assert r["result"] == 0, r
    r = wait(admin, admin.add(f"uid=alice,{SUFFIX}", ["account", "simpleSecurityObject"],
                              {"uid": "alice", "userPassword": "a"}))
    assert r["result"] == 0, r

    # Post-read on add: the stored entry, with the entryUUID the server
    # chose (ldap3 decodes the SearchResultEntry of the control).
    post = (POST_READ, False, attribute_selection("entryUUID"))
    r = wait(admin, admin.add(f"uid=temp,{SUFFIX}", ["account", "dynamicObject"], {"uid": "temp"},
                              controls=[post]))
    assert r["result"] == 0, r
    value = response_control(r, POST_READ)
    uuids = value["result"]["entryUUID"]
    assert len(uuids) == 1 and len(uuids[0]) == 36, value

    # Post-read on modify: the value after the change.
    post = (POST_READ, False, attribute_selection("description"))
    r = wait(admin, admin.modify(f"uid=alice,{SUFFIX}", {"description": [(MODIFY_REPLACE, ["after"])]},
                                 controls=[post]))
    assert r["result"] == 0, r
    assert response_control(r, POST_READ)["result"]["description"] == ["after"], r

    # Proxied authorization: the administrator acts as alice, whom the
    # default rules let read but not write.
    as_alice = (PROXIED_AUTHZ, True, f"dn:uid=alice,{SUFFIX}".encode())
    r = wait(admin, admin.modify(SUFFIX, {"o": [(MODIFY_REPLACE, ["y"])]}, controls=[as_alice]))
    assert r["result"] == 50, r
    if admin.strategy.sync:
        admin.search(SUFFIX, "(objectClass=*)", BASE, attributes=["o"], controls=[as_alice])
        result = admin.result
    else:
        _, result = admin.get_response(admin.search(SUFFIX, "(objectClass=*)", BASE, attributes=["o"],
                                                    controls=[as_alice]), timeout=30)
    assert result["result"] == 0, result

    # Refresh: SEQUENCE { entryName [0], requestTtl [1] } -> responseTtl [1].
    dn = f"uid=temp,{SUFFIX}".encode()
    request = tlv(0x30, tlv(0x80, dn) + bytes([0x81, 2]) + (300).to_bytes(2, "big"))
    r = wait(admin, admin.extended(REFRESH, request))
    assert r["result"] == 0, r
    assert r["responseValue"] == bytes([0x30, 4, 0x81, 2]) + (300).to_bytes(2, "big"), r
    r = wait(admin, admin.extended(REFRESH, tlv(0x30, tlv(0x80, SUFFIX.encode()) + bytes([0x81, 1, 60]))))
    assert r["result"] == 65, r  # objectClassViolation: not a dynamic entry
