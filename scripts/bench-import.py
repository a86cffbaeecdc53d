#!/usr/bin/env python3
"""Bulk load, Meridian beside slapd: `meridian import` against `slapadd -q`.

N inetOrgPerson entries of the seed 000 model (a flat container, uid, cn,
sn and an 8-byte carLicense) in one LDIF file, loaded into an empty
database by each tool with the same indexes (objectClass and uid
equality). Reported: wall-clock seconds, entries per second, and the
size of the database file each produced. Both tools add the same
operational attributes (entryUUID, entryCSN, timestamps, creator).

    scripts/bench-import.py target/release/meridian 1000000
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


def slapadd(ldif, work):
    db = os.path.join(work, "slapd-db")
    os.makedirs(db)
    conf = os.path.join(work, "slapd.conf")
    with open(conf, "w") as f:
        for s in ("core", "cosine", "inetorgperson", "nis"):
            f.write(f"include {SCHEMA}/{s}.schema\n")
        f.write(f"modulepath /usr/lib/ldap\nmoduleload back_mdb\ndatabase mdb\nsuffix \"{SUFFIX}\"\n"
                f"rootdn \"cn=admin,{SUFFIX}\"\ndirectory {db}\nmaxsize 17179869184\n"
                "index objectClass eq\nindex uid eq\n")
    seconds = timed(["slapadd", "-q", "-f", conf, "-l", ldif])
    return seconds, disk_bytes(os.path.join(db, "data.mdb"))


def main():
    binary, n = sys.argv[1], int(sys.argv[2])
    work = tempfile.mkdtemp(prefix="bench-import-")
    try:
        ldif = os.path.join(work, "people.ldif")
        write_ldif(ldif, n)
        total = n + 2
        rows = [("meridian import", *meridian(binary, ldif, work)), ("slapadd -q", *slapadd(ldif, work))]
        print(f"{total} entries, {os.path.getsize(ldif) / 1e6:.0f} MB of LDIF")
        for name, seconds, size in rows:
            print(f"{name:16} {seconds:7.2f} s  {total / seconds:9.0f} entries/s  database {size / 1e6:7.1f} MB")
        print(f"ratio (meridian/slapadd entries per second): {rows[1][1] / rows[0][1]:.2f}")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
