"""`meridian console` in a real browser (Debian's chromium driven headless
through chromium-driver and Selenium) and over plain HTTP: sign in, upload
a scenario, run jobs against a real server and watch the live chart move,
find the runs in the results and compare them, browse to an entry and
change it, sign out; and the security rules: nothing answers without a
session, a forged cross-site request is refused, uploads are bounded and
checked, and no password is ever shown. Screenshots are kept in
target/console-screenshots (or $MERIDIAN_ARTIFACTS)."""

import contextlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
from ldap3 import SYNC, Connection, Server

from conftest import ADMIN_DN, ADMIN_PASSWORD, ROOT, connect, meridian_binary, serve

BASE = "dc=example,dc=com"
PEOPLE = "ou=People," + BASE
USER_PASSWORD = "user-secret-pw"
JOB_PASSWORD = "job-secret-pw"
SHOTS = os.environ.get("MERIDIAN_ARTIFACTS", os.path.join(ROOT, "target", "console-screenshots"))

SCENARIO = """name = "console-test"
description = "Searches of seed 000's users by DN, for the console's tests."
[target]
url = "ldap://127.0.0.1:1"
[load]
sessions = 2
depth = 4
duration_secs = 5
warmup_secs = 1
[keys]
max = 19
[[operation]]
name = "search"
kind = "search"
dn = "uid=user{key},ou=People,dc=example,dc=com"
scope = "base"
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load_people(host, port):
    conn = connect(host, port, SYNC)
    assert conn.add(BASE, ["dcObject", "organization"], {"dc": "example", "o": "Example"}), conn.result
    assert conn.add(PEOPLE, ["organizationalUnit"], {"ou": "People"}), conn.result
    for i in range(20):
        attrs = {"uid": f"user{i}", "cn": f"User {i}", "sn": f"{i}", "userPassword": USER_PASSWORD}
        assert conn.add(f"uid=user{i},{PEOPLE}", ["inetOrgPerson"], attrs), conn.result
    return conn


@contextlib.contextmanager
def console(ldap_port, metrics_port):
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="meridian-console-") as data:
        proc = subprocess.Popen(
            [meridian_binary(), "console", "--listen", f"127.0.0.1:{port}",
             "--url", f"ldap://127.0.0.1:{ldap_port}", "--metrics-url", f"http://127.0.0.1:{metrics_port}",
             "--data", data, "--scenarios", os.path.join(ROOT, "bench", "scenarios")],
            stderr=subprocess.PIPE, text=True)
        try:
            line = proc.stderr.readline()
            assert line.startswith("meridian console on "), line
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            proc.wait(timeout=20)


@pytest.fixture(scope="module")
def setup():
    metrics_port = free_port()
    config = f'[server]\nmetrics_listen = "127.0.0.1:{metrics_port}"\n'
    with serve(config, with_pid=True) as (host, port, pid):
        conn = load_people(host, port)
        with console(port, metrics_port) as url:
            yield {"url": url, "ldap": conn, "ldap_port": port, "pid": pid}


class Http:
    """A client of the console's API with its own cookie."""

    def __init__(self, base):
        self.base = base
        self.cookie = None
        self.csrf = None

    def call(self, method, path, body=None, headers=None, raw=None):
        headers = dict(headers or {})
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            headers.setdefault("Content-Type", "application/json")
        if self.cookie:
            headers["Cookie"] = self.cookie
        if self.csrf and "X-CSRF-Token" not in headers and method != "GET":
            headers["X-CSRF-Token"] = self.csrf
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, answer.read().decode(), answer.headers
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(), e.headers

    def sign_in(self, dn=ADMIN_DN, password=ADMIN_PASSWORD):
        status, body, headers = self.call("POST", "/api/session", {"dn": dn, "password": password})
        assert status == 200, body
        cookie = headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie, cookie
        self.cookie = cookie.split(";")[0]
        self.csrf = json.loads(body)["csrf"]
        return self


def wait_job(http, job_id, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        status, body, _ = http.call("GET", f"/api/jobs/{job_id}")
        assert status == 200, body
        job = json.loads(body)
        if job["state"]["phase"] != "running":
            return job
        time.sleep(0.3)
    raise AssertionError(f"job {job_id} still running after {timeout} s")


# ---------------------------------------------------------------- security


PROTECTED = ["/", "/assets/app.js", "/assets/chart.js", "/assets/app.css", "/api/session", "/api/runs",
             "/api/runs/r1-0", "/api/runs/r1-0/report", "/api/runs/r1-0/csv", "/api/compare?runs=r1-0.0",
             "/api/capacity?runs=r1-0.0", "/api/jobs", "/api/jobs/1", "/api/jobs/1/events", "/api/scenarios",
             "/api/directory", "/api/directory/metrics", "/api/entries", f"/api/entry?dn={BASE}"]


def test_nothing_answers_without_a_session(setup):
    anonymous = Http(setup["url"])
    for path in PROTECTED:
        status, body, headers = anonymous.call("GET", path)
        if path == "/":
            assert status in (303, 302, 307) or "sign-in" in body, (path, status)
        else:
            assert status == 401, (path, status, body)
            assert "sign in" in body
    for method, path in [("POST", "/api/jobs"), ("POST", "/api/scenarios"), ("POST", "/api/entry/modify"),
                         ("POST", "/api/jobs/1/stop"), ("DELETE", "/api/session")]:
        status, _, _ = anonymous.call(method, path, {})
        assert status == 401, (method, path, status)
    # The sign-in page itself, and only it, answers.
    status, body, _ = anonymous.call("GET", "/login")
    assert status == 200 and 'id="sign-in"' in body


def test_a_wrong_password_and_an_anonymous_bind_do_not_sign_in(setup):
    http = Http(setup["url"])
    status, body, _ = http.call("POST", "/api/session", {"dn": ADMIN_DN, "password": "wrong"})
    assert status == 401 and "sign-in refused" in body, body
    status, body, _ = http.call("POST", "/api/session", {"dn": ADMIN_DN, "password": ""})
    assert status == 400, body


def test_a_forged_cross_site_request_is_refused(setup):
    http = Http(setup["url"]).sign_in()
    form = urllib.parse.urlencode({"scenario": "seed000-modify"}).encode()
    # What a page on another site can make a browser send: a form post
    # with the cookie (were it not SameSite) and no CSRF header.
    status, body, _ = http.call("POST", "/api/jobs", raw=form, headers={
        "Content-Type": "application/x-www-form-urlencoded", "X-CSRF-Token": "", "Origin": "http://evil.example"})
    assert status == 403, (status, body)
    status, body, _ = http.call("POST", "/api/jobs", {"scenario": "seed000-modify"},
                                headers={"X-CSRF-Token": "0" * 64})
    assert status == 403, (status, body)
    status, body, _ = http.call("POST", "/api/entry/modify",
                                {"dn": BASE, "changes": [{"op": "replace", "attribute": "o", "values": ["x"]}]},
                                headers={"X-CSRF-Token": ""})
    assert status == 403, (status, body)
    # A sign-in posted from another site.
    status, body, _ = Http(setup["url"]).call(
        "POST", "/api/session", {"dn": ADMIN_DN, "password": ADMIN_PASSWORD}, headers={"Origin": "http://evil.example"})
    assert status == 403, body
    entry = setup["ldap"]
    entry.search(BASE, "(objectClass=*)", search_scope="BASE", attributes=["o"])
    assert entry.entries[0].o.value == "Example"


def test_uploads_are_bounded_and_checked(setup):
    http = Http(setup["url"]).sign_in()
    status, body, _ = http.call("POST", "/api/scenarios", {"name": "big", "text": "#" * (65 << 10)})
    assert status == 413, body
    status, body, _ = http.call("POST", "/api/scenarios", {"name": "broken", "text": "name = 1\n[[operation]]\n"})
    assert status == 400 and "not a valid scenario" in body, body
    status, body, _ = http.call("POST", "/api/scenarios", {"name": "../escape", "text": SCENARIO})
    assert status == 400, body
    status, body, _ = http.call("POST", "/api/scenarios", {"name": "seed000-modify", "text": SCENARIO})
    assert status == 409, body
    # Beyond the request limit altogether.
    status, _, _ = http.call("POST", "/api/scenarios", {"name": "huge", "text": "#" * (1 << 20)})
    assert status == 413
    status, body, _ = http.call("GET", "/api/scenarios")
    names = [s["id"] for s in json.loads(body)]
    assert "big" not in names and "broken" not in names and "seed000-modify" in names


def test_no_password_is_ever_shown(setup):
    http = Http(setup["url"]).sign_in()
    status, body, _ = http.call("POST", "/api/scenarios", {"name": "secretive", "text": SCENARIO.replace(
        'url = "ldap://127.0.0.1:1"', f'url = "ldap://127.0.0.1:1"\nbind_dn = "{ADMIN_DN}"\npassword = "scenario-pw-123"')})
    assert status == 201, body
    status, body, _ = http.call("POST", "/api/jobs", {
        "scenario": "secretive", "bind": "dn", "bind_dn": ADMIN_DN, "password": ADMIN_PASSWORD,
        "duration_secs": 1, "warmup_secs": 0,
        "targets": [{"name": "m", "url": f"ldap://127.0.0.1:{setup['ldap_port']}"}]})
    assert status == 201, body
    job = wait_job(http, json.loads(body)["id"])
    assert job["state"]["phase"] == "done", job
    report = job["state"]["report"]
    seen = []
    for path in ["/api/jobs", f"/api/jobs/{job['id']}", "/api/scenarios", "/api/runs", f"/api/runs/{report}",
                 f"/api/runs/{report}/report", f"/api/runs/{report}/csv", "/api/session",
                 "/api/entry?dn=" + urllib.parse.quote(f"uid=user1,{PEOPLE}"), "/api/entries?base="
                 + urllib.parse.quote(PEOPLE) + "&scope=one&attributes=*"]:
        status, body, _ = http.call("GET", path)
        assert status == 200, (path, status, body)
        seen.append(body)
    everything = "\n".join(seen)
    for secret in [ADMIN_PASSWORD, USER_PASSWORD, "scenario-pw-123", "userPassword"]:
        assert secret not in everything, secret


def start_job(http, setup, **request):
    request.setdefault("scenario", "api-test")
    request.setdefault("targets", [{"name": "m", "url": f"ldap://127.0.0.1:{setup['ldap_port']}"}])
    request.setdefault("bind", "me")
    status, body, _ = http.call("POST", "/api/jobs", request)
    assert status == 201, body
    return json.loads(body)["id"]


def test_jobs_stop_sweep_and_fit_the_capacity_model_through_the_api(setup):
    http = Http(setup["url"]).sign_in()
    status, body, _ = http.call("POST", "/api/scenarios", {"name": "api-test", "text": SCENARIO})
    assert status == 201, body
    # Stopped early: what was measured is kept, over the seconds measured.
    job = start_job(http, setup, duration_secs=120, warmup_secs=0)
    status, body, _ = http.call("POST", "/api/jobs", {"scenario": "api-test"})
    assert status == 409, "one job at a time"
    time.sleep(2.5)
    status, body, _ = http.call("POST", f"/api/jobs/{job}/stop")
    assert status == 200, body
    stopped = wait_job(http, job, timeout=30)
    assert stopped["state"]["phase"] == "stopped", stopped
    status, body, _ = http.call("GET", f"/api/runs/{stopped['state']['report']}")
    run = json.loads(body)["runs"][0]
    assert 1.0 <= run["elapsed_secs"] < 10.0 and run["total"]["count"] > 0, run["elapsed_secs"]
    # A sweep: one run per value, kept as one report.
    job = wait_job(http, start_job(http, setup, duration_secs=1, warmup_secs=0, sweep="sessions=1,2"))
    assert job["state"]["phase"] == "done", job
    status, body, _ = http.call("GET", f"/api/runs/{job['state']['report']}")
    report = json.loads(body)
    assert report["kind"] == "sweep" and [r["sessions"] for r in report["runs"]] == [1, 2]
    # Open-loop runs that read the server's CPU, fitted into the model.
    ids = []
    for rate in (200, 400):
        job = wait_job(http, start_job(http, setup, duration_secs=2, warmup_secs=0, rate=rate,
                                       server_pid=setup["pid"]))
        assert job["state"]["phase"] == "done", job
        ids.append(job["state"]["report"] + ".0")
    status, body, _ = http.call("GET", "/api/capacity?" + urllib.parse.urlencode(
        {"runs": ",".join(ids), "profile": "search:2", "cpus": 2}))
    assert status == 200, body
    model = json.loads(body)
    assert [len(o["points"]) for o in model["operations"]] == [2], model
    assert model["operations"][0]["per_user"] == 2 and model["cpus"] == 2
    # Filters, CSV and JSON exports of chosen runs.
    status, body, _ = http.call("GET", "/api/runs?kind=sweep")
    assert {r["kind"] for r in json.loads(body)} == {"sweep"}
    status, body, headers = http.call("GET", "/api/compare?format=csv&runs=" + ",".join(ids))
    assert status == 200 and headers["Content-Type"].startswith("text/csv"), body
    assert body.splitlines()[0].startswith("label,scenario,target") and len(body.splitlines()) == 5
    status, body, _ = http.call("GET", "/api/compare?format=json&runs=" + ",".join(ids))
    assert [r["offered_rate"] for r in json.loads(body)["runs"]] == [200, 400]
    status, body, _ = http.call("GET", "/api/compare?runs=" + ",".join(ids))
    assert 'class="side-by-side"' in body, "one table of the runs compared"
    status, body, _ = http.call("GET", "/api/compare?runs=nope.0")
    assert status == 404, body


def test_the_console_over_https(setup, tmp_path):
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    port = free_port()
    proc = subprocess.Popen([meridian_binary(), "console", "--listen", f"127.0.0.1:{port}",
                             "--url", f"ldap://127.0.0.1:{setup['ldap_port']}", "--data", str(tmp_path / "data"),
                             "--tls-certificate-file", str(cert), "--tls-key-file", str(key)],
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        assert line.startswith(f"meridian console on https://127.0.0.1:{port}/"), line
        import ssl
        context = ssl.create_default_context(cafile=str(cert))
        request = urllib.request.Request(f"https://127.0.0.1:{port}/api/session", method="POST",
                                         data=json.dumps({"dn": ADMIN_DN, "password": ADMIN_PASSWORD}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, context=context, timeout=30) as answer:
            cookie = answer.headers["Set-Cookie"]
        assert "Secure" in cookie and "HttpOnly" in cookie, cookie
    finally:
        proc.terminate()
        proc.wait(timeout=20)


# ---------------------------------------------------------------- the browser


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium = shutil.which("chromium")
    driver_path = shutil.which("chromedriver")
    assert chromium and driver_path, "install Debian's chromium and chromium-driver (scripts/test.sh does)"
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1400,1000"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.implicitly_wait(0)
    os.makedirs(SHOTS, exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(driver, condition, what, timeout=30):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            value = condition(driver)
            if value:
                return value
        except Exception as e:  # an element not there yet
            last = e
        time.sleep(0.2)
    driver.save_screenshot(os.path.join(SHOTS, "failed-" + what.replace(" ", "-") + ".png"))
    raise AssertionError(f"waited {timeout} s for {what}: {last}")


def by_id(driver, name):
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, name)


def css(driver, selector):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def run_job_in_browser(driver, ldap_port, duration, label):
    from selenium.webdriver.support.ui import Select

    driver.get(driver.current_url.split("#")[0] + "#/jobs")
    wait_for(driver, lambda d: by_id(d, "job-scenario"), "the job form")
    wait_for(driver, lambda d: "console-browser" in [o.get_attribute("value") for o in
                                                     Select(by_id(d, "job-scenario")).options], "the uploaded scenario")
    Select(by_id(driver, "job-scenario")).select_by_value("console-browser")
    name = css(driver, "#job-targets .target-name")[0]
    name.clear()
    name.send_keys(label)
    url = css(driver, "#job-targets .target-url")[0]
    url.clear()
    url.send_keys(f"ldap://127.0.0.1:{ldap_port}")
    Select(by_id(driver, "job-bind")).select_by_value("me")
    duration_box = by_id(driver, "job-duration")
    duration_box.clear()
    duration_box.send_keys(str(duration))
    by_id(driver, "job-start").click()


def test_the_console_in_a_browser(setup, browser):
    driver = browser
    ldap_port = setup["ldap_port"]
    driver.get(setup["url"] + "/")
    wait_for(driver, lambda d: d.current_url.endswith("/login"), "the sign-in page")
    by_id(driver, "dn").clear()
    by_id(driver, "dn").send_keys(ADMIN_DN)
    by_id(driver, "password").send_keys(ADMIN_PASSWORD)
    driver.save_screenshot(os.path.join(SHOTS, "01-sign-in.png"))
    by_id(driver, "sign-in-button").click()
    wait_for(driver, lambda d: by_id(d, "who").text == ADMIN_DN, "signing in")

    # A scenario uploaded through the page's file input.
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(SCENARIO)
    by_id(driver, "upload-name").send_keys("console-browser")
    by_id(driver, "upload-file").send_keys(f.name)
    by_id(driver, "upload-button").click()
    os.unlink(f.name)

    # A 5-second job; the live chart moves while it runs.
    run_job_in_browser(driver, ldap_port, 5, "first")
    wait_for(driver, lambda d: int(by_id(d, "live-header").get_attribute("data-ticks") or 0) >= 2, "live ticks")
    points = lambda d: int(css(d, "#live-rate-chart polyline")[0].get_attribute("data-points"))
    early = wait_for(driver, points, "a throughput line")
    wait_for(driver, lambda d: points(d) >= early + 2, "the live chart to move")
    driver.save_screenshot(os.path.join(SHOTS, "02-job-live.png"))
    assert css(driver, "#live-codes-table"), "errors by result code shown"
    wait_for(driver, lambda d: by_id(d, "live-header").get_attribute("data-phase") == "done", "the job's end", 60)

    # A second, shorter job to compare with.
    run_job_in_browser(driver, ldap_port, 2, "second")
    wait_for(driver, lambda d: by_id(d, "live-header").get_attribute("data-phase") == "done", "the second job", 60)

    # Both runs in the results; compared on one chart and in one table.
    driver.get(setup["url"] + "/#/results")
    filter_box = wait_for(driver, lambda d: by_id(d, "results-filter"), "the results page")
    filter_box.send_keys("console-test")
    wait_for(driver, lambda d: len(css(d, "#results-table tr.run-row")) >= 2, "both runs listed")
    for row in css(driver, "#results-table tr.run-row")[:2]:
        row.find_element("css selector", "input.pick").click()
    driver.save_screenshot(os.path.join(SHOTS, "03-results.png"))
    by_id(driver, "compare-button").click()
    frame = wait_for(driver, lambda d: by_id(d, "report-frame"), "the comparison")
    driver.switch_to.frame(frame)
    page = wait_for(driver, lambda d: d.find_element("tag name", "body").text, "the comparison's report")
    assert "Throughput by run" in page and "first" in page and "second" in page, page[:500]
    assert len(driver.find_elements("css selector", "table.side-by-side tr")) == 3, "one table, a row per run"
    driver.switch_to.default_content()
    driver.save_screenshot(os.path.join(SHOTS, "04-compare.png"))

    # The directory page: the node healthy, charts drawn.
    driver.get(setup["url"] + "/#/directory")
    wait_for(driver, lambda d: "ok" in by_id(d, "nodes-table").text, "the node's health")
    driver.save_screenshot(os.path.join(SHOTS, "05-directory.png"))

    # Browse the tree to an entry and change an attribute.
    driver.get(setup["url"] + "/#/browse")
    wait_for(driver, lambda d: css(d, "#entry-tree .toggle"), "the tree")
    css(driver, "#entry-tree .toggle")[0].click()
    people = wait_for(driver, lambda d: [a for a in css(d, "#entry-tree a.tree-entry")
                                         if a.get_attribute("data-dn") == PEOPLE], "ou=People in the tree")
    people[0].find_element("xpath", "preceding-sibling::span").click()
    user = wait_for(driver, lambda d: [a for a in css(d, "#entry-tree a.tree-entry")
                                       if a.get_attribute("data-dn") == f"uid=user7,{PEOPLE}"], "user7 in the tree")
    user[0].click()
    wait_for(driver, lambda d: by_id(d, "entry-dn").text == f"uid=user7,{PEOPLE}", "user7's entry")
    # The attributes user7 does not hold are folded away until asked for.
    assert not by_id(driver, "more-attributes").get_attribute("open")
    driver.find_element("css selector", "#more-attributes summary").click()
    fields = {f.get_attribute("data-field").lower(): f for f in css(driver, ".entry-form .field")}
    assert "userpassword" not in fields, "a password is never shown"
    assert fields["entryuuid"].find_element("css selector", "input").get_attribute("disabled") is not None
    box = fields["description"].find_element("css selector", "input.value")
    box.clear()
    box.send_keys("changed in the console")
    by_id(driver, "entry-save").click()
    wait_for(driver, lambda d: "saved" in by_id(d, "entry-status").text, "the change saved")
    driver.save_screenshot(os.path.join(SHOTS, "06-entry.png"))
    conn = setup["ldap"]
    conn.search(f"uid=user7,{PEOPLE}", "(objectClass=*)", search_scope="BASE", attributes=["description"])
    assert conn.entries[0].description.value == "changed in the console"

    # The search finds an entry by a filter; its link opens it.
    by_id(driver, "search-filter").send_keys("(description=changed in the console)")
    by_id(driver, "search-button").click()
    hit = wait_for(driver, lambda d: css(d, "#search-results a.search-hit"), "a search hit")
    assert [h.text for h in hit] == [f"uid=user7,{PEOPLE}"]
    hit[0].click()
    wait_for(driver, lambda d: by_id(d, "entry-dn").text == f"uid=user7,{PEOPLE}", "the hit's entry")

    # Signing out ends the session: the pages go back to the sign-in.
    by_id(driver, "sign-out").click()
    wait_for(driver, lambda d: d.current_url.endswith("/login"), "signing out")
    driver.get(setup["url"] + "/#/results")
    wait_for(driver, lambda d: urllib.parse.urlparse(d.current_url).path == "/login", "the sign-in page after signing out")


# ---------------------------------------------------------------- a cluster


from test_ldap3_cluster import cluster, role  # noqa: E402,F401  (the three-node fixture)


def test_the_directory_page_shows_each_nodes_role_and_the_replicas_lag(cluster):  # noqa: F811
    deadline = time.time() + 30
    while True:
        roles = {port: role(port) for port in cluster}
        if sorted(roles.values()) == ["follower", "follower", "leader"]:
            break
        assert time.time() < deadline, f"no stable leader: {roles}"
        time.sleep(0.2)
    follower = next(p for p, r in roles.items() if r == "follower")
    leader = next(p for p, r in roles.items() if r == "leader")
    with console(follower, free_port()) as url:
        http = Http(url).sign_in()
        status, body, _ = http.call("GET", "/api/directory")
        assert status == 200, body
        groups = json.loads(body)["cluster"]["status"]
        by_role = {g["role"]: g for g in groups}
        assert by_role["follower"]["asked"] == f"ldap://127.0.0.1:{follower}", groups
        assert by_role["leader"]["asked"].endswith(f":{leader}"), groups
        assert len(by_role["leader"]["replicas"]) == 2 and "lag=" in by_role["leader"]["replicas"][0], groups
        assert by_role["leader"]["voters"].split() == ["1", "2", "3"], groups
        # Not the administrator: the cluster operation is refused, and
        # the page says so instead of a status.
        conn = Connection(Server("127.0.0.1", port=leader), ADMIN_DN, ADMIN_PASSWORD, auto_bind=True)
        assert conn.add(BASE, ["dcObject", "organization"], {"dc": "example", "o": "Example"}), conn.result
        assert conn.add(f"uid=reader,{BASE}", ["inetOrgPerson"],
                        {"uid": "reader", "cn": "r", "sn": "r", "userPassword": "reader-pw"}), conn.result
        # The console signs in at the follower: once the entry reached it.
        deadline = time.time() + 20
        while Http(url).call("POST", "/api/session", {"dn": f"uid=reader,{BASE}", "password": "reader-pw"})[0] != 200:
            assert time.time() < deadline, "the reader's entry never reached the follower"
            time.sleep(0.2)
        reader = Http(url).sign_in(f"uid=reader,{BASE}", "reader-pw")
        status, body, _ = reader.call("GET", "/api/directory")
        assert "error" in json.loads(body)["cluster"], body
