//! Scenario files (TOML): what to send, how hard, to which server.
//!
//! ```toml
//! name = "seed000-mixed-50-50"
//! [target]
//! url = "ldap://127.0.0.1:389"
//! bind_dn = "cn=admin,dc=example,dc=com"
//! password = "secret"
//! [load]
//! sessions = 8          # connections
//! depth = 1000          # outstanding requests per connection
//! duration_secs = 30
//! warmup_secs = 5
//! [keys]
//! distribution = "array"
//! max = 99999
//! [[operation]]
//! kind = "search"
//! weight = 50
//! dn = "uid=user{key},ou=People,dc=example,dc=com"
//! ```
//!
//! Every table refuses unknown keys, so a typo is an error, not a
//! silently ignored setting. `docs/bench.md` lists every key.

use serde::Deserialize;

use crate::keys::KeySpec;
use crate::ops::{OpKind, OpSpec, Operation};

/// A whole scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Name in reports.
    #[serde(default)]
    pub name: String,
    /// What it reproduces.
    #[serde(default)]
    pub description: String,
    /// The server.
    #[serde(default)]
    pub target: TargetSpec,
    /// How much load.
    #[serde(default)]
    pub load: LoadSpec,
    /// Which entries.
    #[serde(default)]
    pub keys: KeySpec,
    /// The operation mix.
    #[serde(default, rename = "operation")]
    pub operations: Vec<OpSpec>,
    /// Capacity model settings (`meridian bench capacity`).
    #[serde(default)]
    pub capacity: CapacitySpec,
}

/// `[target]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TargetSpec {
    /// `ldap://HOST:PORT`.
    pub url: String,
    /// Bind DN for every session (anonymous when absent).
    pub bind_dn: Option<String>,
    /// Its password.
    pub password: Option<String>,
    /// `ldaps://`: PEM file of the CA certificates to trust.
    pub tls_ca_file: Option<String>,
    /// `ldaps://`: accept any certificate (test servers only).
    pub tls_insecure: bool,
    /// `ldaps://`: the name the certificate must carry, if not the URL's host.
    pub tls_server_name: Option<String>,
}

impl Default for TargetSpec {
    fn default() -> Self {
        TargetSpec {
            url: "ldap://127.0.0.1:389".into(),
            bind_dn: None,
            password: None,
            tls_ca_file: None,
            tls_insecure: false,
            tls_server_name: None,
        }
    }
}

/// `[load]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoadSpec {
    /// Connections (sessions).
    pub sessions: u32,
    /// Outstanding requests per session (1: a synchronous client).
    pub depth: u32,
    /// Client threads; 0: one per CPU.
    pub threads: usize,
    /// Measured time, after the warm-up.
    pub duration_secs: f64,
    /// Time before measuring starts (requests sent, not counted).
    pub warmup_secs: f64,
    /// Stop after this many operations (0: by duration only).
    pub count: u64,
    /// Send the Queue Length control at the head of each bundle.
    pub queue_length: bool,
    /// Connect, bind, one operation, unbind, for every operation.
    pub connection_per_operation: bool,
    /// Open loop: operations per second in total (0: closed loop, or the
    /// operations' own `rate`s, or the user profile).
    pub rate: f64,
    /// User profile: simulated users (each operation's `per_user` rate
    /// times this is its rate).
    pub users: u64,
    /// User profile: users sharing one connection (seed 003: 100); when
    /// set, the session count is users / this, rounded up.
    pub users_per_session: u64,
    /// How long to wait for outstanding answers after the end.
    pub drain_secs: f64,
    /// Client-side time-out per request (0: none): a request without an
    /// answer this long is recorded as `timeout` and abandoned.
    pub timeout_secs: f64,
    /// Largest response PDU accepted.
    pub max_response_bytes: usize,
    /// Which server process to sample CPU and memory from (`/proc`).
    pub server_pid: Option<u32>,
}

impl Default for LoadSpec {
    fn default() -> Self {
        LoadSpec {
            sessions: 1,
            depth: 1,
            threads: 0,
            duration_secs: 10.0,
            warmup_secs: 0.0,
            count: 0,
            queue_length: false,
            connection_per_operation: false,
            rate: 0.0,
            users: 0,
            users_per_session: 0,
            drain_secs: 10.0,
            timeout_secs: 0.0,
            max_response_bytes: 64 << 20,
            server_pid: None,
        }
    }
}

/// `[capacity]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CapacitySpec {
    /// Offered rates (operations per second) each operation is run at.
    pub rates: Vec<f64>,
    /// Seconds per rate.
    pub step_secs: f64,
    /// Server CPUs the capacity is computed for (0: this machine's).
    pub cpus: f64,
    /// Share of CPU the capacity is computed at.
    pub target_utilisation: f64,
}

impl Default for CapacitySpec {
    fn default() -> Self {
        CapacitySpec {
            rates: vec![500.0, 1000.0, 2000.0, 4000.0],
            step_secs: 5.0,
            cpus: 0.0,
            target_utilisation: 0.8,
        }
    }
}

/// Most sessions one run opens.
pub const MAX_SESSIONS: u32 = 50_000;
/// Deepest pipeline per session.
pub const MAX_DEPTH: u32 = 100_000;

impl Scenario {
    /// Reads a scenario from TOML text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Scenario, String> {
        let scenario: Scenario = toml::from_str(text).map_err(|e| {
            // One line: where, and what (the default rendering draws
            // the offending line over several).
            let line = e
                .span()
                .map(|span| text.get(..span.start).unwrap_or("").lines().count().max(1));
            match line {
                Some(line) => format!("{origin}: line {line}: {}", e.message().trim()),
                None => format!("{origin}: {}", e.message().trim()),
            }
        })?;
        scenario.validate().map_err(|e| format!("{origin}: {e}"))?;
        Ok(scenario)
    }

    /// Checks what TOML types cannot.
    pub fn validate(&self) -> Result<(), String> {
        let load = &self.load;
        if !(1..=MAX_SESSIONS).contains(&load.sessions) {
            return Err(format!(
                "load.sessions must be 1..={MAX_SESSIONS}, not {}",
                load.sessions
            ));
        }
        if !(1..=MAX_DEPTH).contains(&load.depth) {
            return Err(format!(
                "load.depth must be 1..={MAX_DEPTH}, not {}",
                load.depth
            ));
        }
        for (key, value) in [
            ("load.duration_secs", load.duration_secs),
            ("load.warmup_secs", load.warmup_secs),
            ("load.rate", load.rate),
            ("load.drain_secs", load.drain_secs),
            ("load.timeout_secs", load.timeout_secs),
        ] {
            if !(value >= 0.0 && value.is_finite()) {
                return Err(format!("{key} must be a number of at least 0, not {value}"));
            }
        }
        if load.duration_secs == 0.0 && load.count == 0 {
            return Err(
                "load: give duration_secs or count (both are 0: the run would never end)".into(),
            );
        }
        self.keys.validate()?;
        if self.operations.is_empty() {
            return Err("no [[operation]]: nothing to send".into());
        }
        for op in &self.operations {
            for (key, value) in [
                ("weight", op.weight),
                ("rate", op.rate),
                ("per_user", op.per_user),
            ] {
                if !(value >= 0.0 && value.is_finite()) {
                    return Err(format!(
                        "operation {:?}: {key} must be at least 0, not {value}",
                        op.kind
                    ));
                }
            }
        }
        let mix = self.mix();
        if mix.weights.iter().all(|w| *w == 0.0) {
            return Err(match mix.mode {
                Mode::Profile => {
                    "every operation has per_user = 0: the profile sends nothing".into()
                }
                Mode::Rates => "every operation has rate = 0".into(),
                _ => "every operation has weight 0: nothing would be sent".into(),
            });
        }
        if mix.mode == Mode::Profile && load.users == 0 {
            return Err("operations give per_user rates but load.users is 0".into());
        }
        if self.sessions() > MAX_SESSIONS {
            return Err(format!(
                "load.users / load.users_per_session asks for {} sessions, above {MAX_SESSIONS}",
                self.sessions()
            ));
        }
        Ok(())
    }

    /// Compiles the operations, naming repeated kinds `search`, `search2`…
    pub fn compile(&self) -> Result<Vec<Operation>, String> {
        let mut seen: Vec<OpKind> = Vec::new();
        self.operations
            .iter()
            .map(|spec| {
                seen.push(spec.kind);
                let nth = seen.iter().filter(|k| **k == spec.kind).count();
                let name = spec.name.clone().unwrap_or_else(|| {
                    let base = format!("{:?}", spec.kind).to_lowercase();
                    if nth == 1 {
                        base
                    } else {
                        format!("{base}{nth}")
                    }
                });
                Operation::compile(spec, name)
            })
            .collect()
    }

    /// How requests are paced and chosen.
    ///
    /// An operation with a `rate` among operations without one is a
    /// background load (seed 001's 20 writes per second under a read
    /// mix): it gets a session of its own at that rate, and the others
    /// share `load.sessions` as usual.
    pub fn mix(&self) -> Mix {
        let ops = &self.operations;
        let mut background = Vec::new();
        let (mode, weights, rate) = if ops.iter().any(|o| o.per_user > 0.0) {
            let weights: Vec<f64> = ops.iter().map(|o| o.per_user).collect();
            let rate = weights.iter().sum::<f64>() * self.load.users as f64;
            (Mode::Profile, weights, rate)
        } else if ops.iter().all(|o| o.rate > 0.0) {
            let weights: Vec<f64> = ops.iter().map(|o| o.rate).collect();
            let rate = weights.iter().sum();
            (Mode::Rates, weights, rate)
        } else {
            let weights = ops
                .iter()
                .enumerate()
                .map(|(i, o)| {
                    if o.rate > 0.0 {
                        background.push((i, o.rate));
                        0.0
                    } else {
                        o.weight
                    }
                })
                .collect();
            if self.load.rate > 0.0 {
                (Mode::Rate, weights, self.load.rate)
            } else {
                (Mode::Closed, weights, 0.0)
            }
        };
        Mix {
            mode,
            weights,
            rate,
            background,
        }
    }

    /// Sessions of the foreground mix.
    pub fn sessions(&self) -> u32 {
        let load = &self.load;
        if self.mix().mode == Mode::Profile && load.users_per_session > 0 {
            u32::try_from(load.users.div_ceil(load.users_per_session))
                .unwrap_or(u32::MAX)
                .max(1)
        } else {
            load.sessions
        }
    }
}

/// How a run paces its requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// As fast as answers come back (window of `depth`).
    Closed,
    /// `load.rate` in total, operations by weight.
    Rate,
    /// Each operation at its own `rate`.
    Rates,
    /// `load.users` users at each operation's `per_user` rate.
    Profile,
}

/// The pacing and the operation weights.
#[derive(Debug, Clone)]
pub struct Mix {
    /// Pacing.
    pub mode: Mode,
    /// Relative share of each operation.
    pub weights: Vec<f64>,
    /// Total operations per second (open loop), 0 for closed.
    pub rate: f64,
    /// Background operations: (operation, rate), a session each.
    pub background: Vec<(usize, f64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = "[[operation]]\nkind = \"search\"\ndn = \"dc=x\"\n";

    #[test]
    fn a_minimal_scenario_has_defaults() {
        let s = Scenario::parse(MINIMAL, "t").unwrap();
        assert_eq!(s.load.sessions, 1);
        assert_eq!(s.mix().mode, Mode::Closed);
        assert_eq!(s.compile().unwrap()[0].name, "search");
    }

    #[test]
    fn mistakes_are_named() {
        for (text, needle) in [
            ("[load]\nsesions = 3\n", "unknown field `sesions`"),
            ("[[operation]]\nkind = \"search\"\nweight = 0\n", "weight 0"),
            (
                "[[operation]]\nkind = \"serch\"\n",
                "unknown variant `serch`",
            ),
            ("", "no [[operation]]"),
            (
                "[load]\nduration_secs = 0\n[[operation]]\nkind = \"search\"\n",
                "never end",
            ),
            (
                "[load]\ndepth = 0\n[[operation]]\nkind = \"search\"\n",
                "load.depth",
            ),
            (
                "[[operation]]\nkind = \"search\"\nper_user = 0.5\n",
                "load.users is 0",
            ),
        ] {
            let err = Scenario::parse(text, "s.toml").unwrap_err();
            assert!(err.contains(needle), "{text:?}: {err}");
            assert!(err.starts_with("s.toml: "), "{err}");
        }
        let bad_filter = "[[operation]]\nkind = \"search\"\nfilter = \"(uid=x\"\n";
        let err = Scenario::parse(bad_filter, "t")
            .unwrap()
            .compile()
            .unwrap_err();
        assert!(err.contains("filter"), "{err}");
    }

    #[test]
    fn pacing_follows_the_file() {
        let profile = "[load]\nusers = 100\n[[operation]]\nkind = \"search\"\nper_user = 0.5\n\
                       [[operation]]\nkind = \"bind\"\nper_user = 0.25\n";
        let mix = Scenario::parse(profile, "t").unwrap().mix();
        assert_eq!(mix.mode, Mode::Profile);
        assert_eq!(mix.rate, 75.0);
        let rates = "[[operation]]\nkind = \"search\"\nrate = 20\n[[operation]]\nkind = \"search\"\nrate = 5\n";
        let s = Scenario::parse(rates, "t").unwrap();
        assert_eq!((s.mix().mode, s.mix().rate), (Mode::Rates, 25.0));
        let background =
            "[[operation]]\nkind = \"search\"\n[[operation]]\nkind = \"bind\"\nrate = 20\n";
        let mix = Scenario::parse(background, "t").unwrap().mix();
        assert_eq!(mix.mode, Mode::Closed);
        assert_eq!(mix.weights, [1.0, 0.0]);
        assert_eq!(mix.background, [(1, 20.0)]);
        let shared = "[load]\nusers = 250\nusers_per_session = 100\n[[operation]]\nkind = \"search\"\nper_user = 0.01\n";
        assert_eq!(Scenario::parse(shared, "t").unwrap().sessions(), 3);
        let names: Vec<String> = s.compile().unwrap().into_iter().map(|o| o.name).collect();
        assert_eq!(names, ["search", "search2"]);
    }
}
