// The console's pages: one script, no framework, no build step. Every
// page is drawn from the JSON API (docs/console.md) with DOM calls and
// textContent only, so nothing a directory or a run holds is ever read
// as HTML.
"use strict";

const { LineChart } = window.MeridianCharts;
let csrf = "";
let leaving = () => {}; // what the current page closes (event streams, timers)

// ------------------------------------------------------------ helpers

function el(tag, attributes = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attributes)) {
    if (k === "onclick" || k === "onchange" || k === "onsubmit" || k === "oninput") e[k] = v;
    else if (v === true) e.setAttribute(k, "");
    else if (v !== false && v !== undefined && v !== null) e.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined) continue;
    e.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
  return e;
}

async function api(method, path, body) {
  const options = { method, credentials: "same-origin", headers: {} };
  if (method !== "GET") options.headers["X-CSRF-Token"] = csrf;
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const answer = await fetch(path, options);
  if (answer.status === 401) {
    window.location.assign("/login");
    throw new Error("signed out");
  }
  const text = await answer.text();
  let data = text;
  try { data = text ? JSON.parse(text) : null; } catch (_) { /* HTML or CSV */ }
  if (!answer.ok) throw new Error((data && data.error) || answer.statusText);
  return data;
}

const number = (v, digits = 0) => (v === null || v === undefined || !isFinite(v)) ? "–"
  : Number(v).toLocaleString("en-GB", { maximumFractionDigits: digits, minimumFractionDigits: digits });
const when = (unix) => new Date(unix * 1000).toLocaleString("en-GB");

function view(...children) {
  document.getElementById("view").replaceChildren(...children);
}

function card(title, ...children) {
  return el("section", { class: "card" }, title ? el("h2", {}, title) : null, ...children);
}

function showError(target, error) {
  target.replaceChildren(el("div", { class: "error" }, String(error.message || error)));
}

// ------------------------------------------------------------ jobs

async function jobsPage() {
  const scenarios = await api("GET", "/api/scenarios");
  const status = el("div", { class: "status", id: "job-status" });
  const live = el("div", { id: "live" });
  const jobsList = el("div", { id: "jobs-list" });
  const byId = new Map(scenarios.map((s) => [s.id, s]));
  const field = (label, input) => el("label", {}, label, input);
  const input = (id, type = "text", value = "") => el("input", { id, type, value, step: "any" });
  const choose = el("select", { id: "job-scenario" },
    scenarios.map((s) => el("option", { value: s.id }, `${s.name} (${s.origin})`)));
  const description = el("p", { class: "muted", id: "scenario-description" });
  const targets = el("div", { id: "job-targets" });
  const addTarget = (name = "", url = "") => targets.appendChild(el("div", { class: "row target" },
    field("name", el("input", { class: "target-name", value: name })),
    field("URL", el("input", { class: "target-url", value: url, size: 30 })),
    el("button", { type: "button", onclick: (e) => e.target.closest(".target").remove() }, "remove")));
  const bind = el("select", { id: "job-bind" },
    el("option", { value: "scenario" }, "the scenario's bind"),
    el("option", { value: "me" }, "me (the signed-in DN)"),
    el("option", { value: "anonymous" }, "anonymous"),
    el("option", { value: "dn" }, "another DN"));
  const bindDn = input("job-bind-dn");
  const bindPassword = input("job-bind-password", "password");
  const inputs = {
    sessions: input("job-sessions", "number"), depth: input("job-depth", "number"),
    rate: input("job-rate", "number"), duration_secs: input("job-duration", "number"),
    warmup_secs: input("job-warmup", "number"), keys_max: input("job-keys-max", "number"),
    server_pid: input("job-server-pid", "number"),
  };
  const distribution = el("select", { id: "job-distribution" },
    ["uniform", "sequential", "zipf", "array"].map((d) => el("option", { value: d }, d)));
  const sweep = el("input", { id: "job-sweep", placeholder: "sessions=1,8,32", size: 18 });
  const fill = () => {
    const s = byId.get(choose.value);
    if (!s) return;
    description.textContent = `${s.description} Operations: ${s.operations.join(", ")}.`;
    targets.replaceChildren();
    addTarget("", s.url);
    inputs.sessions.value = s.sessions; inputs.depth.value = s.depth; inputs.rate.value = s.rate;
    inputs.duration_secs.value = s.duration_secs; inputs.warmup_secs.value = s.warmup_secs;
    inputs.keys_max.value = s.keys_max; distribution.value = s.distribution;
  };
  choose.onchange = fill;
  const start = el("button", { class: "primary", id: "job-start", type: "button" }, "Start");
  start.onclick = async () => {
    const request = { scenario: choose.value, bind: bind.value, distribution: distribution.value };
    for (const [k, i] of Object.entries(inputs)) if (i.value !== "") request[k] = Number(i.value);
    if (bind.value === "dn") { request.bind_dn = bindDn.value; request.password = bindPassword.value; }
    request.targets = [...targets.querySelectorAll(".target")].map((row, i) => ({
      name: row.querySelector(".target-name").value || `target ${i + 1}`,
      url: row.querySelector(".target-url").value,
    })).filter((t) => t.url);
    if (sweep.value.trim()) request.sweep = sweep.value.trim();
    try {
      const job = await api("POST", "/api/jobs", request);
      status.textContent = `job ${job.id} started`;
      watchJob(job.id, live, status, () => refreshJobs(jobsList, live, status));
      refreshJobs(jobsList, live, status);
    } catch (e) { showError(status, e); }
  };
  const uploadName = el("input", { id: "upload-name", placeholder: "name" });
  const uploadFile = el("input", { id: "upload-file", type: "file", accept: ".toml" });
  const uploadStatus = el("span", { class: "status", id: "upload-status" });
  const upload = el("button", { type: "button", id: "upload-button" }, "Upload");
  upload.onclick = async () => {
    const file = uploadFile.files[0];
    if (!file) { uploadStatus.textContent = "choose a file"; return; }
    try {
      const name = uploadName.value || file.name.replace(/\.toml$/, "");
      await api("POST", "/api/scenarios", { name, text: await file.text() });
      uploadStatus.textContent = `${name} uploaded`;
      jobsPage();
    } catch (e) { showError(uploadStatus, e); }
  };
  view(el("div", { class: "grid2" },
    el("div", {},
      card("New job",
        el("div", { class: "row" }, field("scenario", choose)), description,
        el("h3", {}, "Targets (several: compared side by side)"), targets,
        el("button", { type: "button", onclick: () => addTarget() }, "add a target"),
        el("h3", {}, "Load"),
        el("div", { class: "row" }, field("sessions", inputs.sessions), field("depth", inputs.depth),
          field("rate (ops/s, 0: closed loop)", inputs.rate)),
        el("div", { class: "row" }, field("duration (s)", inputs.duration_secs), field("warm-up (s)", inputs.warmup_secs)),
        el("div", { class: "row" }, field("key distribution", distribution), field("largest key", inputs.keys_max)),
        el("div", { class: "row" }, field("sweep", sweep), field("server PID (CPU, memory)", inputs.server_pid)),
        el("h3", {}, "Bind"),
        el("div", { class: "row" }, field("as", bind), field("DN", bindDn), field("password", bindPassword)),
        el("div", { class: "row" }, start), status),
      card("Upload a scenario", el("div", { class: "row" }, uploadName, uploadFile, upload), uploadStatus),
      card("Jobs", jobsList)),
    el("div", {}, card("Live", live))));
  fill();
  await refreshJobs(jobsList, live, status);
  const running = (await api("GET", "/api/jobs")).find((j) => j.state.phase === "running");
  if (running) watchJob(running.id, live, status, () => refreshJobs(jobsList, live, status));
}

async function refreshJobs(target, live, status) {
  const jobs = await api("GET", "/api/jobs");
  if (!jobs.length) { target.replaceChildren(el("p", { class: "muted" }, "No job yet.")); return; }
  target.replaceChildren(el("table", {},
    el("tr", {}, el("th", {}, "job"), el("th", { class: "text" }, "scenario"), el("th", { class: "text" }, "state"), el("th", {}, "")),
    jobs.map((j) => el("tr", { class: "job", "data-job": j.id },
      el("td", {}, j.id), el("td", { class: "text" }, j.request.scenario),
      el("td", { class: "text job-phase" }, j.state.phase, j.state.error ? ` (${j.state.error})` : ""),
      el("td", {},
        j.state.phase === "running"
          ? el("button", { class: "danger job-stop", type: "button", onclick: async () => {
              await api("POST", `/api/jobs/${j.id}/stop`); refreshJobs(target, live, status);
            } }, "Stop")
          : (j.state.report ? el("a", { href: `#/run/${j.state.report}` }, "result") : ""),
        " ", el("a", { href: "#/jobs", onclick: () => watchJob(j.id, live, status, () => refreshJobs(target, live, status)) }, "watch"))))));
}

// The live view of a job: throughput, latency and client CPU each second;
// `ended` is called when the job ends.
function watchJob(id, target, status, ended = () => {}) {
  leaving();
  const header = el("p", { class: "status", id: "live-header" }, `job ${id}: connecting`);
  const rateBox = el("div", { id: "live-rate-chart" });
  const latencyBox = el("div", { id: "live-latency-chart" });
  const cpuBox = el("div", { id: "live-cpu-chart" });
  const codes = el("div", { id: "live-codes" });
  target.replaceChildren(header, rateBox, latencyBox, cpuBox, codes);
  const secondsAxis = { xLabel: "second", xFrom: 0 };
  const rateChart = new LineChart(rateBox, { title: "Throughput", yLabel: "operations per second", ...secondsAxis });
  const latencyChart = new LineChart(latencyBox, { title: "Latency (each second)", yLabel: "milliseconds", ...secondsAxis });
  const cpuChart = new LineChart(cpuBox, { title: "Client CPU", yLabel: "cores", ...secondsAxis });
  const runs = new Map();
  let ticks = 0;
  const events = new EventSource(`/api/jobs/${id}/events`);
  const redraw = () => {
    const all = [...runs.entries()];
    const named = (label, i) => label || `run ${i + 1}`;
    rateChart.update(all.map(([i, r]) => ({ name: named(r.label, i), points: r.ticks.map((t) => [t.seconds, t.rate]) })));
    // A second in which no answer was measured has no latency to draw.
    const timed = (r) => r.ticks.filter((t) => t.measuring && t.latency_us.max > 0);
    latencyChart.update(all.flatMap(([i, r]) => [
      { name: `${named(r.label, i)} p50`, points: timed(r).map((t) => [t.seconds, t.latency_us.p50 / 1000]) },
      { name: `${named(r.label, i)} p99`, points: timed(r).map((t) => [t.seconds, t.latency_us.p99 / 1000]) },
    ]));
    cpuChart.update(all.map(([i, r]) => ({ name: named(r.label, i), points: r.ticks.map((t) => [t.seconds, t.client_cpu]) })));
    const last = all.length ? all[all.length - 1][1].ticks.slice(-1)[0] : null;
    if (last) {
      codes.replaceChildren(el("table", { id: "live-codes-table" },
        el("tr", {}, el("th", { class: "text" }, "result"), el("th", {}, "count")),
        Object.entries(last.codes).map(([code, n]) => el("tr", {}, el("td", { class: "text" }, code), el("td", {}, number(n))))));
    }
  };
  events.addEventListener("tick", (e) => {
    const data = JSON.parse(e.data);
    if (!runs.has(data.run)) runs.set(data.run, { label: data.label, ticks: [] });
    runs.get(data.run).ticks.push(data.tick);
    ticks += 1;
    const t = data.tick;
    header.textContent = `job ${id} ${data.label ? "[" + data.label + "] " : ""}at ${number(t.seconds, 0)} s${t.measuring ? "" : " (warm-up)"}: `
      + `${number(t.rate)} ops/s, p50 ${number(t.latency_us.p50 / 1000, 3)} ms, p99 ${number(t.latency_us.p99 / 1000, 3)} ms, `
      + `${number(t.errors)} errors, client CPU ${number(t.client_cpu, 2)} cores`;
    header.dataset.ticks = ticks;
    redraw();
  });
  events.addEventListener("state", (e) => {
    const state = JSON.parse(e.data);
    events.close();
    header.dataset.phase = state.phase;
    const parts = [`job ${id} ${state.phase}`];
    if (state.error) parts.push(`: ${state.error}`);
    header.replaceChildren(parts.join(""), " ",
      state.report ? el("a", { href: `#/run/${state.report}`, id: "live-result" }, "see the result") : "");
    if (status) status.textContent = `job ${id} ${state.phase}`;
    ended();
  });
  events.onerror = () => { if (events.readyState === EventSource.CLOSED) header.dataset.closed = "1"; };
  leaving = () => events.close();
}

// ------------------------------------------------------------ results

async function resultsPage() {
  const q = el("input", { id: "results-filter", placeholder: "filter: scenario, label, target", size: 30 });
  const kind = el("select", { id: "results-kind" },
    ["", "run", "compare", "sweep"].map((k) => el("option", { value: k }, k || "any kind")));
  const list = el("div", { id: "results-list" });
  const chosenStatus = el("span", { class: "status", id: "results-chosen" });
  const chosen = () => [...list.querySelectorAll("input.pick:checked")].map((c) => c.value);
  const withChosen = (go) => () => {
    const ids = chosen();
    if (ids.length < 1) { chosenStatus.textContent = "tick the runs first"; return; }
    go(ids);
  };
  const load = async () => {
    const params = new URLSearchParams({ q: q.value, kind: kind.value });
    const started = performance.now();
    const rows = await api("GET", `/api/runs?${params}`);
    list.replaceChildren(el("table", { id: "results-table" },
      el("tr", {}, el("th", {}, ""), el("th", { class: "text" }, "started"), el("th", { class: "text" }, "scenario"),
        el("th", { class: "text" }, "label"), el("th", { class: "text" }, "target"), el("th", {}, "sessions × depth"),
        el("th", {}, "ops/s"), el("th", {}, "p50 ms"), el("th", {}, "p99 ms"), el("th", {}, "errors"),
        el("th", {}, "server CPU µs/op")),
      rows.map((r) => el("tr", { class: "run-row", "data-run": r.id },
        el("td", {}, el("input", { type: "checkbox", class: "pick", value: r.id })),
        el("td", { class: "text" }, el("a", { href: `#/run/${r.report}` }, when(r.started_unix))),
        el("td", { class: "text" }, r.scenario), el("td", { class: "text" }, r.label),
        el("td", { class: "text" }, r.target), el("td", {}, `${r.sessions} × ${r.depth}`),
        el("td", {}, number(r.rate)), el("td", {}, number(r.p50_ms, 3)), el("td", {}, number(r.p99_ms, 3)),
        el("td", {}, number(r.errors)),
        el("td", {}, r.server_cpu_per_operation === null ? "–" : number(r.server_cpu_per_operation * 1e6, 1))))));
    list.dataset.count = rows.length;
    list.dataset.loadMs = Math.round(performance.now() - started);
    chosenStatus.textContent = `${rows.length} runs`;
  };
  q.oninput = () => load().catch((e) => showError(list, e));
  kind.onchange = q.oninput;
  view(card("Results",
    el("div", { class: "row" }, q, kind,
      el("button", { type: "button", id: "compare-button", class: "primary",
        onclick: withChosen((ids) => { location.hash = `#/compare/${ids.join(",")}`; }) }, "Compare"),
      el("button", { type: "button", id: "capacity-button",
        onclick: withChosen((ids) => { location.hash = `#/capacity/${ids.join(",")}`; }) }, "Capacity model"),
      el("button", { type: "button", id: "export-csv",
        onclick: withChosen((ids) => window.open(`/api/compare?format=csv&runs=${ids.join(",")}`)) }, "Export CSV"),
      el("button", { type: "button", id: "export-json",
        onclick: withChosen((ids) => window.open(`/api/compare?format=json&runs=${ids.join(",")}`)) }, "Export JSON"),
      chosenStatus),
    list));
  await load();
}

function reportPage(title, src, downloads) {
  view(card(title,
    el("p", {}, downloads.map(([label, href]) => [el("a", { href, target: "_blank" }, label), " "])),
    el("iframe", { class: "report", src, id: "report-frame", title })));
}

async function capacityPage(ids) {
  const profile = el("input", { id: "capacity-profile", placeholder: "search:0.5,modify:0.05", size: 30 });
  const cpus = el("input", { id: "capacity-cpus", type: "number", placeholder: "this machine's", step: "any" });
  const out = el("div", { id: "capacity-result" });
  const fit = async () => {
    try {
      const params = new URLSearchParams({ runs: ids, profile: profile.value, cpus: cpus.value || 0 });
      const model = await api("GET", `/api/capacity?${params}`);
      out.replaceChildren(el("table", {},
        el("tr", {}, el("th", { class: "text" }, "operation"), el("th", {}, "points"), el("th", {}, "CPU ms / op"),
          el("th", {}, "idle CPU"), el("th", {}, "r²"), el("th", {}, "per user/s")),
        model.operations.map((o) => el("tr", {}, el("td", { class: "text" }, o.name), el("td", {}, o.points.length),
          el("td", {}, number(o.cost_ms, 4)), el("td", {}, number(o.idle, 3)), el("td", {}, number(o.r_squared, 3)),
          el("td", {}, number(o.per_user, 3))))),
        el("p", {}, model.users === null
          ? "Give a user profile (operation:rate per user) to count users."
          : `${number(model.users)} users at ${number(model.utilisation * 100)} % of ${number(model.cpus)} CPUs `
            + `(${number(model.cost_per_user_ms, 4)} CPU ms per user per second).`));
    } catch (e) { showError(out, e); }
  };
  view(card("Capacity model (seed 003) from the chosen runs",
    el("p", { class: "muted" }, "Each run that read the server's CPU is a point: operations per second against CPU seconds per second; the slope is an operation's cost."),
    el("div", { class: "row" }, el("label", {}, "user profile", profile), el("label", {}, "CPUs", cpus),
      el("button", { type: "button", class: "primary", onclick: fit }, "Fit")), out));
  await fit();
}

// ------------------------------------------------------------ directory

async function directoryPage() {
  const statusBox = el("div", { id: "directory-status" }, "reading…");
  const chartsBox = el("div", { class: "charts", id: "directory-charts" });
  view(card("Directory", statusBox), card("The last hour", chartsBox));
  const charts = {};
  const chart = (key, title, yLabel) => {
    const box = el("div", { id: `chart-${key}` });
    chartsBox.appendChild(box);
    charts[key] = new LineChart(box, { title, yLabel, xLabel: "time", time: true });
  };
  chart("ops", "Operations", "per second");
  chart("latency", "Latency (bucket bounds)", "milliseconds");
  chart("connections", "Connections", "open");
  chart("refused", "Writes refused (full disk or map)", "naming contexts");
  chart("disk", "Database and journal on disk", "MiB");
  chart("memory", "Resident memory", "MiB");
  chart("cpu", "Server CPU", "cores");
  const refresh = async () => {
    const [status, series] = await Promise.all([api("GET", "/api/directory"), api("GET", "/api/directory/metrics?minutes=60")]);
    const nodes = status.nodes.map((n) => el("tr", {},
      el("td", { class: "text" }, n.metrics_url),
      el("td", { class: "text " + (n.health.status === 200 ? "ok" : "bad") }, n.health.body),
      el("td", { class: "text " + (n.ready.status === 200 ? "ok" : "bad") }, n.ready.body)));
    const columns = ["asked", "partition", "node", "role", "leader", "term", "applied", "last log", "voters", "learners"];
    const cluster = status.cluster.status
      ? el("table", { id: "cluster-table" },
          el("tr", {}, [...columns, "replicas (matched, lag)"].map((h) => el("th", { class: "text" }, h))),
          status.cluster.status.map((g) => el("tr", { class: "cluster-node" },
            columns.map((k) => el("td", { class: "text" }, g[k] || "")),
            el("td", { class: "text" }, g.error ? el("span", { class: "error" }, g.error) : (g.replicas || []).join("; ")))))
      : el("p", { class: "muted", id: "cluster-none" }, `Cluster: ${status.cluster.error}`);
    statusBox.replaceChildren(
      el("p", {}, `${status.url}, signed in as ${status.signed_in_as}`),
      status.nodes.length
        ? el("table", { id: "nodes-table" }, el("tr", {}, el("th", { class: "text" }, "metrics"), el("th", { class: "text" }, "health"), el("th", { class: "text" }, "readiness")), nodes)
        : el("p", { class: "muted" }, "No metrics endpoint: start the console with --metrics-url http://HOST:PORT for each node (the server's metrics_listen)."),
      cluster);
    const per = (pick) => series.map((s) => ({ name: s.url, points: s.points.map((p) => [p.unix, pick(p)]) }));
    charts.ops.update([...per((p) => p.ops_per_sec), ...series.map((s) => ({ name: `${s.url} errors`, points: s.points.map((p) => [p.unix, p.errors_per_sec]) }))]);
    charts.latency.update(series.flatMap((s) => [
      { name: `${s.url} p50`, points: s.points.filter((p) => p.p50_ms !== null).map((p) => [p.unix, p.p50_ms]) },
      { name: `${s.url} p99`, points: s.points.filter((p) => p.p99_ms !== null).map((p) => [p.unix, p.p99_ms]) }]));
    charts.connections.update(per((p) => p.connections));
    charts.refused.update(per((p) => p.writes_refused));
    charts.disk.update(per((p) => p.disk_bytes / (1 << 20)));
    charts.memory.update(per((p) => p.resident_bytes / (1 << 20)));
    charts.cpu.update(per((p) => p.cpu));
  };
  await refresh().catch((e) => showError(statusBox, e));
  const timer = setInterval(() => refresh().catch((e) => showError(statusBox, e)), 5000);
  leaving = () => clearInterval(timer);
}

// ------------------------------------------------------------ entries

async function browsePage(selected) {
  const tree = el("div", { class: "tree", id: "entry-tree" });
  const detail = el("div", { id: "entry-detail" }, el("p", { class: "muted" }, "Choose an entry."));
  const filter = el("input", { id: "search-filter", placeholder: "(uid=user1)", size: 28 });
  const base = el("input", { id: "search-base", placeholder: "base DN", size: 28 });
  const found = el("div", { id: "search-results" });
  const search = async () => {
    try {
      const params = new URLSearchParams({ base: base.value, scope: "sub", filter: filter.value });
      const answer = await api("GET", `/api/entries?${params}`);
      found.replaceChildren(el("ul", {}, answer.entries.map((e) =>
        el("li", {}, el("a", { href: `#/browse/${encodeURIComponent(e.dn)}`, class: "search-hit" }, e.dn)))),
        answer.truncated ? el("p", { class: "muted" }, "More entries match than are shown.") : "");
    } catch (e) { showError(found, e); }
  };
  view(el("div", { class: "grid2" },
    el("div", {}, card("Tree", tree),
      card("Search", el("div", { class: "row" }, base, filter, el("button", { type: "button", id: "search-button", onclick: search }, "Search")), found)),
    card("Entry", detail)));
  const roots = await api("GET", "/api/entries");
  if (!base.value && roots.roots.length) base.value = roots.roots[0];
  tree.replaceChildren(el("ul", {}, roots.roots.map((dn) => treeNode(dn, selected))));
  if (selected) showEntry(selected, detail);
}

function treeNode(dn, selected) {
  const children = el("ul", {});
  let open = false;
  const toggle = el("span", { class: "toggle" }, "▸");
  const expand = async () => {
    open = !open;
    toggle.textContent = open ? "▾" : "▸";
    if (!open) { children.replaceChildren(); return; }
    try {
      const answer = await api("GET", `/api/entries?${new URLSearchParams({ base: dn, scope: "one" })}`);
      children.replaceChildren(...answer.entries.map((e) => treeNode(e.dn, selected)));
      if (answer.truncated) children.appendChild(el("li", { class: "muted" }, "… more (use search)"));
    } catch (e) { children.replaceChildren(el("li", { class: "error" }, e.message)); }
  };
  toggle.onclick = expand;
  const rdn = dn.split(/(?<!\\),/)[0];
  const link = el("a", { href: `#/browse/${encodeURIComponent(dn)}`, class: "tree-entry" + (dn === selected ? " selected" : ""),
    "data-dn": dn, title: dn }, rdn);
  const node = el("li", {}, toggle, link, children);
  if (selected && selected.toLowerCase().endsWith(dn.toLowerCase()) && selected.length > dn.length) expand();
  return node;
}

async function showEntry(dn, target) {
  let answer;
  try { answer = await api("GET", `/api/entry?${new URLSearchParams({ dn })}`); } catch (e) { showError(target, e); return; }
  const values = new Map(answer.entry.attributes.map(([name, vs]) => [name.toLowerCase(), vs]));
  const status = el("div", { class: "status", id: "entry-status" });
  const rows = answer.form.map((f) => {
    const held = values.get(f.name.toLowerCase()) || [];
    const binary = held.some((v) => v.base64 !== undefined);
    const box = el("div", { class: "values" });
    const addInput = (v = "") => box.appendChild(el("input", { value: v, "data-attribute": f.name,
      disabled: f.read_only || binary, class: "value" }));
    held.forEach((v) => addInput(v.text !== undefined ? v.text : `(binary, ${atob(v.base64).length} bytes)`));
    if (!held.length) addInput();
    const more = (!f.single_value && !f.read_only && !binary)
      ? el("button", { type: "button", class: "add-value", onclick: () => addInput() }, "+") : "";
    return { f, held, binary, row: el("div", { class: "field", "data-field": f.name },
      el("span", { class: "name" + (f.required ? " required" : ""), title: f.read_only ? "set by the server" : "" },
        f.name, f.single_value ? " (one value)" : ""), el("div", {}, box, more)) };
  });
  const save = el("button", { type: "button", class: "primary", id: "entry-save" }, "Save");
  save.onclick = async () => {
    const changes = [];
    for (const r of rows) {
      if (r.f.read_only || r.binary) continue;
      const now = [...r.row.querySelectorAll("input.value")].map((i) => i.value).filter((v) => v !== "");
      const before = r.held.map((v) => v.text);
      if (JSON.stringify(now) === JSON.stringify(before)) continue;
      changes.push(now.length ? { op: "replace", attribute: r.f.name, values: now }
        : { op: "delete", attribute: r.f.name, values: [] });
    }
    if (!changes.length) { status.textContent = "nothing changed"; return; }
    try {
      const result = await api("POST", "/api/entry/modify", { dn, changes });
      status.replaceChildren(el("span", { class: "ok" }, `saved (${result.result})`));
      setTimeout(() => showEntry(dn, target), 300);
    } catch (e) { showError(status, e); }
  };
  // What the entry holds or must hold first; the other attributes its
  // classes allow folded away below.
  const shown = rows.filter((r) => r.held.length || r.f.required);
  const more = rows.filter((r) => !r.held.length && !r.f.required);
  target.replaceChildren(el("h3", { id: "entry-dn" }, answer.entry.dn),
    el("div", { class: "entry-form" }, shown.map((r) => r.row),
      more.length ? el("details", { id: "more-attributes" },
        el("summary", {}, `${more.length} more attributes its classes allow`), more.map((r) => r.row)) : ""),
    el("div", { class: "row" }, save), status);
}

// ------------------------------------------------------------ routes

async function route() {
  leaving();
  leaving = () => {};
  const hash = location.hash || "#/jobs";
  const [, page, ...rest] = hash.split("/");
  const argument = decodeURIComponent(rest.join("/"));
  for (const a of document.querySelectorAll("header nav a")) a.classList.toggle("current", a.getAttribute("href") === `#/${page}`);
  try {
    switch (page) {
      case "results": await resultsPage(); break;
      case "run": reportPage(`Run ${argument}`, `/api/runs/${argument}/report`,
        [["JSON", `/api/runs/${argument}`], ["CSV", `/api/runs/${argument}/csv`]]); break;
      case "compare": reportPage("Runs compared", `/api/compare?runs=${argument}`,
        [["JSON", `/api/compare?format=json&runs=${argument}`], ["CSV", `/api/compare?format=csv&runs=${argument}`]]); break;
      case "capacity": await capacityPage(argument); break;
      case "directory": await directoryPage(); break;
      case "browse": await browsePage(argument); break;
      default: await jobsPage();
    }
  } catch (e) {
    view(card("Error", el("div", { class: "error" }, e.message)));
  }
}

async function start() {
  const me = await api("GET", "/api/session");
  csrf = me.csrf;
  document.getElementById("who").textContent = me.dn;
  document.getElementById("sign-out").onclick = async () => {
    await api("DELETE", "/api/session");
    window.location.assign("/login");
  };
  window.addEventListener("hashchange", route);
  route();
}

start();
