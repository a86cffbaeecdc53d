#!/usr/bin/env python3
"""Bulk load, Meridian beside slapd.

Offline (default): `meridian import` against `slapadd -q`. N
inetOrgPerson entries of the seed 000 model (a flat container, uid, cn,
sn and an 8-byte carLicense) in one LDIF file, loaded into an empty
database by each tool with the same indexes (objectClass and uid
equality). Reported: wall-clock seconds, entries per second, and the
size of the database file each produced. Both tools add the same
operational attributes (entryUUID, entryCSN, timestamps, creator).

    scripts/bench-import.py target/release/meridian 1000000 [--rounds 3]

Online (`--online`): N account+posixAccount entries of the seed 002 model
under ou=People, added over LDAP to a running server with durable
commits: `meridian import --online` into `meridian serve`, and OpenLDAP's
`ldapadd` into slapd (the seed's method), plus `meridian import --online`
into slapd to separate client from server.

    scripts/bench-import.py target/release/meridian 50000 --online
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

SUFFIX = "dc=example,dc=com"
SCHEMA = "/etc/ldap/schema"


def write_ldif(path, n):
    with open(path, "w") as f:
        f.write(f"dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: x\n\n")
        f.write(f"dn: ou=People,{SUFFIX}\nobjectClass: organizationalUnit\nou: People\n\n")
        for i in range(n):
            f.write(f"dn: uid=user{i},ou=People,{SUFFIX}\nobjectClass: inetOrgPerson\nuid: user{i}\n"
                    f"cn: User {i}\nsn: S{i}\ncarLicense: {i % 100000000:08d}\n\n")


def disk_bytes(path):
    """Blocks in use: LMDB files are sparse up to the map size."""
    return os.stat(path).st_blocks * 512


def timed(argv, **kw):
    start = time.monotonic()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, **kw)
    return time.monotonic() - start


def meridian(binary, ldif, work):
    data = os.path.join(work, "meridian")
    config = os.path.join(work, "meridian.toml")
    with open(config, "w") as f:
        f.write("[storage.indexes]\nobjectClass = [\"eq\"]\nuid = [\"eq\"]\n")
    seconds = timed([binary, "import", "--config", config, "--data-dir", data, "-i", ldif])
    return seconds, disk_bytes(os.path.join(data, "db", "data.mdb"))


def slapd_conf(work, tag):
    """A slapd.conf for an empty back-mdb database with objectClass and uid
    equality indexes; rootdn cn=admin, password "secret". Returns the
    config path and the database directory."""
    db = os.path.join(work, f"slapd-{tag}")
    os.makedirs(db)
    conf = os.path.join(work, f"slapd-{tag}.conf")
    with open(conf, "w") as f:
        for s in ("core", "cosine", "inetorgperson", "nis"):
            f.write(f"include {SCHEMA}/{s}.schema\n")
        f.write(f"modulepath /usr/lib/ldap\nmoduleload back_mdb\ndatabase mdb\nsuffix \"{SUFFIX}\"\n"
                f"rootdn \"cn=admin,{SUFFIX}\"\nrootpw secret\ndirectory {db}\nmaxsize 17179869184\n"
                "index objectClass eq\nindex uid eq\n")
    return conf, db


def slapadd(ldif, work):
    conf, db = slapd_conf(work, "slapadd")
    seconds = timed(["slapadd", "-q", "-f", conf, "-l", ldif])
    return seconds, disk_bytes(os.path.join(db, "data.mdb"))


def write_posix_ldif(path, n):
    with open(path, "w") as f:
        for i in range(n):
            f.write(f"dn: uid=user{i},ou=People,{SUFFIX}\nobjectClass: account\nobjectClass: posixAccount\n"
                    f"uid: user{i}\ncn: User {i}\nuidNumber: {10000 + i}\ngidNumber: 100\n"
                    f"homeDirectory: /home/user{i}\nloginShell: /bin/bash\n\n")


BASE_LDIF = (f"dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: x\n\n"
             f"dn: ou=People,{SUFFIX}\nobjectClass: organizationalUnit\nou: People\n\n")


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def online(binary, n, work):
    ldif = os.path.join(work, "people.ldif")
    write_posix_ldif(ldif, n)
    base = os.path.join(work, "base.ldif")
    with open(base, "w") as f:
        f.write(BASE_LDIF)
    rows = []

    # Meridian, durable commits (the default), loaded over LDAP.
    env = dict(os.environ, MERIDIAN_ADMIN_PASSWORD="secret", RUST_LOG="warn")
    data = os.path.join(work, "meridian")
    config = os.path.join(work, "meridian.toml")
    with open(config, "w") as f:
        # The same indexes as the slapd below.
        f.write("[log]\naccess = false\n[storage.indexes]\nobjectClass = [\"eq\"]\nuid = [\"eq\"]\n")
    server = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", data, "--config", config],
                              stdout=subprocess.PIPE, env=env, text=True)
    try:
        addr = next(l.split()[-1] for l in server.stdout if l.startswith("meridian listening on "))
        bind = ["-D", f"cn=admin,{SUFFIX}", "-w", "secret"]
        subprocess.run([binary, "import", "--online", f"ldap://{addr}", *bind, "-i", base], check=True,
                       stdout=subprocess.DEVNULL)
        rows.append(("meridian import --online -> meridian",
                     timed([binary, "import", "--online", f"ldap://{addr}", *bind, "-i", ldif])))
    finally:
        server.terminate()
        server.wait()

    # slapd: ldapadd (one add at a time, as seed 002 measured it), then
    # our pipelined client into a fresh slapd.
    for name, client in [("ldapadd -> slapd", "ldapadd"), ("meridian import --online -> slapd", "meridian")]:
        conf, _ = slapd_conf(work, client)
        subprocess.run(["slapadd", "-q", "-f", conf, "-l", base], check=True, stdout=subprocess.DEVNULL)
        port = free_port()
        slapd = subprocess.Popen(["slapd", "-f", conf, "-h", f"ldap://127.0.0.1:{port}/", "-d", "0"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(100):
                if subprocess.run(["ldapsearch", "-x", "-H", f"ldap://127.0.0.1:{port}", "-s", "base", "-b", "",
                                   "1.1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
                    break
                time.sleep(0.1)
            url = f"ldap://127.0.0.1:{port}"
            if client == "ldapadd":
                argv = ["ldapadd", "-x", "-H", url, "-D", f"cn=admin,{SUFFIX}", "-w", "secret", "-f", ldif]
            else:
                argv = [binary, "import", "--online", url, "-D", f"cn=admin,{SUFFIX}", "-w", "secret", "-i", ldif]
            rows.append((name, timed(argv, env=dict(os.environ, LDAPNOINIT="1"))))
        finally:
            slapd.terminate()
            slapd.wait()
    print(f"{n} posixAccount entries over LDAP, durable commits")
    for name, seconds in rows:
        print(f"{name:38} {seconds:7.2f} s  {n / seconds:9.0f} entries/s")
    print(f"ratio (meridian import --online -> meridian / ldapadd -> slapd): {rows[1][1] / rows[0][1]:.1f}")


def main():
    binary, n = sys.argv[1], int(sys.argv[2])
    if "--online" in sys.argv[3:]:
        work = tempfile.mkdtemp(prefix="bench-import-")
        try:
            online(binary, n, work)
        finally:
            shutil.rmtree(work)
        return
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 1
    work = tempfile.mkdtemp(prefix="bench-import-")
    try:
        ldif = os.path.join(work, "people.ldif")
        write_ldif(ldif, n)
        # The LDIF on disk before the first load, not written back during it.
        os.sync()
        total = n + 2
        # Rounds alternate the tools; each round's times are printed, then
        # the best time of each tool (the machine is shared: slow runs
        # are noise, not the tool).
        best = {}
        for r in range(rounds):
            tools = [
                ("meridian import", lambda d: meridian(binary, ldif, d)),
                ("slapadd -q", lambda d: slapadd(ldif, d)),
            ]
            for name, load in tools:
                round_dir = os.path.join(work, f"{r}-{name.split()[0]}")
                os.makedirs(round_dir)
                seconds, size = load(round_dir)
                shutil.rmtree(round_dir)
                print(f"round {r + 1}: {name:16} {seconds:7.2f} s  database {size / 1e6:7.1f} MB")
                if name not in best or seconds < best[name][0]:
                    best[name] = (seconds, size)
        print(f"{total} entries, {os.path.getsize(ldif) / 1e6:.0f} MB of LDIF; best of {rounds}:")
        for name, (seconds, size) in best.items():
            print(f"{name:16} {seconds:7.2f} s  {total / seconds:9.0f} entries/s  database {size / 1e6:7.1f} MB")
        ratio = best["slapadd -q"][0] / best["meridian import"][0]
        print(f"ratio (meridian/slapadd entries per second): {ratio:.2f}")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
