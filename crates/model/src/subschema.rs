//! The subschema subentry (RFC 4512 section 4.2): the schema published
//! as attribute values, which clients and schema browsers read from
//! `cn=Subschema`.

use crate::rules::RULES;
use crate::schema::Schema;
use crate::syntax::SYNTAXES;

/// The DN Meridian publishes its subschema under (as slapd does).
pub const SUBSCHEMA_DN: &str = "cn=Subschema";

/// The attributes of the subschema subentry, in the order clients list
/// them: `(attribute name, values)`.
pub fn subschema_attributes(schema: &Schema) -> Vec<(&'static str, Vec<String>)> {
    let quote = |s: &str| s.replace('\\', "\\5C").replace('\'', "\\27");
    let mut syntaxes: Vec<String> = SYNTAXES
        .iter()
        .map(|s| {
            let binary = if s.binary {
                " X-NOT-HUMAN-READABLE 'TRUE'"
            } else {
                ""
            };
            format!("( {} DESC '{}'{binary} )", s.oid, quote(s.desc))
        })
        .collect();
    syntaxes.extend(
        schema
            .extra_syntaxes()
            .iter()
            .map(|(oid, desc)| format!("( {oid} DESC '{}' )", quote(desc))),
    );
    let rules: Vec<String> = RULES
        .iter()
        .map(|r| format!("( {} NAME '{}' SYNTAX {} )", r.oid, r.name, r.syntax))
        .collect();
    let rule_uses: Vec<String> = RULES
        .iter()
        .filter_map(|r| {
            let applies: Vec<&str> = schema
                .attributes()
                .filter(|(_, a)| {
                    a.syntax_oid == r.syntax
                        || [a.equality, a.ordering, a.substr]
                            .iter()
                            .flatten()
                            .any(|x| x.oid == r.oid)
                })
                .map(|(_, a)| a.name())
                .collect();
            (!applies.is_empty()).then(|| {
                format!(
                    "( {} NAME '{}' APPLIES ( {} ) )",
                    r.oid,
                    r.name,
                    applies.join(" $ ")
                )
            })
        })
        .collect();
    vec![
        (
            "objectClass",
            vec![
                "top".into(),
                "subentry".into(),
                "subschema".into(),
                "extensibleObject".into(),
            ],
        ),
        ("cn", vec!["Subschema".into()]),
        ("ldapSyntaxes", syntaxes),
        ("matchingRules", rules),
        ("matchingRuleUse", rule_uses),
        (
            "attributeTypes",
            schema
                .attributes()
                .map(|(_, a)| a.definition.clone())
                .collect(),
        ),
        (
            "objectClasses",
            schema
                .classes()
                .map(|(_, c)| c.definition.clone())
                .collect(),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::description;

    #[test]
    fn every_published_value_parses_and_reloads() {
        let schema = Schema::builtin().unwrap();
        let attrs = subschema_attributes(&schema);
        for (name, values) in &attrs {
            if *name == "objectClass" || *name == "cn" {
                continue;
            }
            assert!(!values.is_empty(), "{name}");
            for v in values {
                description::parse(v).unwrap_or_else(|e| panic!("{name}: {v}: {e}"));
            }
        }
        // Publishing then loading the published definitions (as a client
        // copying our schema would) gives the same types and classes.
        let mut ldif = String::from("dn: cn=Subschema\n");
        for (name, values) in &attrs {
            if *name == "attributeTypes" || *name == "objectClasses" {
                for v in values {
                    ldif.push_str(&format!("{name}: {v}\n"));
                }
            }
        }
        let mut reloaded = Schema::default();
        reloaded.load_str(&ldif, "published.ldif").unwrap();
        assert_eq!(reloaded.attributes().count(), schema.attributes().count());
        assert_eq!(reloaded.classes().count(), schema.classes().count());
        let cn = reloaded.attribute("commonName").unwrap();
        assert_eq!(cn.equality.unwrap().name, "caseIgnoreMatch");
        let person = reloaded.class("person").unwrap();
        assert_eq!(
            person.must.len(),
            schema.class("person").unwrap().must.len()
        );
    }
}
