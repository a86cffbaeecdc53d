//! Every job's result kept: one JSON file per job (the bench's own
//! report, so `bench run --json` files can be dropped in the folder too),
//! a summary of each in memory for the list, the file read again when a
//! run is opened, compared or exported.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use meridian_bench::capacity::{self, CapacityResult};
use meridian_bench::report::Report;
use meridian_bench::run::RunResult;
use serde::{Deserialize, Serialize};

use super::Console;
use super::http::{ApiError, ApiResult, HTML, page};

/// Runs one comparison or capacity fit takes.
const MAX_CHOSEN: usize = 64;

pub(super) fn routes() -> Router<Arc<Console>> {
    Router::new()
        .route("/api/runs", get(list))
        .route("/api/runs/{id}", get(one_json))
        .route("/api/runs/{id}/report", get(one_html))
        .route("/api/runs/{id}/csv", get(one_csv))
        .route("/api/compare", get(compare))
        .route("/api/capacity", get(fit_capacity))
}

/// One run as the results list shows it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RunRow {
    /// `REPORT.INDEX`.
    id: String,
    report: String,
    kind: String,
    scenario: String,
    label: String,
    target: String,
    started_unix: u64,
    sessions: u32,
    depth: u32,
    mode: String,
    elapsed_secs: f64,
    rate: f64,
    errors: u64,
    p50_ms: f64,
    p99_ms: f64,
    /// Server CPU seconds per operation, when the run read them.
    server_cpu_per_operation: Option<f64>,
}

impl RunRow {
    fn of(report_id: &str, report: &Report, index: usize, run: &RunResult) -> RunRow {
        RunRow {
            id: format!("{report_id}.{index}"),
            report: report_id.to_owned(),
            kind: report.kind.clone(),
            scenario: run.scenario.clone(),
            label: run.label.clone(),
            target: run.target.clone(),
            started_unix: run.started_unix,
            sessions: run.sessions,
            depth: run.depth,
            mode: run.mode.clone(),
            elapsed_secs: run.elapsed_secs,
            rate: run.total.rate,
            errors: run.total.errors,
            p50_ms: run.total.latency_us.p50 / 1000.0,
            p99_ms: run.total.latency_us.p99 / 1000.0,
            server_cpu_per_operation: run.server.as_ref().map(|s| s.cpu_seconds_per_operation),
        }
    }
}

/// The folder of runs and its summary.
pub(crate) struct Runs {
    dir: PathBuf,
    rows: Mutex<Vec<Arc<RunRow>>>,
    sequence: AtomicU64,
}

impl Runs {
    /// Opens (creating) the folder and reads every report in it; a file
    /// that does not parse is named in the log and left alone.
    pub(crate) fn open(dir: &Path) -> anyhow::Result<Runs> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut rows = Vec::new();
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .filter_map(|f| f.ok().map(|f| f.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        for path in files {
            let Some(id) = path
                .file_stem()
                .and_then(|s| s.to_str())
                .filter(|s| valid_id(s))
            else {
                continue;
            };
            match read_report(&path) {
                Ok(report) => rows.extend(
                    report
                        .runs
                        .iter()
                        .enumerate()
                        .map(|(i, run)| Arc::new(RunRow::of(id, &report, i, run))),
                ),
                Err(e) => tracing::warn!("console: {} is not a report: {e:#}", path.display()),
            }
        }
        Ok(Runs {
            dir: dir.to_owned(),
            rows: Mutex::new(rows),
            sequence: AtomicU64::new(0),
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.rows
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Keeps `report` (written whole, then renamed into place); its ID.
    #[allow(clippy::disallowed_methods)] // a file name for people, not directory data
    pub(crate) fn save(&self, report: Report) -> anyhow::Result<String> {
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let id = format!(
            "r{millis}-{}",
            self.sequence.fetch_add(1, Ordering::Relaxed)
        );
        let path = self.dir.join(format!("{id}.json"));
        let temporary = self.dir.join(format!(".{id}.json.new"));
        std::fs::write(&temporary, report.to_json())
            .and_then(|()| std::fs::rename(&temporary, &path))
            .with_context(|| format!("writing {}", path.display()))?;
        let mut rows = self.rows.lock().unwrap_or_else(PoisonError::into_inner);
        rows.extend(
            report
                .runs
                .iter()
                .enumerate()
                .map(|(i, run)| Arc::new(RunRow::of(&id, &report, i, run))),
        );
        Ok(id)
    }

    fn report(&self, id: &str) -> ApiResult<Report> {
        if !valid_id(id) {
            return Err(ApiError::bad_request(format!("{id:?} is not a run's ID")));
        }
        let path = self.dir.join(format!("{id}.json"));
        if !path.is_file() {
            return Err(ApiError::not_found(format!("no report {id}")));
        }
        read_report(&path).map_err(|e| ApiError::bad_request(format!("{e:#}")))
    }

    /// The runs `ids` name (`REPORT.INDEX`, comma-separated), in order.
    fn chosen(&self, ids: &str) -> ApiResult<Vec<RunResult>> {
        let ids: Vec<&str> = ids
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        if ids.is_empty() || ids.len() > MAX_CHOSEN {
            return Err(ApiError::bad_request(format!(
                "choose 1 to {MAX_CHOSEN} runs (runs=REPORT.INDEX,...)"
            )));
        }
        let mut runs = Vec::new();
        for id in ids {
            let (report, index) = id
                .rsplit_once('.')
                .and_then(|(r, i)| Some((r, i.parse::<usize>().ok()?)))
                .ok_or_else(|| ApiError::bad_request(format!("{id:?}: expected REPORT.INDEX")))?;
            let mut run = self
                .report(report)?
                .runs
                .into_iter()
                .nth(index)
                .ok_or_else(|| ApiError::not_found(format!("no run {id}")))?;
            if run.label.is_empty() {
                run.label = id.to_owned();
            }
            runs.push(run);
        }
        Ok(runs)
    }
}

fn read_report(path: &Path) -> anyhow::Result<Report> {
    let text = std::fs::read_to_string(path)?;
    Ok(serde_json::from_str(&text)?)
}

/// A report ID: what [`Runs::save`] makes, or a file name of the same
/// letters dropped in the folder; never a path.
fn valid_id(id: &str) -> bool {
    // No `.`: a run is named `REPORT.INDEX`.
    super::plain_file_name(id, 100, b"")
}

/// The results list's filters.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
struct Filters {
    /// Words each of which the scenario, label, target or kind holds.
    q: String,
    scenario: String,
    target: String,
    kind: String,
    /// Started at or after (Unix seconds).
    since: u64,
    /// At most this many (newest first); 0: all.
    limit: usize,
}

async fn list(
    State(console): State<Arc<Console>>,
    Query(filters): Query<Filters>,
) -> Json<Vec<Arc<RunRow>>> {
    let rows = console
        .runs
        .rows
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let words: Vec<String> = filters
        .q
        .split_whitespace()
        .map(str::to_lowercase)
        .collect();
    let matches = |row: &RunRow| {
        let text =
            format!("{} {} {} {}", row.scenario, row.label, row.target, row.kind).to_lowercase();
        words.iter().all(|w| text.contains(w.as_str()))
            && (filters.scenario.is_empty() || row.scenario == filters.scenario)
            && (filters.target.is_empty() || row.target == filters.target)
            && (filters.kind.is_empty() || row.kind == filters.kind)
            && row.started_unix >= filters.since
    };
    let mut found: Vec<Arc<RunRow>> = rows.iter().filter(|r| matches(r)).cloned().collect();
    drop(rows);
    found.sort_by(|a, b| b.started_unix.cmp(&a.started_unix).then(b.id.cmp(&a.id)));
    if filters.limit > 0 {
        found.truncate(filters.limit);
    }
    Json(found)
}

fn download(body: String, kind: &'static str, name: &str) -> Response {
    let mut response = page(body, kind);
    if let Ok(value) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\"")) {
        response
            .headers_mut()
            .insert(header::CONTENT_DISPOSITION, value);
    }
    response
}

async fn one_json(
    State(console): State<Arc<Console>>,
    UrlPath(id): UrlPath<String>,
) -> ApiResult<Response> {
    let report = console.runs.report(&id)?;
    Ok(download(
        report.to_json(),
        "application/json",
        &format!("{id}.json"),
    ))
}

/// The run's page: the bench's HTML report, as `bench run --html` writes it.
async fn one_html(
    State(console): State<Arc<Console>>,
    UrlPath(id): UrlPath<String>,
) -> ApiResult<Response> {
    let report = console.runs.report(&id)?;
    Ok(html(report.to_html()))
}

fn html(body: String) -> Response {
    page(body, HTML)
}

async fn one_csv(
    State(console): State<Arc<Console>>,
    UrlPath(id): UrlPath<String>,
) -> ApiResult<Response> {
    let report = console.runs.report(&id)?;
    Ok(download(
        to_csv(&report.runs),
        "text/csv; charset=utf-8",
        &format!("{id}.csv"),
    ))
}

/// One row per operation of each run (and its total).
fn to_csv(runs: &[RunResult]) -> String {
    let mut out = String::from(
        "label,scenario,target,started_unix,sessions,depth,mode,offered_rate,elapsed_secs,operation,count,ops_per_sec,errors,p50_ms,p90_ms,p99_ms,p999_ms,max_ms,server_cpu_seconds_per_op\n",
    );
    for run in runs {
        let cpu = run
            .server
            .as_ref()
            .map(|s| format!("{:.9}", s.cpu_seconds_per_operation))
            .unwrap_or_default();
        for s in run.operations.iter().chain(std::iter::once(&run.total)) {
            let [p50, p90, p99, p999, max] = s.latency_us.table_millis();
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{},{:.3},{},{},{:.1},{},{p50:.3},{p90:.3},{p99:.3},{p999:.3},{max:.3},{cpu}",
                csv_field(&run.label),
                csv_field(&run.scenario),
                csv_field(&run.target),
                run.started_unix,
                run.sessions,
                run.depth,
                run.mode,
                run.offered_rate,
                run.elapsed_secs,
                csv_field(&s.name),
                s.count,
                s.rate,
                s.errors,
            );
        }
    }
    out
}

/// A CSV field, quoted when it must be (RFC 4180); a leading `=`, `+`,
/// `-` or `@` is prefixed with `'` so a spreadsheet does not run it.
fn csv_field(text: &str) -> String {
    let text = if text.starts_with(['=', '+', '-', '@']) {
        format!("'{text}")
    } else {
        text.to_owned()
    };
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text
    }
}

#[derive(Debug, Deserialize)]
struct Chosen {
    runs: String,
    /// html (default), json or csv.
    #[serde(default)]
    format: String,
}

/// `GET /api/compare?runs=A.0,B.0`: the runs on one chart and in one
/// table (the bench's compare report), or as JSON or CSV.
async fn compare(
    State(console): State<Arc<Console>>,
    Query(chosen): Query<Chosen>,
) -> ApiResult<Response> {
    let runs = console.runs.chosen(&chosen.runs)?;
    let report = Report {
        kind: "compare".into(),
        scenario: String::new(),
        description: format!("{} runs compared", runs.len()),
        runs,
        capacity: None,
    };
    Ok(match chosen.format.as_str() {
        "json" => download(report.to_json(), "application/json", "compare.json"),
        "csv" => download(
            to_csv(&report.runs),
            "text/csv; charset=utf-8",
            "compare.csv",
        ),
        "" | "html" => html(report.to_html()),
        other => {
            return Err(ApiError::bad_request(format!(
                "format {other:?}: html, json or csv"
            )));
        }
    })
}

#[derive(Debug, Deserialize)]
struct CapacityQuery {
    runs: String,
    /// `operation:per-user-rate,...`: the user profile.
    #[serde(default)]
    profile: String,
    /// CPUs of the server (0: this machine's).
    #[serde(default)]
    cpus: f64,
    /// Utilisation the users are counted at (default 0.8).
    #[serde(default)]
    utilisation: Option<f64>,
}

/// `GET /api/capacity?runs=...`: seed 003's model fitted from chosen runs
/// that read the server's CPU (`server_pid`).
async fn fit_capacity(
    State(console): State<Arc<Console>>,
    Query(query): Query<CapacityQuery>,
) -> ApiResult<Json<CapacityResult>> {
    let runs = console.runs.chosen(&query.runs)?;
    if runs.iter().all(|r| r.server.is_none()) {
        return Err(ApiError::bad_request(
            "none of these runs read the server's CPU: run jobs with the server's PID",
        ));
    }
    let mut profile = Vec::new();
    for pair in query.profile.split(',').filter(|p| !p.trim().is_empty()) {
        let (name, rate) = pair
            .rsplit_once(':')
            .and_then(|(n, r)| Some((n.trim().to_owned(), r.trim().parse::<f64>().ok()?)))
            .filter(|(_, r)| r.is_finite() && *r >= 0.0)
            .ok_or_else(|| {
                ApiError::bad_request(format!("profile {pair:?}: expected operation:rate"))
            })?;
        profile.push((name, rate));
    }
    let per_user = |name: &str| {
        profile
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0.0, |(_, r)| *r)
    };
    let cpus = if query.cpus > 0.0 {
        query.cpus
    } else {
        meridian_bench::procstat::cpus() as f64
    };
    let utilisation = query.utilisation.unwrap_or(0.8).clamp(0.01, 1.0);
    Ok(Json(capacity::from_runs(
        &runs,
        &per_user,
        cpus,
        utilisation,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_never_paths() {
        assert!(valid_id("r1764380000000-0"));
        for bad in ["", "../etc/passwd", ".x", "a/b", "a.b"] {
            assert!(!valid_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn csv_fields_are_quoted_and_defused() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"x\""), "\"say \"\"x\"\"\"");
        assert_eq!(csv_field("=cmd()"), "'=cmd()");
    }
}
