//! The password policy (`[password_policy]`): what a new password must
//! be, in the spirit of OpenLDAP's ppolicy (draft-behera-ldap-password-
//! policy) and 389 DS's password syntax checks.
//!
//! The quality rules apply to passwords users set, in clear text (a
//! userPassword written in an add or a modify, or Password Modify's new
//! password). The administrator may set any password: an administrator's
//! reset is how a forgotten password is replaced.

/// `[password_policy]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PasswordPolicy {
    /// Fewest characters (Unicode scalar values) of a new password; 0:
    /// no minimum.
    pub min_length: usize,
    /// Fewest character classes (lower-case letters, upper-case letters,
    /// digits, anything else) a new password draws from; 0: no rule.
    pub min_classes: usize,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_and_classes_are_counted_in_characters() {
        let policy = PasswordPolicy {
            min_length: 8,
            min_classes: 3,
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
            min_classes: 0,
        };
        assert_eq!(policy.quality_refusal("ääääääää".as_bytes()), None);
        assert!(PasswordPolicy::default().quality_refusal(b"").is_none());
    }
}
