//! Proxied authorization (RFC 4370): who may act as whom.

use std::sync::Arc;

use meridian_model::dn::Dn;
use meridian_proto::ResultCode;

use crate::{Directory, Identity, Outcome};

/// One `directory.proxy_authorizers` entry.
#[derive(Debug, Clone)]
pub(crate) enum ProxyAuthorizer {
    Dn(Dn),
    Group(Dn),
}

impl Directory {
    /// The same directory letting the identities `specs` names (`dn:DN`,
    /// `group:DN`; `directory.proxy_authorizers`) use proxied
    /// authorization.
    pub fn with_proxy_authorizers(mut self, specs: &[String]) -> Result<Self, String> {
        for (i, spec) in specs.iter().enumerate() {
            let parse = |text: &str| {
                Dn::parse(text.as_bytes(), &self.schema)
                    .map_err(|e| format!("config key `directory.proxy_authorizers` entry {i}: {e}"))
            };
            let authorizer = match spec.split_once(':') {
                Some(("dn", dn)) => ProxyAuthorizer::Dn(parse(dn)?),
                Some(("group", dn)) => ProxyAuthorizer::Group(parse(dn)?),
                _ => {
                    return Err(format!(
                        "config key `directory.proxy_authorizers` entry {i}: {spec:?}: expected dn:DN or group:DN"
                    ));
                }
            };
            self.proxy_authorizers.push(authorizer);
        }
        Ok(self)
    }

    /// The identity an operation runs as under the proxied authorization
    /// control (RFC 4370). `authz_id` is `dn:DN`, or empty for anonymous.
    /// The requester must be the administrator or one of
    /// `directory.proxy_authorizers`; nobody becomes the administrator
    /// this way; the DN must name an entry that exists. Every refusal is
    /// authorizationDenied, saying why.
    pub fn proxied_identity(
        &self,
        requester: &Identity,
        authz_id: &[u8],
    ) -> Result<Identity, Outcome> {
        let denied = |why: String| Outcome::new(ResultCode::AUTHORIZATION_DENIED, why);
        let allowed = match requester {
            Identity::Admin(_) => true,
            Identity::Anonymous => false,
            Identity::User(dn) => self.proxy_authorizers.iter().any(|a| match a {
                ProxyAuthorizer::Dn(d) => d.same_entry(dn),
                ProxyAuthorizer::Group(g) => self.is_member(g, dn),
            }),
        };
        if !allowed {
            return Err(denied(format!(
                "{} may not use proxied authorization (directory.proxy_authorizers)",
                match requester {
                    Identity::Anonymous => "an anonymous client",
                    Identity::Admin(d) | Identity::User(d) => d.original(),
                }
            )));
        }
        if authz_id.is_empty() {
            return Ok(Identity::Anonymous);
        }
        let Some(text) = authz_id.strip_prefix(b"dn:") else {
            return Err(denied(format!(
                "authzId {:?}: only dn: authorization identities are supported",
                String::from_utf8_lossy(authz_id)
            )));
        };
        let dn = Dn::parse(text, &self.schema).map_err(|e| {
            denied(format!(
                "authzId {:?}: {e}",
                String::from_utf8_lossy(authz_id)
            ))
        })?;
        if dn.same_entry(&self.admin) {
            return Err(denied(
                "the administrator cannot be assumed by proxy".into(),
            ));
        }
        let exists = self
            .store_for(&dn)
            .snapshot()
            .and_then(|s| s.id(&dn))
            .map_err(Outcome::from)?
            .is_some();
        if !exists {
            return Err(denied(format!("no entry {} to act as", dn.original())));
        }
        Ok(Identity::User(Arc::new(dn)))
    }
}
