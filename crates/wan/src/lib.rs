//! A WAN emulator of our own, for a cluster on one machine to be run as
//! if its nodes were on several continents. These kernels have no `tc
//! netem`; TCP proxies need neither root nor a kernel module.
//!
//! A [`Topology`] (a TOML file: sites, nodes per site, the round-trip
//! time between every two sites) is brought up as an [`Emulator`]: a
//! [`Link`] (a loopback TCP proxy) for every directed pair of nodes, the
//! one node `i` dials to reach node `j`, and one for each node's clients.
//! Each link carries its two directions through a [`Way`], the
//! [`Conditions`] of bytes going from one place to another (one-way
//! delay, jitter, bandwidth cap, stall, cut), shared by every link and
//! connection that carries bytes that way, and changed while they run by
//! commands on the control channel ([`control`]).
//!
//! What it does not emulate: packet loss short of a cut (TCP would hide
//! it as delay), reordering (TCP hides it), and the sender's congestion
//! window (a sender here is only slowed by the bandwidth cap and the
//! link's bounded queue, [`link`]).

pub mod conditions;
pub mod control;
pub mod emulator;
pub mod link;
pub mod topology;

pub use conditions::{Conditions, Way};
pub use emulator::{CommandError, Emulator};
pub use link::Link;
pub use topology::{Topology, TopologyError};
