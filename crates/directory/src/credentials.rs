//! userPassword in the directory: the values a bind checks, the hashing
//! of written passwords (and the refusal of pre-hashed ones over the
//! bounds), and Password Modify (RFC 3062).

use std::sync::Arc;

use meridian_model::ModelError;
use meridian_model::dn::Dn;
use meridian_model::entry::Description;
use meridian_model::modify::{ModOp, Modification};
use meridian_proto::ResultCode;
use meridian_proto::controls::PolicyError;
use meridian_store::{Command, Operational, StoreError};

use crate::access::Level;
use crate::policy::PasswordPolicy;
use crate::rights::Memberships;
use crate::{Directory, Identity, Outcome, password};

/// A password change checked by [`Directory::prepare_password_modify`];
/// [`PasswordChange::into_command`] finishes it on the blocking pool.
#[derive(Debug)]
pub struct PasswordChange {
    target: Dn,
    old: Option<Vec<u8>>,
    new: Vec<u8>,
    /// True when the server chose the new password (returned to the client).
    pub generated: bool,
    operational: Operational,
    cost: password::HashCost,
    bounds: password::HashBounds,
}

impl PasswordChange {
    /// The new password in clear text (for genPasswd).
    pub fn new_password(&self) -> &[u8] {
        &self.new
    }

    /// Whose password changes.
    pub fn target(&self) -> &Dn {
        &self.target
    }

    /// Checks the old password if required and hashes the new one. Slow
    /// by design: run it on the blocking pool, once the connection's
    /// earlier writes have committed (it reads what they wrote).
    ///
    /// The old password is checked against the values stored now, and
    /// the change is guarded by the value it matched (the write applies
    /// only if that value is still there): a change of the password by
    /// another connection in between makes the write fail with
    /// assertionFailed instead of replacing a password the client never
    /// proved it knew. [`PasswordChange::CHANGED_MEANWHILE`] is the
    /// answer to give then.
    pub fn into_command(
        self,
        directory: &Directory,
        allow_cleartext: bool,
    ) -> Result<Command, Outcome> {
        let mut proven = None;
        if let Some(old) = &self.old {
            let stored = directory.user_passwords(&self.target)?.ok_or_else(|| {
                Outcome::from(StoreError::NoSuchObject {
                    dn: self.target.original().to_owned(),
                    matched: String::new(),
                })
            })?;
            let matched = stored
                .into_iter()
                .find(|v| password::verify(v, old, allow_cleartext, &self.bounds).matched())
                .ok_or_else(|| {
                    // slapd's code: the operation is refused, the bind
                    // stands (49 reads as a failed bind to some clients).
                    Outcome::new(
                        ResultCode::UNWILLING_TO_PERFORM,
                        "unwilling to verify old password: it does not match",
                    )
                })?;
            proven = Some(matched);
        }
        // A user's own change is checked against the history; the
        // administrator's reset may reuse a password.
        let history = directory.password_history(&self.target, &self.new, self.old.is_some())?;
        let mut operational = self.operational;
        operational.extend(history);
        let hashed = password::hash(&self.new, self.cost)
            .map_err(|e| Outcome::new(ResultCode::OTHER, format!("hashing: {e}")))?;
        let modify = Command::Modify {
            dn: self.target,
            changes: vec![Modification {
                op: ModOp::Replace,
                attr: USER_PASSWORD.into(),
                values: vec![hashed],
            }],
            operational,
            permissive: false,
        };
        Ok(match proven {
            None => modify,
            Some(value) => {
                let mut assertion = Vec::new();
                meridian_proto::Filter::Equality(meridian_proto::Ava {
                    attr: USER_PASSWORD.as_bytes(),
                    value: &value,
                })
                .to_ber(&mut assertion);
                Command::Guarded {
                    assertion,
                    command: Box::new(modify),
                }
            }
        })
    }

    /// The answer when the guard of [`PasswordChange::into_command`]
    /// fails.
    pub const CHANGED_MEANWHILE: &str = "the password was changed by another operation while the old one was being checked; try again";
}

pub(crate) const USER_PASSWORD: &str = "userPassword";

impl Directory {
    /// Whether the rules give anonymous `auth` access to `dn`'s
    /// userPassword: what a bind as `dn` needs.
    pub(crate) fn may_bind_with_password(&self, dn: &Dn) -> bool {
        let groups = Memberships::default();
        self.access_level(&Identity::Anonymous, dn, self.user_password, &groups) >= Level::Auth
    }

    /// The userPassword values of the entry at `dn`, or `None` if there
    /// is no such entry.
    pub fn user_passwords(&self, dn: &Dn) -> Result<Option<Vec<Vec<u8>>>, Outcome> {
        let snapshot = self.store_for(dn).snapshot().map_err(Outcome::from)?;
        let Some((_, entry)) = snapshot.get(dn).map_err(Outcome::from)? else {
            return Ok(None);
        };
        let attr = self
            .user_password
            .ok_or_else(|| ModelError::internal("the schema has no userPassword type"))?;
        Ok(Some(
            entry
                .get(attr)
                .map(|a| a.values.to_vec())
                .unwrap_or_default(),
        ))
    }

    /// With `directory.rehash_on_bind`: the modify that replaces
    /// `stored`, the userPassword value a bind of `dn` with `password`
    /// just matched, by its `{ARGON2}` hash, when `stored` is in another
    /// scheme (migrated `{MD5}`, `{SSHA}`, crypt, clear text); `None`
    /// otherwise. The old value is deleted by its exact bytes and the
    /// hash added in one modify, so a password changed since the bind
    /// checked it is left alone (the delete finds nothing and the whole
    /// modify fails). The password policy's change time and history are
    /// not touched: the password is the same. CPU-heavy (one Argon2
    /// hash): call it off the async workers.
    pub fn rehash_on_bind(&self, dn: &Arc<Dn>, stored: &[u8], password: &[u8]) -> Option<Command> {
        if !self.rehashes(stored) {
            return None;
        }
        let hashed = match password::hash(password, self.limits().password_hash) {
            Ok(hashed) => hashed,
            Err(e) => {
                tracing::warn!(dn = %dn.original(), "rehashing a password at bind: {e}");
                return None;
            }
        };
        let changes = vec![
            Modification {
                op: ModOp::Delete,
                attr: USER_PASSWORD.into(),
                values: vec![stored.to_vec()],
            },
            Modification {
                op: ModOp::Add,
                attr: USER_PASSWORD.into(),
                values: vec![hashed],
            },
        ];
        Some(Command::Modify {
            dn: (**dn).clone(),
            changes,
            operational: self.operational_changes(&Identity::User(Arc::clone(dn))),
            permissive: false,
        })
    }

    /// Whether a bind that matches `stored` rehashes it
    /// ([`Directory::rehash_on_bind`]): cheap, no hash computed.
    pub fn rehashes(&self, stored: &[u8]) -> bool {
        self.limits().rehash_on_bind && !password::is_scheme(stored, b"ARGON2")
    }

    /// Replaces clear-text userPassword values in a command by their
    /// `{ARGON2}` hash, and for a modify checks the new password against
    /// the entry's history and records the history
    /// (`password_policy.history`; `who`'s changes are checked unless it
    /// is the administrator). CPU-heavy by design: call it off the async
    /// workers (the server uses the blocking pool).
    pub fn hash_passwords(&self, who: &Identity, command: Command) -> Result<Command, Outcome> {
        let is_password = |name: &str| self.names_user_password(name);
        let hash_all = |values: &mut [Vec<u8>]| -> Result<(), Outcome> {
            for v in values.iter_mut() {
                if !password::is_hashed(v) {
                    *v = password::hash(v, self.limits().password_hash).map_err(|e| {
                        Outcome::new(ResultCode::OTHER, format!("hashing a password: {e}"))
                    })?;
                }
            }
            Ok(())
        };
        match command {
            Command::Add {
                mut entry,
                prechecked,
            } => {
                for attr in entry
                    .attributes
                    .iter_mut()
                    .filter(|a| self.is_user_password(a))
                {
                    hash_all(&mut attr.values)?;
                }
                Ok(Command::Add { entry, prechecked })
            }
            Command::Modify {
                dn,
                mut changes,
                mut operational,
                permissive,
            } => {
                let check = !matches!(who, Identity::Admin(_));
                self.match_deleted_passwords(&dn, &mut changes)?;
                let mut history = None;
                for change in changes
                    .iter_mut()
                    .filter(|c| matches!(c.op, ModOp::Add | ModOp::Replace) && is_password(&c.attr))
                {
                    for new in change.values.iter().filter(|v| !password::is_hashed(v)) {
                        history = self.password_history(&dn, new, check)?;
                    }
                    hash_all(&mut change.values)?;
                }
                operational.extend(history);
                Ok(Command::Modify {
                    dn,
                    changes,
                    operational,
                    permissive,
                })
            }
            Command::Guarded { assertion, command } => Ok(Command::Guarded {
                assertion,
                command: Box::new(self.hash_passwords(who, *command)?),
            }),
            Command::ReadBack { pre, post, command } => Ok(Command::ReadBack {
                pre,
                post,
                command: Box::new(self.hash_passwords(who, *command)?),
            }),
            Command::Transaction { commands } => Ok(Command::Transaction {
                commands: commands
                    .into_iter()
                    .map(|command| self.hash_passwords(who, command))
                    .collect::<Result<_, _>>()?,
            }),
            other => Ok(other),
        }
    }

    /// Checks a Password Modify request (RFC 3062) up to what needs the
    /// blocking pool (old password check, hashing): the administrator may
    /// change anyone's password, a user only its own and only with its
    /// old password.
    pub fn prepare_password_modify(
        &self,
        who: &Identity,
        user: Option<&[u8]>,
        old: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<PasswordChange, Outcome> {
        // slapd's answer: a password is changed by someone bound, whether
        // or not the request names the user (RFC 3062 leaves it to the
        // server).
        if matches!(who, Identity::Anonymous) {
            return Err(Outcome::new(
                ResultCode::STRONGER_AUTH_REQUIRED,
                "only authenticated users may change passwords",
            ));
        }
        let target = match user {
            Some(id) => {
                // An authzId "dn:..." or a plain DN.
                let text = id.strip_prefix(b"dn:").unwrap_or(id);
                self.parse_dn(text)?
            }
            None => match who {
                Identity::Admin(dn) | Identity::User(dn) => Dn::clone(dn),
                Identity::Anonymous => {
                    return Err(Outcome::new(
                        ResultCode::UNWILLING_TO_PERFORM,
                        "bind first, or name the user whose password to change",
                    ));
                }
            },
        };
        // Changing a password is a write to userPassword: the rules
        // decide (by default only the user and the administrator). Users
        // changing their own must prove they know the old one.
        let groups = &Memberships::default();
        self.require_visible(who, &target, self.user_password, Level::Write, groups)?;
        // Whether this user may change this password now, and the policy
        // in force for it.
        let policy = self.password_change_policy(who, &target, true)?;
        // One policy for both ways of changing one's own password
        // (pwdSafeModify): with it, the old password is needed; without,
        // a bound user may change its own without it. An old password
        // given is checked.
        let own = matches!(who, Identity::User(dn) if dn.same_entry(&target));
        if own && old.is_none() && policy.safe_modify {
            return Err(Self::old_password_needed("give it as oldPasswd"));
        }
        let check_old = own && old.is_some();
        // The entry must exist; its passwords are read when the old one
        // is checked (`into_command`).
        self.user_passwords(&target)?.ok_or_else(|| {
            Outcome::from(StoreError::NoSuchObject {
                dn: target.original().to_owned(),
                matched: String::new(),
            })
        })?;
        let (new, generated) = match new {
            Some(n) if !n.is_empty() => {
                self.check_password_values(who, &policy, [n])?;
                (n.to_vec(), false)
            }
            _ => {
                let generated =
                    password::generate().map_err(|e| Outcome::new(ResultCode::OTHER, e))?;
                (generated.into_bytes(), true)
            }
        };
        Ok(PasswordChange {
            target,
            old: if check_old {
                old.map(<[u8]>::to_vec)
            } else {
                None
            },
            new,
            generated,
            operational: {
                let mut operational = self.operational_changes(who);
                operational.extend(self.password_set_state(who, &policy, false));
                operational
            },
            cost: self.limits().password_hash,
            bounds: self.limits().password_bounds,
        })
    }

    /// True if the command holds a clear-text userPassword to hash.
    pub fn needs_hashing(&self, command: &Command) -> bool {
        let is_password = |name: &str| self.names_user_password(name);
        match command {
            Command::Add { entry, .. } => entry.attributes.iter().any(|a| {
                self.is_user_password(a) && a.values.iter().any(|v| !password::is_hashed(v))
            }),
            // Added values to hash, or deleted ones to match to the
            // stored hash (`match_deleted_passwords`).
            Command::Modify { changes, .. } => changes.iter().any(|c| {
                matches!(c.op, ModOp::Add | ModOp::Replace | ModOp::Delete)
                    && is_password(&c.attr)
                    && c.values.iter().any(|v| !password::is_hashed(v))
            }),
            Command::Guarded { command, .. } | Command::ReadBack { command, .. } => {
                self.needs_hashing(command)
            }
            Command::Transaction { commands } => {
                commands.iter().any(|command| self.needs_hashing(command))
            }
            _ => false,
        }
    }

    /// Refuses userPassword values given already hashed whose scheme is
    /// unknown or whose cost is over `security.password_max_*`: whoever
    /// writes a hash chooses what every bind to it costs the server. A
    /// user's clear-text values must pass the password policy's quality
    /// rules, and while those are on a user may not write a hash (whose
    /// quality cannot be seen); the administrator may set anything.
    pub(crate) fn check_password_values<V: AsRef<[u8]>>(
        &self,
        who: &Identity,
        policy: &PasswordPolicy,
        values: impl IntoIterator<Item = V>,
    ) -> Result<(), Outcome> {
        let checked = !matches!(who, Identity::Admin(_));
        let refused = |why: String| Outcome::new(ResultCode::CONSTRAINT_VIOLATION, why);
        let most = self.limits().password_bounds.max_values;
        for (i, value) in values.into_iter().enumerate() {
            if i == most {
                return Err(refused(too_many_passwords(most)));
            }
            let value = value.as_ref();
            if password::is_hashed(value) {
                password::check_stored(value, &self.limits().password_bounds).map_err(refused)?;
                if checked && policy.checks_quality() && !policy.allow_hashed {
                    return Err(refused(
                        "a hashed password cannot be checked against the password policy (password_policy.min_length, min_classes; pwdCheckQuality: 2): send it in clear text over TLS".into(),
                    )
                    .with_password_error(PolicyError::InsufficientPasswordQuality));
                }
            } else if checked && let Some((why, error)) = policy.quality_refusal(value) {
                return Err(refused(why).with_password_error(error));
            }
        }
        Ok(())
    }

    /// Checks a modify's changes of `dn`'s userPassword by `who` against
    /// the password policy in force for `dn` (who may change it and
    /// when, the old password, the new one's quality) and the bound on
    /// values; gives that policy.
    pub(crate) fn check_password_change(
        &self,
        who: &Identity,
        dn: &Dn,
        changes: &[Modification],
    ) -> Result<PasswordPolicy, Outcome> {
        let sets = |c: &&Modification| {
            matches!(c.op, ModOp::Add | ModOp::Replace) && self.names_user_password(&c.attr)
        };
        let sets_new = changes.iter().filter(sets).any(|c| !c.values.is_empty());
        let policy = self.password_change_policy(who, dn, sets_new)?;
        self.check_safe_modify(who, dn, &policy, changes)?;
        for change in changes.iter().filter(sets) {
            self.check_password_values(who, &policy, &change.values)?;
        }
        self.check_password_count(dn, changes)?;
        Ok(policy)
    }

    /// Refuses a modify of `dn` that would leave it more userPassword
    /// values than `security.max_password_values` (the values it has,
    /// less those deleted, plus those added; a replace starts afresh).
    pub(crate) fn check_password_count(
        &self,
        dn: &Dn,
        changes: &[Modification],
    ) -> Result<(), Outcome> {
        let most = self.limits().password_bounds.max_values;
        let mut held: Option<usize> = None;
        for change in changes.iter().filter(|c| self.names_user_password(&c.attr)) {
            // Each clear-text value deleted is checked against each held
            // (`match_deleted_passwords`): bounded as the values added.
            if change.values.len() > most {
                return Err(Outcome::new(
                    ResultCode::CONSTRAINT_VIOLATION,
                    too_many_passwords(most),
                ));
            }
            let now = match held {
                Some(n) => n,
                None => self.user_passwords(dn)?.map_or(0, |values| values.len()),
            };
            held = Some(match change.op {
                ModOp::Add => now.saturating_add(change.values.len()),
                ModOp::Replace => change.values.len(),
                ModOp::Delete if change.values.is_empty() => 0,
                ModOp::Delete => now.saturating_sub(change.values.len()),
                ModOp::Increment => now,
            });
        }
        match held {
            Some(n) if n > most => Err(Outcome::new(
                ResultCode::CONSTRAINT_VIOLATION,
                too_many_passwords(most),
            )),
            _ => Ok(()),
        }
    }

    /// A modify deleting a userPassword given in clear text (the old
    /// password, as `ldapmodify` sends it under `safe_modify`) deletes
    /// the stored value it verifies against. One that matches none is
    /// left as it is: the delete then answers noSuchAttribute, as the
    /// delete of any value the entry does not hold.
    fn match_deleted_passwords(
        &self,
        dn: &Dn,
        changes: &mut [Modification],
    ) -> Result<(), Outcome> {
        let stored = std::cell::OnceCell::new();
        for change in changes
            .iter_mut()
            .filter(|c| c.op == ModOp::Delete && self.names_user_password(&c.attr))
        {
            for value in change.values.iter_mut().filter(|v| !password::is_hashed(v)) {
                let stored = match stored.get() {
                    Some(s) => s,
                    None => {
                        let found = self.user_passwords(dn)?.unwrap_or_default();
                        stored.get_or_init(|| found)
                    }
                };
                let bounds = self.limits().password_bounds;
                if let Some(matched) = stored
                    .iter()
                    .find(|s| password::verify(s, value, true, &bounds).matched())
                {
                    value.clone_from(matched);
                }
            }
        }
        Ok(())
    }

    /// The most work a stored password hash may ask (`security.password_max_*`).
    pub fn password_bounds(&self) -> password::HashBounds {
        self.limits().password_bounds
    }

    /// Whether an attribute description as a client wrote it
    /// (`userPassword`, `USERPASSWORD;x-opt`) is userPassword.
    pub(crate) fn names_user_password(&self, name: &str) -> bool {
        self.names_password(name.as_bytes())
    }

    /// [`Directory::names_user_password`], for a type as a request
    /// carries it.
    pub fn names_password(&self, ty: &[u8]) -> bool {
        Description::parse(ty, &self.schema).is_ok_and(|d| Some(d.attr) == self.user_password)
    }

    /// Whether an entry's attribute is userPassword (its description is
    /// already parsed: no name lookup, which every imported entry would pay).
    pub(crate) fn is_user_password(&self, attribute: &meridian_model::entry::Attribute) -> bool {
        Some(attribute.desc.attr) == self.user_password
    }
}

/// The refusal of more userPassword values than allowed.
fn too_many_passwords(most: usize) -> String {
    format!(
        "an entry may hold at most {most} userPassword values (security.max_password_values): each one is a hash every bind to the entry computes"
    )
}
