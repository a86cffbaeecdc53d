//! Bind protection: failed simple binds are counted per DN and per client
//! address; past a few, each further failure is answered late (a delay
//! that doubles, up to a cap), and past more, binds to that DN, or from
//! that address, are refused for a while without their password being
//! checked: invalidCredentials, as for a wrong password, so a guesser
//! learns nothing. The administrator's DN is counted and slowed but never
//! locked (a stranger could otherwise lock the administrator out); its
//! guessers are stopped by the per-address lockout.
//!
//! This is rate limiting in the memory of one process, bounded in size;
//! a persisted, replicated lockout belongs with the password policy
//! (`pwdAccountLockedTime`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Most DNs (and, apart, addresses) tracked at once: a client inventing
/// DNs cannot make the table grow without bound.
const MAX_TRACKED: usize = 100_000;

/// The first delay, doubled with each further failure.
const FIRST_DELAY: Duration = Duration::from_millis(100);

/// The thresholds (`security.bind_*`); a count of 0 turns its rule off.
#[derive(Debug, Clone, Copy)]
pub struct BindGuardSettings {
    /// Failures after which each further failure is answered late.
    pub delay_after: u32,
    /// The longest delay.
    pub max_delay: Duration,
    /// Failures for one DN that lock it.
    pub lockout_after: u32,
    /// Failures from one address that lock it.
    pub lockout_per_ip_after: u32,
    /// Failures older than this are forgotten.
    pub window: Duration,
    /// How long a lockout lasts.
    pub lockout: Duration,
}

/// Failures of one DN or address.
#[derive(Debug)]
struct Tally {
    failures: u32,
    since: Instant,
    locked_until: Option<Instant>,
}

impl Tally {
    fn new(now: Instant) -> Tally {
        Tally {
            failures: 0,
            since: now,
            locked_until: None,
        }
    }

    fn locked(&self, now: Instant) -> bool {
        self.locked_until.is_some_and(|until| now < until)
    }

    /// Counts a failure; true if it starts a lockout.
    fn fail(&mut self, now: Instant, settings: &BindGuardSettings, lock_after: u32) -> bool {
        if now.duration_since(self.since) > settings.window {
            self.failures = 0;
            self.since = now;
        }
        self.failures += 1;
        if lock_after > 0 && self.failures >= lock_after && !self.locked(now) {
            self.locked_until = Some(now + settings.lockout);
            self.failures = 0;
            self.since = now;
            return true;
        }
        false
    }

    /// Forgettable: no lockout running, and no failure in the window.
    fn stale(&self, now: Instant, window: Duration) -> bool {
        !self.locked(now) && now.duration_since(self.since) > window
    }
}

/// Why a bind was refused unchecked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Locked {
    Dn,
    Address,
}

#[derive(Debug, Default)]
struct Tallies {
    by_dn: HashMap<String, Tally>,
    by_ip: HashMap<IpAddr, Tally>,
}

/// The failed-bind tallies of the whole server.
#[derive(Debug)]
pub(crate) struct BindGuard {
    settings: BindGuardSettings,
    /// The administrator's normalised DN: slowed, never locked.
    exempt_dn: String,
    tallies: Mutex<Tallies>,
}

/// Finds or makes the tally of `key`, keeping the table within
/// [`MAX_TRACKED`]: stale tallies go first, then, while the table is
/// still full, those with the fewest failures that are not locked (a
/// flood of one guess each cannot push out an account under attack); a
/// key that still finds no room is not tracked (`None`), and the caller
/// fails safe. The key is copied only when it is new.
fn tally_of<'t, K, Q>(
    table: &'t mut HashMap<K, Tally>,
    key: &Q,
    now: Instant,
    window: Duration,
) -> Option<&'t mut Tally>
where
    K: std::borrow::Borrow<Q> + std::hash::Hash + Eq,
    Q: ToOwned<Owned = K> + std::hash::Hash + Eq + ?Sized,
{
    if !table.contains_key(key) {
        if table.len() >= MAX_TRACKED {
            table.retain(|_, t| !t.stale(now, window));
        }
        if table.len() >= MAX_TRACKED {
            // All the lightest go at once, so the scan is paid once for
            // as many insertions as it frees (a flood of one guess each
            // frees the whole table).
            let lightest = table
                .values()
                .filter(|t| !t.locked(now))
                .map(|t| t.failures)
                .min()?;
            table.retain(|_, t| t.locked(now) || t.failures > lightest);
        }
        table.insert(key.to_owned(), Tally::new(now));
    }
    table.get_mut(key)
}

impl BindGuard {
    pub(crate) fn new(settings: BindGuardSettings, admin_dn: &str) -> BindGuard {
        BindGuard {
            settings,
            exempt_dn: admin_dn.to_owned(),
            tallies: Mutex::new(Tallies::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Tallies> {
        self.tallies.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a bind to `dn` (normalised) from `ip` is refused unchecked.
    pub(crate) fn locked(&self, dn: &str, ip: IpAddr) -> Option<Locked> {
        // In-memory rate limits of the network layer, never stored.
        #[allow(clippy::disallowed_methods)]
        let now = Instant::now();
        let t = self.lock();
        if t.by_ip.get(&ip).is_some_and(|t| t.locked(now)) {
            return Some(Locked::Address);
        }
        if t.by_dn.get(dn).is_some_and(|t| t.locked(now)) {
            return Some(Locked::Dn);
        }
        None
    }

    /// Counts a failed bind, to `dn` when it names an entry with a
    /// password (`None`: no entry, or none to match, so the DN cannot be
    /// guessed into; counted against the address only, and so junk DNs
    /// never crowd real accounts out of the table). Returns how long to
    /// wait before answering, and what it locked, if anything. A failure
    /// the full table cannot count is answered after the longest delay.
    pub(crate) fn failed(&self, dn: Option<&str>, ip: IpAddr) -> (Duration, Option<Locked>) {
        // In-memory rate limits of the network layer, never stored.
        #[allow(clippy::disallowed_methods)]
        let now = Instant::now();
        let s = &self.settings;
        let mut t = self.lock();
        let mut started = None;
        let mut most = 0;
        let mut untracked = false;
        if let Some(dn) = dn {
            let dn_lock = if dn == self.exempt_dn {
                0
            } else {
                s.lockout_after
            };
            match tally_of(&mut t.by_dn, dn, now, s.window) {
                Some(tally) => {
                    if tally.fail(now, s, dn_lock) {
                        started = Some(Locked::Dn);
                    }
                    most = most.max(tally.failures);
                }
                None => untracked = true,
            }
        }
        match tally_of(&mut t.by_ip, &ip, now, s.window) {
            Some(tally) => {
                if tally.fail(now, s, s.lockout_per_ip_after) {
                    started = Some(Locked::Address);
                }
                most = most.max(tally.failures);
            }
            None => untracked = true,
        }
        if untracked && s.delay_after > 0 {
            return (s.max_delay, started);
        }
        let delay = if s.delay_after > 0 && most > s.delay_after {
            let doublings = (most - s.delay_after - 1).min(16);
            FIRST_DELAY.saturating_mul(1 << doublings).min(s.max_delay)
        } else {
            Duration::ZERO
        };
        (delay, started)
    }

    /// A successful bind: the DN's failures are forgotten (not the
    /// address's: one known password must not reset a guesser's count).
    pub(crate) fn succeeded(&self, dn: &str) {
        // In-memory rate limits of the network layer, never stored.
        #[allow(clippy::disallowed_methods)]
        let now = Instant::now();
        let mut t = self.lock();
        if t.by_dn.get(dn).is_some_and(|t| !t.locked(now)) {
            t.by_dn.remove(dn);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> BindGuardSettings {
        BindGuardSettings {
            delay_after: 2,
            max_delay: Duration::from_millis(400),
            lockout_after: 5,
            lockout_per_ip_after: 8,
            window: Duration::from_secs(60),
            lockout: Duration::from_secs(60),
        }
    }

    #[test]
    fn failures_slow_then_lock_a_dn_but_never_the_administrator() {
        let guard = BindGuard::new(settings(), "cn=admin");
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let delays: Vec<Duration> = (0..4).map(|_| guard.failed(Some("uid=a"), ip).0).collect();
        assert_eq!(delays, [0, 0, 100, 200].map(Duration::from_millis).to_vec());
        assert_eq!(guard.locked("uid=a", ip), None);
        assert_eq!(guard.failed(Some("uid=a"), ip).1, Some(Locked::Dn));
        assert_eq!(guard.locked("uid=a", ip), Some(Locked::Dn));
        // A success does not lift a lockout.
        guard.succeeded("uid=a");
        assert_eq!(guard.locked("uid=a", ip), Some(Locked::Dn));
        // Another address may bind to another DN.
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        for _ in 0..6 {
            guard.failed(Some("cn=admin"), other);
        }
        assert_eq!(guard.locked("cn=admin", other), None);
        assert_eq!(guard.locked("uid=b", other), None);
        // The delay is capped.
        assert_eq!(
            guard.failed(Some("cn=admin"), other).0,
            Duration::from_millis(400)
        );
    }

    #[test]
    fn an_address_guessing_many_dns_is_locked() {
        let guard = BindGuard::new(settings(), "cn=admin");
        let ip: IpAddr = "10.0.0.9".parse().unwrap();
        for i in 0..7 {
            assert_eq!(guard.failed(Some(&format!("uid=u{i}")), ip).1, None);
        }
        assert_eq!(guard.failed(Some("uid=u7"), ip).1, Some(Locked::Address));
        assert_eq!(guard.locked("uid=anyone", ip), Some(Locked::Address));
        // A success resets the DN only.
        guard.succeeded("uid=u1");
        assert_eq!(guard.locked("uid=anyone", ip), Some(Locked::Address));
    }

    #[test]
    fn a_success_forgets_the_dn_s_failures() {
        let guard = BindGuard::new(settings(), "cn=admin");
        let ip: IpAddr = "10.0.0.3".parse().unwrap();
        for _ in 0..4 {
            guard.failed(Some("uid=c"), ip);
        }
        guard.succeeded("uid=c");
        let other: IpAddr = "10.0.0.4".parse().unwrap();
        assert_eq!(guard.failed(Some("uid=c"), other).0, Duration::ZERO);
    }

    /// Issue 44, severe 4: failures on 100,500 junk DNs filled the table,
    /// after which a real account's failures were neither slowed nor
    /// locked.
    #[test]
    fn junk_dns_and_a_full_table_never_switch_the_lockout_off() {
        let guard = BindGuard::new(settings(), "cn=admin");
        // Junk DNs (no entry, no password) count per address only.
        for i in 0..(MAX_TRACKED as u32 + 500) {
            let ip = IpAddr::from(std::net::Ipv4Addr::from(0x0b00_0000 + i));
            guard.failed(None, ip);
        }
        assert!(guard.lock().by_dn.is_empty());
        // Real accounts guessed once each from as many addresses fill
        // both tables; an account under attack still gets its place.
        for i in 0..(MAX_TRACKED as u32) {
            let ip = IpAddr::from(std::net::Ipv4Addr::from(0x0c00_0000 + i));
            guard.failed(Some(&format!("uid=u{i}")), ip);
        }
        let ip: IpAddr = "10.9.9.9".parse().unwrap();
        for _ in 0..4 {
            assert_eq!(guard.failed(Some("uid=victim"), ip).1, None);
        }
        assert_eq!(guard.failed(Some("uid=victim"), ip).1, Some(Locked::Dn));
        assert_eq!(guard.locked("uid=victim", ip), Some(Locked::Dn));
    }

    #[test]
    fn a_failure_the_full_table_cannot_count_waits_the_longest() {
        let guard = BindGuard::new(settings(), "cn=admin");
        // The guard's own clock, as it reads it.
        #[allow(clippy::disallowed_methods)]
        let now = Instant::now();
        {
            let mut t = guard.lock();
            for i in 0..(MAX_TRACKED as u32) {
                let mut tally = Tally::new(now);
                tally.locked_until = Some(now + Duration::from_secs(60));
                t.by_dn.insert(format!("uid=l{i}"), tally);
            }
        }
        let ip: IpAddr = "10.9.9.8".parse().unwrap();
        assert_eq!(
            guard.failed(Some("uid=new"), ip).0,
            settings().max_delay,
            "every tally locked: nothing to evict, so the longest delay"
        );
    }
}
