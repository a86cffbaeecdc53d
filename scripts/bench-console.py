#!/usr/bin/env python3
"""Issue 49's benchmarks of the console's own cost.

1. A job's throughput three ways, interleaved over --rounds rounds so the
   machine's noise falls on all alike: `meridian bench run` on the
   command line (no console); the same scenario as a console job nobody
   watches; and a console job watched live by headless chromium on the
   jobs page (its event stream and charts redrawn each second).
2. The results list with 1,000 runs: the console's start (reading every
   report), `GET /api/runs` (median of 10), and the results page in
   chromium from navigation to its 1,000 rows drawn.

    scripts/bench-console.py target/release/meridian --entries 100000

Meridian runs with its default configuration on a private 127.0.0.1
port, loaded with seed 000's entries by `meridian import`; the scenario is
seed 000's 80/20 search and modify mix (bench/scenarios).
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ADMIN = "cn=admin,dc=example,dc=com"
PASSWORD = "secret"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCENARIO_ID = "seed000-mixed-80-20"
SCENARIO = os.path.join(ROOT, "bench", "scenarios", SCENARIO_ID + ".toml")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(binary, work, entries):
    ldif = os.path.join(work, "seed000.ldif")
    subprocess.run([binary, "gen", "--model", "seed000", "-n", str(entries), "-o", ldif], check=True,
                   stderr=subprocess.DEVNULL)
    data = os.path.join(work, "data")
    subprocess.run([binary, "import", "--data-dir", data, "-i", ldif], check=True, stdout=subprocess.DEVNULL)
    env = dict(os.environ, MERIDIAN_ADMIN_PASSWORD=PASSWORD)
    env.pop("RUST_LOG", None)
    server = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", data],
                              stdout=subprocess.PIPE, stderr=open(os.path.join(work, "meridian.log"), "w"),
                              env=env, text=True)
    for line in server.stdout:
        if line.startswith("meridian listening on "):
            return server, line.split()[-1]
    sys.exit("meridian did not start")


def start_console(binary, ldap, data):
    port = free_port()
    started = time.monotonic()
    proc = subprocess.Popen([binary, "console", "--listen", f"127.0.0.1:{port}", "--url", f"ldap://{ldap}",
                             "--data", data, "--scenarios", os.path.join(ROOT, "bench", "scenarios")],
                            stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    if not line.startswith("meridian console on "):
        sys.exit(f"the console did not start: {line}")
    return proc, f"http://127.0.0.1:{port}", time.monotonic() - started


class Http:
    def __init__(self, base):
        self.base, self.cookie, self.csrf = base, None, None

    def call(self, method, path, body=None):
        headers = {"Content-Type": "application/json"}
        if self.cookie:
            headers["Cookie"] = self.cookie
        if self.csrf:
            headers["X-CSRF-Token"] = self.csrf
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(request, timeout=120) as answer:
            return answer.read().decode(), answer.headers

    def sign_in(self):
        body, headers = self.call("POST", "/api/session", {"dn": ADMIN, "password": PASSWORD})
        self.cookie = headers["Set-Cookie"].split(";")[0]
        self.csrf = json.loads(body)["csrf"]
        return self


def cli_run(binary, ldap, work, args, tag):
    report = os.path.join(work, f"cli-{tag}.json")
    subprocess.run([binary, "bench", "run", SCENARIO, "--url", f"ldap://{ldap}", "-w", PASSWORD, "-q",
                    "--json", report, "--keys", str(args.entries - 1), "--duration", str(args.duration),
                    "--warmup", str(args.warmup)], check=True, stdout=subprocess.DEVNULL)
    with open(report) as f:
        return json.load(f)["runs"][0]["total"]["rate"]


def console_run(http, ldap, args, driver=None, console_url=None):
    body, _ = http.call("POST", "/api/jobs", {
        "scenario": SCENARIO_ID, "targets": [{"name": "meridian", "url": f"ldap://{ldap}"}],
        "bind": "scenario", "keys_max": args.entries - 1, "duration_secs": args.duration,
        "warmup_secs": args.warmup})
    job = json.loads(body)["id"]
    if driver:
        # A fresh load of the jobs page, which watches the running job.
        driver.get(f"{console_url}/?job={job}#/jobs")
    while True:
        state = json.loads(http.call("GET", f"/api/jobs/{job}")[0])["state"]
        if state["phase"] != "running":
            break
        time.sleep(0.5)
    if state["phase"] != "done":
        sys.exit(f"job {job}: {state}")
    ticks = None
    if driver:
        ticks = int(driver.find_element("id", "live-header").get_attribute("data-ticks") or 0)
    report = json.loads(http.call("GET", f"/api/runs/{state['report']}")[0])
    return report["runs"][0]["total"]["rate"], ticks


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1400,1000"]:
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


def sign_in_browser(driver, url):
    driver.get(url + "/login")
    driver.find_element("id", "password").send_keys(PASSWORD)
    driver.find_element("id", "sign-in-button").click()
    deadline = time.time() + 20
    while not signed_in(driver):
        if time.time() > deadline:
            sys.exit("the browser did not sign in")
        time.sleep(0.1)


def signed_in(driver):
    if "/login" in driver.current_url:
        return False
    who = driver.find_elements("id", "who")
    return bool(who) and who[0].text == ADMIN


def results_list(binary, ldap, work, template_report, runs):
    data = os.path.join(work, "many")
    os.makedirs(os.path.join(data, "runs"))
    with open(template_report) as f:
        report = json.load(f)
    base = report["runs"][0]["started_unix"]
    for i in range(runs):
        report["runs"][0]["started_unix"] = base - i * 60
        report["runs"][0]["label"] = f"run {i}"
        with open(os.path.join(data, "runs", f"r{i:06d}.json"), "w") as f:
            json.dump(report, f)
    proc, url, startup = start_console(binary, ldap, data)
    try:
        http = Http(url).sign_in()
        times = []
        for _ in range(10):
            started = time.monotonic()
            rows = json.loads(http.call("GET", "/api/runs")[0])
            times.append(time.monotonic() - started)
        assert len(rows) == runs, len(rows)
        driver = browser()
        try:
            sign_in_browser(driver, url)
            pages, inner = [], []
            rows_drawn = "return document.querySelectorAll('#results-table tr.run-row').length"
            for i in range(5):
                # A full load of the page (its scripts, the session, the
                # list); the browser's own clock from the navigation's
                # start to the rows drawn (polled every 5 ms).
                driver.get(f"{url}/?load={i}#/results")
                while driver.execute_script(rows_drawn) < runs:
                    time.sleep(0.005)
                pages.append(driver.execute_script("return performance.now()"))
                inner.append(float(driver.find_element("id", "results-list").get_attribute("data-load-ms")))
            return startup, statistics.median(times), statistics.median(pages), statistics.median(inner)
        finally:
            driver.quit()
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary")
    parser.add_argument("--entries", type=int, default=100000)
    parser.add_argument("--duration", type=float, default=15)
    parser.add_argument("--warmup", type=float, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--results-only", action="store_true", help="only the results list's figures")
    args = parser.parse_args()
    binary = os.path.abspath(args.binary)
    with tempfile.TemporaryDirectory(prefix="meridian-bench-console-") as work:
        server, ldap = start_server(binary, work, args.entries)
        try:
            measure(binary, ldap, work, args)
        finally:
            server.terminate()
            server.wait(timeout=60)


def measure(binary, ldap, work, args):
    console, url, _ = start_console(binary, ldap, os.path.join(work, "console"))
    try:
        if args.results_only:
            args.duration, args.warmup, args.rounds = 2, 0, 0
            cli_run(binary, ldap, work, args, 0)
        http = Http(url).sign_in()
        driver = browser()
        try:
            sign_in_browser(driver, url)
            rates = {"command line": [], "console, unwatched": [], "console, watched in chromium": []}
            for r in range(args.rounds):
                rates["command line"].append(cli_run(binary, ldap, work, args, r))
                rates["console, unwatched"].append(console_run(http, ldap, args)[0])
                rate, ticks = console_run(http, ldap, args, driver, url)
                rates["console, watched in chromium"].append(rate)
                print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:,.0f}/s" for k, v in rates.items())
                      + f" (the page drew {ticks} ticks)", flush=True)
        finally:
            driver.quit()
        for name, values in rates.items() if args.rounds else []:
            print(f"{name}: median {statistics.median(values):,.0f} operations/s "
                  f"({', '.join(f'{v:,.0f}' for v in values)})")
    finally:
        console.terminate()
        console.wait(timeout=20)
    startup, api, page, inner = results_list(binary, ldap, work, os.path.join(work, "cli-0.json"), args.runs)
    print(f"{args.runs} runs: console start {startup:.2f} s; GET /api/runs median {api * 1000:.1f} ms; "
          f"the results page loaded in chromium, median {page:.0f} ms from navigation to {args.runs} rows "
          f"drawn (of which the list's fetch and drawing {inner:.0f} ms)")

if __name__ == "__main__":
    main()
