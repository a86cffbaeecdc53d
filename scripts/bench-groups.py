#!/usr/bin/env python3
"""What group integrity costs, Meridian beside slapd with its memberof and
refint overlays, in one run (issue 47's benchmarks):

- adding one member to a group of M members (M = --members, 10,000);
- deleting a user who is in G groups (G = --groups, 100);
- a memberOf-filtered search over N users (N = --users), one group of
  M of them.

Both servers are loaded online through LDAP, or with --bulk offline
from one LDIF that carries memberOf on the members, as a slapcat of a
site running the memberof overlay does (`slapadd -q` for slapd, which
bypasses its overlays; `meridian import` for Meridian): the way to a
million users. Equality indexes on objectClass, uid, member and memberOf
on both. Each timed operation is repeated --repeat times on a fresh
target and the median printed.

    scripts/bench-groups.py target/release/meridian --users 20000
    scripts/bench-groups.py target/release/meridian --bulk --users 1000000

Needs Python's ldap3 (scripts/test.sh installs it).
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from ldap3 import MODIFY_ADD, Connection, Server

SUFFIX = "dc=example,dc=com"
PEOPLE = f"ou=People,{SUFFIX}"
GROUPS = f"ou=Groups,{SUFFIX}"
SCHEMA = "/etc/ldap/schema"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port):
    for _ in range(400):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def start_meridian(binary, work, ldif=None):
    if ldif:
        subprocess.run([binary, "import", "-i", ldif, "--data-dir", os.path.join(work, "meridian")],
                       check=True, stdout=subprocess.DEVNULL)
    port = free_port()
    config = os.path.join(work, "meridian.toml")
    with open(config, "w") as f:
        f.write("[log]\naccess = false\n")
    env = dict(os.environ, MERIDIAN_ADMIN_PASSWORD="secret")
    server = subprocess.Popen([binary, "serve", "--listen", f"127.0.0.1:{port}", "--config", config,
                               "--data-dir", os.path.join(work, "meridian")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wait_port(port)
    return server, port


def start_slapd(work, ldif=None):
    db = os.path.join(work, "slapd")
    os.makedirs(db)
    conf = os.path.join(work, "slapd.conf")
    with open(conf, "w") as f:
        for s in ("core", "cosine", "inetorgperson", "nis"):
            f.write(f"include {SCHEMA}/{s}.schema\n")
        f.write("modulepath /usr/lib/ldap\nmoduleload back_mdb\nmoduleload memberof\nmoduleload refint\n"
                f"database mdb\nsuffix \"{SUFFIX}\"\nrootdn \"cn=admin,{SUFFIX}\"\nrootpw secret\n"
                f"directory {db}\nmaxsize 17179869184\n"
                "index objectClass,uid,member,memberOf eq\n"
                "overlay memberof\nmemberof-refint TRUE\n"
                "overlay refint\nrefint_attributes member uniqueMember manager secretary seeAlso\n")
    if ldif:
        subprocess.run(["slapadd", "-q", "-f", conf, "-l", ldif], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    port = free_port()
    server = subprocess.Popen(["slapd", "-f", conf, "-h", f"ldap://127.0.0.1:{port}/", "-d", "0"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    return server, port


def connect(port):
    conn = Connection(Server("127.0.0.1", port=port), f"cn=admin,{SUFFIX}", "secret", auto_bind=True)
    return conn


def load(conn, users, members, groups):
    """The tree: N users, one big group of M of them, G small groups each
    holding user 0."""
    ok = conn.add(SUFFIX, ["dcObject", "organization"], {"dc": "example", "o": "Example"})
    assert ok, conn.result
    for ou in ("People", "Groups"):
        assert conn.add(f"ou={ou},{SUFFIX}", ["organizationalUnit"], {"ou": ou}), conn.result
    for i in range(users):
        assert conn.add(f"uid=u{i},{PEOPLE}", ["inetOrgPerson"], {"uid": f"u{i}", "cn": "u", "sn": "u"}), conn.result
    big = [f"uid=u{i},{PEOPLE}" for i in range(members)]
    assert conn.add(f"cn=big,{GROUPS}", ["groupOfNames"], {"cn": "big", "member": big}), conn.result
    for g in range(groups):
        assert conn.add(f"cn=g{g},{GROUPS}", ["groupOfNames"], {"cn": f"g{g}", "member": [f"uid=u0,{PEOPLE}"]}), \
            conn.result


def write_ldif(path, users, members, groups):
    """The tree of `load`, as one LDIF with memberOf on the members."""
    def entry(f, dn, attrs):
        f.write(f"dn: {dn}\n")
        for name, values in attrs:
            for value in values:
                f.write(f"{name}: {value}\n")
        f.write("\n")

    big = f"cn=big,{GROUPS}"
    small = [f"cn=g{g},{GROUPS}" for g in range(groups)]
    with open(path, "w") as f:
        entry(f, SUFFIX, [("objectClass", ["dcObject", "organization"]), ("dc", ["example"]), ("o", ["Example"])])
        for ou in ("People", "Groups"):
            entry(f, f"ou={ou},{SUFFIX}", [("objectClass", ["organizationalUnit"]), ("ou", [ou])])
        for i in range(users):
            of = ([big] if i < members else []) + (small if i == 0 else [])
            entry(f, f"uid=u{i},{PEOPLE}", [("objectClass", ["inetOrgPerson"]), ("uid", [f"u{i}"]), ("cn", ["u"]),
                                            ("sn", ["u"]), ("memberOf", of)])
        entry(f, big, [("objectClass", ["groupOfNames"]), ("cn", ["big"]),
                       ("member", [f"uid=u{i},{PEOPLE}" for i in range(members)])])
        for g, dn in enumerate(small):
            entry(f, dn, [("objectClass", ["groupOfNames"]), ("cn", [f"g{g}"]), ("member", [f"uid=u0,{PEOPLE}"])])


def timed(f):
    start = time.perf_counter()
    f()
    return (time.perf_counter() - start) * 1000


def measure(conn, users, members, groups, repeat):
    add_member, delete_user, search = [], [], []
    for r in range(repeat):
        # A user not yet in the big group joins it.
        who = f"uid=u{members + r},{PEOPLE}"
        add_member.append(timed(lambda: conn.modify(f"cn=big,{GROUPS}", {"member": [(MODIFY_ADD, [who])]})))
        assert conn.result["result"] == 0, conn.result
        # A user in every small group (and the big one) goes.
        victim = f"uid=v{r},{PEOPLE}"
        assert conn.add(victim, ["inetOrgPerson"], {"uid": f"v{r}", "cn": "v", "sn": "v"}), conn.result
        for g in range(groups):
            assert conn.modify(f"cn=g{g},{GROUPS}", {"member": [(MODIFY_ADD, [victim])]}), conn.result
        delete_user.append(timed(lambda: conn.delete(victim)))
        assert conn.result["result"] == 0, conn.result
        found = []
        search.append(timed(lambda: found.append(conn.search(
            PEOPLE, f"(&(objectClass=inetOrgPerson)(memberOf=cn=big,{GROUPS}))", attributes=["1.1"],
            paged_size=None, size_limit=0))))
        assert len(conn.entries) >= members, (len(conn.entries), conn.result)
    return statistics.median(add_member), statistics.median(delete_user), statistics.median(search)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary")
    parser.add_argument("--users", type=int, default=20000)
    parser.add_argument("--members", type=int, default=10000)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--bulk", action="store_true", help="load offline from one LDIF (slapadd, meridian import)")
    args = parser.parse_args()
    assert args.members + args.repeat <= args.users
    with tempfile.TemporaryDirectory(prefix="meridian-bench-groups-") as work:
        servers = []
        try:
            ldif = None
            if args.bulk:
                ldif = os.path.join(work, "tree.ldif")
                write_ldif(ldif, args.users, args.members, args.groups)
            loads = {}
            loads["meridian"] = timed(lambda: servers.append(start_meridian(args.binary, work, ldif)))
            m_port = servers[-1][1]
            loads["slapd"] = timed(lambda: servers.append(start_slapd(work, ldif)))
            s_port = servers[-1][1]
            rows = []
            for name, port in (("meridian", m_port), ("slapd", s_port)):
                conn = connect(port)
                loaded = loads[name] if args.bulk else timed(
                    lambda: load(conn, args.users, args.members, args.groups))
                rows.append((name, loaded / 1000, *measure(conn, args.users, args.members, args.groups,
                                                           args.repeat)))
            print(f"{args.users:,} users, a group of {args.members:,}, {args.groups} groups holding one user; "
                  f"median of {args.repeat}")
            print(f"{'server':<10} {'load s':>8} {'add member ms':>14} {'delete user ms':>15} {'memberOf search ms':>19}")
            for name, loaded, add, delete, search in rows:
                print(f"{name:<10} {loaded:>8.1f} {add:>14.1f} {delete:>15.1f} {search:>19.1f}")
        finally:
            for server, _ in servers:
                server.terminate()
                server.wait()


if __name__ == "__main__":
    sys.exit(main())
