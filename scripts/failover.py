#!/usr/bin/env python3
"""Leader kill -9 to the next acknowledged write, as a client of a follower sees it.

    scripts/failover.py ldap://127.0.0.1:FOLLOWER_PORT LEADER_PID [--seconds 8]

Needs a running cluster (`meridian cluster local`) holding seed 000 entries
(`uid=user<n>,ou=People,dc=example,dc=com`, n < 1000) and the administrator
password `secret`. One ldap3 connection sends synchronous modifies; two
seconds in, the leader's process gets SIGKILL; the script prints the gap from
the kill to the next acknowledged modify. The cluster keeps running without
the killed node: restart it before the next run.
"""
import argparse
import os
import signal
import time

import ldap3

parser = argparse.ArgumentParser()
parser.add_argument("url")
parser.add_argument("leader_pid", type=int)
parser.add_argument("--seconds", type=float, default=8)
args = parser.parse_args()

conn = ldap3.Connection(ldap3.Server(args.url), "cn=admin,dc=example,dc=com", "secret",
                        auto_bind=True, receive_timeout=30)
acks = []
stop = time.time() + args.seconds
killed_at = None
n = 0
while time.time() < stop:
    n += 1
    ok = conn.modify(f"uid=user{n % 1000},ou=People,dc=example,dc=com",
                     {"description": [(ldap3.MODIFY_REPLACE, [f"f{n}"])]})
    now = time.time()
    if ok:
        acks.append(now)
    if killed_at is None and now > stop - args.seconds + 2:
        os.kill(args.leader_pid, signal.SIGKILL)
        killed_at = time.time()
after = [t for t in acks if t > killed_at]
before = [t for t in acks if t <= killed_at]
if not after:
    raise SystemExit(f"no write acknowledged in the {stop - killed_at:.1f} s after the kill")
print(f"acks {len(acks)}; last before the kill {1000 * (killed_at - before[-1]):.1f} ms before it; "
      f"first after it {1000 * (after[0] - killed_at):.0f} ms after it")
