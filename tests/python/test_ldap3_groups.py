"""Groups as applications ask for them through Python ldap3: the memberOf
filters of Nextcloud, Gitea, Grafana and SSSD (`(memberOf=GROUP)` on the
user), the nested-group filter of Active Directory style clients
(`memberOf:1.2.840.113556.1.4.1941:=`), and memberOf kept as groups
change."""

from ldap3 import MODIFY_ADD, MODIFY_DELETE, SUBTREE, SYNC

from conftest import connect

SUFFIX = "dc=example,dc=com"
PEOPLE = f"ou=People,{SUFFIX}"
GROUPS = f"ou=Groups,{SUFFIX}"
IN_CHAIN = "1.2.840.113556.1.4.1941"


def uids(conn, search_filter, attributes=("uid",)):
    assert conn.search(SUFFIX, search_filter, SUBTREE, attributes=list(attributes)), conn.result
    # Groups nested in a group match too: only the people are counted.
    return sorted(str(e.uid) for e in conn.entries if e.uid.values)


def test_application_group_filters(server):
    host, port = server
    conn = connect(host, port, SYNC)
    assert conn.add(SUFFIX, ["dcObject", "organization"], {"dc": "example", "o": "Example"})
    assert conn.add(PEOPLE, ["organizationalUnit"], {"ou": "People"})
    assert conn.add(GROUPS, ["organizationalUnit"], {"ou": "Groups"})
    for name in ["ann", "ben", "cat", "dan"]:
        assert conn.add(f"uid={name},{PEOPLE}", ["inetOrgPerson"], {"uid": name, "cn": name, "sn": name})
    assert conn.add(f"cn=admins,{GROUPS}", ["groupOfNames"], {"cn": "admins", "member": [f"uid=ann,{PEOPLE}"]})
    assert conn.add(
        f"cn=developers,{GROUPS}",
        ["groupOfNames"],
        {"cn": "developers", "member": [f"uid=ben,{PEOPLE}", f"cn=admins,{GROUPS}"]},
    )
    assert conn.add(f"cn=staff,{GROUPS}", ["groupOfUniqueNames"], {"cn": "staff", "uniqueMember": [f"uid=cat,{PEOPLE}"]})

    # Nextcloud / Gitea / Grafana: users of a group, by the user's memberOf.
    assert uids(conn, f"(&(objectClass=inetOrgPerson)(memberOf=cn=developers,{GROUPS}))") == ["ben"]
    assert uids(conn, f"(&(objectClass=inetOrgPerson)(|(memberOf=cn=admins,{GROUPS})(memberOf=cn=staff,{GROUPS})))") == ["ann", "cat"]
    # memberOf is operational: asked for by name, it comes back.
    assert conn.search(f"uid=ann,{PEOPLE}", "(objectClass=*)", attributes=["memberOf"])
    assert [str(v) for v in conn.entries[0].memberOf.values] == [f"cn=admins,{GROUPS}"]
    # Nested groups: ann is a developer through admins.
    assert uids(conn, f"(&(objectClass=inetOrgPerson)(memberOf:{IN_CHAIN}:=cn=developers,{GROUPS}))") == ["ann", "ben"]
    # The groups a user is in, however deep (Keycloak's group mapper asks so).
    assert conn.search(SUFFIX, f"(member:{IN_CHAIN}:=uid=ann,{PEOPLE})", SUBTREE, attributes=["cn"])
    assert sorted(str(e.cn) for e in conn.entries) == ["admins", "developers"]

    # Membership changes show at once on the user's side.
    assert conn.modify(f"cn=admins,{GROUPS}", {"member": [(MODIFY_ADD, [f"uid=dan,{PEOPLE}"])]})
    assert uids(conn, f"(memberOf:{IN_CHAIN}:=cn=developers,{GROUPS})") == ["ann", "ben", "dan"]
    assert conn.modify(f"cn=developers,{GROUPS}", {"member": [(MODIFY_DELETE, [f"cn=admins,{GROUPS}"])]})
    assert uids(conn, f"(memberOf:{IN_CHAIN}:=cn=developers,{GROUPS})") == ["ben"]
    # A deleted user leaves its groups (referential integrity).
    assert conn.delete(f"uid=dan,{PEOPLE}")
    assert conn.search(f"cn=admins,{GROUPS}", "(objectClass=*)", attributes=["member"])
    assert [str(v) for v in conn.entries[0].member.values] == [f"uid=ann,{PEOPLE}"]
    # Clients do not write memberOf.
    assert not conn.modify(f"uid=ben,{PEOPLE}", {"memberOf": [(MODIFY_ADD, [f"cn=admins,{GROUPS}"])]})
    assert conn.result["result"] == 19, conn.result
