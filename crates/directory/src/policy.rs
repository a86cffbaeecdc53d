//! The password policy (`[password_policy]`): what a new password must
//! be, in the spirit of OpenLDAP's ppolicy (draft-behera-ldap-password-
//! policy) and 389 DS's password syntax checks.
//!
//! The quality rules apply to passwords users set, in clear text (a
//! userPassword written in an add or a modify, or Password Modify's new
//! password). The administrator may set any password: an administrator's
//! reset is how a forgotten password is replaced.
//!
//! Lockout keeps its state in the entry, as ppolicy does
//! (`pwdFailureTime`, `pwdAccountLockedTime`), written by store commands
//! like any update: it survives a restart, and with replication every
//! replica will see it. The administrator unlocks an entry by deleting
//! `pwdAccountLockedTime`.

use std::time::Duration;

use meridian_model::dn::Dn;
use meridian_model::time::{Instant, parse_generalized_time};
use meridian_store::Command;

use crate::{Directory, Identity, Outcome};

/// The state attributes (OpenLDAP's ppolicy names).
pub const FAILURE_TIME: &str = "pwdFailureTime";
/// When the entry was locked.
pub const LOCKED_TIME: &str = "pwdAccountLockedTime";
/// When the password was last set.
pub const CHANGED_TIME: &str = "pwdChangedTime";
/// The passwords used before, `time#syntaxOID#length#hash` (the draft's
/// form).
pub const HISTORY: &str = "pwdHistory";
/// The syntax OID a history value names: octet string.
const HISTORY_SYNTAX: &str = "1.3.6.1.4.1.1466.115.121.1.40";
/// `[password_policy]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PasswordPolicy {
    /// Fewest characters (Unicode scalar values) of a new password; 0:
    /// no minimum.
    pub min_length: usize,
    /// Fewest character classes (lower-case letters, upper-case letters,
    /// digits, anything else) a new password draws from; 0: no rule.
    pub min_classes: usize,
    /// Failed binds after which the entry is locked; 0: never.
    pub lockout_failures: usize,
    /// How long a lock lasts; zero: until the administrator unlocks.
    pub lockout: Duration,
    /// Failures older than this are forgotten; zero: kept until a
    /// successful bind.
    pub failure_window: Duration,
    /// How long a password is good for after it is set; zero: forever.
    pub max_age: Duration,
    /// How long before expiry a successful bind is warned (the policy
    /// control's timeBeforeExpiration); zero: no warning.
    pub expire_warning: Duration,
    /// Passwords remembered per entry (`pwdHistory`): a new one may not
    /// be any of them, nor the current one; 0: none.
    pub history: usize,
    /// A user changing its own password must give the old one, in
    /// Password Modify and in a modify alike (OpenLDAP's pwdSafeModify).
    pub safe_modify: bool,
}

impl PasswordPolicy {
    /// Whether quality rules are on: then a user may not write a hash,
    /// whose quality the server cannot see.
    pub fn checks_quality(&self) -> bool {
        self.min_length > 0 || self.min_classes > 0
    }

    /// Why the clear-text `password` is not good enough, or `None`.
    pub fn quality_refusal(&self, password: &[u8]) -> Option<String> {
        let text = String::from_utf8_lossy(password);
        let length = text.chars().count();
        if length < self.min_length {
            return Some(format!(
                "the password is {length} characters long; at least {} are needed (password_policy.min_length)",
                self.min_length
            ));
        }
        let classes = [
            text.chars().any(char::is_lowercase),
            text.chars().any(char::is_uppercase),
            text.chars().any(|c| c.is_ascii_digit()),
            text.chars()
                .any(|c| !c.is_lowercase() && !c.is_uppercase() && !c.is_ascii_digit()),
        ]
        .into_iter()
        .filter(|present| *present)
        .count();
        if classes < self.min_classes {
            return Some(format!(
                "the password uses {classes} of the character classes (lower case, upper case, digits, others); at least {} are needed (password_policy.min_classes)",
                self.min_classes
            ));
        }
        None
    }
}

/// The policy's state types, looked up once: a bind and an add ask for
/// them every time.
#[derive(Debug)]
pub(crate) struct PolicyTypes {
    failure_time: Option<meridian_model::schema::AttrId>,
    locked_time: Option<meridian_model::schema::AttrId>,
    changed_time: Option<(
        meridian_model::entry::AttrName,
        meridian_model::entry::Description,
    )>,
    history: Option<meridian_model::schema::AttrId>,
}

impl PolicyTypes {
    pub(crate) fn of(schema: &meridian_model::Schema) -> PolicyTypes {
        let changed_time =
            meridian_model::entry::Description::parse(CHANGED_TIME.as_bytes(), schema)
                .ok()
                .map(|desc| {
                    (
                        meridian_model::entry::AttrName::new(CHANGED_TIME, &desc, schema),
                        desc,
                    )
                });
        PolicyTypes {
            failure_time: schema.attribute_id(FAILURE_TIME),
            locked_time: schema.attribute_id(LOCKED_TIME),
            changed_time,
            history: schema.attribute_id(HISTORY),
        }
    }
}

/// What a bind needs of its entry: the passwords to check and the
/// policy's state.
#[derive(Debug, Clone, Default)]
pub struct BindTarget {
    /// The userPassword values (empty: nothing can match). Taken by the
    /// password check ([`BindTarget::take_passwords`]).
    passwords: Vec<Vec<u8>>,
    /// The entry has a password: failed binds to it count.
    has_password: bool,
    /// The recorded failures still counted.
    failures: Vec<Instant>,
    /// When the entry was locked, if it was.
    locked_at: Option<Instant>,
    /// The lock is in force: the bind fails whatever the password.
    pub locked: bool,
    /// Seconds until the password expires (zero or less: expired), when
    /// passwords expire and this one has a `pwdChangedTime`.
    expires_in: Option<i64>,
}

impl BindTarget {
    /// The passwords to check, moved out: the rest of the target is
    /// what the policy records after the check.
    pub fn take_passwords(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.passwords)
    }

    /// The password is past `password_policy.max_age_secs`: a bind with
    /// it fails (passwordExpired) until it is changed.
    pub fn expired(&self) -> bool {
        self.expires_in.is_some_and(|secs| secs <= 0)
    }

    /// Seconds until expiry, when within `password_policy.expire_warning_secs`.
    pub fn expiry_warning(&self, policy: &PasswordPolicy) -> Option<u32> {
        let secs = self.expires_in.filter(|s| *s > 0)?;
        (secs <= self::secs(policy.expire_warning)).then(|| u32::try_from(secs).unwrap_or(u32::MAX))
    }
}

impl Directory {
    /// The passwords and lockout state a bind as `dn` works with, read
    /// from one look at the entry, or `None` if there is no such entry
    /// or the rules do not give anonymous `auth` access to its
    /// userPassword (a bind runs as anonymous, as in slapd).
    pub fn bind_target(&self, dn: &Dn) -> Result<Option<BindTarget>, Outcome> {
        if !self.may_bind_with_password(dn) {
            return Ok(None);
        }
        let snapshot = self.store_for(dn).snapshot().map_err(Outcome::from)?;
        let Some((_, entry)) = snapshot.get(dn).map_err(Outcome::from)? else {
            return Ok(None);
        };
        let values_of = |id: Option<meridian_model::schema::AttrId>| {
            id.and_then(|id| entry.get(id)).map(|a| &a.values)
        };
        let passwords = values_of(self.user_password)
            .map(|v| v.to_vec())
            .unwrap_or_default();
        let policy = &self.limits().password_policy;
        let has_password = !passwords.is_empty();
        if policy.lockout_failures == 0 && policy.max_age.is_zero() {
            return Ok(Some(BindTarget {
                passwords,
                has_password,
                ..BindTarget::default()
            }));
        }
        let times = |id: Option<meridian_model::schema::AttrId>| -> Vec<Instant> {
            values_of(id)
                .map(|values| {
                    values
                        .iter()
                        .filter_map(|v| parse_generalized_time(v))
                        .collect()
                })
                .unwrap_or_default()
        };
        let types = &self.policy_types;
        let now = self.instant_now();
        let locked_at = times(types.locked_time).into_iter().next();
        let locked = locked_at.is_some_and(|at| {
            policy.lockout.is_zero() || now.secs < at.secs.saturating_add(secs(policy.lockout))
        });
        let mut failures = times(types.failure_time);
        if !policy.failure_window.is_zero() {
            let oldest = now.secs.saturating_sub(secs(policy.failure_window));
            failures.retain(|t| t.secs >= oldest);
        }
        let expires_in = match policy.max_age.is_zero() {
            true => None,
            false => times(types.changed_time.as_ref().map(|(_, d)| d.attr))
                .into_iter()
                .next()
                .map(|changed| {
                    changed
                        .secs
                        .saturating_add(secs(policy.max_age))
                        .saturating_sub(now.secs)
                }),
        };
        Ok(Some(BindTarget {
            passwords,
            has_password,
            failures,
            locked_at,
            locked,
            expires_in,
        }))
    }

    /// For a change of `dn`'s password to the clear-text `new`: refuses
    /// one the entry had before or has now (when `check`: users' changes;
    /// the administrator's reset may reuse one), and gives the
    /// `pwdHistory` to write: the current hashes, which become history,
    /// then the older ones, at most `password_policy.history`. `None`
    /// when no history is kept.
    pub(crate) fn password_history(
        &self,
        dn: &Dn,
        new: &[u8],
        check: bool,
    ) -> Result<Option<meridian_store::OperationalAttribute>, Outcome> {
        let keep = self.limits().password_policy.history;
        if keep == 0 {
            return Ok(None);
        }
        let snapshot = self.store_for(dn).snapshot().map_err(Outcome::from)?;
        let Some((_, entry)) = snapshot.get(dn).map_err(Outcome::from)? else {
            return Ok(None);
        };
        let values = |id: Option<meridian_model::schema::AttrId>| -> Vec<Vec<u8>> {
            id.and_then(|id| entry.get(id))
                .map(|a| a.values.to_vec())
                .unwrap_or_default()
        };
        let current = values(self.user_password);
        let older = values(self.policy_types.history);
        if check {
            let bounds = self.limits().password_bounds;
            let used = current
                .iter()
                .map(Vec::as_slice)
                .chain(older.iter().filter_map(|v| history_hash(v)))
                .any(|hash| crate::password::verify(hash, new, true, &bounds).matched());
            if used {
                return Err(Outcome::new(
                    meridian_proto::ResultCode::CONSTRAINT_VIOLATION,
                    format!(
                        "the password was used before; the last {keep} may not be used again (password_policy.history)"
                    ),
                ));
            }
        }
        let now = self.instant_now().canonical();
        let history: Vec<Vec<u8>> = current
            .iter()
            .map(|hash| {
                let mut value = format!("{now}#{HISTORY_SYNTAX}#{}#", hash.len()).into_bytes();
                value.extend_from_slice(hash);
                value
            })
            .chain(older)
            .take(keep)
            .collect();
        Ok(Some((HISTORY.into(), history)))
    }

    /// Under `password_policy.safe_modify`, a user's modify of its own
    /// userPassword must delete the old value (in clear text; it is
    /// checked when the new one is hashed) and add the new one.
    pub(crate) fn check_safe_modify(
        &self,
        who: &Identity,
        dn: &Dn,
        changes: &[meridian_model::modify::Modification],
    ) -> Result<(), Outcome> {
        let own = matches!(who, Identity::User(me) if me.same_entry(dn));
        if !own || !self.limits().password_policy.safe_modify {
            return Ok(());
        }
        let deletes_old = changes.iter().any(|c| {
            c.op == meridian_model::modify::ModOp::Delete
                && self.names_user_password(&c.attr)
                && !c.values.is_empty()
        });
        if deletes_old {
            return Ok(());
        }
        Err(Outcome::new(
            meridian_proto::ResultCode::UNWILLING_TO_PERFORM,
            "changing your own password needs the old one: delete it (delete: userPassword, with the old value) and add the new one (password_policy.safe_modify)",
        ))
    }

    /// The password policy.
    pub fn password_policy(&self) -> PasswordPolicy {
        self.limits().password_policy
    }

    /// `pwdChangedTime` = now, for a write that sets a password.
    pub(crate) fn password_changed_now(&self) -> meridian_store::OperationalAttribute {
        (
            CHANGED_TIME.into(),
            vec![self.instant_now().whole_seconds().canonical().into_bytes()],
        )
    }

    /// Adds `pwdChangedTime` to a new entry that has a password.
    pub(crate) fn stamp_password_set(&self, entry: &mut meridian_model::entry::Entry) {
        let Some((name, desc)) = &self.policy_types.changed_time else {
            return;
        };
        let has_password = entry.attributes.iter().any(|a| self.is_user_password(a));
        if has_password && entry.get(desc.attr).is_none() {
            let now = self.instant_now().whole_seconds().canonical().into_bytes();
            entry.attributes.push(meridian_model::entry::Attribute {
                desc: desc.clone(),
                name: name.clone(),
                values: meridian_model::entry::Values::from_buf([now]),
            });
        }
    }

    /// The write that records a failed bind to `dn`, and locks the entry
    /// at `password_policy.lockout_failures`; `None` when lockout is off
    /// or the entry is locked already.
    pub fn bind_failed(&self, dn: &Dn, target: &BindTarget) -> Option<Command> {
        let policy = &self.limits().password_policy;
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
            tracing::warn!(target: "meridian::auth", dn = dn.original(), "entry locked: password_policy.lockout_failures reached");
            operational.push((
                LOCKED_TIME.into(),
                vec![now.whole_seconds().canonical().into_bytes()],
            ));
        }
        Some(self.policy_write(dn, operational))
    }

    /// The write that clears the failures (and an expired lock) of `dn`
    /// after a successful bind; `None` when there is nothing to clear.
    pub fn bind_succeeded(&self, dn: &Dn, target: &BindTarget) -> Option<Command> {
        if target.failures.is_empty() && target.locked_at.is_none() {
            return None;
        }
        Some(self.policy_write(
            dn,
            vec![
                (FAILURE_TIME.into(), Vec::new()),
                (LOCKED_TIME.into(), Vec::new()),
            ],
        ))
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

    /// Now, from the directory's clock.
    fn instant_now(&self) -> Instant {
        let since = self
            .clock
            .now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Instant {
            secs: i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
            nanos: since.subsec_micros() * 1000,
        }
    }

    /// Whether `who` may delete the policy state attribute `attr` (an
    /// unlock): the administrator only.
    pub(crate) fn may_unlock(&self, who: &Identity, attr: meridian_model::schema::AttrId) -> bool {
        let types = &self.policy_types;
        matches!(who, Identity::Admin(_))
            && (types.failure_time == Some(attr) || types.locked_time == Some(attr))
    }
}

/// The hash a `pwdHistory` value holds (`time#syntaxOID#length#hash`).
fn history_hash(value: &[u8]) -> Option<&[u8]> {
    let mut fields = value.splitn(4, |b| *b == b'#');
    let (_time, _syntax, length) = (fields.next()?, fields.next()?, fields.next()?);
    let hash = fields.next()?;
    let length: usize = std::str::from_utf8(length).ok()?.parse().ok()?;
    (hash.len() == length).then_some(hash)
}

fn secs(duration: Duration) -> i64 {
    i64::try_from(duration.as_secs()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_and_classes_are_counted_in_characters() {
        let policy = PasswordPolicy {
            min_length: 8,
            min_classes: 3,
            ..PasswordPolicy::default()
        };
        assert!(
            policy
                .quality_refusal(b"Ab1!")
                .unwrap()
                .contains("min_length")
        );
        assert!(
            policy
                .quality_refusal(b"abcdefgh")
                .unwrap()
                .contains("min_classes")
        );
        assert_eq!(policy.quality_refusal(b"abcdEF12"), None);
        assert_eq!(policy.quality_refusal("ärgerlich-1".as_bytes()), None);
        // Eight characters, sixteen bytes.
        let policy = PasswordPolicy {
            min_length: 8,
            ..PasswordPolicy::default()
        };
        assert_eq!(policy.quality_refusal("ääääääää".as_bytes()), None);
        assert!(PasswordPolicy::default().quality_refusal(b"").is_none());
    }
}
