//! The scenarios jobs run: the bench's files (`--scenarios`) and those
//! uploaded through the console, bounded and checked as the bench checks
//! them before they are kept. A scenario is shown without its password.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use meridian_bench::scenario::Scenario;
use serde::{Deserialize, Serialize};

use super::Console;
use super::http::{ApiError, ApiResult};

/// The largest scenario file taken by upload.
const MAX_SCENARIO_BYTES: usize = 64 << 10;
/// Uploaded scenarios kept at most.
const MAX_UPLOADED: usize = 1000;

pub(super) fn routes() -> Router<Arc<Console>> {
    Router::new().route("/api/scenarios", get(list_scenarios).post(upload_scenario))
}

/// The scenarios jobs can run: the bench's files and uploaded ones.
pub(crate) struct ScenarioShelf {
    builtin: PathBuf,
    uploaded: PathBuf,
}

/// A scenario as the form shows it: never its password.
#[derive(Debug, Serialize)]
struct ScenarioView {
    id: String,
    origin: &'static str,
    name: String,
    description: String,
    url: String,
    bind_dn: Option<String>,
    sessions: u32,
    depth: u32,
    duration_secs: f64,
    warmup_secs: f64,
    rate: f64,
    distribution: String,
    keys_max: u64,
    operations: Vec<String>,
}

impl ScenarioView {
    fn of(id: &str, origin: &'static str, s: &Scenario) -> ScenarioView {
        ScenarioView {
            id: id.to_owned(),
            origin,
            name: s.name.clone(),
            description: s.description.clone(),
            url: s.target.url.clone(),
            bind_dn: s.target.bind_dn.clone(),
            sessions: s.load.sessions,
            depth: s.load.depth,
            duration_secs: s.load.duration_secs,
            warmup_secs: s.load.warmup_secs,
            rate: s.load.rate,
            distribution: format!("{:?}", s.keys.distribution).to_lowercase(),
            keys_max: s.keys.max,
            operations: s
                .operations
                .iter()
                .enumerate()
                .map(|(i, o)| {
                    o.name
                        .clone()
                        .unwrap_or_else(|| format!("operation {}", i + 1))
                })
                .collect(),
        }
    }
}

impl ScenarioShelf {
    pub(crate) fn open(builtin: &Path, uploaded: &Path) -> anyhow::Result<ScenarioShelf> {
        std::fs::create_dir_all(uploaded)
            .with_context(|| format!("creating {}", uploaded.display()))?;
        Ok(ScenarioShelf {
            builtin: builtin.to_owned(),
            uploaded: uploaded.to_owned(),
        })
    }

    /// Every scenario that parses, uploaded ones first; files that do not
    /// parse are left out (the bench names their faults).
    fn list(&self) -> Vec<ScenarioView> {
        let mut views = Vec::new();
        for (dir, origin) in [(&self.uploaded, "uploaded"), (&self.builtin, "bench")] {
            let Ok(files) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut files: Vec<PathBuf> = files
                .filter_map(|f| f.ok().map(|f| f.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "toml"))
                .collect();
            files.sort();
            for path in files {
                let Some(id) = path.file_stem().and_then(|s| s.to_str()) else {
                    continue;
                };
                if let Ok(scenario) = read_scenario(&path) {
                    views.push(ScenarioView::of(id, origin, &scenario));
                }
            }
        }
        views
    }

    /// The scenario named `id` (an uploaded one first).
    pub(super) fn load(&self, id: &str) -> ApiResult<Scenario> {
        if !valid_name(id) {
            return Err(ApiError::bad_request(format!(
                "{id:?} is not a scenario name"
            )));
        }
        let file = format!("{id}.toml");
        let path = [self.uploaded.join(&file), self.builtin.join(&file)]
            .into_iter()
            .find(|p| p.is_file())
            .ok_or_else(|| ApiError::not_found(format!("no scenario {id:?}")))?;
        read_scenario(&path).map_err(|e| ApiError::bad_request(format!("{e:#}")))
    }
}

fn read_scenario(path: &Path) -> anyhow::Result<Scenario> {
    let text = std::fs::read_to_string(path)?;
    Scenario::parse(&text, &path.display().to_string()).map_err(anyhow::Error::msg)
}

/// A scenario or upload name: letters, digits, `-`, `_` and `.` (not
/// first), at most 64: a file name in one folder, nothing more.
fn valid_name(name: &str) -> bool {
    super::plain_file_name(name, 64, b".")
}

async fn list_scenarios(State(console): State<Arc<Console>>) -> Json<Vec<ScenarioView>> {
    Json(console.scenarios.list())
}

#[derive(Deserialize)]
struct Upload {
    name: String,
    text: String,
}

/// `POST /api/scenarios`: a scenario file, bounded and checked as the
/// bench checks it (parsed, validated, its operations compiled) before
/// it is kept.
async fn upload_scenario(
    State(console): State<Arc<Console>>,
    Json(upload): Json<Upload>,
) -> ApiResult<(StatusCode, Json<ScenarioView>)> {
    if !valid_name(&upload.name) {
        return Err(ApiError::bad_request(
            "a scenario's name is 1 to 64 letters, digits, '-', '_' or '.'",
        ));
    }
    if upload.text.len() > MAX_SCENARIO_BYTES {
        return Err(ApiError(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("a scenario is at most {MAX_SCENARIO_BYTES} bytes"),
        ));
    }
    let shelf = &console.scenarios;
    let file = format!("{}.toml", upload.name);
    let path = shelf.uploaded.join(&file);
    let held = std::fs::read_dir(&shelf.uploaded).map_or(0, Iterator::count);
    if held >= MAX_UPLOADED && !path.exists() {
        return Err(ApiError(
            StatusCode::INSUFFICIENT_STORAGE,
            format!("the console keeps at most {MAX_UPLOADED} uploaded scenarios"),
        ));
    }
    if shelf.builtin.join(&file).exists() {
        return Err(ApiError(
            StatusCode::CONFLICT,
            format!(
                "{:?} is one of the bench's scenarios: choose another name",
                upload.name
            ),
        ));
    }
    let scenario = Scenario::parse(&upload.text, &upload.name)
        .and_then(|s| s.validate().map(|()| s))
        .and_then(|s| s.compile().map(|_| s))
        .map_err(|e| ApiError::bad_request(format!("not a valid scenario: {e}")))?;
    let temporary = shelf.uploaded.join(format!(".{file}.new"));
    std::fs::write(&temporary, &upload.text)
        .and_then(|()| std::fs::rename(&temporary, &path))
        .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, format!("saving: {e}")))?;
    Ok((
        StatusCode::CREATED,
        Json(ScenarioView::of(&upload.name, "uploaded", &scenario)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scenario_is_shown_without_its_password() {
        let scenario = Scenario::parse(
            "name = \"t\"\n[target]\nbind_dn = \"cn=x\"\npassword = \"scenario-secret\"\n\
             [[operation]]\nkind = \"search\"\ndn = \"dc=x\"\n",
            "t",
        )
        .unwrap();
        let view = serde_json::to_string(&ScenarioView::of("t", "bench", &scenario)).unwrap();
        assert!(!view.contains("scenario-secret"), "{view}");
        assert!(view.contains("cn=x"), "{view}");
    }

    #[test]
    fn names_are_file_names_in_one_folder() {
        assert!(valid_name("seed000-modify"));
        assert!(valid_name("my_scenario.v2"));
        for bad in ["", "../x", ".hidden", "a/b", "a b", &"x".repeat(65)] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }
}
