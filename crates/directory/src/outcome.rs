//! What an operation answers: a result code, a message, a matched DN and
//! referrals, made from model and store errors.

use super::*;

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
        }
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
            },
            StoreError::Model(m) => m.into(),
            StoreError::Referral(url) => Outcome {
                code,
                matched: String::new(),
                message: format!(
                    "this node does not take writes; send them to the leader at {url}"
                ),
                referrals: vec![url],
            },
            other => Outcome::new(code, other.to_string()),
        }
    }
}
