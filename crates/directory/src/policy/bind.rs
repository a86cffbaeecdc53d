//! The password policy at a bind: lockout after failures, expiry with
//! grace logins, and the change a reset password demands.

use meridian_model::dn::Dn;
use meridian_model::time::Instant;
use meridian_proto::controls::PolicyWarning;
use meridian_store::Command;

use super::{FAILURE_TIME, GRACE_USE_TIME, LOCKED_TIME, PasswordPolicy, secs, times};
use crate::{Directory, Outcome};

/// What a bind needs of its entry: the passwords to check, the policy in
/// force and its state.
#[derive(Debug, Clone, Default)]
pub struct BindTarget {
    /// The userPassword values (empty: nothing can match). Taken by the
    /// password check ([`BindTarget::take_passwords`]).
    passwords: Vec<Vec<u8>>,
    /// The entry has a password: failed binds to it count.
    has_password: bool,
    /// The policy in force for the entry.
    policy: PasswordPolicy,
    /// The recorded failures still counted.
    failures: Vec<Instant>,
    /// When the entry was locked, if it was.
    locked_at: Option<Instant>,
    /// The lock is in force: the bind fails whatever the password.
    pub locked: bool,
    /// Seconds until the password expires (zero or less: expired), when
    /// passwords expire and this one has a `pwdChangedTime`.
    expires_in: Option<i64>,
    /// The grace logins used since the password expired.
    grace_used: Vec<Instant>,
    /// The password was reset by someone else and the policy says it
    /// must be changed (`pwdReset` under `must_change`).
    reset: bool,
}

/// What a bind with the right password comes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Bound.
    Bound {
        /// The warning for the policy control: time before expiration,
        /// or the grace logins left after this one.
        warning: Option<PolicyWarning>,
        /// Nothing but a change of the password may follow
        /// (changeAfterReset).
        must_change: bool,
    },
    /// Refused: the password has expired and no grace login is left.
    Expired,
}

impl BindTarget {
    /// The passwords to check, moved out: the rest of the target is
    /// what the policy records after the check.
    pub fn take_passwords(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.passwords)
    }

    /// What a bind with the right password comes to under the policy.
    pub fn admission(&self) -> Admission {
        let must_change = self.reset;
        let Some(left) = self.expires_in else {
            return Admission::Bound {
                warning: None,
                must_change,
            };
        };
        if left <= 0 {
            let used = self.grace_used.len();
            return match self.policy.grace_logins.checked_sub(used + 1) {
                Some(remaining) => Admission::Bound {
                    warning: Some(PolicyWarning::GraceAuthNsRemaining(
                        u32::try_from(remaining).unwrap_or(u32::MAX),
                    )),
                    must_change,
                },
                None => Admission::Expired,
            };
        }
        let warn = left <= secs(self.policy.expire_warning);
        Admission::Bound {
            warning: warn.then(|| {
                PolicyWarning::TimeBeforeExpiration(u32::try_from(left).unwrap_or(u32::MAX))
            }),
            must_change,
        }
    }

    /// This bind uses one of the grace logins of an expired password.
    fn uses_grace(&self) -> bool {
        self.expires_in.is_some_and(|left| left <= 0)
            && matches!(self.admission(), Admission::Bound { .. })
    }
}

impl Directory {
    /// The passwords, policy and policy state a bind as `dn` works
    /// with, read from one look at the entry (and its policy entry), or
    /// `None` if there is no such entry or the rules do not give
    /// anonymous `auth` access to its userPassword (a bind runs as
    /// anonymous, as in slapd).
    pub fn bind_target(&self, dn: &Dn) -> Result<Option<BindTarget>, Outcome> {
        if !self.may_bind_with_password(dn) {
            return Ok(None);
        }
        let Some((entry, policy)) = self.entry_and_policy(dn)? else {
            return Ok(None);
        };
        let passwords = self
            .user_password
            .and_then(|id| entry.get(id))
            .map(|a| a.values.to_vec())
            .unwrap_or_default();
        let has_password = !passwords.is_empty();
        if policy.lockout_failures == 0 && policy.max_age.is_zero() && !policy.must_change {
            return Ok(Some(BindTarget {
                passwords,
                has_password,
                policy,
                ..BindTarget::default()
            }));
        }
        let types = &self.policy_types;
        let now = self.instant_now();
        let locked_at = times(&entry, types.locked_time).into_iter().next();
        let locked = locked_at.is_some_and(|at| {
            policy.lockout.is_zero() || now.secs < at.secs.saturating_add(secs(policy.lockout))
        });
        let mut failures = times(&entry, types.failure_time);
        if !policy.failure_window.is_zero() {
            let oldest = now.secs.saturating_sub(secs(policy.failure_window));
            failures.retain(|t| t.secs >= oldest);
        }
        let expires_in = match policy.max_age.is_zero() {
            true => None,
            false => times(&entry, types.changed_time())
                .into_iter()
                .next()
                .map(|changed| {
                    changed
                        .secs
                        .saturating_add(secs(policy.max_age))
                        .saturating_sub(now.secs)
                }),
        };
        let reset = policy.must_change
            && types
                .reset
                .and_then(|id| entry.get(id))
                .and_then(|a| a.values.first())
                .is_some_and(|v| v.eq_ignore_ascii_case(b"TRUE"));
        Ok(Some(BindTarget {
            passwords,
            has_password,
            policy,
            failures,
            locked_at,
            locked,
            expires_in,
            grace_used: times(&entry, types.grace_use_time),
            reset,
        }))
    }

    /// The write that records a failed bind to `dn`, and locks the entry
    /// at the policy's `lockout_failures`; `None` when lockout is off or
    /// the entry is locked already.
    pub fn bind_failed(&self, dn: &Dn, target: &BindTarget) -> Option<Command> {
        let policy = &target.policy;
        // No entry, or none with a password: nothing to count.
        if policy.lockout_failures == 0 || target.locked || !target.has_password {
            return None;
        }
        let now = self.instant_now();
        // The most recent failures, at most as many as lock the entry.
        let keep = policy.lockout_failures.saturating_sub(1);
        let mut failures: Vec<Instant> = target
            .failures
            .iter()
            .rev()
            .take(keep)
            .rev()
            .copied()
            .collect();
        failures.push(now);
        let mut operational = vec![(
            FAILURE_TIME.into(),
            failures
                .iter()
                .map(|t| t.canonical().into_bytes())
                .collect(),
        )];
        if failures.len() >= policy.lockout_failures {
            tracing::warn!(target: "meridian::auth", dn = dn.original(), "entry locked: the password policy's lockout_failures (pwdMaxFailure) reached");
            operational.push((LOCKED_TIME.into(), vec![self.policy_time_now()]));
        }
        Some(self.policy_write(dn, operational))
    }

    /// The write after a successful bind to `dn`: clears the failures
    /// (and an expired lock), and records a grace login used; `None`
    /// when there is nothing to write.
    pub fn bind_succeeded(&self, dn: &Dn, target: &BindTarget) -> Option<Command> {
        let mut operational = Vec::new();
        if !target.failures.is_empty() || target.locked_at.is_some() {
            operational.push((FAILURE_TIME.into(), Vec::new()));
            operational.push((LOCKED_TIME.into(), Vec::new()));
        }
        if target.uses_grace() {
            let mut used: Vec<Vec<u8>> = target
                .grace_used
                .iter()
                .map(|t| t.canonical().into_bytes())
                .collect();
            used.push(self.policy_time_now());
            operational.push((GRACE_USE_TIME.into(), used));
        }
        (!operational.is_empty()).then(|| self.policy_write(dn, operational))
    }

    /// A write of the policy's state attributes only: the server's own,
    /// so it leaves modifiersName and modifyTimestamp alone, as ppolicy
    /// does; a new entryCSN marks the change.
    fn policy_write(&self, dn: &Dn, mut operational: meridian_store::Operational) -> Command {
        let (_, csn) = self.time_and_csn();
        operational.push(("entryCSN".into(), vec![csn.into_bytes()]));
        Command::Modify {
            dn: dn.clone(),
            changes: Vec::new(),
            operational,
            permissive: true,
        }
    }
}
