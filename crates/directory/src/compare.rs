//! Compare (RFC 4511 4.10).

use meridian_model::ModelError;
use meridian_model::entry::Description;
use meridian_proto::{CompareRequest, ResultCode};
use meridian_store::StoreError;

use crate::access::Level;
use crate::rights::{Memberships, insufficient};
use crate::{Directory, Identity, Outcome};

impl Directory {
    /// Compare (RFC 4511 section 4.10).
    pub fn compare(&self, who: &Identity, req: &CompareRequest<'_>) -> Outcome {
        self.compare_inner(who, req)
            .unwrap_or_else(|e| self.disclose(who, e))
    }

    pub(crate) fn compare_inner(
        &self,
        who: &Identity,
        req: &CompareRequest<'_>,
    ) -> Result<Outcome, Outcome> {
        let dn = self.parse_dn(req.dn)?;
        let desc = Description::parse(req.ava.attr, &self.schema)?;
        let groups = &Memberships::default();
        self.require_visible(who, &dn, Some(desc.attr), Level::Compare, groups)?;
        let at = self.schema.attr(desc.attr).ok_or_else(|| {
            ModelError::internal(format!("attribute ID {:?} has no type", desc.attr))
        })?;
        if Some(desc.attr) == self.user_password && !matches!(who, Identity::Admin(_)) {
            return Err(insufficient(
                "userPassword can only be compared by the administrator",
            ));
        }
        let Some(rule) = at.equality else {
            return Err(Outcome::new(
                ResultCode::INAPPROPRIATE_MATCHING,
                format!("{} has no equality matching rule", at.name()),
            ));
        };
        let snapshot = self.store_for(&dn).snapshot().map_err(Outcome::from)?;
        let Some((_, entry)) = snapshot.get(&dn).map_err(Outcome::from)? else {
            return Err(StoreError::NoSuchObject {
                dn: dn.original().to_owned(),
                matched: snapshot.matched(&dn).unwrap_or_default(),
            }
            .into());
        };
        let Some(asserted) = rule.key(req.ava.value, &self.schema) else {
            return Err(Outcome::new(
                ResultCode::INVALID_ATTRIBUTE_SYNTAX,
                format!("the value is not valid for {}", rule.name),
            ));
        };
        let mut present = false;
        for attr in entry.matching(&desc, &self.schema) {
            present = true;
            if attr
                .values
                .iter()
                .any(|v| rule.key(v, &self.schema).as_ref() == Some(&asserted))
            {
                return Ok(Outcome::new(ResultCode::COMPARE_TRUE, ""));
            }
        }
        if present {
            Ok(Outcome::new(ResultCode::COMPARE_FALSE, ""))
        } else {
            Err(Outcome::new(
                ResultCode::NO_SUCH_ATTRIBUTE,
                format!("the entry has no {} attribute", at.name()),
            ))
        }
    }
}
