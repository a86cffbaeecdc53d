//! A topology brought up: a link for every directed pair of nodes (what
//! node `i` dials to reach node `j`) and one for each node's clients,
//! the ways between every two places, and the commands that change them
//! during a run.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use crate::conditions::{Conditions, Way};
use crate::link::Link;
use crate::topology::{Topology, bytes_per_second, half_of, millis};

/// Where bytes come from or go: a site's nodes, or a site's clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Place {
    /// The nodes of a site (its index).
    Site(usize),
    /// The clients of a site (its index), which reach only its nodes.
    Clients(usize),
}

/// A running emulator.
#[derive(Debug)]
pub struct Emulator {
    topology: Topology,
    ways: BTreeMap<(Place, Place), Way>,
    /// `(from, to)` node numbers (from 1): the link `from` dials for `to`.
    peers: BTreeMap<(usize, usize), Link>,
    /// Each node's clients' link, by node number.
    clients: BTreeMap<usize, Link>,
}

/// A command refused, with the reason.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CommandError(String);

impl Emulator {
    /// Starts the links of `topology` to nodes whose peer listeners are
    /// `peers` and LDAP listeners `ldap` (node `i` at index `i - 1`).
    pub async fn start(
        topology: Topology,
        peers: &[SocketAddr],
        ldap: &[SocketAddr],
    ) -> io::Result<Emulator> {
        let n = topology.node_count();
        if peers.len() != n || ldap.len() != n {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the topology has {n} nodes, not {}", peers.len()),
            ));
        }
        let mut ways = BTreeMap::new();
        for a in 0..topology.sites.len() {
            for b in 0..topology.sites.len() {
                ways.insert(
                    (Place::Site(a), Place::Site(b)),
                    Way::new(topology.conditions(a, b)),
                );
            }
            let local = Conditions::with_delay(half_of(topology.local_rtt_ms));
            ways.insert((Place::Clients(a), Place::Site(a)), Way::new(local.clone()));
            ways.insert((Place::Site(a), Place::Clients(a)), Way::new(local));
        }
        let way = |from: Place, to: Place| ways.get(&(from, to)).cloned().ok_or_else(unknown);
        let site = |node: usize| topology.site_of(node).ok_or_else(unknown);
        let mut peer_links = BTreeMap::new();
        let mut client_links = BTreeMap::new();
        for (from, to_peer) in (1..=n).zip(ldap) {
            let a = Place::Site(site(from)?);
            for (to, target) in (1..=n).zip(peers) {
                if from != to {
                    let b = Place::Site(site(to)?);
                    let link = Link::start(*target, way(a, b)?, way(b, a)?).await?;
                    peer_links.insert((from, to), link);
                }
            }
            let clients = Place::Clients(site(from)?);
            let link = Link::start(*to_peer, way(clients, a)?, way(a, clients)?).await?;
            client_links.insert(from, link);
        }
        Ok(Emulator {
            topology,
            ways,
            peers: peer_links,
            clients: client_links,
        })
    }

    /// The topology it runs.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The address node `from` dials to reach node `to`'s peer listener.
    pub fn peer_route(&self, from: usize, to: usize) -> Option<SocketAddr> {
        self.peers.get(&(from, to)).map(Link::addr)
    }

    /// The address a client of node `node`'s site dials to reach its LDAP
    /// listener.
    pub fn client_route(&self, node: usize) -> Option<SocketAddr> {
        self.clients.get(&node).map(Link::addr)
    }

    /// Carries out one control command (see [`crate::control`]) and says
    /// what it did.
    pub fn execute(&self, line: &str) -> Result<String, CommandError> {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["status"] => Ok(self.status()),
            ["heal", "all"] => {
                for way in self.ways.values() {
                    way.change(|c| {
                        c.cut = false;
                        c.stalled_until = None;
                    });
                }
                Ok("every way healed".into())
            }
            ["cut", places @ ..] => self.for_each_way(places, "cut", |w| w.set_cut(true)),
            ["heal", places @ ..] => self.for_each_way(places, "healed", |w| w.set_cut(false)),
            ["isolate", site] => {
                // From the other sites; its own clients still reach it.
                let site = self.site(site)?;
                for ((from, to), way) in &self.ways {
                    let (Place::Site(a), Place::Site(b)) = (from, to) else {
                        continue;
                    };
                    if (*a == site) != (*b == site) {
                        way.set_cut(true);
                    }
                }
                Ok(format!("{} isolated", self.name(Place::Site(site))))
            }
            ["stall", rest @ ..] => {
                let (places, ms) = split_number(rest, "stall A B MILLISECONDS")?;
                self.for_each_way(places, "stalled", |w| w.stall(millis(ms)))
            }
            ["rtt", rest @ ..] => {
                let (places, ms) = split_number(rest, "rtt A B MILLISECONDS")?;
                self.for_each_way(places, "delayed", |w| w.change(|c| c.delay = half_of(ms)))
            }
            ["jitter", rest @ ..] => {
                let (places, ms) = split_number(rest, "jitter A B MILLISECONDS")?;
                self.for_each_way(places, "jittered", |w| w.change(|c| c.jitter = millis(ms)))
            }
            ["bandwidth", places @ .., "none"] => {
                self.for_each_way(places, "unlimited", |w| w.change(|c| c.bandwidth = None))
            }
            ["bandwidth", rest @ ..] => {
                let (places, mbit) = split_number(rest, "bandwidth A B MBIT|none")?;
                if mbit <= 0.0 {
                    return Err(CommandError(
                        "bandwidth: give megabits per second above 0".into(),
                    ));
                }
                self.for_each_way(places, "capped", |w| {
                    w.change(|c| c.bandwidth = Some(bytes_per_second(mbit)));
                })
            }
            _ => Err(CommandError(format!(
                "unknown command {line:?}; commands: status, cut A B, cut A>B, heal A B, heal all, isolate SITE, stall A B MS, rtt A B MS, jitter A B MS, bandwidth A B MBIT|none (A and B: sites, or SITE.clients)"
            ))),
        }
    }

    /// Applies `change` to the ways `places` names: `A B` both ways,
    /// `A>B` one.
    fn for_each_way(
        &self,
        places: &[&str],
        done: &str,
        change: impl Fn(&Way),
    ) -> Result<String, CommandError> {
        let pairs = match places {
            [one_way] => {
                let Some((a, b)) = one_way.split_once('>') else {
                    return Err(CommandError(format!(
                        "{one_way:?}: name two places, `A B` (both ways) or `A>B` (one way)"
                    )));
                };
                let (a, b) = (self.place(a)?, self.place(b)?);
                vec![(a, b)]
            }
            [a, b] => {
                let (a, b) = (self.place(a)?, self.place(b)?);
                vec![(a, b), (b, a)]
            }
            _ => {
                return Err(CommandError(
                    "name two places, `A B` (both ways) or `A>B` (one way)".into(),
                ));
            }
        };
        let mut said = Vec::new();
        for (a, b) in pairs {
            let Some(way) = self.ways.get(&(a, b)) else {
                return Err(CommandError(format!(
                    "there is no way from {} to {}: clients reach only their own site",
                    self.name(a),
                    self.name(b)
                )));
            };
            change(way);
            said.push(format!("{}>{}", self.name(a), self.name(b)));
        }
        Ok(format!("{done}: {}", said.join(" ")))
    }

    fn site(&self, name: &str) -> Result<usize, CommandError> {
        self.topology
            .site_index(name)
            .ok_or_else(|| CommandError(format!("no site is named {name:?}")))
    }

    fn place(&self, name: &str) -> Result<Place, CommandError> {
        match name.strip_suffix(".clients") {
            Some(site) => self.site(site).map(Place::Clients),
            None => self.site(name).map(Place::Site),
        }
    }

    fn name(&self, place: Place) -> String {
        let site = |i: usize| self.topology.sites.get(i).map_or("?", |s| s.name.as_str());
        match place {
            Place::Site(i) => site(i).to_string(),
            Place::Clients(i) => format!("{}.clients", site(i)),
        }
    }

    /// Every way's conditions and every link's traffic, a line each.
    fn status(&self) -> String {
        let mut text = String::new();
        for ((from, to), way) in &self.ways {
            let c = way.conditions();
            let _ = writeln!(
                text,
                "way {}>{} delay_ms={:.1} jitter_ms={:.1} bandwidth_mbit={} cut={}{}",
                self.name(*from),
                self.name(*to),
                ms(c.delay),
                ms(c.jitter),
                c.bandwidth.map_or("unlimited".to_string(), |b| format!(
                    "{:.1}",
                    b as f64 * 8.0 / 1e6
                )),
                c.cut,
                if c.stalled_until
                    .is_some_and(|u| u > tokio::time::Instant::now())
                {
                    " stalled"
                } else {
                    ""
                }
            );
        }
        for ((from, to), link) in &self.peers {
            let _ = writeln!(
                text,
                "link node{from}>node{to} {} -> {} delivered_bytes={} connections={}",
                link.addr(),
                link.target(),
                link.delivered(),
                link.open_connections()
            );
        }
        for (node, link) in &self.clients {
            let _ = writeln!(
                text,
                "clients node{node} {} -> {} delivered_bytes={} connections={}",
                link.addr(),
                link.target(),
                link.delivered(),
                link.open_connections()
            );
        }
        text
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn unknown() -> io::Error {
    io::Error::other("a node or site outside the topology")
}

/// `A B N` or `A>B N`: the places and the number.
fn split_number<'a, 'b>(
    words: &'b [&'a str],
    usage: &str,
) -> Result<(&'b [&'a str], f64), CommandError> {
    let Some((last, places)) = words.split_last() else {
        return Err(CommandError(format!("usage: {usage}")));
    };
    let number: f64 = last
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite() && *n >= 0.0)
        .ok_or_else(|| CommandError(format!("{last:?} is not a number; usage: {usage}")))?;
    Ok((places, number))
}
