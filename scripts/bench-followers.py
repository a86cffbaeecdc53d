#!/usr/bin/env python3
"""Issue 48's benchmarks of following changes, against Meridian.

1. Seed 000's modify scenario (bench/scenarios/seed000-modify.toml) over
   N entries with 0, 1, 10 and 100 persistent-search consumers attached
   (`meridian bench followers`, every change below the suffix): the
   modify throughput with each, its drop against none, and the changes
   delivered per second to the consumers together.
2. A content synchronization consumer's catch-up: its cookie taken, then
   --catch-up modifies made, then the time of `ldapsearch -E sync=ro/COOKIE`
   (the changes since the cookie) against a full refresh's.

    scripts/bench-followers.py target/release/meridian --entries 1000000

Meridian runs with its default configuration (durable commits), on a
private 127.0.0.1 port, with the data imported by `meridian import`.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

SUFFIX = "dc=example,dc=com"
ADMIN = "cn=admin,dc=example,dc=com"
PASSWORD = "secret"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCENARIO = os.path.join(ROOT, "bench", "scenarios", "seed000-modify.toml")


def start(binary, work, ldif):
    data = os.path.join(work, "data")
    subprocess.run([binary, "import", "--data-dir", data, "-i", ldif], check=True,
                   stdout=subprocess.DEVNULL)
    env = dict(os.environ, MERIDIAN_ADMIN_PASSWORD=PASSWORD)
    env.pop("RUST_LOG", None)
    log = open(os.path.join(work, "meridian.log"), "w")
    server = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", data],
                              stdout=subprocess.PIPE, stderr=log, env=env, text=True)
    for line in server.stdout:
        if line.startswith("meridian listening on "):
            return server, "ldap://" + line.split()[-1]
    sys.exit("meridian did not start")


def modify_run(binary, url, work, duration, warmup, tag, count=None):
    report = os.path.join(work, f"modify-{tag}.json")
    argv = [binary, "bench", "run", SCENARIO, "--url", url, "-w", PASSWORD, "--json", report, "-q",
            "--duration", str(duration), "--warmup", str(warmup)]
    if count:
        argv += ["--count", str(count)]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    with open(report) as f:
        run = json.load(f)["runs"][0]
    return run["total"]["rate"], run["total"]["count"]


def with_followers(binary, url, work, consumers, duration, warmup):
    """The modify rate with `consumers` attached, and their line."""
    follow = None
    if consumers:
        follow = subprocess.Popen(
            [binary, "bench", "followers", "--url", url, "-w", PASSWORD, "--consumers",
             str(consumers), "--duration", str(duration)],
            stdout=subprocess.PIPE, text=True)
        # Connected and searching before the writes begin; the consumers
        # count from then for the measured seconds (the warm-up's
        # changes included: delivery lags the writes a little).
        time.sleep(1.0 + consumers / 50)
    rate, _ = modify_run(binary, url, work, duration, warmup, f"{consumers}")
    line = ""
    if follow:
        line = follow.communicate(timeout=duration + warmup + 120)[0].strip()
    return rate, line


def timed(argv):
    began = time.monotonic()
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    return time.monotonic() - began, out


def sync_search(url, cookie=None):
    control = f"sync=ro/{cookie}" if cookie else "sync=ro"
    return timed(["ldapsearch", "-x", "-H", url, "-D", ADMIN, "-w", PASSWORD, "-E", control, "-b",
                  SUFFIX, "-o", "ldif-wrap=no", "1.1"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("binary")
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--duration", type=float, default=20)
    parser.add_argument("--warmup", type=float, default=5)
    parser.add_argument("--consumers", default="0,1,10,100")
    parser.add_argument("--catch-up", type=int, default=1_000_000,
                        help="modifies made between a cookie and its refresh (0: skip)")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="meridian-bench-followers-")
    ldif = os.path.join(work, "data.ldif")
    subprocess.run([args.binary, "gen", "--model", "seed000", "-n", str(args.entries), "-o", ldif],
                   check=True, stdout=subprocess.DEVNULL)
    server, url = start(args.binary, work, ldif)
    try:
        print(f"seed000-modify over {args.entries} entries, {args.duration:.0f} s measured "
              f"after {args.warmup:.0f} s of warm-up ({url})")
        baseline = None
        for consumers in [int(c) for c in args.consumers.split(",")]:
            rate, line = with_followers(args.binary, url, work, consumers, args.duration,
                                        args.warmup)
            if consumers == 0:
                baseline = rate
            drop = f", {100 * (1 - rate / baseline):.1f} % below none" if baseline else ""
            print(f"  {consumers:>3} consumers: {rate:,.0f} modifies/s{drop}")
            if line:
                print(f"      {line}")
        if args.catch_up:
            full_secs, out = sync_search(url)
            cookie = re.search(r"^# cookie: (\S+)", out, re.M).group(1)
            sent = out.count("\ndn: ")
            print(f"full refresh: {sent} entries in {full_secs:.1f} s")
            # Clear of the margin kept for commits out of their CSNs' order.
            time.sleep(11)
            _, made = modify_run(args.binary, url, work, 3600, 0, "catch-up", args.catch_up)
            secs, out = sync_search(url, cookie)
            sent = out.count("\ndn: ")
            print(f"catch-up after {made:,} modifies: {sent} changed entries sent in {secs:.1f} s "
                  f"({'delete phase' if 'refreshDeletes=1' in out else 'present phase'})")
    finally:
        server.terminate()
        server.wait(timeout=60)


if __name__ == "__main__":
    main()
