//! The administrator's credentials.
//!
//! The password is never kept in clear: at start it is hashed with Argon2id
//! (OpenLDAP's `{ARGON2}` scheme), and a bind verifies against the hash in
//! the server's password pool (`password_pool.rs`), which runs at most one
//! hash per CPU with every other password check.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use argon2::password_hash::PasswordHash;
use meridian_directory::password::{HashBounds, HashCost, argon2_phc};
use meridian_model::dn::Dn;

/// The environment variable that sets the administrator's password.
pub const PASSWORD_ENV: &str = "MERIDIAN_ADMIN_PASSWORD";
/// File under the data directory holding the generated password's hash.
pub const SECRET_FILE: &str = "admin.secret";
/// The userPassword-style scheme prefix of the stored hash.
const SCHEME: &str = "{ARGON2}";

/// Where the administrator's password came from (for the start-up log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PasswordSource {
    /// `MERIDIAN_ADMIN_PASSWORD`.
    Environment,
    /// `directory.admin_password_hash` (a hash carried over, as slapd's
    /// `rootpw`).
    Configured,
    /// A hash stored by an earlier start.
    Stored(PathBuf),
    /// Generated now; the caller shows it once.
    Generated {
        /// The password, to print once.
        password: String,
        /// Where its hash was stored.
        path: PathBuf,
    },
}

/// Why the credentials could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// The data directory or secret file could not be used.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The stored hash is not a valid `{ARGON2}` hash.
    #[error("{path}: not a valid {SCHEME} password hash")]
    BadHash {
        /// The file.
        path: PathBuf,
    },
    /// `directory.admin_password_hash` is not a hash this server checks.
    #[error("directory.admin_password_hash: {0}")]
    BadConfiguredHash(String),
    /// Hashing failed (no randomness, or bad parameters).
    #[error("cannot hash the administrator password: {0}")]
    Hash(String),
}

/// The administrator's DN and password hash.
#[derive(Debug, Clone)]
pub struct AdminCredentials {
    dn: String,
    dn_key: String,
    /// As userPassword holds it: `{ARGON2}$argon2id$...`, or the scheme
    /// of a hash carried over (`{SSHA}...`).
    hash: Arc<str>,
    bounds: HashBounds,
}

impl AdminCredentials {
    /// Sets up the credentials: from `env_password` if given, else from
    /// `configured` (`directory.admin_password_hash`: a hash in any scheme
    /// a bind verifies, within `bounds`), else from the stored hash in
    /// `data_dir`, else a new random password whose hash is stored there.
    pub fn load(
        admin_dn: &Dn,
        admin_dn_text: &str,
        env_password: Option<String>,
        configured: Option<&str>,
        data_dir: &Path,
        cost: HashCost,
        bounds: HashBounds,
    ) -> Result<(AdminCredentials, PasswordSource), AdminError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| AdminError::Io { path, source }
        };
        let secret = data_dir.join(SECRET_FILE);
        let (hash, source) = if let Some(password) = env_password {
            (
                hash_password(password.as_bytes(), cost)?,
                PasswordSource::Environment,
            )
        } else if let Some(stored) = configured.filter(|h| !h.is_empty()) {
            if !stored.starts_with('{') {
                return Err(AdminError::BadConfiguredHash(
                    "a hash with its scheme ({SSHA}..., {ARGON2}...), never the password itself"
                        .to_owned(),
                ));
            }
            meridian_directory::password::check_stored(stored.as_bytes(), &bounds)
                .map_err(AdminError::BadConfiguredHash)?;
            (stored.to_owned(), PasswordSource::Configured)
        } else if secret.exists() {
            let stored = std::fs::read_to_string(&secret).map_err(io(&secret))?;
            let stored = stored.trim();
            stored
                .strip_prefix(SCHEME)
                .filter(|h| PasswordHash::new(h).is_ok())
                .ok_or_else(|| AdminError::BadHash {
                    path: secret.clone(),
                })?;
            (stored.to_owned(), PasswordSource::Stored(secret))
        } else {
            let password = meridian_directory::password::generate().map_err(AdminError::Hash)?;
            let hash = hash_password(password.as_bytes(), cost)?;
            std::fs::create_dir_all(data_dir).map_err(io(data_dir))?;
            write_private(&secret, &format!("{hash}\n")).map_err(io(&secret))?;
            (
                hash,
                PasswordSource::Generated {
                    password,
                    path: secret,
                },
            )
        };
        Ok((
            AdminCredentials {
                dn: admin_dn_text.to_owned(),
                dn_key: admin_dn.normalized().to_owned(),
                hash: hash.into(),
                bounds,
            },
            source,
        ))
    }

    /// The stored `{ARGON2}` hash (the bind cache's key for it).
    pub(crate) fn hash(&self) -> &str {
        &self.hash
    }

    /// The DN normalised (what [`AdminCredentials::is_admin_dn`] compares).
    pub(crate) fn dn_key(&self) -> &str {
        &self.dn_key
    }

    /// The DN as configured.
    pub fn dn(&self) -> &str {
        &self.dn
    }

    /// True when `dn` names the administrator (schema-aware comparison).
    pub fn is_admin_dn(&self, dn: &Dn) -> bool {
        dn.normalized() == self.dn_key
    }

    /// Verifies `password`; false on any failure. Slow by design (Argon2):
    /// the server runs it in its password pool.
    pub fn verify(&self, password: &[u8]) -> bool {
        matches!(
            meridian_directory::password::verify(
                self.hash.as_bytes(),
                password,
                false,
                &self.bounds
            ),
            meridian_directory::password::Verdict::Matched
        )
    }
}

/// `{ARGON2}` and the PHC string of `password`'s hash.
fn hash_password(password: &[u8], cost: HashCost) -> Result<String, AdminError> {
    Ok(format!(
        "{SCHEME}{}",
        argon2_phc(password, cost).map_err(AdminError::Hash)?
    ))
}

fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(contents.as_bytes())?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Dn {
        let schema = meridian_model::Schema::builtin().unwrap();
        Dn::parse(text.as_bytes(), &schema).unwrap()
    }

    fn dn() -> Dn {
        parse("cn=admin,dc=example,dc=com")
    }

    #[tokio::test]
    async fn generated_password_is_stored_hashed_and_reused() {
        let dir = std::env::temp_dir().join(format!("meridian-admin-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (creds, source) = AdminCredentials::load(
            &dn(),
            "cn=admin,dc=example,dc=com",
            None,
            None,
            &dir,
            HashCost::default(),
            HashBounds::default(),
        )
        .unwrap();
        let PasswordSource::Generated { password, path } = source else {
            panic!("expected a generated password");
        };
        let stored = std::fs::read_to_string(&path).unwrap();
        assert!(stored.starts_with("{ARGON2}$argon2id$"));
        assert!(!stored.contains(&password));
        assert!(creds.verify(password.as_bytes()));
        assert!(!creds.verify(b"wrong"));

        let (again, source) = AdminCredentials::load(
            &dn(),
            "cn=admin,dc=example,dc=com",
            None,
            None,
            &dir,
            HashCost::default(),
            HashBounds::default(),
        )
        .unwrap();
        assert!(matches!(source, PasswordSource::Stored(_)));
        assert!(again.verify(password.as_bytes()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn environment_password_wins_and_dn_matching_folds_case() {
        let dir = std::env::temp_dir().join("meridian-admin-unused");
        let (creds, source) = AdminCredentials::load(
            &dn(),
            "cn=admin,dc=example,dc=com",
            Some("s3cret".into()),
            Some("{SSHA}ignored"),
            &dir,
            HashCost::default(),
            HashBounds::default(),
        )
        .unwrap();
        assert_eq!(source, PasswordSource::Environment);
        assert!(creds.verify(b"s3cret"));
        assert!(creds.is_admin_dn(&parse("CN=Admin, DC=Example, DC=com")));
        assert!(creds.is_admin_dn(&parse(
            "commonName=admin,0.9.2342.19200300.100.1.25=example,dc=com"
        )));
        assert!(!creds.is_admin_dn(&parse("cn=other,dc=example,dc=com")));
    }

    #[tokio::test]
    async fn a_configured_hash_is_used_as_slapds_rootpw_is() {
        let dir = std::env::temp_dir().join("meridian-admin-configured");
        // {SSHA} of "secret" with the salt "salt" (slappasswd's form).
        let ssha = "{SSHA}gVK8WC9YyFT1gMsQHTGCgT3sSv5zYWx0";
        let (creds, source) = AdminCredentials::load(
            &dn(),
            "cn=admin,dc=example,dc=com",
            None,
            Some(ssha),
            &dir,
            HashCost::default(),
            HashBounds::default(),
        )
        .unwrap();
        assert_eq!(source, PasswordSource::Configured);
        assert!(creds.verify(b"secret"));
        assert!(!creds.verify(b"wrong"));
        assert!(!dir.exists(), "nothing written");
        // The password itself, or a hash no bind could check, is refused.
        for bad in ["secret", "{SSHA}not-base64!", "{NOSUCH}abc"] {
            let refused = AdminCredentials::load(
                &dn(),
                "cn=admin,dc=example,dc=com",
                None,
                Some(bad),
                &dir,
                HashCost::default(),
                HashBounds::default(),
            );
            assert!(
                matches!(refused, Err(AdminError::BadConfiguredHash(_))),
                "{bad}"
            );
        }
    }
}
