//! Schema files: OpenLDAP's `.schema` format and LDIF subschema entries.
//!
//! * `.schema`: statements `attributetype ( ... )`, `objectclass ( ... )`,
//!   `objectidentifier NAME OID`, `ldapsyntax ( ... )`; a line starting
//!   with whitespace continues the statement; `#` starts a comment.
//! * LDIF: `attributeTypes: ( ... )`, `objectClasses:`, `ldapSyntaxes:`,
//!   also OpenLDAP's `olc`-prefixed cn=config forms with `{n}` ordering
//!   prefixes; folded lines and base64 values are understood. Other
//!   attributes of the entry (dn, objectClass, matchingRules, ...) are
//!   skipped: matching rules are implemented in code, not loaded.

use std::fmt;
use std::path::Path;

use super::description::{self, Description, Value};
use super::{
    AttrId, AttrSet, AttributeType, ClassId, ClassKind, ObjectClass, Schema, Usage, rule_named,
    syntax_for,
};
use crate::rules::RuleKind;

/// A schema file that cannot be loaded: where, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    /// The file (or built-in name).
    pub source: String,
    /// The 1-based line where the offending statement starts.
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

/// Attribute types the server defines and maintains itself, which a
/// schema file may define again (the file's definition is then passed
/// over): memberOf (1.2.840.113556.1.2.102).
const SERVER_KEPT: &[&str] = &["1.2.840.113556.1.2.102"];

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.source, self.line, self.reason)
    }
}

impl std::error::Error for SchemaError {}

/// One statement to apply: its keyword (lower case), text and line.
struct Statement {
    keyword: String,
    text: String,
    line: usize,
}

impl Schema {
    /// Loads a schema file from disk.
    pub fn load_file(&mut self, path: &Path) -> Result<(), SchemaError> {
        let source = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| SchemaError {
            source: source.clone(),
            line: 0,
            reason: format!("cannot read: {e}"),
        })?;
        self.load_str(&text, &source)
    }

    /// Loads schema text in either format; `source` names it in errors.
    /// On error the schema keeps the definitions before the failing one.
    pub fn load_str(&mut self, text: &str, source: &str) -> Result<(), SchemaError> {
        let statements = if is_ldif(text) {
            ldif_statements(text, source)?
        } else {
            schema_statements(text)
        };
        for st in statements {
            self.apply(&st).map_err(|reason| SchemaError {
                source: source.to_owned(),
                line: st.line,
                reason,
            })?;
        }
        Ok(())
    }

    fn apply(&mut self, st: &Statement) -> Result<(), String> {
        // slapd compares only the first 9 characters of "attributetype",
        // and Debian's own dsee.schema relies on it ("attributeype").
        let keyword = if st.keyword.starts_with("attribute") {
            "attributetype"
        } else {
            st.keyword.as_str()
        };
        match keyword {
            "attributetype" => {
                let d = description::parse(&st.text).map_err(|e| format!("attribute type {e}"))?;
                self.add_attribute(&d)
            }
            "objectclass" | "objectclasses" => {
                let d = description::parse(&st.text).map_err(|e| format!("object class {e}"))?;
                self.add_class(&d)
            }
            "objectidentifier" => {
                let mut words = st.text.split_whitespace();
                let (Some(name), Some(oid), None) = (words.next(), words.next(), words.next())
                else {
                    return Err("objectidentifier needs a name and an OID".into());
                };
                let oid = self.expand(oid);
                if !is_numericoid(&oid) {
                    return Err(format!(
                        "objectidentifier {name}: {oid:?} is not a numeric OID"
                    ));
                }
                self.macros.insert(name.to_ascii_lowercase(), oid);
                Ok(())
            }
            "ldapsyntax" | "ldapsyntaxes" => {
                let d = description::parse(&st.text).map_err(|e| format!("syntax {e}"))?;
                let oid = self.expand(&d.oid);
                if !is_numericoid(&oid) {
                    return Err(format!("syntax OID {oid:?} is not numeric"));
                }
                if crate::syntax::find(&oid).is_none()
                    && !self.extra_syntaxes.iter().any(|(o, _)| *o == oid)
                {
                    let desc = d
                        .get("DESC")
                        .map(|v| v.quoted().join(" "))
                        .unwrap_or_default();
                    self.extra_syntaxes.push((oid, desc));
                }
                Ok(())
            }
            // Matching rules are implemented in code: published rule
            // descriptions (an LDIF subschema copied from another server)
            // are checked for syntax and otherwise not loaded.
            "matchingrule" | "matchingruleuse" => description::parse(&st.text)
                .map(|_| ())
                .map_err(|e| format!("matching rule description {e}")),
            // Not enforced yet; accepted so that common files load.
            "ditcontentrule" | "ditcontentrules" => Ok(()),
            other => Err(format!("unknown schema statement {other:?}")),
        }
    }

    /// Expands OpenLDAP OID macros: `name` or `name:suffix`.
    fn expand(&self, word: &str) -> String {
        if let Some((prefix, suffix)) = word.split_once(':')
            && let Some(base) = self.macros.get(&prefix.to_ascii_lowercase())
        {
            return format!("{base}.{suffix}");
        }
        self.macros
            .get(&word.to_ascii_lowercase())
            .cloned()
            .unwrap_or_else(|| word.to_owned())
    }

    fn attr_ref(&self, name: &str, what: &str) -> Result<AttrId, String> {
        self.attribute_id(&self.expand(name)).ok_or_else(|| {
            format!("{what}: attribute type {name:?} is not defined (define it before use)")
        })
    }

    /// Whether a file's type `oid` named `names` is one the server keeps
    /// itself (memberOf, `[groups]`), defined already by that OID and
    /// those names. Debian's msuser.schema defines memberOf without
    /// NO-USER-MODIFICATION: the server's own stands, as slapd's memberof
    /// overlay keeps its own.
    fn keeps_itself(&self, oid: &str, names: &[String]) -> bool {
        SERVER_KEPT.contains(&oid)
            && self
                .attribute_id(oid)
                .and_then(|id| self.attr(id))
                .is_some_and(|kept| {
                    names
                        .iter()
                        .all(|n| kept.names.iter().any(|k| k.eq_ignore_ascii_case(n)))
                })
    }

    fn add_attribute(&mut self, d: &Description) -> Result<(), String> {
        let oid = self.expand(&d.oid);
        if !is_numericoid(&oid) {
            return Err(format!("{oid:?} is not a numeric OID"));
        }
        let names = d.get("NAME").map(Value::quoted).unwrap_or_default();
        let label = names.first().cloned().unwrap_or_else(|| oid.clone());
        if self.keeps_itself(&oid, &names) {
            return Ok(());
        }
        let sup = match d.get("SUP").map(Value::words).as_deref() {
            Some([one]) => Some(self.attr_ref(one, &format!("superior of {label}"))?),
            Some(_) => {
                return Err(format!(
                    "{label}: an attribute type has at most one superior"
                ));
            }
            None => None,
        };
        let parent = sup.and_then(|s| self.attr(s)).cloned();
        let rule = |keyword: &str,
                    kind: RuleKind|
         -> Result<Option<&'static crate::rules::RuleInfo>, String> {
            match d.get(keyword).map(Value::words).as_deref() {
                Some([name]) => {
                    let r = rule_named(name)
                        .ok_or_else(|| format!("{label}: unknown matching rule {name:?}"))?;
                    if r.kind != kind {
                        return Err(format!(
                            "{label}: {name} is not a{} rule",
                            kind.article_name()
                        ));
                    }
                    Ok(Some(r))
                }
                Some(_) => Err(format!("{label}: {keyword} takes one rule")),
                None => Ok(None),
            }
        };
        let equality =
            rule("EQUALITY", RuleKind::Equality)?.or(parent.as_ref().and_then(|p| p.equality));
        let ordering =
            rule("ORDERING", RuleKind::Ordering)?.or(parent.as_ref().and_then(|p| p.ordering));
        let substr =
            rule("SUBSTR", RuleKind::Substrings)?.or(parent.as_ref().and_then(|p| p.substr));
        let syntax_oid = match d.get("SYNTAX").map(Value::words).as_deref() {
            Some([noidlen]) => {
                let base = noidlen.split('{').next().unwrap_or(noidlen);
                let expanded = self.expand(base);
                if !is_numericoid(&expanded) {
                    return Err(format!("{label}: syntax {noidlen:?} is not a numeric OID"));
                }
                expanded
            }
            Some(_) => return Err(format!("{label}: SYNTAX takes one OID")),
            None => match &parent {
                Some(p) => p.syntax_oid.clone(),
                None => {
                    return Err(format!(
                        "{label}: needs SYNTAX or SUP (RFC 4512 section 4.1.2)"
                    ));
                }
            },
        };
        let usage = match d.get("USAGE").map(Value::words).as_deref() {
            None => Usage::User,
            Some([u]) => match u.as_str() {
                "userApplications" => Usage::User,
                "directoryOperation" => Usage::DirectoryOperation,
                "distributedOperation" => Usage::DistributedOperation,
                "dSAOperation" => Usage::DsaOperation,
                other => return Err(format!("{label}: unknown USAGE {other:?}")),
            },
            Some(_) => return Err(format!("{label}: USAGE takes one value")),
        };
        let no_user_modification = d.has("NO-USER-MODIFICATION");
        if no_user_modification && !usage.is_operational() {
            return Err(format!(
                "{label}: NO-USER-MODIFICATION needs an operational USAGE"
            ));
        }
        let collective = d.has("COLLECTIVE");
        if collective && usage.is_operational() {
            return Err(format!(
                "{label}: a COLLECTIVE attribute must have USAGE userApplications"
            ));
        }
        if parent.as_ref().is_some_and(|p| p.usage != usage) {
            return Err(format!("{label}: USAGE differs from its superior's"));
        }
        let definition = render(d, &oid, |w| self.expand(w));
        self.push_attribute(AttributeType {
            syntax: syntax_for(&syntax_oid),
            oid,
            names,
            sup,
            equality,
            ordering,
            substr,
            syntax_oid,
            single_value: d.has("SINGLE-VALUE"),
            collective,
            no_user_modification,
            usage,
            obsolete: d.has("OBSOLETE"),
            definition,
        })
        .map(|_| ())
    }

    fn add_class(&mut self, d: &Description) -> Result<(), String> {
        let oid = self.expand(&d.oid);
        if !is_numericoid(&oid) {
            return Err(format!("{oid:?} is not a numeric OID"));
        }
        let names = d.get("NAME").map(Value::quoted).unwrap_or_default();
        let label = names.first().cloned().unwrap_or_else(|| oid.clone());
        let kind = match (d.has("ABSTRACT"), d.has("STRUCTURAL"), d.has("AUXILIARY")) {
            (true, false, false) => ClassKind::Abstract,
            (false, _, false) => ClassKind::Structural,
            (false, false, true) => ClassKind::Auxiliary,
            _ => return Err(format!("{label}: more than one kind")),
        };
        let mut sup: Vec<ClassId> = Vec::new();
        let mut must: Vec<AttrId> = Vec::new();
        let mut may: Vec<AttrId> = Vec::new();
        for name in d.get("SUP").map(Value::words).unwrap_or_default() {
            let id = self
                .class_id(&self.expand(&name))
                .ok_or_else(|| format!("{label}: superior class {name:?} is not defined"))?;
            let parent = self.class_by_id(id).ok_or("dangling class id")?;
            let allowed = match kind {
                ClassKind::Abstract => parent.kind == ClassKind::Abstract,
                ClassKind::Structural => parent.kind != ClassKind::Auxiliary,
                ClassKind::Auxiliary => parent.kind != ClassKind::Structural,
            };
            if !allowed {
                return Err(format!(
                    "{label}: a {kind:?} class cannot inherit from the {:?} class {name}",
                    parent.kind
                ));
            }
            must.extend(&parent.must);
            may.extend(&parent.may);
            sup.push(id);
        }
        for name in d.get("MUST").map(Value::words).unwrap_or_default() {
            must.push(self.attr_ref(&name, &format!("MUST of {label}"))?);
        }
        for name in d.get("MAY").map(Value::words).unwrap_or_default() {
            may.push(self.attr_ref(&name, &format!("MAY of {label}"))?);
        }
        must.sort();
        must.dedup();
        may.sort();
        may.dedup();
        // An attribute both required and allowed is required.
        may.retain(|a| !must.contains(a));
        let definition = render(d, &oid, |w| self.expand(w));
        self.push_class(ObjectClass {
            oid,
            names,
            sup,
            kind,
            must,
            may,
            obsolete: d.has("OBSOLETE"),
            definition,
            lineage: Vec::new(),
            allowed: AttrSet::new(),
        })
        .map(|_| ())
    }
}

fn is_numericoid(s: &str) -> bool {
    crate::syntax::is_oid(s.as_bytes()) && s.bytes().all(|c| c.is_ascii_digit() || c == b'.')
}

/// The RFC 4512 form of a description, with OID macros expanded.
fn render(d: &Description, oid: &str, expand: impl Fn(&str) -> String) -> String {
    let quote = |s: &str| format!("'{}'", s.replace('\\', "\\5C").replace('\'', "\\27"));
    let mut out = format!("( {oid}");
    for (keyword, value) in &d.fields {
        out.push(' ');
        out.push_str(keyword);
        match value {
            Value::Flag => {}
            Value::Quoted(q) => {
                out.push(' ');
                out.push_str(&quote(q));
            }
            Value::QuotedList(qs) => {
                out.push_str(" ( ");
                out.push_str(&qs.iter().map(|q| quote(q)).collect::<Vec<_>>().join(" "));
                out.push_str(" )");
            }
            Value::Word(w) => {
                out.push(' ');
                if keyword == "SYNTAX" {
                    let (base, len) = w.split_once('{').map_or((w.as_str(), ""), |(b, l)| (b, l));
                    out.push_str(&expand(base));
                    if !len.is_empty() {
                        out.push('{');
                        out.push_str(len);
                    }
                } else {
                    out.push_str(w);
                }
            }
            Value::WordList(ws) => {
                out.push_str(" ( ");
                out.push_str(&ws.join(" $ "));
                out.push_str(" )");
            }
        }
    }
    out.push_str(" )");
    out
}

fn schema_statements(text: &str) -> Vec<Statement> {
    let mut out: Vec<Statement> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if line.starts_with(char::is_whitespace)
            && let Some(last) = out.last_mut()
        {
            last.text.push(' ');
            last.text.push_str(trimmed);
            continue;
        }
        let (keyword, rest) = trimmed
            .split_once(char::is_whitespace)
            .unwrap_or((trimmed, ""));
        out.push(Statement {
            keyword: keyword.to_ascii_lowercase(),
            text: rest.trim().to_owned(),
            line: i + 1,
        });
    }
    out
}

fn is_ldif(text: &str) -> bool {
    text.lines()
        .map(str::trim_end)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .is_some_and(|l| {
            let lower = l.to_ascii_lowercase();
            lower.starts_with("dn:") || lower.starts_with("version:")
        })
}

fn ldif_statements(text: &str, source: &str) -> Result<Vec<Statement>, SchemaError> {
    // Unfold: a line starting with one space continues the previous line.
    let mut lines: Vec<(usize, String)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(cont) = line.strip_prefix(' ')
            && let Some((_, last)) = lines.last_mut()
        {
            last.push_str(cont);
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        lines.push((i + 1, line.to_owned()));
    }
    let mut out = Vec::new();
    for (line, content) in lines {
        if content.trim().is_empty() {
            continue;
        }
        let Some((attr, value)) = content.split_once(':') else {
            return Err(SchemaError {
                source: source.to_owned(),
                line,
                reason: "expected 'attribute: value'".into(),
            });
        };
        let value = match value.strip_prefix(':') {
            Some(b64) => {
                let bytes =
                    meridian_ldif::base64::decode(b64.trim().as_bytes()).ok_or_else(|| {
                        SchemaError {
                            source: source.to_owned(),
                            line,
                            reason: "invalid base64 value".into(),
                        }
                    })?;
                String::from_utf8(bytes).map_err(|_| SchemaError {
                    source: source.to_owned(),
                    line,
                    reason: "value is not UTF-8".into(),
                })?
            }
            None => value.trim().to_owned(),
        };
        let attr = attr.trim().to_ascii_lowercase();
        let attr = attr.strip_prefix("olc").unwrap_or(&attr).to_owned();
        let keyword = match attr.as_str() {
            "attributetypes" => "attributetype",
            "objectclasses" => "objectclass",
            "objectidentifier" => "objectidentifier",
            "ldapsyntaxes" => "ldapsyntax",
            "ditcontentrules" => "ditcontentrule",
            "matchingrules" => "matchingrule",
            "matchingruleuse" => "matchingruleuse",
            _ => continue,
        };
        // cn=config keeps values ordered with a "{n}" prefix.
        let value = match value.strip_prefix('{').and_then(|v| v.split_once('}')) {
            Some((n, rest)) if n.bytes().all(|c| c.is_ascii_digit()) => rest.trim().to_owned(),
            _ => value,
        };
        out.push(Statement {
            keyword: keyword.to_owned(),
            text: value,
            line,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_types_are_found_when_defined() {
        let s = Schema::builtin().unwrap();
        assert_eq!(s.object_class_attr(), s.attribute_id("objectClass"));
        assert!(s.entry_csn_attr().is_some());
        assert_eq!(s.entry_csn_attr(), s.attribute_id("entryCSN"));
    }

    #[test]
    fn errors_name_file_line_and_reason() {
        let mut s = Schema::builtin().unwrap();
        let err = s
            .load_str(
                "# c\n\nattributetype ( 1.2.3.4 NAME 'x'\n  SUP nosuch )\n",
                "my.schema",
            )
            .unwrap_err();
        assert_eq!((err.source.as_str(), err.line), ("my.schema", 3));
        assert!(err.reason.contains("nosuch"), "{err}");
        let err = s.load_str("bogus ( 1.2 )\n", "b.schema").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("b.schema:1: unknown schema statement"),
            "{err}"
        );
        let err = s
            .load_str("attributetype ( 1.2.3.5 NAME 'y' EQUALITY caseIgnoreSubstringsMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 )", "c")
            .unwrap_err();
        assert!(err.reason.contains("not an equality rule"), "{err}");
        let err = s
            .load_str(
                "objectclass ( 1.2.3.6 NAME 'z' SUP top AUXILIARY MUST nosuch )",
                "d",
            )
            .unwrap_err();
        assert!(err.reason.contains("nosuch"), "{err}");
        let err = s
            .load_str("attributetype ( 1.2.3.7 NAME 'cn' SUP name )", "e")
            .unwrap_err();
        assert!(err.reason.contains("already defined"), "{err}");
    }

    #[test]
    fn a_class_knows_its_whole_lineage_and_all_it_allows() {
        let mut s = Schema::builtin().unwrap();
        // Two superiors, one of them reached twice (top): a diamond.
        s.load_str(
            "objectclass ( 1.3.6.1.4.1.99999.9.1 NAME 'staffPerson' SUP ( inetOrgPerson $ account ) \
             STRUCTURAL MAY ( dc ) )",
            "diamond.schema",
        )
        .unwrap();
        let id = |name: &str| s.class_id(name).unwrap();
        let staff = s.class("staffPerson").unwrap();
        let mut lineage: Vec<&str> = staff
            .lineage()
            .iter()
            .map(|&c| s.class_by_id(c).unwrap().name())
            .collect();
        lineage.sort_unstable();
        assert_eq!(
            lineage,
            [
                "account",
                "inetOrgPerson",
                "organizationalPerson",
                "person",
                "staffPerson",
                "top"
            ]
        );
        assert!(s.class_inherits(id("staffPerson"), id("person")));
        assert!(s.class_inherits(id("staffPerson"), id("account")));
        assert!(!s.class_inherits(id("person"), id("staffPerson")));
        assert!(!s.class_inherits(id("inetOrgPerson"), id("account")));
        // Own MAY, inherited MAY and MUST from both lines, nothing else.
        let attr = |name: &str| s.attribute_id(name).unwrap();
        for allowed in ["dc", "mail", "sn", "uid", "host", "objectClass"] {
            assert!(staff.allows(attr(allowed)), "{allowed}");
        }
        for refused in ["homeDirectory", "entryUUID"] {
            assert!(!staff.allows(attr(refused)), "{refused}");
        }
    }

    #[test]
    fn macros_and_ldif_forms() {
        let mut s = Schema::builtin().unwrap();
        s.load_str(
            "objectidentifier myOID 1.3.6.1.4.1.99999\nobjectidentifier myAttrs myOID:1\n\
             attributetype ( myAttrs:1 NAME 'fooBar' SUP name )\n\
             objectclass ( myOID:2.1 NAME 'fooObject' SUP top AUXILIARY MAY fooBar )\n",
            "macros.schema",
        )
        .unwrap();
        assert_eq!(s.attribute("foobar").unwrap().oid, "1.3.6.1.4.1.99999.1.1");
        assert_eq!(s.class("FOOOBJECT").unwrap().oid, "1.3.6.1.4.1.99999.2.1");

        s.load_str(
            "dn: cn=test,cn=schema,cn=config\nobjectClass: olcSchemaConfig\ncn: test\n\
             olcAttributeTypes: {0}( 1.3.6.1.4.1.99999.3.1 NAME 'ldifAttr'\n  DESC 'folded' SUP name )\n\
             attributeTypes:: KCAxLjMuNi4xLjQuMS45OTk5OS4zLjIgTkFNRSAnYjY0QXR0cicgU1VQIG5hbWUgKQ==\n",
            "test.ldif",
        )
        .unwrap();
        assert!(s.attribute("ldifAttr").is_some());
        assert!(s.attribute("b64Attr").is_some());

        // Published rule descriptions are checked, not loaded.
        s.load_str("dn: cn=Subschema\nmatchingRules: ( 2.5.13.2 NAME 'caseIgnoreMatch' SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 )\n", "rules.ldif")
            .unwrap();
        let err = s
            .load_str(
                "dn: cn=Subschema\nmatchingRules: ( 2.5.13.2 NAME caseIgnoreMatch )\n",
                "bad.ldif",
            )
            .unwrap_err();
        assert_eq!(err.line, 2, "{err}");
    }

    #[test]
    fn debian_schema_files_load_when_installed() {
        // The bundled copies always load (Schema::builtin); the rest of the
        // files Debian's slapd ships must load too. scripts/test.sh makes
        // them available (installed slapd, or its package unpacked).
        let dir = std::env::var_os("MERIDIAN_SLAPD_SCHEMA_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| "/etc/ldap/schema".into());
        assert!(
            dir.join("core.schema").exists(),
            "{} has no slapd schema files: run scripts/test.sh, install slapd, or set MERIDIAN_SLAPD_SCHEMA_DIR",
            dir.display()
        );
        let mut s = Schema::builtin().unwrap();
        let order = [
            "corba",
            "java",
            "misc",
            "openldap",
            "collective",
            "duaconf",
            "dyngroup",
            "namedobject",
            "pmi",
            "dsee",
            "msuser",
        ];
        for name in order {
            let path = dir.join(format!("{name}.schema"));
            if path.exists() {
                s.load_file(&path).unwrap_or_else(|e| panic!("{e}"));
            }
        }
    }
}
