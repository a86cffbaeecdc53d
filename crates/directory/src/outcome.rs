//! What an operation answers: a result code, a message, a matched DN and
//! referrals, made from model and store errors.

use meridian_model::ModelError;
use meridian_proto::ResultCode;
use meridian_proto::controls::PolicyError;
use meridian_store::StoreError;

/// An LDAPResult to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// resultCode.
    pub code: ResultCode,
    /// matchedDN.
    pub matched: String,
    /// diagnosticMessage.
    pub message: String,
    /// The referral URLs of a `referral` result (RFC 4511 section
    /// 4.1.10); empty for every other code.
    pub referrals: Vec<String>,
    /// Why the password policy refused the operation, for the password
    /// policy response control of a client that asked for it.
    pub password_error: Option<PolicyError>,
}

impl Outcome {
    /// success.
    pub fn success() -> Self {
        Self::new(ResultCode::SUCCESS, "")
    }

    /// A result without matchedDN.
    pub fn new(code: ResultCode, message: impl Into<String>) -> Self {
        Outcome {
            code,
            matched: String::new(),
            message: message.into(),
            referrals: Vec::new(),
            password_error: None,
        }
    }

    /// The same answer, marked with the password policy's `error`.
    pub fn with_password_error(mut self, error: PolicyError) -> Self {
        self.password_error = Some(error);
        self
    }
}

impl From<ModelError> for Outcome {
    fn from(e: ModelError) -> Self {
        Outcome::new(e.code, e.message)
    }
}

impl From<StoreError> for Outcome {
    fn from(e: StoreError) -> Self {
        let code = e.code();
        match e {
            StoreError::NoSuchObject { dn, matched } => Outcome {
                code,
                matched,
                message: format!("no such entry: {dn}"),
                referrals: Vec::new(),
                password_error: None,
            },
            StoreError::Model(m) => m.into(),
            // The failed update's own outcome (matchedDN, referrals), its
            // place in the transaction said first.
            StoreError::InTransaction { at, error } => {
                let mut outcome = Outcome::from(*error);
                outcome.message =
                    format!("update {} of the transaction: {}", at + 1, outcome.message);
                outcome
            }
            StoreError::Referral(url) => Outcome {
                code,
                matched: String::new(),
                message: format!(
                    "this node does not take writes; send them to the leader at {url}"
                ),
                referrals: vec![url],
                password_error: None,
            },
            other => Outcome::new(code, other.to_string()),
        }
    }
}
