#!/usr/bin/env python3
"""Seed 000's geo-replicated runs on one machine, with an HTML report.

    scripts/seed000-geo.py atlantic [--scenario modify|mixed-50-50] [--out DIR]
    scripts/seed000-geo.py world --conflicts first-wins --keys 99 [--out DIR]
    scripts/seed000-geo.py atlantic --partitioned [--out DIR]

Starts `meridian cluster local` behind the WAN emulator with the run's
topology (`contrib/topologies/seed000-<run>.toml`), loads seed 000
entries, runs `meridian bench` at every site at once (each on its site's
client link), SIGKILLs the leader partway through and starts it again,
then runs `meridian verify --cluster-dir`. Writes DIR/report.html:
throughput per site over time, latency percentiles per site and
operation, conflicts (won, refused, rate), the failover gap, bytes
between sites per modify, the verify result, and seed 000's published
figures beside ours. With --partitioned, each site has a partition of
its own (`ou=<site>,dc=example,dc=com`, led from that site's node, as
seed 000 masters each object space at one site) holding its own copy
of the entries, and each site's clients write there. Needs a release build (`cargo build --release`);
about two minutes a run. Figures from a run with everything on one
machine measure the software, not the seed's fifteen servers.
"""
import argparse
import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ADMIN = "cn=admin,dc=example,dc=com"
PASSWORD = "secret"

# Seed 000's published figures (../shared/seeds/000_*), for the table.
SEED = {
    "atlantic": [
        ("replicated updates/s, 3 sites", "more than 1,000,000 (15 servers)"),
        ("updates/s per vCPU", "8,700"),
        ("conflict rate", "0.1 % (random writes over a large entry set)"),
    ],
    "world": [
        ("random writes/s, 7 sites", "more than 108,000"),
        ("conflict rate", "up to almost 16 % (2 million objects per replica)"),
        ("replicas after the storm", "identical"),
    ],
}


def meridian(*args, **kw):
    exe = os.path.join(ROOT, "target", "release", "meridian")
    return subprocess.run([exe, *args], capture_output=True, text=True, **kw)


def cluster_status(url, key):
    """One `key: value` line of `meridian cluster status` at `url` (no
    LDAP client library needed)."""
    out = meridian("cluster", "status", "--url", url, "-D", ADMIN, "-w", PASSWORD,
                   "--timeout-secs", "10").stdout
    match = re.search(rf"^{key}:\s*(.*)$", out, re.M)
    return match.group(1).strip() if match else None


def partition_leaders(url):
    """Each partition's leader ID as `meridian cluster status` at `url`
    names it, by suffix (one partition: under the key "")."""
    out = meridian("cluster", "status", "--url", url, "-D", ADMIN, "-w", PASSWORD,
                   "--timeout-secs", "10").stdout
    leaders, partition = {}, ""
    for line in out.splitlines():
        if line.startswith("partition: "):
            partition = line[len("partition: "):].strip()
        elif m := re.match(r"leader:\s*(\d+)", line):
            leaders[partition] = int(m.group(1))
    return leaders


def site_suffix(site):
    return f"ou={site},dc=example,dc=com"


def partitioned_copy(data, site, path):
    """The entries of `data` under the site's own partition: its suffix
    entry, then every account moved from ou=People to it."""
    with open(data) as f:
        records = f.read().split("\n\n")
    with open(path, "w") as out:
        out.write(f"dn: {site_suffix(site)}\nobjectClass: organizationalUnit\nou: {site}\n\n")
        for record in records:
            if record.startswith("dn: uid="):
                out.write(record.replace(",ou=People,dc=example,dc=com",
                                         "," + site_suffix(site), 1) + "\n\n")


def node_pid(cluster_dir, node):
    """The PID of `meridian serve` for node `node` of the cluster."""
    config = os.path.join(cluster_dir, f"node{node}", "config.toml")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().split(b"\0")
        except OSError:
            continue
        if b"serve" in cmdline and config.encode() in cmdline:
            return int(pid)
    return None


def peer_bytes(nodes):
    """Bytes each node has sent its peers since it started, by port."""
    sent = {}
    for port in nodes:
        value = cluster_status(f"ldap://127.0.0.1:{port}", "peer bytes sent") or ""
        m = re.match(r"(\d+) \((\d+) before compression\)", value)
        sent[port] = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    return sent


def chart(series, width=720, height=240):
    """An SVG line chart of {name: [per second]}, axis ticks rounded."""
    longest = max((len(v) for v in series.values()), default=1) or 1
    top = max((max(v) for v in series.values() if v), default=1) or 1
    step = 10 ** max(len(str(int(top))) - 1, 0)
    top = ((int(top) // step) + 1) * step
    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]
    parts = [f'<svg width="{width + 80}" height="{height + 50}" xmlns="http://www.w3.org/2000/svg">']
    for i in range(5):
        y = 10 + height - height * i / 4
        parts.append(f'<line x1="60" x2="{60 + width}" y1="{y}" y2="{y}" stroke="#ddd"/>')
        parts.append(f'<text x="55" y="{y + 4}" text-anchor="end" font-size="11">{int(top * i / 4):,}</text>')
    for t in range(0, longest + 1, max(longest // 6, 1)):
        x = 60 + width * t / longest
        parts.append(f'<text x="{x}" y="{height + 28}" text-anchor="middle" font-size="11">{t} s</text>')
    for n, (name, values) in enumerate(series.items()):
        points = " ".join(f"{60 + width * i / longest:.1f},{10 + height - height * v / top:.1f}"
                          for i, v in enumerate(values))
        colour = colours[n % len(colours)]
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{points}"/>')
        parts.append(f'<text x="{70 + 110 * n}" y="{height + 45}" font-size="12" fill="{colour}">{html.escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def failover_gap(series, killed_at):
    """The longest run of seconds after the kill in which the sites
    together did less than a tenth of their median rate before it."""
    totals = [sum(v[i] for v in series.values() if i < len(v))
              for i in range(max(len(v) for v in series.values()))]
    before = sorted(totals[: max(killed_at, 1)]) or [0]
    floor = before[len(before) // 2] / 10
    gap = longest = 0
    for value in totals[killed_at:]:
        gap = gap + 1 if value < floor else 0
        longest = max(longest, gap)
    return longest


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", choices=["atlantic", "world"])
    parser.add_argument("--scenario", default="modify", choices=["modify", "mixed-50-50"])
    parser.add_argument("--conflicts", default="last-writer-wins",
                        choices=["last-writer-wins", "first-wins"])
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--keys", type=int, help="largest key written (default: every entry)")
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--depth", type=int, default=1000)
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--kill-at", type=int, default=12, help="seconds into the run; 0: no kill")
    parser.add_argument("--preferred-leader", type=int, default=1)
    parser.add_argument("--cluster-key", action="append", default=[], metavar="KEY=VALUE",
                        help="another [cluster] key of every node (cluster local --cluster-key)")
    parser.add_argument("--partitioned", action="store_true",
                        help="a partition per site, led there; each site writes its own")
    parser.add_argument("--out", default="seed000-run")
    args = parser.parse_args()
    keys = args.keys if args.keys is not None else args.entries - 1

    out = os.path.abspath(args.out)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    cluster_dir = os.path.join(out, "cluster")
    topology = os.path.join(ROOT, "contrib", "topologies", f"seed000-{args.run}.toml")
    data = os.path.join(out, "entries.ldif")
    meridian("gen", "--model", "seed000", "-n", str(args.entries), "-o", data, check=True)

    env = dict(os.environ, MERIDIAN_ADMIN_PASSWORD=PASSWORD)
    exe = os.path.join(ROOT, "target", "release", "meridian")
    log = open(os.path.join(out, "cluster-local.log"), "w")
    # Nodes are numbered in the order of the topology's sites.
    with open(topology, "rb") as f:
        site_nodes = [site["name"] for site in tomllib.load(f)["sites"]
                      for _ in range(site.get("nodes", 1))]
    partitions = []
    if args.partitioned:
        partitions = [(site_suffix(site), node) for node, site in enumerate(site_nodes, start=1)
                      if site not in site_nodes[:node - 1]]
    cluster = subprocess.Popen(
        [exe, "cluster", "local", "--topology", topology, "--data-dir", cluster_dir,
         "--conflicts", args.conflicts, "--preferred-leader", str(args.preferred_leader)]
        + [arg for suffix, node in partitions for arg in ("--partition", f"{suffix}={node}")]
        + [arg for key in args.cluster_key for arg in ("--cluster-key", key)],
        stdout=subprocess.PIPE, stderr=log, text=True, env=env, start_new_session=True)
    sites, ports = [], []
    try:
        for line in cluster.stdout:
            log.write(line)
            log.flush()
            if m := re.match(r"node (\d+): meridian listening on 127\.0\.0\.1:(\d+)", line):
                ports.append(int(m.group(2)))
            if m := re.match(r"node (\d+) at (\S+): its site's clients connect to (\S+)", line):
                sites.append((int(m.group(1)), m.group(2), m.group(3)))
            if "cluster of" in line and "up" in line:
                continue
            if sites and len(sites) == len(ports):
                break
        ports.sort()
        url = f"ldap://127.0.0.1:{ports[0]}"
        # Until a leader is known and the preferred one leads, in every
        # partition.
        want = {"": args.preferred_leader} if not partitions else {
            "dc=example,dc=com": args.preferred_leader, **dict(partitions)}
        deadline = time.time() + 60
        while time.time() < deadline:
            if partition_leaders(url) == want:
                break
            time.sleep(1)
        imported = meridian("import", "--online", url, "-D", ADMIN, "-w", PASSWORD, "-i", data)
        print(imported.stdout.strip() or imported.stderr.strip())
        scenario = os.path.join(ROOT, "bench", "scenarios", f"seed000-{args.scenario}.toml")
        scenarios = {}
        for node, site, _ in sites:
            if not partitions:
                scenarios[node] = scenario
                continue
            copy = os.path.join(out, f"entries-{site}.ldif")
            partitioned_copy(data, site, copy)
            imported = meridian("import", "--online", url, "-D", ADMIN, "-w", PASSWORD, "-i", copy)
            print(imported.stdout.strip() or imported.stderr.strip())
            scenarios[node] = os.path.join(out, f"scenario-{site}.toml")
            with open(scenario) as f, open(scenarios[node], "w") as to:
                to.write(f.read().replace(",ou=People,dc=example,dc=com", "," + site_suffix(site)))

        bytes_before = peer_bytes(ports)
        benches = []
        for node, site, site_url in sites:
            report = os.path.join(out, f"site{node}.json")
            benches.append((node, site, report, subprocess.Popen(
                [exe, "bench", "run", scenarios[node], "--url", site_url, "-D", ADMIN, "-w", PASSWORD,
                 "--keys", str(keys), "--sessions", str(args.sessions), "--depth", str(args.depth),
                 "--duration", str(args.seconds), "--warmup", "0", "--json", report],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
        killed, bytes_at_kill = None, {}
        if args.kill_at:
            time.sleep(args.kill_at)
            leader = cluster_status(url, "leader")
            killed = int(leader.split()[0]) if leader else None
            pid = node_pid(cluster_dir, killed) if killed else None
            if pid:
                # Its counter starts again from 0 when it restarts.
                bytes_at_kill = peer_bytes(ports)
                os.kill(pid, signal.SIGKILL)
                print(f"node {killed} (the leader) killed at {args.kill_at} s")
                time.sleep(3)
                config = os.path.join(cluster_dir, f"node{killed}", "config.toml")
                serve_log = open(os.path.join(cluster_dir, f"node{killed}", "serve.log"), "a")
                subprocess.Popen([exe, "serve", "--config", config], stdout=subprocess.DEVNULL,
                                 stderr=serve_log, env=env, start_new_session=True)
        for _, _, _, bench in benches:
            bench.wait()
        bytes_after = peer_bytes(ports)
        verify = meridian("verify", "--cluster-dir", cluster_dir, "--wait", "120")
    finally:
        os.killpg(cluster.pid, signal.SIGTERM)
        if killed:
            pid = node_pid(cluster_dir, killed)
            if pid:
                os.kill(pid, signal.SIGTERM)
        cluster.wait(timeout=60)

    # The report.
    rows, series, modifies_ok, refused = [], {}, 0, 0
    for node, site, report, _ in benches:
        with open(report) as f:
            run = json.load(f)["runs"][0]
        series[site] = run["total"]["per_second"]
        for op in run["operations"]:
            lat = op["latency_us"]
            rows.append((site, op["name"], op["count"], op["rate"], lat["p50"] / 1000,
                         lat["p90"] / 1000, lat["p99"] / 1000, op["errors"],
                         ", ".join(f"{k} {v}" for k, v in sorted(op["codes"].items()))))
            if op["name"] == "modify":
                modifies_ok += op["codes"].get("success", 0)
                refused += op["codes"].get("assertionFailed", 0)
    total_rate = sum(r[3] for r in rows)
    attempted = modifies_ok + refused
    gap = failover_gap(series, args.kill_at) if killed else None
    sent = [0, 0]
    for node, port in enumerate(ports, start=1):
        for i in range(2):
            if node == killed and bytes_at_kill:
                sent[i] += bytes_at_kill[port][i] - bytes_before[port][i] + bytes_after[port][i]
            else:
                sent[i] += bytes_after[port][i] - bytes_before[port][i]
    per_modify = [s / modifies_ok if modifies_ok else 0 for s in sent]
    cpus = os.cpu_count() or 1
    ours = [
        ("operations/s, all sites", f"{total_rate:,.0f}"),
        ("operations/s per vCPU (servers, clients and emulator on it)", f"{total_rate / cpus:,.0f}"),
        ("conflict rate (refused / modifies)",
         f"{100 * refused / attempted:.2f} % ({refused:,} refused, {modifies_ok:,} won)" if attempted else "-"),
        ("failover gap after the leader's SIGKILL", f"{gap} s" if gap is not None else "no kill"),
        ("bytes between nodes per acknowledged modify, every peer message: LZ4 as sent / uncompressed"
         " (seed 000 compressed with gzip level 6)",
         f"{per_modify[0]:,.0f} / {per_modify[1]:,.0f}"),
        ("verify", html.escape((verify.stdout + verify.stderr).strip().splitlines()[-1]
                               if (verify.stdout + verify.stderr).strip() else "no output")),
    ]
    page = [
        "<!doctype html><meta charset=utf-8><title>seed 000 run</title>",
        "<style>body{font-family:sans-serif;max-width:1000px;margin:auto}"
        "td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}"
        "td:first-child,th:first-child{text-align:left}</style>",
        f"<h1>Seed 000, {args.run}: {html.escape(args.scenario)}, {html.escape(args.conflicts)}</h1>",
        f"<p>{len(sites)} sites ({', '.join(s for _, s, _ in sites)}), {args.entries:,} entries, "
        f"keys 0-{keys}, {args.sessions} sessions x {args.depth} outstanding per site, "
        f"{args.seconds} s; leader preferred at node {args.preferred_leader}"
        + (", each site writing its own partition, led there" if partitions else "")
        + (f", node {killed} killed at {args.kill_at} s and restarted 3 s later" if killed else "")
        + f"; {time.strftime('%Y-%m-%d %H:%M')} on {cpus} vCPUs.</p>",
        "<h2>Throughput per site (operations/s)</h2>", chart(series),
        "<h2>Latency per site and operation</h2><table><tr><th>site</th><th>operation</th>"
        "<th>count</th><th>ops/s</th><th>p50 ms</th><th>p90 ms</th><th>p99 ms</th>"
        "<th>errors</th><th>result codes</th></tr>",
    ]
    for r in rows:
        page.append(f"<tr><td>{r[0]}</td><td>{r[1]}</td><td>{r[2]:,}</td><td>{r[3]:,.0f}</td>"
                    f"<td>{r[4]:.1f}</td><td>{r[5]:.1f}</td><td>{r[6]:.1f}</td><td>{r[7]:,}</td>"
                    f"<td>{html.escape(r[8])}</td></tr>")
    page.append("</table><h2>This run</h2><table>")
    page += [f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in ours]
    page.append("</table><h2>Seed 000 (published)</h2><table>")
    page += [f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in SEED[args.run]]
    page.append("</table>")
    with open(os.path.join(out, "report.html"), "w") as f:
        f.write("\n".join(page))
    for k, v in ours:
        print(f"{k}: {html.unescape(v)}")
    print(f"report: {os.path.join(out, 'report.html')}")
    return 0 if verify.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
