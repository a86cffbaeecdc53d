//! The password policy, in the spirit of OpenLDAP's ppolicy overlay
//! (draft-behera-ldap-password-policy) and 389 DS's password syntax
//! checks: what a new password must be, who may change it and when,
//! lockout after failed binds, expiry with grace logins, and the change
//! a password reset by someone else demands.
//!
//! The policy in force for an entry is the `pwdPolicy` entry its
//! `pwdPolicySubentry` names, as in slapd; otherwise `[password_policy]`
//! (which plays the part of slapd's `ppolicy_default`).
//!
//! The quality rules apply to passwords users set, in clear text (a
//! userPassword written in an add or a modify, or Password Modify's new
//! password). The administrator may set any password: an administrator's
//! reset is how a forgotten password is replaced.
//!
//! The policy keeps its state in the entry, as ppolicy does
//! (`pwdFailureTime`, `pwdAccountLockedTime`, `pwdGraceUseTime`,
//! `pwdReset`), written by store commands like any update: it survives
//! a restart, and with replication every replica sees it. The
//! administrator unlocks an entry by deleting `pwdAccountLockedTime`.

mod bind;
mod change;

use std::time::Duration;

use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_model::entry::{AttrName, Description, Entry};
use meridian_model::schema::AttrId;
use meridian_model::time::Instant;
use meridian_proto::controls::PolicyError;

use crate::{Directory, Outcome};

pub use bind::{Admission, BindTarget};

/// The state attributes (OpenLDAP's ppolicy names).
pub const FAILURE_TIME: &str = "pwdFailureTime";
/// When the entry was locked.
pub const LOCKED_TIME: &str = "pwdAccountLockedTime";
/// When the password was last set.
pub const CHANGED_TIME: &str = "pwdChangedTime";
/// The passwords used before, `time#syntaxOID#length#hash` (the draft's
/// form).
pub const HISTORY: &str = "pwdHistory";
/// When each grace login after expiry was used.
pub const GRACE_USE_TIME: &str = "pwdGraceUseTime";
/// TRUE once someone other than the user set the password, under a
/// policy with `must_change`.
pub const RESET: &str = "pwdReset";
/// The DN of the `pwdPolicy` entry in force for this entry.
pub const SUBENTRY: &str = "pwdPolicySubentry";

/// A password policy: `[password_policy]`, or a `pwdPolicy` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PasswordPolicy {
    /// Fewest characters (Unicode scalar values) of a new password; 0:
    /// no minimum.
    pub min_length: usize,
    /// Fewest character classes (lower-case letters, upper-case letters,
    /// digits, anything else) a new password draws from; 0: no rule.
    pub min_classes: usize,
    /// While quality rules are on, a user may still write a password
    /// already hashed, unchecked (ppolicy's `pwdCheckQuality: 1`);
    /// otherwise it is refused (`pwdCheckQuality: 2`).
    pub allow_hashed: bool,
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
    /// Binds an expired password still allows (each warned with the
    /// number left); 0: none.
    pub grace_logins: usize,
    /// How soon after a change a user may change the password again;
    /// zero: at once.
    pub min_age: Duration,
    /// Passwords remembered per entry (`pwdHistory`): a new one may not
    /// be any of them, nor the current one; 0: none.
    pub history: usize,
    /// A user changing its own password must give the old one, in
    /// Password Modify and in a modify alike (OpenLDAP's pwdSafeModify).
    pub safe_modify: bool,
    /// Users may change their own password.
    pub allow_user_change: bool,
    /// A password set by someone else (an administrator's reset) must be
    /// changed by the user before anything else is done when bound.
    pub must_change: bool,
}

impl Default for PasswordPolicy {
    /// No rules, as an entry with no policy has in slapd; users may
    /// change their own password.
    fn default() -> Self {
        PasswordPolicy {
            min_length: 0,
            min_classes: 0,
            allow_hashed: false,
            lockout_failures: 0,
            lockout: Duration::ZERO,
            failure_window: Duration::ZERO,
            max_age: Duration::ZERO,
            expire_warning: Duration::ZERO,
            grace_logins: 0,
            min_age: Duration::ZERO,
            history: 0,
            safe_modify: false,
            allow_user_change: true,
            must_change: false,
        }
    }
}

/// Why a new password is refused by the quality rules: the message, and
/// the policy control's error.
pub type QualityRefusal = (String, PolicyError);

impl PasswordPolicy {
    /// Whether quality rules are on: then a user may not write a hash,
    /// whose quality the server cannot see (unless `allow_hashed`).
    pub fn checks_quality(&self) -> bool {
        self.min_length > 0 || self.min_classes > 0
    }

    /// Why the clear-text `password` is not good enough, or `None`.
    pub fn quality_refusal(&self, password: &[u8]) -> Option<QualityRefusal> {
        let text = String::from_utf8_lossy(password);
        let length = text.chars().count();
        if length < self.min_length {
            return Some((
                format!(
                    "the password is {length} characters long; at least {} are needed (password policy: min_length, pwdMinLength)",
                    self.min_length
                ),
                PolicyError::PasswordTooShort,
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
            return Some((
                format!(
                    "the password uses {classes} of the character classes (lower case, upper case, digits, others); at least {} are needed (password_policy.min_classes)",
                    self.min_classes
                ),
                PolicyError::InsufficientPasswordQuality,
            ));
        }
        None
    }

    /// The policy a `pwdPolicy` entry describes, read as slapd's ppolicy
    /// reads it: lengths only count under `pwdCheckQuality` 1 or 2,
    /// failures only lock under `pwdLockout: TRUE`, users may change
    /// their password unless `pwdAllowUserChange: FALSE`. `None` if the
    /// entry is no password policy for userPassword.
    pub fn from_entry(entry: &Entry, schema: &Schema) -> Option<PasswordPolicy> {
        let first = |name: &str| -> Option<&[u8]> {
            let attr = entry.get(schema.attribute_id(name)?)?;
            attr.values.first().map(Vec::as_slice)
        };
        let applies = first("pwdAttribute")
            .is_some_and(|v| v.eq_ignore_ascii_case(b"userPassword") || v == b"2.5.4.35");
        if !applies {
            return None;
        }
        let number = |name: &str| -> u64 {
            first(name)
                .and_then(|v| std::str::from_utf8(v).ok())
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        let flag = |name: &str, default: bool| -> bool {
            match first(name) {
                Some(v) if v.eq_ignore_ascii_case(b"TRUE") => true,
                Some(v) if v.eq_ignore_ascii_case(b"FALSE") => false,
                _ => default,
            }
        };
        let count = |name: &str| usize::try_from(number(name)).unwrap_or(usize::MAX);
        let check_quality = number("pwdCheckQuality");
        Some(PasswordPolicy {
            min_length: if check_quality > 0 {
                count("pwdMinLength")
            } else {
                0
            },
            min_classes: 0,
            allow_hashed: check_quality == 1,
            lockout_failures: if flag("pwdLockout", false) {
                count("pwdMaxFailure")
            } else {
                0
            },
            lockout: Duration::from_secs(number("pwdLockoutDuration")),
            failure_window: Duration::from_secs(number("pwdFailureCountInterval")),
            max_age: Duration::from_secs(number("pwdMaxAge")),
            expire_warning: Duration::from_secs(number("pwdExpireWarning")),
            grace_logins: count("pwdGraceAuthNLimit"),
            min_age: Duration::from_secs(number("pwdMinAge")),
            history: count("pwdInHistory"),
            safe_modify: flag("pwdSafeModify", false),
            allow_user_change: flag("pwdAllowUserChange", true),
            must_change: flag("pwdMustChange", false),
        })
    }
}

/// The policy's attribute types, looked up once: a bind and an add ask
/// for them every time.
#[derive(Debug)]
pub(crate) struct PolicyTypes {
    failure_time: Option<AttrId>,
    locked_time: Option<AttrId>,
    changed_time: Option<(AttrName, Description)>,
    history: Option<AttrId>,
    grace_use_time: Option<AttrId>,
    reset: Option<AttrId>,
    subentry: Option<AttrId>,
}

impl PolicyTypes {
    pub(crate) fn of(schema: &Schema) -> PolicyTypes {
        let changed_time = Description::parse(CHANGED_TIME.as_bytes(), schema)
            .ok()
            .map(|desc| (AttrName::new(CHANGED_TIME, &desc, schema), desc));
        PolicyTypes {
            failure_time: schema.attribute_id(FAILURE_TIME),
            locked_time: schema.attribute_id(LOCKED_TIME),
            changed_time,
            history: schema.attribute_id(HISTORY),
            grace_use_time: schema.attribute_id(GRACE_USE_TIME),
            reset: schema.attribute_id(RESET),
            subentry: schema.attribute_id(SUBENTRY),
        }
    }

    fn changed_time(&self) -> Option<AttrId> {
        self.changed_time.as_ref().map(|(_, desc)| desc.attr)
    }
}

impl Directory {
    /// The default policy (`[password_policy]`): the one in force for an
    /// entry that names no `pwdPolicySubentry`.
    pub fn password_policy(&self) -> PasswordPolicy {
        self.limits().password_policy
    }

    /// The policy in force for `entry`: the `pwdPolicy` entry its
    /// `pwdPolicySubentry` names, or the default when it names none, or
    /// one that is missing or no password policy (slapd falls back the
    /// same way).
    pub fn policy_of(&self, entry: &Entry) -> PasswordPolicy {
        let default = self.password_policy();
        let Some(named) = self
            .policy_types
            .subentry
            .and_then(|id| entry.get(id))
            .and_then(|a| a.values.first())
        else {
            return default;
        };
        let Ok(dn) = Dn::parse(named, &self.schema) else {
            return default;
        };
        let found = self
            .store_for(&dn)
            .snapshot()
            .ok()
            .and_then(|snapshot| snapshot.get(&dn).ok().flatten())
            .and_then(|(_, policy)| PasswordPolicy::from_entry(&policy, &self.schema));
        if found.is_none() {
            tracing::debug!(
                entry = entry.dn.original(),
                policy = dn.original(),
                "pwdPolicySubentry names no password policy entry; the default policy applies"
            );
        }
        found.unwrap_or(default)
    }

    /// The entry at `dn` and the policy in force for it; `None` if there
    /// is no such entry.
    pub(crate) fn entry_and_policy(
        &self,
        dn: &Dn,
    ) -> Result<Option<(Entry, PasswordPolicy)>, Outcome> {
        let snapshot = self.store_for(dn).snapshot().map_err(Outcome::from)?;
        let Some((_, entry)) = snapshot.get(dn).map_err(Outcome::from)? else {
            return Ok(None);
        };
        let policy = self.policy_of(&entry);
        Ok(Some((entry, policy)))
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

    /// Now in whole seconds, as ppolicy writes its times.
    fn policy_time_now(&self) -> Vec<u8> {
        self.instant_now().whole_seconds().canonical().into_bytes()
    }
}

/// The times an attribute of `entry` holds (unparsable values skipped).
fn times(entry: &Entry, id: Option<AttrId>) -> Vec<Instant> {
    id.and_then(|id| entry.get(id))
        .map(|attr| {
            attr.values
                .iter()
                .filter_map(|v| meridian_model::time::parse_generalized_time(v))
                .collect()
        })
        .unwrap_or_default()
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
        let (why, error) = policy.quality_refusal(b"Ab1!").unwrap();
        assert!(why.contains("min_length"));
        assert_eq!(error, PolicyError::PasswordTooShort);
        let (why, error) = policy.quality_refusal(b"abcdefgh").unwrap();
        assert!(why.contains("min_classes"));
        assert_eq!(error, PolicyError::InsufficientPasswordQuality);
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

    #[test]
    fn a_policy_entry_is_read_as_slapd_reads_it() {
        let schema = Schema::builtin().unwrap();
        let ldif = [
            ("objectClass", &["top", "device", "pwdPolicy"][..]),
            ("cn", &["strict"]),
            ("pwdAttribute", &["userPassword"]),
            ("pwdMinLength", &["10"]),
            ("pwdCheckQuality", &["1"]),
            ("pwdMaxFailure", &["3"]),
            ("pwdLockout", &["TRUE"]),
            ("pwdMaxAge", &["3600"]),
            ("pwdGraceAuthNLimit", &["2"]),
            ("pwdMinAge", &["60"]),
            ("pwdInHistory", &["4"]),
            ("pwdMustChange", &["TRUE"]),
            ("pwdAllowUserChange", &["FALSE"]),
        ];
        let entry = |pairs: &[(&str, &[&str])]| {
            let dn = Dn::parse(b"cn=strict,dc=example,dc=com", &schema).unwrap();
            Entry::new(
                dn,
                pairs
                    .iter()
                    .map(|(ty, values)| (ty.as_bytes(), values.iter().map(|v| v.as_bytes()))),
                &schema,
            )
            .unwrap()
        };
        let policy = PasswordPolicy::from_entry(&entry(&ldif), &schema).unwrap();
        assert_eq!(policy.min_length, 10);
        assert!(policy.allow_hashed);
        assert_eq!(policy.lockout_failures, 3);
        assert_eq!(policy.max_age, Duration::from_secs(3600));
        assert_eq!(policy.grace_logins, 2);
        assert_eq!(policy.min_age, Duration::from_secs(60));
        assert_eq!(policy.history, 4);
        assert!(policy.must_change && !policy.allow_user_change);
        // Without pwdCheckQuality the length is not checked; without
        // pwdLockout failures never lock.
        let lax: Vec<_> = ldif
            .iter()
            .copied()
            .filter(|(ty, _)| *ty != "pwdCheckQuality" && *ty != "pwdLockout")
            .collect();
        let policy = PasswordPolicy::from_entry(&entry(&lax), &schema).unwrap();
        assert_eq!((policy.min_length, policy.lockout_failures), (0, 0));
        // A policy for another attribute is not ours.
        let other: Vec<_> = ldif
            .iter()
            .map(|(ty, v)| match *ty {
                "pwdAttribute" => (*ty, &["description"][..]),
                _ => (*ty, *v),
            })
            .collect();
        assert_eq!(PasswordPolicy::from_entry(&entry(&other), &schema), None);
    }
}
