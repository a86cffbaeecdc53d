"""Persistent search (draft-ietf-ldapext-psearch-03) through python
ldap3's own client: the changes of each type, with Entry Change
Notifications, only those the filter and changeTypes select, and the
search ended by Abandon."""

from ldap3 import ASYNC_STREAM, MODIFY_REPLACE, SYNC

from conftest import connect

BASE = "dc=example,dc=com"
PEOPLE = "ou=people," + BASE


def setup(conn):
    assert conn.add(BASE, ["dcObject", "organization"], {"dc": "example", "o": "Example"}), conn.result
    assert conn.add(PEOPLE, ["organizationalUnit"], {"ou": "people"}), conn.result
    assert conn.add("ou=moved," + BASE, ["organizationalUnit"], {"ou": "moved"}), conn.result


def events(search, count):
    """The next `count` notifications, each within ten seconds."""
    got = []
    for _ in range(count):
        event = search.next(block=True, timeout=10)
        assert event is not None, f"only {len(got)} of {count} notifications: {got}"
        got.append(event)
    return got


def test_persistent_search_reports_each_change_with_its_notification(server):
    host, port = server
    writer = connect(host, port, SYNC)
    setup(writer)
    follower = connect(host, port, ASYNC_STREAM)
    search = follower.extend.standard.persistent_search(
        PEOPLE, "(objectClass=*)", attributes=["cn", "sn"], streaming=False
    )
    dn = "uid=ann," + PEOPLE
    assert writer.add(dn, ["inetOrgPerson"], {"uid": "ann", "cn": "Ann", "sn": "One"}), writer.result
    assert writer.modify(dn, {"sn": [(MODIFY_REPLACE, ["Two"])]}), writer.result
    assert writer.modify_dn(dn, "uid=anna"), writer.result
    renamed = "uid=anna," + PEOPLE
    assert writer.delete(renamed), writer.result
    got = events(search, 4)
    assert [e["changeType"] for e in got] == ["add", "modify", "modify dn", "delete"], got
    assert got[0]["dn"].lower() == dn.lower()
    assert got[0]["attributes"]["cn"] == ["Ann"]
    assert got[1]["attributes"]["sn"] == ["Two"]
    assert got[2]["dn"].lower() == renamed.lower()
    assert str(got[2]["previousDN"]).lower() == dn.lower()
    assert got[3]["dn"].lower() == renamed.lower()
    search.stop()


def test_persistent_search_selects_by_filter_type_and_scope(server):
    host, port = server
    writer = connect(host, port, SYNC)
    setup(writer)
    follower = connect(host, port, ASYNC_STREAM)
    # Adds and deletes only, of entries whose uid starts with "a", below
    # ou=people.
    search = follower.extend.standard.persistent_search(
        PEOPLE,
        "(uid=a*)",
        show_modifications=False,
        show_dn_modifications=False,
        streaming=False,
    )
    for uid in ["bob", "amy", "ada"]:
        assert writer.add(f"uid={uid}," + PEOPLE, ["account"], {"uid": uid}), writer.result
    assert writer.add("uid=abe,ou=moved," + BASE, ["account"], {"uid": "abe"}), writer.result
    assert writer.modify("uid=amy," + PEOPLE, {"description": [(MODIFY_REPLACE, ["x"])]}), writer.result
    assert writer.delete("uid=bob," + PEOPLE), writer.result
    assert writer.delete("uid=ada," + PEOPLE), writer.result
    got = events(search, 3)
    seen = [(e["changeType"], e["dn"].lower()) for e in got]
    assert seen == [
        ("add", "uid=amy," + PEOPLE),
        ("add", "uid=ada," + PEOPLE),
        ("delete", "uid=ada," + PEOPLE),
    ], seen
    # Nothing else comes.
    assert search.next(block=True, timeout=1) is None
    search.stop()
