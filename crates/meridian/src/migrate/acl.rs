//! slapd's `access to <what> by <who> <access>...` as Meridian's
//! `[[access]]` rules, where the two mean the same; otherwise the reason
//! it does not translate. Both decide by the first rule whose target
//! matches and, in it, the first clause whose subject matches; both grant
//! nothing when no clause matches (slapd's implicit `by * none`).

/// One translated rule: `to`, `attrs`, and `(who, grant)` clauses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rule {
    pub(crate) to: String,
    pub(crate) attrs: Vec<String>,
    pub(crate) by: Vec<(String, String)>,
}

impl Rule {
    /// The rule as a TOML `[[access]]` table.
    pub(crate) fn toml(&self) -> String {
        let mut out = String::from("[[access]]\n");
        out.push_str(&format!("to = {}\n", quote(&self.to)));
        if !self.attrs.is_empty() {
            let attrs: Vec<String> = self.attrs.iter().map(|a| quote(a)).collect();
            out.push_str(&format!("attrs = [{}]\n", attrs.join(", ")));
        }
        let by: Vec<String> = self
            .by
            .iter()
            .map(|(who, grant)| format!("{{ who = {}, grant = {} }}", quote(who), quote(grant)))
            .collect();
        out.push_str(&format!("by = [ {} ]\n", by.join(",\n       ")));
        out
    }
}

/// A TOML basic string.
pub(crate) fn quote(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Translates the words after `access` (`to`, the target, then `by`
/// clauses).
pub(crate) fn translate(args: &[String]) -> Result<Rule, String> {
    let mut words = args.iter().map(String::as_str).peekable();
    if words.next() != Some("to") {
        return Err("an access directive starts with `to`".to_owned());
    }
    let mut to = "*".to_owned();
    let mut attrs = Vec::new();
    while let Some(word) = words.peek().copied() {
        if word == "by" {
            break;
        }
        words.next();
        if word == "*" {
            continue;
        }
        let (key, value) = word.split_once('=').unwrap_or((word, ""));
        let (kind, style) = key.split_once('.').unwrap_or((key, ""));
        match kind {
            "dn" => {
                to = match style {
                    "base" | "exact" | "baseobject" => format!("base:{value}"),
                    "sub" | "subtree" => format!("subtree:{value}"),
                    "children" => format!("children:{value}"),
                    "" if value.is_empty() => "base:".to_owned(),
                    "one" | "onelevel" => {
                        return Err(format!(
                            "`{word}` (the entries one level below) has no Meridian form: \
                             children:DN covers every level below"
                        ));
                    }
                    _ => {
                        return Err(format!(
                            "`{word}`: a regular expression (slapd's `dn=` without a style \
                             is one); write it as base, subtree or children"
                        ));
                    }
                };
            }
            "attrs" | "attr" => {
                for name in value.split(',').filter(|n| !n.is_empty()) {
                    if name.starts_with('@')
                        || name.starts_with('!')
                        || name == "entry"
                        || name == "children"
                    {
                        return Err(format!(
                            "`{word}`: {name} (object classes, `entry`, `children`) has no Meridian form"
                        ));
                    }
                    attrs.push(name.to_owned());
                }
            }
            _ => {
                return Err(format!(
                    "`{word}`: targets by `{kind}` (filter, val, ...) have no Meridian form"
                ));
            }
        }
    }
    let mut by = Vec::new();
    while let Some(word) = words.next() {
        if word != "by" {
            return Err(format!("`{word}` where a `by` clause should start"));
        }
        let who_word = words.next().ok_or("a `by` clause without a subject")?;
        let level = words
            .next()
            .ok_or("a `by` clause without an access level")?;
        // Subject modifiers slapd allows before the level.
        if level.starts_with("ssf=")
            || level.starts_with("transport_ssf=")
            || level.starts_with("tls_ssf=")
            || level.starts_with("sasl_ssf=")
            || level.starts_with("aci")
            || level.starts_with("dynacl")
            || level.starts_with("peername")
            || level.starts_with("sockurl")
            || level.starts_with("domain")
        {
            return Err(format!(
                "`{level}` conditions on the connection have no Meridian form"
            ));
        }
        if matches!(level, "break" | "continue" | "stop") {
            return Err(format!(
                "`by {who_word} {level}`: a clause that passes on to later rules                  (Meridian stops at the first matching rule and clause)"
            ));
        }
        let who = subject(who_word)?;
        let grant = grant(level)?;
        if let Some(control) = words.peek().copied()
            && matches!(control, "stop" | "continue" | "break")
        {
            words.next();
            if control != "stop" {
                return Err(format!(
                    "`{control}`: Meridian stops at the first matching clause and rule, as slapd's default `stop`"
                ));
            }
        }
        by.push((who, grant));
    }
    if by.is_empty() {
        return Err("a rule without a `by` clause".to_owned());
    }
    Ok(Rule { to, attrs, by })
}

/// `*`, `anonymous`, `users`, `self`, `dn.exact=X`, `group=X`.
fn subject(word: &str) -> Result<String, String> {
    match word {
        "*" | "anonymous" | "users" | "self" => return Ok(word.to_owned()),
        _ => {}
    }
    let (key, value) = word
        .split_once('=')
        .ok_or_else(|| format!("`{word}`: a subject Meridian does not know"))?;
    let (kind, style) = key.split_once('.').unwrap_or((key, ""));
    if kind == "dn" && matches!(style, "exact" | "base" | "baseobject") {
        return Ok(format!("dn:{value}"));
    }
    // group, group/groupOfNames/member, group/groupOfUniqueNames/uniqueMember
    let group = kind.split('/').next() == Some("group");
    if group && matches!(style, "" | "exact" | "expand") {
        let mut parts = kind.split('/').skip(1);
        let class = parts.next().unwrap_or("groupOfNames");
        if !matches!(
            class.to_ascii_lowercase().as_str(),
            "groupofnames" | "groupofuniquenames"
        ) {
            return Err(format!(
                "`{word}`: groups of class {class} (Meridian's groups are groupOfNames and \
                 groupOfUniqueNames, by member and uniqueMember)"
            ));
        }
        return Ok(format!("group:{value}"));
    }
    Err(format!(
        "`{word}` has no Meridian form (subjects: *, anonymous, users, self, dn.exact=, group=)"
    ))
}

/// slapd's access levels, each including those below it.
fn grant(level: &str) -> Result<String, String> {
    let name = match level {
        "none" | "disclose" => "none",
        "auth" => "auth",
        "compare" => "compare",
        "search" => "search",
        "read" => "read",
        "write" | "manage" => "write",
        _ => {
            return Err(format!(
                "`{level}`: privileges (`=rw`, `+x`) and self-only levels (selfwrite) have no Meridian form"
            ));
        }
    };
    Ok(name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::migrate::read::words;

    fn t(text: &str) -> Result<Rule, String> {
        translate(&words(text))
    }

    #[test]
    fn the_common_rules_translate() {
        let rule = t("to attrs=userPassword by self write by anonymous auth by * none").unwrap();
        assert_eq!(rule.to, "*");
        assert_eq!(rule.attrs, ["userPassword"]);
        assert_eq!(
            rule.by,
            [
                ("self".into(), "write".into()),
                ("anonymous".into(), "auth".into()),
                ("*".into(), "none".into())
            ]
        );
        let rule = t(r#"to dn.subtree="ou=People,dc=x" attrs=telephoneNumber,mail by group="cn=HR,dc=x" write by users read"#).unwrap();
        assert_eq!(rule.to, "subtree:ou=People,dc=x");
        assert_eq!(rule.attrs, ["telephoneNumber", "mail"]);
        assert_eq!(rule.by[0], ("group:cn=HR,dc=x".into(), "write".into()));
        assert_eq!(t(r#"to dn.base="" by * read"#).unwrap().to, "base:");
        assert_eq!(
            t(r#"to * by dn.exact="cn=sync,dc=x" manage by * none stop"#)
                .unwrap()
                .by[0],
            ("dn:cn=sync,dc=x".into(), "write".into())
        );
    }

    #[test]
    fn what_has_no_meridian_form_says_why() {
        for rule in [
            "to dn.one=\"dc=x\" by * read",
            "to dn=\".*,dc=x\" by * read",
            "to filter=(objectClass=person) by * read",
            "to * by dn.regex=\"^uid=.*\" read",
            "to * by * =rw",
            "to * by peername.ip=127.0.0.1 read",
            "to * by * read break",
            "to * by ssf=128 read",
        ] {
            let why = t(rule).unwrap_err();
            assert!(!why.is_empty(), "{rule}");
        }
    }
}
