#!/usr/bin/env python3
"""A seed scenario against Meridian and slapd, side by side.

Generates N entries of a seed model with `meridian gen`, loads them into
Meridian (`meridian import`) and into Debian's slapd (`slapadd -q`), both
with the same equality indexes (objectClass, uid, cn), starts both on
private 127.0.0.1 ports (durable commits on both: Meridian's default,
slapd's back-mdb default), and runs `meridian bench compare` with the
scenario. Extra arguments go to `meridian bench compare` as they are.

    scripts/bench-seed.py target/release/meridian bench/scenarios/seed000-mixed-50-50.toml \\
        --model seed000 --entries 100000 -- --duration 20 --warmup 3

Reports (JSON and HTML) are written to --out (default: the current
directory) as SCENARIO.json and SCENARIO.html.

With --groups four servers run: Meridian with `[groups]` as by default
(memberOf and referential integrity on) and with both off, slapd with
its memberof and refint overlays and without (issue 47's cost of
integrity on writes that do not touch groups).

With --tls both servers are reached over ldaps:// with the same
certificate (RSA 2048, made here with openssl by a throwaway CA), and
the bench trusts that CA.
"""
import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

SUFFIX = "dc=example,dc=com"
SCHEMA = "/etc/ldap/schema"
# Equality indexes on both servers; --index adds more.
INDEXES = ("objectClass", "uid", "cn")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_certificate(work):
    """A CA and a certificate for 127.0.0.1 signed by it: (ca, cert, key)."""
    ca_key, ca, key, csr, cert = (os.path.join(work, n) for n in ("ca.key", "ca.pem", "server.key",
                                                                   "server.csr", "server.pem"))
    run = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca, "-days", "2",
        "-subj", "/CN=bench CA", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=localhost")
    san = os.path.join(work, "san.cnf")
    with open(san, "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    run("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert,
        "-days", "2", "-extfile", san)
    # slapd runs as root here, but keeps its files readable by openldap.
    for path in (cert, key):
        os.chmod(path, 0o644)
    return ca, cert, key


def start_meridian(binary, ldif, work, directory_config, storage_config, extra, tls=None,
                   name="meridian", more=""):
    data = os.path.join(work, name)
    config = os.path.join(work, f"{name}.toml")
    with open(config, "w") as f:
        f.write(f"{more}\n[directory]\n{directory_config}\n"
                f"[storage]\n{storage_config}\n[storage.indexes]\n")
        for attr in INDEXES:
            f.write(f"{attr} = [\"eq\"]\n")
        for attr, kinds in extra:
            quoted = ", ".join('"' + k + '"' for k in kinds)
            f.write(f"{attr} = [{quoted}]\n")
    subprocess.run([binary, "import", "--config", config, "--data-dir", data, "-i", ldif], check=True,
                   stdout=subprocess.DEVNULL)
    # The default log, access lines included (users run the default); to
    # a file, as a service's standard error goes to its journal.
    env = dict(os.environ, MERIDIAN_ADMIN_PASSWORD="secret")
    env.pop("RUST_LOG", None)
    argv = [binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", data, "--config", config]
    if tls:
        _, cert, key = tls
        argv += ["--listen-tls", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key]
    log = open(os.path.join(work, f"{name}.log"), "w")
    server = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, env=env, text=True)
    log.close()
    tls_addr = None
    for line in server.stdout:
        if line.startswith("meridian listening for ldaps on "):
            tls_addr = line.split()[-1]
        elif line.startswith("meridian listening on "):
            addr = line.split()[-1]
            break
    return server, (f"ldaps://{tls_addr}" if tls else f"ldap://{addr}")


# slapd's memberof (one instance per group class) and refint overlays,
# as Meridian's [groups] defaults keep them.
OVERLAYS = ("overlay memberof\nmemberof-refint TRUE\n"
            "overlay memberof\nmemberof-group-oc groupOfUniqueNames\nmemberof-member-ad uniqueMember\n"
            "memberof-refint TRUE\n"
            "overlay refint\nrefint_attributes member uniqueMember manager secretary seeAlso\n")


def start_slapd(ldif, work, extra, tls=None, name="slapd", overlays=False):
    db = os.path.join(work, name)
    os.makedirs(db)
    conf = os.path.join(work, f"{name}.conf")
    with open(conf, "w") as f:
        for s in ("core", "cosine", "inetorgperson", "nis"):
            f.write(f"include {SCHEMA}/{s}.schema\n")
        if tls:
            # Global directives, before the database.
            ca, cert, key = tls
            f.write(f"TLSCACertificateFile {ca}\nTLSCertificateFile {cert}\nTLSCertificateKeyFile {key}\n")
        modules = "moduleload memberof\nmoduleload refint\n" if overlays else ""
        f.write(f"modulepath /usr/lib/ldap\nmoduleload back_mdb\n{modules}database mdb\nsuffix \"{SUFFIX}\"\n"
                f"rootdn \"cn=admin,{SUFFIX}\"\nrootpw secret\ndirectory {db}\nmaxsize 17179869184\n")
        for attr in INDEXES:
            f.write(f"index {attr} eq\n")
        for attr, kinds in extra:
            # slapd has no ordering kind: its own kinds only.
            theirs = [k for k in kinds if k in ("eq", "pres", "sub", "approx")]
            if theirs:
                f.write(f"index {attr} {','.join(theirs)}\n")
        if overlays:
            f.write(OVERLAYS)
    subprocess.run(["slapadd", "-q", "-f", conf, "-l", ldif], check=True, stdout=subprocess.DEVNULL)
    port = free_port()
    scheme = "ldaps" if tls else "ldap"
    server = subprocess.Popen(["slapd", "-f", conf, "-h", f"{scheme}://127.0.0.1:{port}/", "-d", "0"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.05)
    return server, f"{scheme}://127.0.0.1:{port}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary")
    parser.add_argument("scenario")
    parser.add_argument("--model", required=True, choices=["seed000", "seed002", "seed003"])
    parser.add_argument("--entries", type=int, default=100000)
    parser.add_argument("--out", default=".")
    parser.add_argument("--meridian-directory", default="",
                        help="lines for Meridian's [directory] table, e.g. 'password_hash_memory_kib = 1024'")
    parser.add_argument("--meridian-storage", default="",
                        help="lines for Meridian's [storage] table, e.g. 'durability = \"journal\"'")
    parser.add_argument("--index", action="append", default=[], metavar="ATTR=KIND,...",
                        help="one more index on both servers, e.g. uidNumber=eq,ord (slapd gets the kinds it has)")
    parser.add_argument("--keys", type=int, help="largest key (default: entries - 1)")
    parser.add_argument("--tls", action="store_true", help="both servers over ldaps://, one certificate")
    parser.add_argument("--groups", action="store_true",
                        help="each server with its group integrity on and off (four servers)")
    args, bench_args = parser.parse_known_args()
    extra = [(attr, kinds.split(",")) for attr, kinds in (i.split("=", 1) for i in args.index)]
    args.bench_args = [a for a in bench_args if a != "--"]
    name = os.path.splitext(os.path.basename(args.scenario))[0]
    # The reports are written at the end: a missing directory would lose
    # the whole run's figures.
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="meridian-bench-seed-") as work:
        ldif = os.path.join(work, "data.ldif")
        subprocess.run([args.binary, "gen", "--model", args.model, "-n", str(args.entries), "-o", ldif], check=True,
                       stderr=subprocess.DEVNULL)
        servers = []
        tls = make_certificate(work) if args.tls else None
        if tls:
            args.bench_args += ["--tls-ca-file", tls[0]]
        try:
            meridian, meridian_url = start_meridian(args.binary, ldif, work,
                                                    args.meridian_directory.replace("\\n", "\n"),
                                                    args.meridian_storage.replace("\\n", "\n"), extra, tls)
            servers.append(meridian)
            slapd, slapd_url = start_slapd(ldif, work, extra, tls, overlays=args.groups)
            servers.append(slapd)
            targets = ["--server", f"meridian={meridian_url}", "--server", f"slapd={slapd_url}"]
            if args.groups:
                plain, plain_url = start_meridian(
                    args.binary, ldif, work, args.meridian_directory.replace("\\n", "\n"),
                    args.meridian_storage.replace("\\n", "\n"), extra, tls, name="meridian-nogroups",
                    more="[groups]\nmemberof = false\nrefint = false")
                servers.append(plain)
                bare, bare_url = start_slapd(ldif, work, extra, tls, name="slapd-nooverlays")
                servers.append(bare)
                targets = ["--server", f"meridian-groups={meridian_url}",
                           "--server", f"meridian-nogroups={plain_url}",
                           "--server", f"slapd-overlays={slapd_url}",
                           "--server", f"slapd-nooverlays={bare_url}"]
            argv = [args.binary, "bench", "compare", args.scenario, *targets,
                    # An add-only scenario may start from the base alone.
                    "--keys", str(args.keys if args.keys is not None else max(args.entries - 1, 0)),
                    "--json", os.path.join(args.out, f"{name}.json"),
                    "--html", os.path.join(args.out, f"{name}.html"), "-q", *args.bench_args]
            print("$", " ".join(argv[1:]), flush=True)
            sys.exit(subprocess.run(argv).returncode)
        finally:
            for server in servers:
                server.terminate()
                server.wait()


if __name__ == "__main__":
    main()
