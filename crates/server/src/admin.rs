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
use meridian_directory::password::{HashCost, argon2_phc};
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
    /// Hashing failed (no randomness, or bad parameters).
    #[error("cannot hash the administrator password: {0}")]
    Hash(String),
}

/// The administrator's DN and password hash.
#[derive(Debug, Clone)]
pub struct AdminCredentials {
    dn: String,
    dn_key: String,
    hash: Arc<str>,
}

impl AdminCredentials {
    /// Sets up the credentials: from `env_password` if given, else from the
    /// stored hash in `data_dir`, else a new random password whose hash is
    /// stored there.
    pub fn load(
        admin_dn: &Dn,
        admin_dn_text: &str,
        env_password: Option<String>,
        data_dir: &Path,
        cost: HashCost,
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
        } else if secret.exists() {
            let stored = std::fs::read_to_string(&secret).map_err(io(&secret))?;
            let hash = stored
                .trim()
                .strip_prefix(SCHEME)
                .filter(|h| PasswordHash::new(h).is_ok())
                .ok_or_else(|| AdminError::BadHash {
                    path: secret.clone(),
                })?
                .to_owned();
            (hash, PasswordSource::Stored(secret))
        } else {
            let password = meridian_directory::password::generate().map_err(AdminError::Hash)?;
            let hash = hash_password(password.as_bytes(), cost)?;
            std::fs::create_dir_all(data_dir).map_err(io(data_dir))?;
            write_private(&secret, &format!("{SCHEME}{hash}\n")).map_err(io(&secret))?;
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
        meridian_directory::password::argon2_matches(&self.hash, password)
    }
}

fn hash_password(password: &[u8], cost: HashCost) -> Result<String, AdminError> {
    argon2_phc(password, cost).map_err(AdminError::Hash)
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
            &dir,
            HashCost::default(),
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
            &dir,
            HashCost::default(),
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
            &dir,
            HashCost::default(),
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
}
