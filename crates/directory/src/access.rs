//! Access rules (the SPEC's access control): evaluated in order, the
//! first rule whose target and attributes match decides, and within it
//! the first `by` clause that matches the caller; anything not granted is
//! denied. The administrator bypasses the rules; userPassword is never
//! returned to anyone else, whatever the rules say.
//!
//! ```toml
//! [[access]]
//! to = "subtree:ou=People,dc=example,dc=com"   # "*", "base:DN", "subtree:DN", "children:DN"
//! attrs = ["telephoneNumber"]                  # optional: these types only
//! by = [ { who = "self", grant = "write" },    # "*", "anonymous", "users", "self",
//!        { who = "users", grant = "read" } ]   #  "dn:DN", "group:DN"
//! ```
//!
//! Levels, each including the ones before it: none, auth, compare,
//! search, read, write. Without `[[access]]` rules the default applies:
//! anyone may bind, bound users read everything (but passwords) and may
//! change their own userPassword; anonymous reads nothing but the root
//! DSE and cn=Subschema (which the server publishes itself).

use meridian_model::Schema;
use meridian_model::dn::Dn;
use meridian_model::filter::CompiledFilter;
use meridian_model::schema::AttrId;

use crate::Identity;

/// What an access grants, in increasing order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Nothing.
    None,
    /// Bind with the attribute's values (userPassword). A bind is
    /// checked as anonymous, whoever the connection was bound as before,
    /// so `{ who = "anonymous", grant = "auth" }` is the usual clause.
    Auth,
    /// Compare.
    Compare,
    /// Use in search filters (and see that the entry exists).
    Search,
    /// Read values.
    Read,
    /// Change.
    Write,
}

impl Level {
    fn parse(text: &str) -> Option<Level> {
        Some(match text {
            "none" => Level::None,
            "auth" => Level::Auth,
            "compare" => Level::Compare,
            "search" => Level::Search,
            "read" => Level::Read,
            "write" => Level::Write,
            _ => return None,
        })
    }

    /// The level's name as written in the config.
    pub fn name(self) -> &'static str {
        match self {
            Level::None => "none",
            Level::Auth => "auth",
            Level::Compare => "compare",
            Level::Search => "search",
            Level::Read => "read",
            Level::Write => "write",
        }
    }
}

#[derive(Debug, Clone)]
enum Target {
    Any,
    Base(Dn),
    Subtree(Dn),
    Children(Dn),
}

#[derive(Debug, Clone)]
enum Who {
    Anyone,
    Anonymous,
    Users,
    SelfEntry,
    Dn(Dn),
    Group(Dn),
}

#[derive(Debug, Clone)]
struct Rule {
    to: Target,
    attrs: Vec<AttrId>,
    by: Vec<(Who, Level)>,
}

/// The configured rules.
#[derive(Debug, Clone)]
pub struct AccessRules {
    rules: Vec<Rule>,
    /// The built-in defaults, not an operator's `[[access]]` rules.
    builtin: bool,
}

/// What the rules decided for one access: the level, and whether an
/// operator's rule that names the attribute decided it (what reading
/// userPassword takes: see `rights.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// The level granted.
    pub level: Level,
    /// Granted by a configured rule whose `attrs` name the attribute.
    pub named: bool,
}

/// One `[[access]]` rule as written in the config.
#[derive(Debug, Clone)]
pub struct RuleText<'a> {
    /// `to`.
    pub to: &'a str,
    /// `attrs`.
    pub attrs: &'a [String],
    /// `by`: `(who, grant)`.
    pub by: Vec<(&'a str, &'a str)>,
}

fn dn(text: &str, schema: &Schema) -> Result<Dn, String> {
    Dn::parse(text.as_bytes(), schema).map_err(|e| e.message)
}

impl AccessRules {
    /// The default rules (see the module documentation).
    pub fn default_rules(schema: &Schema) -> AccessRules {
        let user_password = schema.attribute_id("userPassword");
        AccessRules {
            rules: vec![
                Rule {
                    to: Target::Any,
                    attrs: user_password.into_iter().collect(),
                    by: vec![
                        (Who::SelfEntry, Level::Write),
                        (Who::Anonymous, Level::Auth),
                        (Who::Anyone, Level::None),
                    ],
                },
                Rule {
                    to: Target::Any,
                    attrs: Vec::new(),
                    by: vec![(Who::Users, Level::Read), (Who::Anyone, Level::None)],
                },
            ],
            builtin: true,
        }
    }

    /// Parses configured rules; errors name the rule and the reason.
    pub fn parse(rules: &[RuleText<'_>], schema: &Schema) -> Result<AccessRules, String> {
        let mut out = Vec::new();
        for (i, rule) in rules.iter().enumerate() {
            let at = |what: &str, e: String| format!("config key `access[{i}].{what}`: {e}");
            let to = match rule.to.split_once(':') {
                _ if rule.to == "*" => Target::Any,
                Some(("base", d)) => Target::Base(dn(d, schema).map_err(|e| at("to", e))?),
                Some(("subtree", d)) => Target::Subtree(dn(d, schema).map_err(|e| at("to", e))?),
                Some(("children", d)) => Target::Children(dn(d, schema).map_err(|e| at("to", e))?),
                _ => {
                    return Err(at(
                        "to",
                        format!(
                            "{:?}: expected \"*\", base:DN, subtree:DN or children:DN",
                            rule.to
                        ),
                    ));
                }
            };
            let mut attrs = Vec::new();
            for name in rule.attrs {
                attrs.push(schema.attribute_id(name).ok_or_else(|| {
                    at("attrs", format!("attribute type {name:?} is not defined"))
                })?);
            }
            let mut by = Vec::new();
            for (j, (who, grant)) in rule.by.iter().enumerate() {
                let key = format!("by[{j}]");
                let who = match who.split_once(':') {
                    _ if *who == "*" => Who::Anyone,
                    _ if *who == "anonymous" => Who::Anonymous,
                    _ if *who == "users" => Who::Users,
                    _ if *who == "self" => Who::SelfEntry,
                    Some(("dn", d)) => {
                        Who::Dn(dn(d, schema).map_err(|e| at(&format!("{key}.who"), e))?)
                    }
                    Some(("group", d)) => {
                        Who::Group(dn(d, schema).map_err(|e| at(&format!("{key}.who"), e))?)
                    }
                    _ => {
                        return Err(at(
                            &format!("{key}.who"),
                            format!(
                                "{who:?}: expected *, anonymous, users, self, dn:DN or group:DN"
                            ),
                        ));
                    }
                };
                let grant = Level::parse(grant).ok_or_else(|| {
                    at(
                        &format!("{key}.grant"),
                        format!("{grant:?}: expected none, auth, compare, search, read or write"),
                    )
                })?;
                by.push((who, grant));
            }
            out.push(Rule { to, attrs, by });
        }
        Ok(AccessRules {
            rules: out,
            builtin: false,
        })
    }

    /// The level `who` has on `attr` (`None`: the entry itself) of the
    /// entry at `entry`. `member(group, who)` tells group membership.
    pub fn level(
        &self,
        who: &Identity,
        entry: &Dn,
        attr: Option<AttrId>,
        schema: &Schema,
        member: &dyn Fn(&Dn, &Dn) -> bool,
    ) -> Level {
        self.decide(who, entry, attr, schema, member).level
    }

    /// [`AccessRules::level`], with whether an operator's rule naming
    /// `attr` decided it.
    pub fn decide(
        &self,
        who: &Identity,
        entry: &Dn,
        attr: Option<AttrId>,
        schema: &Schema,
        member: &dyn Fn(&Dn, &Dn) -> bool,
    ) -> Decision {
        self.decide_among(who, entry, attr, schema, member, false)
    }

    /// [`AccessRules::decide`] by the rules that name a DN (`base:`,
    /// `subtree:`, `children:`) only: what opens the server's own
    /// subtrees (cn=Monitor), which a catch-all `to = "*"` must not.
    pub fn decide_named(
        &self,
        who: &Identity,
        entry: &Dn,
        schema: &Schema,
        member: &dyn Fn(&Dn, &Dn) -> bool,
    ) -> Decision {
        self.decide_among(who, entry, None, schema, member, true)
    }

    fn decide_among(
        &self,
        who: &Identity,
        entry: &Dn,
        attr: Option<AttrId>,
        schema: &Schema,
        member: &dyn Fn(&Dn, &Dn) -> bool,
        named_only: bool,
    ) -> Decision {
        let denied = Decision {
            level: Level::None,
            named: false,
        };
        let bound = match who {
            Identity::Admin(_) => {
                return Decision {
                    level: Level::Write,
                    named: true,
                };
            }
            Identity::User(dn) => Some(dn),
            Identity::Anonymous => None,
        };
        for rule in &self.rules {
            let target = match &rule.to {
                Target::Any => !named_only,
                Target::Base(d) => d.same_entry(entry),
                Target::Subtree(d) => entry.is_within(d),
                Target::Children(d) => entry.is_descendant_of(d),
            };
            let attrs = rule.attrs.is_empty()
                || attr.is_some_and(|a| rule.attrs.iter().any(|r| schema.is_subtype(a, *r)));
            if !target || !attrs {
                continue;
            }
            for (clause, grant) in &rule.by {
                let matches = match (clause, bound) {
                    (Who::Anyone, _) => true,
                    (Who::Anonymous, None) => true,
                    (Who::Users, Some(_)) => true,
                    (Who::SelfEntry, Some(b)) => b.same_entry(entry),
                    (Who::Dn(d), Some(b)) => b.same_entry(d),
                    (Who::Group(g), Some(b)) => member(g, b),
                    _ => false,
                };
                if matches {
                    return Decision {
                        level: *grant,
                        named: !self.builtin && !rule.attrs.is_empty(),
                    };
                }
            }
            // The rule decided the target; no clause matched: denied.
            return denied;
        }
        denied
    }
}

/// The attribute types a search filter tests, which the caller needs
/// `search` access to for an entry to match.
#[derive(Debug, Default)]
pub struct FilterAttrs {
    /// The types named.
    pub attrs: Vec<AttrId>,
    /// Some part matches against every attribute of the entry (an
    /// extensible match without a type, or with dnAttributes).
    pub every: bool,
}

impl FilterAttrs {
    /// The types `filter`'s items test; items on names not in the
    /// schema are left out (they evaluate to Undefined and so never
    /// reveal anything).
    pub fn of(filter: &CompiledFilter) -> FilterAttrs {
        let mut out = FilterAttrs::default();
        filter.visit_tested(&mut |tested| match tested {
            Some(attr) if !out.attrs.contains(&attr) => out.attrs.push(attr),
            Some(_) => {}
            None => out.every = true,
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn dn(s: &str, schema: &Schema) -> Dn {
        Dn::parse(s.as_bytes(), schema).unwrap()
    }

    #[test]
    fn first_matching_rule_and_clause_decide() {
        let schema = Schema::builtin().unwrap();
        let attrs_phone = vec!["telephoneNumber".to_owned()];
        let rules = AccessRules::parse(
            &[
                RuleText {
                    to: "subtree:ou=People,dc=example,dc=com",
                    attrs: &attrs_phone,
                    by: vec![("self", "write"), ("anonymous", "read")],
                },
                RuleText {
                    to: "subtree:ou=People,dc=example,dc=com",
                    attrs: &[],
                    by: vec![
                        ("group:cn=HR,dc=example,dc=com", "write"),
                        ("users", "read"),
                    ],
                },
                RuleText {
                    to: "*",
                    attrs: &[],
                    by: vec![("users", "search")],
                },
            ],
            &schema,
        )
        .unwrap();
        let alice = dn("uid=alice,ou=People,dc=example,dc=com", &schema);
        let bob = dn("uid=bob,ou=People,dc=example,dc=com", &schema);
        let hr = dn("cn=HR,dc=example,dc=com", &schema);
        let phone = schema.attribute_id("telephoneNumber");
        let cn = schema.attribute_id("cn");
        let is_hr = |g: &Dn, who: &Dn| g.same_entry(&hr) && who.same_entry(&bob);
        let level =
            |who: &Identity, entry: &Dn, attr| rules.level(who, entry, attr, &schema, &is_hr);
        let as_alice = Identity::User(Arc::new(alice.clone()));
        let as_bob = Identity::User(Arc::new(bob.clone()));
        assert_eq!(level(&as_alice, &alice, phone), Level::Write);
        assert_eq!(level(&Identity::Anonymous, &alice, phone), Level::Read);
        // bob is in HR, but the phone rule matched first and has no clause for him.
        assert_eq!(level(&as_bob, &alice, phone), Level::None);
        assert_eq!(level(&as_bob, &alice, cn), Level::Write);
        assert_eq!(level(&as_alice, &bob, cn), Level::Read);
        assert_eq!(level(&Identity::Anonymous, &bob, cn), Level::None);
        assert_eq!(
            level(&as_alice, &dn("dc=example,dc=com", &schema), None),
            Level::Search
        );
        assert_eq!(
            level(&Identity::Admin(Arc::new(hr.clone())), &alice, phone),
            Level::Write
        );
    }

    #[test]
    fn the_defaults_let_anyone_bind_users_read_and_change_their_own_password() {
        let schema = Schema::builtin().unwrap();
        let rules = AccessRules::default_rules(&schema);
        let alice = dn("uid=alice,dc=example,dc=com", &schema);
        let bob = dn("uid=bob,dc=example,dc=com", &schema);
        let password = schema.attribute_id("userPassword");
        let cn = schema.attribute_id("cn");
        let no_groups = |_: &Dn, _: &Dn| false;
        let level =
            |who: &Identity, entry: &Dn, attr| rules.level(who, entry, attr, &schema, &no_groups);
        let as_alice = Identity::User(Arc::new(alice.clone()));
        assert_eq!(level(&Identity::Anonymous, &alice, password), Level::Auth);
        assert_eq!(level(&Identity::Anonymous, &alice, cn), Level::None);
        assert_eq!(level(&Identity::Anonymous, &alice, None), Level::None);
        assert_eq!(level(&as_alice, &alice, password), Level::Write);
        assert_eq!(level(&as_alice, &bob, password), Level::None);
        assert_eq!(level(&as_alice, &bob, cn), Level::Read);
        assert_eq!(level(&as_alice, &alice, cn), Level::Read);
    }

    #[test]
    fn errors_name_the_key() {
        let schema = Schema::builtin().unwrap();
        for (to, who, grant, key) in [
            ("subtree:not a dn", "users", "read", "access[0].to"),
            ("nowhere", "users", "read", "access[0].to"),
            ("*", "everyone", "read", "access[0].by[0].who"),
            ("*", "users", "all", "access[0].by[0].grant"),
        ] {
            let err = AccessRules::parse(
                &[RuleText {
                    to,
                    attrs: &[],
                    by: vec![(who, grant)],
                }],
                &schema,
            )
            .unwrap_err();
            assert!(err.contains(key), "{err}");
        }
        let nosuch = vec!["nosuch".to_owned()];
        let err = AccessRules::parse(
            &[RuleText {
                to: "*",
                attrs: &nosuch,
                by: vec![],
            }],
            &schema,
        )
        .unwrap_err();
        assert!(err.contains("access[0].attrs"), "{err}");
    }
}
