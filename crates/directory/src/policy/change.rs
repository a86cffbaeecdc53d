//! The password policy at a change of password: who may change it and
//! when, the history, and the state a change writes.
//!
//! The administrator is the policy's administrator (slapd's "password
//! administrator", who has manage access): its changes skip every rule,
//! and under `must_change` its reset sets `pwdReset`. Anyone else
//! changing a password (the user, or another user the access rules let
//! write it) is held to the policy.

use meridian_model::dn::Dn;
use meridian_model::entry::{Attribute, Entry, Values};
use meridian_model::modify::{ModOp, Modification};
use meridian_proto::ResultCode;
use meridian_proto::controls::PolicyError;
use meridian_store::{Operational, OperationalAttribute};

use super::{
    CHANGED_TIME, FAILURE_TIME, GRACE_USE_TIME, HISTORY, LOCKED_TIME, PasswordPolicy, RESET, secs,
    times,
};
use crate::{Directory, Identity, Outcome};

/// The syntax OID a history value names: octet string.
const HISTORY_SYNTAX: &str = "1.3.6.1.4.1.1466.115.121.1.40";

impl Directory {
    /// The policy a change of `dn`'s password by `who` is held to, once
    /// the rules on who may change it and when allow the change:
    /// users may change their own only under `allow_user_change`
    /// (insufficientAccessRights, passwordModNotAllowed), and a new
    /// password (`sets_new`) not sooner than `min_age` after the last
    /// change unless it was reset (constraintViolation,
    /// passwordTooYoung). The administrator skips the rules.
    pub(crate) fn password_change_policy(
        &self,
        who: &Identity,
        dn: &Dn,
        sets_new: bool,
    ) -> Result<PasswordPolicy, Outcome> {
        let Some((entry, policy)) = self.entry_and_policy(dn)? else {
            // The write answers noSuchObject itself.
            return Ok(self.password_policy());
        };
        if matches!(who, Identity::Admin(_)) {
            return Ok(policy);
        }
        let own = matches!(who, Identity::User(me) if me.same_entry(dn));
        if own && !policy.allow_user_change {
            return Err(Outcome::new(
                ResultCode::INSUFFICIENT_ACCESS_RIGHTS,
                "users may not change their own password under this password policy (pwdAllowUserChange: FALSE, password_policy.allow_user_change = false); ask an administrator",
            )
            .with_password_error(PolicyError::PasswordModNotAllowed));
        }
        if sets_new && !policy.min_age.is_zero() && !self.is_reset(&entry) {
            let changed = times(&entry, self.policy_types.changed_time())
                .into_iter()
                .next();
            let now = self.instant_now().secs;
            if let Some(changed) = changed
                && now.saturating_sub(changed.secs) < secs(policy.min_age)
            {
                let wait = changed
                    .secs
                    .saturating_add(secs(policy.min_age))
                    .saturating_sub(now);
                return Err(Outcome::new(
                    ResultCode::CONSTRAINT_VIOLATION,
                    format!(
                        "the password is too young to change: it may be changed again in {wait} s (pwdMinAge, password_policy.min_age_secs)"
                    ),
                )
                .with_password_error(PolicyError::PasswordTooYoung));
            }
        }
        Ok(policy)
    }

    /// `entry` carries `pwdReset: TRUE`.
    fn is_reset(&self, entry: &Entry) -> bool {
        self.policy_types
            .reset
            .and_then(|id| entry.get(id))
            .and_then(|a| a.values.first())
            .is_some_and(|v| v.eq_ignore_ascii_case(b"TRUE"))
    }

    /// Whether the user bound as `dn` must still change a password that
    /// was reset before doing anything else (`pwdReset` under a policy
    /// with `must_change`). Read afresh, so a change made on any
    /// connection lifts the restriction.
    pub fn must_change_password(&self, dn: &Dn) -> bool {
        match self.entry_and_policy(dn) {
            Ok(Some((entry, policy))) => policy.must_change && self.is_reset(&entry),
            _ => false,
        }
    }

    /// For a change of `dn`'s password to the clear-text `new`: refuses
    /// one the entry had before or has now (when `check`: users' changes;
    /// the administrator's reset may reuse one), and gives the
    /// `pwdHistory` to write: the current hashes, which become history,
    /// then the older ones, at most the policy's `history`. `None` when
    /// no history is kept.
    pub(crate) fn password_history(
        &self,
        dn: &Dn,
        new: &[u8],
        check: bool,
    ) -> Result<Option<OperationalAttribute>, Outcome> {
        let Some((entry, policy)) = self.entry_and_policy(dn)? else {
            return Ok(None);
        };
        let keep = policy.history;
        if keep == 0 {
            return Ok(None);
        }
        let values = |id| -> Vec<Vec<u8>> {
            entry
                .get(id)
                .map(|a: &Attribute| a.values.to_vec())
                .unwrap_or_default()
        };
        let current = self.user_password.map(values).unwrap_or_default();
        let older = self.policy_types.history.map(values).unwrap_or_default();
        if check {
            let bounds = self.limits().password_bounds;
            let used = current
                .iter()
                .map(Vec::as_slice)
                .chain(older.iter().filter_map(|v| history_hash(v)))
                .any(|hash| crate::password::verify(hash, new, true, &bounds).matched());
            if used {
                return Err(Outcome::new(
                    ResultCode::CONSTRAINT_VIOLATION,
                    format!(
                        "the password was used before; the last {keep} may not be used again (pwdInHistory, password_policy.history)"
                    ),
                )
                .with_password_error(PolicyError::PasswordInHistory));
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

    /// Under the policy's `safe_modify`, a user's modify of its own
    /// userPassword must delete the old value (in clear text; it is
    /// checked when the new one is hashed) and add the new one.
    pub(crate) fn check_safe_modify(
        &self,
        who: &Identity,
        dn: &Dn,
        policy: &PasswordPolicy,
        changes: &[Modification],
    ) -> Result<(), Outcome> {
        let own = matches!(who, Identity::User(me) if me.same_entry(dn));
        if !own || !policy.safe_modify {
            return Ok(());
        }
        let deletes_old = changes.iter().any(|c| {
            c.op == ModOp::Delete && self.names_user_password(&c.attr) && !c.values.is_empty()
        });
        if deletes_old {
            return Ok(());
        }
        Err(Self::old_password_needed(
            "delete it (delete: userPassword, with the old value) and add the new one",
        ))
    }

    /// The refusal of a user's change of its own password without the
    /// old one, as slapd answers it; `how` says how to give it.
    pub(crate) fn old_password_needed(how: &str) -> Outcome {
        Outcome::new(
            ResultCode::INSUFFICIENT_ACCESS_RIGHTS,
            format!(
                "changing your own password needs the old one: {how} (pwdSafeModify, password_policy.safe_modify)"
            ),
        )
        .with_password_error(PolicyError::MustSupplyOldPassword)
    }

    /// The policy's state a write setting a password by `who` also
    /// writes, as slapd's ppolicy does: `pwdChangedTime` now; the grace
    /// logins, failures and lock cleared; and `pwdReset` set when the
    /// administrator resets it under `must_change`, cleared otherwise
    /// (unless the write sets `pwdReset` itself).
    pub(crate) fn password_set_state(
        &self,
        who: &Identity,
        policy: &PasswordPolicy,
        sets_reset: bool,
    ) -> Operational {
        let mut state: Operational = vec![
            (CHANGED_TIME.into(), vec![self.policy_time_now()]),
            (GRACE_USE_TIME.into(), Vec::new()),
            (FAILURE_TIME.into(), Vec::new()),
            (LOCKED_TIME.into(), Vec::new()),
        ];
        if !sets_reset {
            let reset = policy.must_change && matches!(who, Identity::Admin(_));
            let value = reset.then(|| b"TRUE".to_vec());
            state.push((RESET.into(), value.into_iter().collect()));
        }
        state
    }

    /// Whether a modify's `changes` write `pwdReset` themselves (an
    /// administrator setting or clearing it along with the password).
    pub(crate) fn sets_reset(&self, changes: &[Modification]) -> bool {
        changes.iter().any(|c| c.attr.eq_ignore_ascii_case(RESET))
    }

    /// Adds `pwdChangedTime` to a new entry that has a password.
    pub(crate) fn stamp_password_set(&self, entry: &mut Entry) {
        let Some((name, desc)) = &self.policy_types.changed_time else {
            return;
        };
        let has_password = entry.attributes.iter().any(|a| self.is_user_password(a));
        if has_password && entry.get(desc.attr).is_none() {
            entry.attributes.push(Attribute {
                desc: desc.clone(),
                name: name.clone(),
                values: Values::from_buf([self.policy_time_now()]),
            });
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
