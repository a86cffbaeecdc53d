#!/usr/bin/env python3
"""Cost of access control on searches, Meridian beside slapd.

For each server: N inetOrgPerson entries under ou=People, the default
access rules (Meridian's built-in defaults; for slapd the equivalent
`access to attrs=userPassword by self write by anonymous auth by * none`
and `access to * by users read by * none`), then the same paged subtree
search of every entry read by ldapsearch, alternately as the
administrator (rules bypassed) and as a bound user (rules evaluated).
Reported: the server's own CPU time (utime + stime from /proc) summed
over the rounds, so the client's cost does not count, less the CPU of
the same binds made alone (Meridian checks {ARGON2} hashes, slapd here
clear-text passwords).

    scripts/bench-access.py target/release/meridian 20000 15
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

SUFFIX = "dc=example,dc=com"
PEOPLE = f"ou=People,{SUFFIX}"
ADMIN = (f"cn=admin,{SUFFIX}", "secret")
READER = (f"uid=reader,{SUFFIX}", "pw")


def ldif(n):
    yield f"dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: x\n"
    yield f"dn: {PEOPLE}\nobjectClass: organizationalUnit\nou: People\n"
    yield f"dn: {READER[0]}\nobjectClass: inetOrgPerson\nuid: reader\ncn: R\nsn: R\nuserPassword: {READER[1]}\n"
    for i in range(n):
        yield (f"dn: uid=u{i},{PEOPLE}\nobjectClass: inetOrgPerson\nuid: u{i}\ncn: User {i}\nsn: S{i}\n"
               f"mail: u{i}@example.com\ntelephoneNumber: +1 555 {i:06d}\ndescription: {'x' * 40}\n")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_meridian(binary, n, work):
    env = dict(os.environ, MERIDIAN_ADMIN_PASSWORD=ADMIN[1], RUST_LOG="warn")
    # Like slapd's `sizelimit unlimited` below: the user reads everything.
    config = os.path.join(work, "meridian.toml")
    with open(config, "w") as f:
        f.write(f"[directory]\nsize_limit = {n + 10}\n")
    proc = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", work,
                             "--config", config],
                            stdout=subprocess.PIPE, env=env, text=True)
    addr = next(l.split()[-1] for l in proc.stdout if l.startswith("meridian listening on "))
    url = f"ldap://{addr}"
    load = subprocess.run(["ldapadd", "-x", "-H", url, "-D", ADMIN[0], "-w", ADMIN[1]],
                          input="\n".join(ldif(n)), capture_output=True, text=True)
    assert load.returncode == 0, load.stderr
    return proc, url


def start_slapd(n, work):
    conf = os.path.join(work, "slapd.conf")
    os.makedirs(os.path.join(work, "db"))
    s = "/etc/ldap/schema"
    with open(conf, "w") as f:
        f.write(f"include {s}/core.schema\ninclude {s}/cosine.schema\ninclude {s}/inetorgperson.schema\n"
                f"modulepath /usr/lib/ldap\nmoduleload back_mdb\npidfile {work}/slapd.pid\n"
                "sizelimit unlimited\n"
                f"database mdb\nsuffix \"{SUFFIX}\"\nrootdn \"{ADMIN[0]}\"\nrootpw {ADMIN[1]}\n"
                f"directory {work}/db\nmaxsize 1073741824\n"
                "access to attrs=userPassword by self write by anonymous auth by * none\n"
                "access to * by users read by * none\n")
    load = subprocess.run(["/usr/sbin/slapadd", "-q", "-f", conf], input="\n".join(ldif(n)),
                          capture_output=True, text=True)
    assert load.returncode == 0, load.stderr
    url = f"ldap://127.0.0.1:{free_port()}/"
    proc = subprocess.Popen(["/usr/sbin/slapd", "-f", conf, "-h", url, "-d", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        if subprocess.run(["ldapsearch", "-x", "-H", url, "-b", "", "-s", "base"],
                          capture_output=True).returncode == 0:
            break
        time.sleep(0.1)
    return proc, url


def search_cpu(proc, url, bind, n):
    before = cpu_seconds(proc.pid)
    out = subprocess.run(["ldapsearch", "-x", "-LLL", "-H", url, "-D", bind[0], "-w", bind[1],
                          "-b", PEOPLE, "-E", "pr=500/noprompt", "(objectClass=inetOrgPerson)"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    got = out.stdout.count("\ndn: ") + out.stdout.startswith("dn: ")
    assert got == n, f"{got} entries, expected {n}"
    assert "userPassword" not in out.stdout or bind == ADMIN
    return cpu_seconds(proc.pid) - before


def bind_cpu(proc, url, bind):
    # The same bind alone (ldapwhoami): Meridian verifies an {ARGON2}
    # hash, slapd a clear-text rootpw/userPassword, so binds are
    # measured apart and subtracted.
    before = cpu_seconds(proc.pid)
    out = subprocess.run(["ldapwhoami", "-x", "-H", url, "-D", bind[0], "-w", bind[1]],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return cpu_seconds(proc.pid) - before


def main():
    binary, n, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    for name in ("meridian", "slapd"):
        work = tempfile.mkdtemp(prefix=f"bench-access-{name}-")
        proc, url = start_meridian(binary, n, work) if name == "meridian" else start_slapd(n, work)
        try:
            totals = {"admin": 0.0, "user": 0.0}
            binds = {"admin": 0.0, "user": 0.0}
            for _ in range(rounds):
                for who, bind in (("admin", ADMIN), ("user", READER)):
                    totals[who] += search_cpu(proc, url, bind, n)
                    binds[who] += bind_cpu(proc, url, bind)
            admin, user = (totals[w] - binds[w] for w in ("admin", "user"))
            print(f"{name}: {n} entries x {rounds} rounds, server CPU for the searches "
                  f"(binds subtracted: administrator {binds['admin']:.2f} s, user {binds['user']:.2f} s): "
                  f"administrator {admin:.2f} s, user {user:.2f} s, user/administrator {user / admin:.3f}")
        finally:
            proc.terminate()
            proc.wait()
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
