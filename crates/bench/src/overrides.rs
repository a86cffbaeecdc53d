//! What a command line or the console's job form changes in a scenario:
//! [`Overrides`] of its settings, and a [`Sweep`] that makes one run per
//! value of sessions, depth or offered rate. One place, so `meridian
//! bench` and `meridian console` run the same scenario the same way.

use crate::keys::Kind;
use crate::scenario::Scenario;

/// Settings that replace the scenario's own; `None` keeps its value.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// Server URL.
    pub url: Option<String>,
    /// Bind DN of every session.
    pub bind_dn: Option<String>,
    /// Its password.
    pub password: Option<String>,
    /// ldaps://: PEM file of the CA certificates to trust.
    pub tls_ca_file: Option<String>,
    /// ldaps://: accept any certificate (only ever turns it on).
    pub tls_insecure: bool,
    /// Sessions (connections).
    pub sessions: Option<u32>,
    /// Outstanding requests per session.
    pub depth: Option<u32>,
    /// Measured seconds.
    pub duration_secs: Option<f64>,
    /// Warm-up seconds.
    pub warmup_secs: Option<f64>,
    /// Stop after this many operations.
    pub count: Option<u64>,
    /// Open loop: operations per second in total.
    pub rate: Option<f64>,
    /// User profile: simulated users.
    pub users: Option<u64>,
    /// Client threads.
    pub threads: Option<usize>,
    /// Local server process to read CPU and memory from.
    pub server_pid: Option<u32>,
    /// Largest key.
    pub keys_max: Option<u64>,
    /// Key distribution.
    pub distribution: Option<Kind>,
}

impl Overrides {
    /// `scenario` with these settings, checked as a scenario file is.
    pub fn apply(&self, scenario: &mut Scenario) -> Result<(), String> {
        let t = &mut scenario.target;
        set(&mut t.url, &self.url);
        if self.bind_dn.is_some() {
            t.bind_dn.clone_from(&self.bind_dn);
        }
        if self.password.is_some() {
            t.password.clone_from(&self.password);
        }
        if self.tls_ca_file.is_some() {
            t.tls_ca_file.clone_from(&self.tls_ca_file);
        }
        t.tls_insecure |= self.tls_insecure;
        let l = &mut scenario.load;
        set(&mut l.sessions, &self.sessions);
        set(&mut l.depth, &self.depth);
        set(&mut l.duration_secs, &self.duration_secs);
        set(&mut l.warmup_secs, &self.warmup_secs);
        set(&mut l.count, &self.count);
        set(&mut l.rate, &self.rate);
        set(&mut l.users, &self.users);
        set(&mut l.threads, &self.threads);
        l.server_pid = self.server_pid.or(l.server_pid);
        set(&mut scenario.keys.max, &self.keys_max);
        set(&mut scenario.keys.distribution, &self.distribution);
        scenario.validate()
    }
}

fn set<T: Clone>(field: &mut T, value: &Option<T>) {
    if let Some(value) = value {
        field.clone_from(value);
    }
}

/// What a sweep varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Swept {
    Sessions,
    Depth,
    /// Open loop at each offered rate: latency against load.
    Rate,
}

/// One run per value: `sessions=1,8,32`, `depth=1,10,100` or
/// `rate=1000,2000,4000`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sweep {
    swept: Swept,
    name: String,
    values: Vec<f64>,
}

impl Sweep {
    /// Reads `KEY=V1,V2,...`.
    pub fn parse(text: &str) -> Result<Sweep, String> {
        let (key, values) = text.split_once('=').ok_or_else(|| {
            format!("sweep {text:?}: expected sessions=1,8,32, depth=1,10,100 or rate=1000,2000")
        })?;
        let swept = match key.trim() {
            "sessions" => Swept::Sessions,
            "depth" => Swept::Depth,
            "rate" => Swept::Rate,
            other => {
                return Err(format!(
                    "sweep {other}: sessions, depth and rate can be swept"
                ));
            }
        };
        let values = values
            .split(',')
            .map(|v| {
                v.trim()
                    .parse()
                    .ok()
                    .filter(|n: &f64| *n >= 0.0 && n.is_finite())
                    .ok_or_else(|| format!("sweep: {v:?} is not a number"))
            })
            .collect::<Result<Vec<f64>, String>>()?;
        Ok(Sweep {
            swept,
            name: key.trim().to_owned(),
            values,
        })
    }

    /// The runs: each value's label (`sessions=8`) and scenario, checked.
    pub fn runs(&self, scenario: &Scenario) -> Result<Vec<(String, Scenario)>, String> {
        self.values
            .iter()
            .map(|&value| {
                let mut one = scenario.clone();
                let whole = u32::try_from(value as u64).unwrap_or(u32::MAX);
                match self.swept {
                    Swept::Sessions => one.load.sessions = whole,
                    Swept::Depth => one.load.depth = whole,
                    Swept::Rate => one.load.rate = value,
                }
                one.validate()?;
                Ok((format!("{}={value}", self.name), one))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario() -> Scenario {
        Scenario::parse(
            "name = \"t\"\n[load]\nduration_secs = 5\n[[operation]]\nkind = \"search\"\ndn = \"dc=x\"\n",
            "t",
        )
        .unwrap()
    }

    #[test]
    fn overrides_replace_only_what_they_name_and_are_checked() {
        let mut s = scenario();
        let before = s.load.depth;
        Overrides {
            sessions: Some(3),
            keys_max: Some(99),
            distribution: Some(Kind::Zipf),
            ..Overrides::default()
        }
        .apply(&mut s)
        .unwrap();
        assert_eq!((s.load.sessions, s.load.depth, s.keys.max), (3, before, 99));
        assert_eq!(s.keys.distribution, Kind::Zipf);
        let too_many = Overrides {
            sessions: Some(crate::scenario::MAX_SESSIONS + 1),
            ..Overrides::default()
        };
        assert!(too_many.apply(&mut scenario()).is_err());
    }

    #[test]
    fn a_sweep_makes_a_run_per_value() {
        let runs = Sweep::parse("depth=1,10,100")
            .unwrap()
            .runs(&scenario())
            .unwrap();
        let labels: Vec<&str> = runs.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(labels, ["depth=1", "depth=10", "depth=100"]);
        assert_eq!(runs[2].1.load.depth, 100);
        let rates = Sweep::parse("rate=500.5")
            .unwrap()
            .runs(&scenario())
            .unwrap();
        assert_eq!(rates[0].1.load.rate, 500.5);
        for bad in ["threads=1,2", "sessions", "depth=1,x", "rate=-1"] {
            assert!(Sweep::parse(bad).is_err(), "{bad}");
        }
    }
}
