//! The topology file: sites, the nodes at each, and the round-trip time
//! between every two sites (TOML; examples in `contrib/topologies/`).
//!
//! ```toml
//! local_rtt_ms = 0.5          # within a site, and a site's clients to its nodes
//! [[sites]]
//! name = "washington"
//! nodes = 1
//! [[sites]]
//! name = "frankfurt"
//! [[rtt]]
//! between = ["washington", "frankfurt"]
//! ms = 89
//! jitter_ms = 1               # optional, each way
//! bandwidth_mbit = 1000       # optional, each way
//! ```

use std::time::Duration;

use serde::Deserialize;

use crate::conditions::Conditions;

/// Most sites in a topology.
pub const MAX_SITES: usize = 16;
/// Most nodes at one site.
pub const MAX_NODES_PER_SITE: usize = 16;
/// The longest round trip a topology may give (a minute).
const MAX_RTT_MS: f64 = 60_000.0;

/// Why a topology file is refused.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// It is not TOML of the expected shape.
    #[error("the topology file: {0}")]
    Syntax(#[from] toml::de::Error),
    /// It is TOML, but says something impossible.
    #[error("the topology file: {0}")]
    Invalid(String),
}

/// A topology as written in its file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// The round trip within a site, and from a site's clients to its
    /// nodes, in milliseconds.
    #[serde(default = "default_local_rtt")]
    pub local_rtt_ms: f64,
    /// The sites, in order: nodes are numbered from 1 site by site.
    pub sites: Vec<Site>,
    /// The path between every two sites.
    #[serde(default)]
    pub rtt: Vec<Path>,
}

fn default_local_rtt() -> f64 {
    0.2
}

/// One site.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Site {
    /// Its name (lower-case letters, digits and `-`).
    pub name: String,
    /// Its nodes.
    #[serde(default = "one")]
    pub nodes: usize,
}

fn one() -> usize {
    1
}

/// The path between two sites, alike both ways.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Path {
    /// The two sites.
    pub between: [String; 2],
    /// The round-trip time in milliseconds.
    pub ms: f64,
    /// Each way's delay varies by up to this much, in milliseconds.
    #[serde(default)]
    pub jitter_ms: f64,
    /// Each way's bandwidth in megabits per second; absent: unlimited.
    #[serde(default)]
    pub bandwidth_mbit: Option<f64>,
}

impl Topology {
    /// Reads and checks a topology.
    pub fn parse(text: &str) -> Result<Topology, TopologyError> {
        let topology: Topology = toml::from_str(text)?;
        topology.check()?;
        Ok(topology)
    }

    fn check(&self) -> Result<(), TopologyError> {
        let invalid = |s: String| Err(TopologyError::Invalid(s));
        if self.sites.is_empty() || self.sites.len() > MAX_SITES {
            return invalid(format!("give 1 to {MAX_SITES} [[sites]]"));
        }
        check_ms("local_rtt_ms", self.local_rtt_ms)?;
        for (i, site) in self.sites.iter().enumerate() {
            let good_name = !site.name.is_empty()
                && site
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            if !good_name {
                return invalid(format!(
                    "site {:?}: a name is lower-case letters, digits and '-'",
                    site.name
                ));
            }
            if self.sites.iter().take(i).any(|s| s.name == site.name) {
                return invalid(format!("site {:?} is given twice", site.name));
            }
            if site.nodes == 0 || site.nodes > MAX_NODES_PER_SITE {
                return invalid(format!(
                    "site {:?}: nodes must be 1 to {MAX_NODES_PER_SITE}",
                    site.name
                ));
            }
        }
        for (i, path) in self.rtt.iter().enumerate() {
            let [a, b] = &path.between;
            for name in [a, b] {
                if self.site_index(name).is_none() {
                    return invalid(format!("[[rtt]] names an unknown site {name:?}"));
                }
            }
            if a == b {
                return invalid(format!(
                    "[[rtt]] between {a:?} and itself: a site's own round trip is local_rtt_ms"
                ));
            }
            let same = |p: &Path| {
                (p.between[0] == *a && p.between[1] == *b)
                    || (p.between[0] == *b && p.between[1] == *a)
            };
            if self.rtt.iter().take(i).any(same) {
                return invalid(format!("the path between {a:?} and {b:?} is given twice"));
            }
            check_ms("ms", path.ms)?;
            check_ms("jitter_ms", path.jitter_ms)?;
            if path
                .bandwidth_mbit
                .is_some_and(|m| !(m > 0.0 && m.is_finite()))
            {
                return invalid(format!(
                    "the path between {a:?} and {b:?}: bandwidth_mbit must be above 0"
                ));
            }
        }
        for (i, a) in self.sites.iter().enumerate() {
            for b in self.sites.iter().skip(i + 1) {
                if self.path(&a.name, &b.name).is_none() {
                    return invalid(format!(
                        "no [[rtt]] between {:?} and {:?}: every two sites need one",
                        a.name, b.name
                    ));
                }
            }
        }
        Ok(())
    }

    /// The index of the site of that name.
    pub fn site_index(&self, name: &str) -> Option<usize> {
        self.sites.iter().position(|s| s.name == name)
    }

    /// The path between two sites.
    pub fn path(&self, a: &str, b: &str) -> Option<&Path> {
        self.rtt.iter().find(|p| {
            (p.between[0] == a && p.between[1] == b) || (p.between[0] == b && p.between[1] == a)
        })
    }

    /// The longest round trip of the topology, in milliseconds (within a
    /// site, or between two).
    pub fn longest_rtt_ms(&self) -> f64 {
        self.rtt
            .iter()
            .map(|p| p.ms)
            .fold(self.local_rtt_ms, f64::max)
    }

    /// How many nodes in all.
    pub fn node_count(&self) -> usize {
        self.sites.iter().map(|s| s.nodes).sum()
    }

    /// The site of node `node` (from 1).
    pub fn site_of(&self, node: usize) -> Option<usize> {
        let mut first = 1;
        for (i, site) in self.sites.iter().enumerate() {
            if (first..first + site.nodes).contains(&node) {
                return Some(i);
            }
            first += site.nodes;
        }
        None
    }

    /// The conditions one way between sites `a` and `b` (indexes), or
    /// within a site when they are the same.
    pub fn conditions(&self, a: usize, b: usize) -> Conditions {
        let (Some(sa), Some(sb)) = (self.sites.get(a), self.sites.get(b)) else {
            return Conditions::with_delay(Duration::ZERO);
        };
        match self.path(&sa.name, &sb.name).filter(|_| a != b) {
            None => Conditions::with_delay(half_of(self.local_rtt_ms)),
            Some(path) => Conditions {
                jitter: millis(path.jitter_ms),
                bandwidth: path.bandwidth_mbit.map(bytes_per_second),
                ..Conditions::with_delay(half_of(path.ms))
            },
        }
    }
}

fn check_ms(key: &str, ms: f64) -> Result<(), TopologyError> {
    if (0.0..=MAX_RTT_MS).contains(&ms) {
        Ok(())
    } else {
        Err(TopologyError::Invalid(format!(
            "{key} = {ms}: give 0 to {MAX_RTT_MS} milliseconds"
        )))
    }
}

/// Half a round trip: one way's delay.
pub(crate) fn half_of(rtt_ms: f64) -> Duration {
    millis(rtt_ms / 2.0)
}

pub(crate) fn millis(ms: f64) -> Duration {
    Duration::from_secs_f64((ms / 1000.0).clamp(0.0, MAX_RTT_MS))
}

pub(crate) fn bytes_per_second(mbit: f64) -> u64 {
    // Checked above 0 and finite; at least a byte a second.
    ((mbit * 1_000_000.0 / 8.0) as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const THREE: &str = r#"
local_rtt_ms = 1
[[sites]]
name = "washington"
nodes = 2
[[sites]]
name = "frankfurt"
[[sites]]
name = "sao-paulo"
[[rtt]]
between = ["washington", "frankfurt"]
ms = 89
[[rtt]]
between = ["washington", "sao-paulo"]
ms = 120
jitter_ms = 2
[[rtt]]
between = ["sao-paulo", "frankfurt"]
ms = 195
bandwidth_mbit = 100
"#;

    #[test]
    fn a_topology_gives_each_way_its_conditions() {
        let t = Topology::parse(THREE).unwrap();
        assert_eq!(t.node_count(), 4);
        assert_eq!(t.longest_rtt_ms(), 195.0);
        assert_eq!(
            (1..=5).map(|n| t.site_of(n)).collect::<Vec<_>>(),
            [Some(0), Some(0), Some(1), Some(2), None]
        );
        assert_eq!(t.conditions(0, 1).delay, Duration::from_micros(44_500));
        assert_eq!(t.conditions(1, 0).delay, Duration::from_micros(44_500));
        assert_eq!(t.conditions(0, 2).jitter, Duration::from_millis(2));
        assert_eq!(t.conditions(2, 1).bandwidth, Some(12_500_000));
        assert_eq!(t.conditions(1, 1).delay, Duration::from_micros(500));
    }

    #[test]
    fn impossible_topologies_are_refused_with_a_reason() {
        let missing = THREE.replace(
            "between = [\"sao-paulo\", \"frankfurt\"]",
            "between = [\"sao-paulo\", \"washington\"]",
        );
        for (text, says) in [
            (missing.as_str(), "twice"),
            (
                "[[sites]]\nname = \"a\"\n[[sites]]\nname = \"b\"\n",
                "no [[rtt]] between",
            ),
            ("[[sites]]\nname = \"A\"\n", "lower-case"),
            ("[[sites]]\nname = \"a\"\nnodes = 0\n", "nodes must be"),
            ("sites = []\n", "give 1 to"),
            (
                "[[sites]]\nname = \"a\"\n[[rtt]]\nbetween = [\"a\", \"z\"]\nms = 1\n",
                "unknown site",
            ),
            ("[[sites]]\nname = \"a\"\nspeed = 1\n", "unknown field"),
            ("local_rtt_ms = -1\n[[sites]]\nname = \"a\"\n", "give 0 to"),
        ] {
            let error = Topology::parse(text).unwrap_err().to_string();
            assert!(error.contains(says), "{text}: {error}");
        }
    }
}
