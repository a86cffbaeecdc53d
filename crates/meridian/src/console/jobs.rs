//! Load jobs: a scenario from the shelf with the parameters the form
//! set, run in this process by the bench's own runner, one job at a
//! time (two at once would share the client's CPU and measure neither),
//! watched live through server-sent events and kept as a run when done.
//!
//! A job is one run, several targets side by side (as `bench compare`)
//! or a sweep of sessions, depth or rate (as `bench run --sweep`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use meridian_bench::keys::Kind;
use meridian_bench::live::Live;
use meridian_bench::overrides::{Overrides, Sweep};
use meridian_bench::report::Report;
use meridian_bench::run::{self, Options, RunResult};
use meridian_bench::scenario::Scenario;
use serde::{Deserialize, Serialize};

use super::Console;
use super::auth::SignedIn;
use super::http::{ApiError, ApiResult};

/// Jobs listed (the oldest finished ones are forgotten; their runs stay).
const JOBS_KEPT: usize = 100;
/// Runs in one job (targets compared or values swept).
const MAX_RUNS_PER_JOB: usize = 32;

pub(super) fn routes() -> Router<Arc<Console>> {
    Router::new()
        .route("/api/jobs", get(list_jobs).post(start_job))
        .route("/api/jobs/{id}", get(job_status))
        .route("/api/jobs/{id}/events", get(job_events))
        .route("/api/jobs/{id}/stop", post(stop_job))
}

/// What the job form sends. Anything left out keeps the scenario's value.
/// Not `Debug`, and its password is never serialized: it is never shown.
#[derive(Clone, Deserialize, Serialize, Default)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct JobRequest {
    scenario: String,
    /// The servers: one runs the scenario, several compare them.
    targets: Vec<JobTarget>,
    /// `scenario` (its own bind), `me` (the signed-in identity),
    /// `anonymous`, or `dn` (`bind_dn` with `password`).
    bind: String,
    bind_dn: Option<String>,
    #[serde(skip_serializing)]
    password: Option<String>,
    sessions: Option<u32>,
    depth: Option<u32>,
    rate: Option<f64>,
    duration_secs: Option<f64>,
    warmup_secs: Option<f64>,
    distribution: Option<Kind>,
    keys_max: Option<u64>,
    /// A local server process to read CPU and memory from.
    server_pid: Option<u32>,
    /// `sessions=1,8,32`, `depth=1,10,100` or `rate=1000,2000`.
    sweep: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
struct JobTarget {
    name: String,
    url: String,
}

/// The runs of a job: each run's label and scenario, in order.
type Runs = Vec<(String, Scenario)>;

/// The runs a request makes, and the report's kind.
fn plan(
    mut scenario: Scenario,
    request: &JobRequest,
    who: &SignedIn,
) -> Result<(&'static str, Runs), String> {
    let t = &mut scenario.target;
    match request.bind.as_str() {
        "" | "scenario" => {}
        "me" => {
            t.bind_dn = Some(who.dn.clone());
            t.password = Some(who.password.clone());
        }
        "anonymous" => (t.bind_dn, t.password) = (None, None),
        "dn" => {
            t.bind_dn = Some(request.bind_dn.clone().ok_or("bind \"dn\" needs bind_dn")?);
            t.password = request.password.clone();
        }
        other => return Err(format!("bind {other:?}: scenario, me, anonymous or dn")),
    }
    Overrides {
        sessions: request.sessions,
        depth: request.depth,
        rate: request.rate,
        duration_secs: request.duration_secs,
        warmup_secs: request.warmup_secs,
        server_pid: request.server_pid,
        keys_max: request.keys_max,
        distribution: request.distribution,
        ..Overrides::default()
    }
    .apply(&mut scenario)?;
    // A job always ends: by its duration, or by its count.
    if scenario.load.duration_secs <= 0.0 && scenario.load.count == 0 {
        return Err("a job needs a duration (seconds) or a count".into());
    }
    let runs = match (request.targets.as_slice(), &request.sweep) {
        ([], None) => vec![(String::new(), scenario)],
        (targets, None) => targets
            .iter()
            .map(|target| {
                let mut s = scenario.clone();
                s.target.url.clone_from(&target.url);
                (target.name.clone(), s)
            })
            .collect(),
        ([], Some(sweep)) | ([_], Some(sweep)) => {
            if let Some(one) = request.targets.first() {
                scenario.target.url.clone_from(&one.url);
            }
            Sweep::parse(sweep)?.runs(&scenario)?
        }
        (_, Some(_)) => return Err("a sweep runs against one target".into()),
    };
    if runs.len() > MAX_RUNS_PER_JOB {
        return Err(format!("at most {MAX_RUNS_PER_JOB} runs in one job"));
    }
    for (_, s) in &runs {
        meridian_bench::wire::resolve(&s.target.url).map_err(|e| format!("{e:#}"))?;
    }
    let kind = match (runs.len(), &request.sweep) {
        (_, Some(_)) => "sweep",
        (1, None) => "run",
        _ => "compare",
    };
    Ok((kind, runs))
}

/// Where a job is.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "lowercase")]
enum Phase {
    Running,
    Done,
    Stopped,
    Failed,
}

#[derive(Debug, Clone, Serialize)]
struct JobState {
    phase: Phase,
    /// The report the job's runs were kept as.
    report: Option<String>,
    error: Option<String>,
}

/// One job: its request (without a password), where it is, and each
/// run's live ticks.
pub(crate) struct Job {
    id: u64,
    request: JobRequest,
    started_unix: u64,
    signed_in_as: String,
    state: Mutex<JobState>,
    runs: Mutex<Vec<(String, Arc<Live>)>>,
    stop: AtomicBool,
}

impl Job {
    fn state(&self) -> JobState {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set_state(&self, state: JobState) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = state;
    }

    fn lives(&self) -> Vec<(String, Arc<Live>)> {
        self.runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn view(&self) -> serde_json::Value {
        let runs: Vec<String> = self.lives().into_iter().map(|(label, _)| label).collect();
        serde_json::json!({
            "id": self.id,
            "request": self.request,
            "started_unix": self.started_unix,
            "signed_in_as": self.signed_in_as,
            "state": self.state(),
            "runs": runs,
        })
    }
}

/// The jobs started since the console did.
#[derive(Default)]
pub(crate) struct Jobs {
    list: Mutex<VecDeque<Arc<Job>>>,
    next_id: AtomicU64,
}

impl Jobs {
    fn find(&self, id: u64) -> ApiResult<Arc<Job>> {
        self.list
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|j| j.id == id)
            .cloned()
            .ok_or_else(|| ApiError::not_found(format!("no job {id}")))
    }

    pub(crate) fn running(&self) -> bool {
        self.list
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|j| j.state().phase == Phase::Running)
    }
}

async fn list_jobs(State(console): State<Arc<Console>>) -> Json<Vec<serde_json::Value>> {
    let jobs: Vec<Arc<Job>> = console
        .jobs
        .list
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .rev()
        .cloned()
        .collect();
    Json(jobs.iter().map(|j| j.view()).collect())
}

async fn job_status(
    State(console): State<Arc<Console>>,
    UrlPath(id): UrlPath<u64>,
) -> ApiResult<Json<serde_json::Value>> {
    Ok(Json(console.jobs.find(id)?.view()))
}

/// `POST /api/jobs`: starts a job; 409 while another runs.
async fn start_job(
    State(console): State<Arc<Console>>,
    Extension(who): Extension<Arc<SignedIn>>,
    Json(request): Json<JobRequest>,
) -> ApiResult<(StatusCode, Json<serde_json::Value>)> {
    let scenario = console.scenarios.load(&request.scenario)?;
    let (kind, runs) = plan(scenario, &request, &who).map_err(ApiError::bad_request)?;
    let job = {
        let mut list = console
            .jobs
            .list
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if list.iter().any(|j| j.state().phase == Phase::Running) {
            return Err(ApiError(
                StatusCode::CONFLICT,
                "a job is running: stop it or wait for it (two at once would share the client's CPU and measure neither)".into(),
            ));
        }
        let job = Arc::new(Job {
            id: console.jobs.next_id.fetch_add(1, Ordering::Relaxed) + 1,
            request,
            started_unix: now_unix(),
            signed_in_as: who.dn.clone(),
            state: Mutex::new(JobState {
                phase: Phase::Running,
                report: None,
                error: None,
            }),
            runs: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        });
        if list.len() >= JOBS_KEPT
            && let Some(at) = list.iter().position(|j| j.state().phase != Phase::Running)
        {
            list.remove(at);
        }
        list.push_back(Arc::clone(&job));
        job
    };
    let (thread_job, thread_console) = (Arc::clone(&job), Arc::clone(&console));
    std::thread::Builder::new()
        .name(format!("console-job-{}", job.id))
        .spawn(move || run_job(&thread_job, &thread_console, kind, runs))
        .map_err(|e| {
            ApiError(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("starting the job: {e}"),
            )
        })?;
    Ok((StatusCode::CREATED, Json(job.view())))
}

/// The job's runs, one after another, on this (its own) thread; the
/// report kept when they are done, even when stopped early.
fn run_job(job: &Job, console: &Console, kind: &str, runs: Runs) {
    let Some(first) = runs.first().map(|(_, s)| s.clone()) else {
        return;
    };
    let mut results: Vec<RunResult> = Vec::new();
    let mut error = None;
    for (label, scenario) in runs {
        if job.stop.load(Ordering::Relaxed) {
            break;
        }
        let live = Arc::new(Live::default());
        job.runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((label.clone(), Arc::clone(&live)));
        let options = Options {
            quiet: true,
            live: Some(live),
        };
        match run::run(&scenario, &label, options) {
            Ok(result) => results.push(result),
            Err(e) => {
                error = Some(
                    format!("{label}: {e:#}")
                        .trim_start_matches(": ")
                        .to_owned(),
                );
                break;
            }
        }
    }
    let report = (!results.is_empty()).then(|| Report {
        kind: kind.to_owned(),
        scenario: first.name.clone(),
        description: first.description.clone(),
        runs: results,
        capacity: None,
    });
    let saved = report.map(|r| console.runs.save(r));
    let (report, error) = match saved {
        Some(Ok(id)) => (Some(id), error),
        Some(Err(e)) => (None, Some(format!("the run could not be kept: {e:#}"))),
        None => (None, error),
    };
    let phase = if error.is_some() {
        Phase::Failed
    } else if job.stop.load(Ordering::Relaxed) {
        Phase::Stopped
    } else {
        Phase::Done
    };
    job.set_state(JobState {
        phase,
        report,
        error,
    });
}

/// `POST /api/jobs/{id}/stop`: stops sending; what was measured is kept.
async fn stop_job(
    State(console): State<Arc<Console>>,
    UrlPath(id): UrlPath<u64>,
) -> ApiResult<Json<serde_json::Value>> {
    let job = console.jobs.find(id)?;
    job.stop.store(true, Ordering::Relaxed);
    for (_, live) in job.lives() {
        live.stop();
    }
    Ok(Json(job.view()))
}

/// What the event stream has sent of a job so far.
struct Cursor {
    job: Arc<Job>,
    /// Ticks sent of each run.
    sent: Vec<usize>,
    ended: bool,
    interval: tokio::time::Interval,
}

/// `GET /api/jobs/{id}/events`: server-sent events: `tick` (a run's
/// second: `run`, `label` and the tick's figures), `state` when the job
/// ends, then the stream closes. Checked twice a second: a watcher costs
/// the run nothing between.
async fn job_events(
    State(console): State<Arc<Console>>,
    UrlPath(id): UrlPath<u64>,
) -> ApiResult<Sse<impl futures_util::Stream<Item = Result<Event, std::convert::Infallible>>>> {
    let job = console.jobs.find(id)?;
    let cursor = Cursor {
        job,
        sent: Vec::new(),
        ended: false,
        interval: tokio::time::interval(Duration::from_millis(500)),
    };
    let stream = futures_util::stream::unfold(cursor, |mut cursor| async move {
        if cursor.ended {
            return None;
        }
        cursor.interval.tick().await;
        let state = cursor.job.state();
        let mut events = Vec::new();
        let lives = cursor.job.lives();
        cursor.sent.resize(lives.len(), 0);
        for (i, ((label, live), sent)) in lives.iter().zip(&mut cursor.sent).enumerate() {
            let (ticks, next) = live.ticks_from(*sent);
            *sent = next;
            for tick in ticks {
                let data = serde_json::json!({ "run": i, "label": label, "tick": tick });
                events.push(Event::default().event("tick").data(data.to_string()));
            }
        }
        if state.phase != Phase::Running {
            cursor.ended = true;
            let data = serde_json::to_string(&state).unwrap_or_default();
            events.push(Event::default().event("state").data(data));
        }
        Some((
            futures_util::stream::iter(events.into_iter().map(Ok)),
            cursor,
        ))
    });
    use futures_util::StreamExt as _;
    Ok(Sse::new(stream.flatten()).keep_alive(KeepAlive::default()))
}

#[allow(clippy::disallowed_methods)] // a job's start, for people: not directory data
fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario() -> Scenario {
        Scenario::parse(
            "name = \"t\"\n[target]\nurl = \"ldap://127.0.0.1:3389\"\nbind_dn = \"cn=x\"\npassword = \"scenario-secret\"\n\
             [load]\nduration_secs = 5\n[[operation]]\nkind = \"search\"\ndn = \"uid=user{key},dc=x\"\n",
            "t",
        )
        .unwrap()
    }

    fn me() -> SignedIn {
        SignedIn {
            dn: "cn=me".into(),
            password: "my-secret".into(),
            csrf: String::new(),
        }
    }

    #[test]
    fn one_target_runs_several_compare_a_sweep_sweeps() {
        let one = JobRequest {
            targets: vec![JobTarget {
                name: "a".into(),
                url: "ldap://127.0.0.1:1".into(),
            }],
            sessions: Some(3),
            ..JobRequest::default()
        };
        let (kind, runs) = plan(scenario(), &one, &me()).unwrap();
        assert_eq!((kind, runs.len()), ("run", 1));
        assert_eq!(runs[0].1.load.sessions, 3);
        assert_eq!(runs[0].1.target.url, "ldap://127.0.0.1:1");
        let mut two = one.clone();
        two.targets.push(JobTarget {
            name: "b".into(),
            url: "ldap://127.0.0.1:2".into(),
        });
        let (kind, runs) = plan(scenario(), &two, &me()).unwrap();
        assert_eq!((kind, runs[1].0.as_str()), ("compare", "b"));
        let sweep = JobRequest {
            sweep: Some("depth=1,10,100".into()),
            ..one
        };
        let (kind, runs) = plan(scenario(), &sweep, &me()).unwrap();
        assert_eq!(kind, "sweep");
        let depths: Vec<u32> = runs.iter().map(|(_, s)| s.load.depth).collect();
        assert_eq!(depths, [1, 10, 100]);
    }

    #[test]
    fn the_bind_is_the_scenarios_mine_or_none() {
        let me_bind = JobRequest {
            bind: "me".into(),
            ..JobRequest::default()
        };
        let (_, runs) = plan(scenario(), &me_bind, &me()).unwrap();
        assert_eq!(runs[0].1.target.password.as_deref(), Some("my-secret"));
        let anonymous = JobRequest {
            bind: "anonymous".into(),
            ..JobRequest::default()
        };
        let (_, runs) = plan(scenario(), &anonymous, &me()).unwrap();
        assert!(runs[0].1.target.bind_dn.is_none());
        let bad = JobRequest {
            bind: "root".into(),
            ..JobRequest::default()
        };
        assert!(plan(scenario(), &bad, &me()).is_err());
    }

    #[test]
    fn a_job_that_would_never_end_or_is_malformed_is_refused() {
        let forever = JobRequest {
            duration_secs: Some(0.0),
            ..JobRequest::default()
        };
        assert!(
            plan(scenario(), &forever, &me())
                .unwrap_err()
                .contains("duration")
        );
        let sweep = JobRequest {
            sweep: Some("threads=1,2".into()),
            ..JobRequest::default()
        };
        assert!(plan(scenario(), &sweep, &me()).is_err());
        let url = JobRequest {
            targets: vec![JobTarget {
                name: "x".into(),
                url: "http://nowhere".into(),
            }],
            ..JobRequest::default()
        };
        assert!(plan(scenario(), &url, &me()).is_err());
    }

    #[test]
    fn a_password_is_never_shown() {
        let request = JobRequest {
            bind: "dn".into(),
            bind_dn: Some("cn=x".into()),
            password: Some("hidden-password".into()),
            ..JobRequest::default()
        };
        let shown = serde_json::to_string(&request).unwrap();
        assert!(!shown.contains("hidden-password"), "{shown}");
    }
}
