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


SORT_REQUEST = "1.2.840.113556.1.4.473"
SORT_RESPONSE = "1.2.840.113556.1.4.474"
VLV_REQUEST = "2.16.840.1.113730.3.4.9"
VLV_RESPONSE = "2.16.840.1.113730.3.4.10"


def sort_keys(*keys):
    """SortKeyList ::= SEQUENCE OF SEQUENCE { attributeType,
    orderingRule [0] OPTIONAL, reverseOrder [1] BOOLEAN DEFAULT FALSE }."""
    body = b""
    for name, reverse in keys:
        key = tlv(0x04, name.encode()) + (tlv(0x81, b"\xff") if reverse else b"")
        body += tlv(0x30, key)
    return tlv(0x30, body)


def test_server_side_sort_and_virtual_list_view(server):
    """RFC 2891 and the VLV draft as an address book uses them: people
    sorted by cn (which has no ORDERING rule: sorted by its equality
    rule), then a window of three around the fourth."""
    host, port = server
    admin = connect(host, port, SYNC)
    assert admin.add(SUFFIX, ["dcObject", "organization"], {"dc": "example", "o": "x"})
    names = ["Mallory Jones", "alice Smith", "Bob Stone", "carol White", "Dave Brown", "Eve Black"]
    for i, name in enumerate(names):
        assert admin.add(f"uid=p{i},{SUFFIX}", ["inetOrgPerson"],
                         {"uid": f"p{i}", "cn": name, "sn": name.split()[1]})
    by_cn = sorted(names, key=str.lower)

    admin.search(SUFFIX, "(objectClass=person)", attributes=["cn"],
                 controls=[(SORT_REQUEST, True, sort_keys(("cn", False)))])
    assert admin.result["result"] == 0, admin.result
    assert [e["attributes"]["cn"][0] for e in admin.response] == by_cn
    # sortResult success: SEQUENCE { ENUMERATED 0 }.
    assert response_control(admin.result, SORT_RESPONSE) == bytes([0x30, 3, 0x0A, 1, 0])

    admin.search(SUFFIX, "(objectClass=person)", attributes=["cn"],
                 controls=[(SORT_REQUEST, True, sort_keys(("cn", True)))])
    assert [e["attributes"]["cn"][0] for e in admin.response] == by_cn[::-1]

    # VLV: beforeCount 1, afterCount 1, byOffset { offset 4, contentCount 0 }.
    vlv = tlv(0x30, tlv(0x02, b"\x01") + tlv(0x02, b"\x01")
              + tlv(0xA0, tlv(0x02, b"\x04") + tlv(0x02, b"\x00")))
    admin.search(SUFFIX, "(objectClass=person)", attributes=["cn"],
                 controls=[(SORT_REQUEST, True, sort_keys(("cn", False))), (VLV_REQUEST, True, vlv)])
    assert admin.result["result"] == 0, admin.result
    assert [e["attributes"]["cn"][0] for e in admin.response] == by_cn[2:5]
    # targetPosition 4, contentCount 6, success.
    assert response_control(admin.result, VLV_RESPONSE) == tlv(
        0x30, tlv(0x02, b"\x04") + tlv(0x02, b"\x06") + tlv(0x0A, b"\x00"))

    # A sort on an attribute type the schema does not know, critical:
    # unavailableCriticalExtension (12) and no entries (RFC 2891 section 2).
    admin.search(SUFFIX, "(objectClass=person)", attributes=["cn"],
                 controls=[(SORT_REQUEST, True, sort_keys(("noSuchType", False)))])
    assert admin.result["result"] == 12, admin.result
    assert admin.response == []
