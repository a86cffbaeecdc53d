//! What the entry browser's forms know of the schema: read from the
//! directory's subschema entry (RFC 4512 objectClasses and
//! attributeTypes), so the form of an entry lists the attributes its
//! classes require and allow, marks the single-valued ones, and leaves
//! the ones no user may change read-only.

use std::collections::HashMap;

use serde::Serialize;

/// One description's parts the forms use.
#[derive(Debug, Default, Clone, PartialEq)]
struct Description {
    names: Vec<String>,
    sup: Vec<String>,
    must: Vec<String>,
    may: Vec<String>,
    single_value: bool,
    no_user_modification: bool,
}

/// The words of a description, `( ... )` lists kept as one item each.
fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '(' | ')' | '$' => out.push(c.to_string()),
            '\'' => {
                let mut word = String::new();
                for d in chars.by_ref() {
                    if d == '\'' {
                        break;
                    }
                    word.push(d);
                }
                out.push(word);
            }
            c if c.is_whitespace() => {}
            c => {
                let mut word = c.to_string();
                while let Some(&d) = chars.peek() {
                    if d.is_whitespace() || matches!(d, '(' | ')' | '\'' | '$') {
                        break;
                    }
                    word.push(d);
                    chars.next();
                }
                out.push(word);
            }
        }
    }
    out
}

fn parse(text: &str) -> Description {
    let words = tokens(text);
    let mut d = Description::default();
    let mut i = 1; // past the opening parenthesis
    // The values after a keyword: one word, or a parenthesised list.
    let list = |i: &mut usize| -> Vec<String> {
        match words.get(*i).map(String::as_str) {
            Some("(") => {
                let mut items = Vec::new();
                *i += 1;
                while let Some(w) = words.get(*i) {
                    *i += 1;
                    match w.as_str() {
                        ")" => break,
                        "$" => {}
                        w => items.push(w.to_owned()),
                    }
                }
                items
            }
            Some(w) => {
                *i += 1;
                vec![w.to_owned()]
            }
            None => Vec::new(),
        }
    };
    while let Some(word) = words.get(i) {
        i += 1;
        match word.to_ascii_uppercase().as_str() {
            "NAME" => d.names = list(&mut i),
            "SUP" => d.sup = list(&mut i),
            "MUST" => d.must = list(&mut i),
            "MAY" => d.may = list(&mut i),
            "SINGLE-VALUE" => d.single_value = true,
            "NO-USER-MODIFICATION" => d.no_user_modification = true,
            _ => {}
        }
    }
    d
}

/// The classes and attribute types of a subschema entry, by lower-case name.
#[derive(Debug, Default)]
pub(crate) struct Schema {
    classes: HashMap<String, Description>,
    attributes: HashMap<String, Description>,
}

/// One attribute of a form.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct Field {
    pub(crate) name: String,
    pub(crate) required: bool,
    pub(crate) single_value: bool,
    pub(crate) read_only: bool,
}

impl Schema {
    /// From the `objectClasses` and `attributeTypes` values.
    pub(crate) fn read(object_classes: &[String], attribute_types: &[String]) -> Schema {
        let index = |texts: &[String]| {
            let mut map = HashMap::new();
            for d in texts.iter().map(|t| parse(t)) {
                for name in &d.names {
                    map.insert(name.to_ascii_lowercase(), d.clone());
                }
            }
            map
        };
        Schema {
            classes: index(object_classes),
            attributes: index(attribute_types),
        }
    }

    /// The form of an entry of `classes`: required attributes first,
    /// then allowed ones, each once, with the superclasses' included.
    pub(crate) fn form(&self, classes: &[String]) -> Vec<Field> {
        let mut must = Vec::new();
        let mut may = Vec::new();
        let mut pending: Vec<String> = classes.iter().map(|c| c.to_ascii_lowercase()).collect();
        let mut seen = Vec::new();
        while let Some(class) = pending.pop() {
            if seen.contains(&class) || seen.len() > 256 {
                continue;
            }
            seen.push(class.clone());
            let Some(d) = self.classes.get(&class) else {
                continue;
            };
            must.extend(d.must.iter().cloned());
            may.extend(d.may.iter().cloned());
            pending.extend(d.sup.iter().map(|s| s.to_ascii_lowercase()));
        }
        let mut fields: Vec<Field> = Vec::new();
        for (name, required) in must
            .into_iter()
            .map(|n| (n, true))
            .chain(may.into_iter().map(|n| (n, false)))
        {
            if fields.iter().any(|f| f.name.eq_ignore_ascii_case(&name)) {
                continue;
            }
            let d = self.attribute(&name);
            fields.push(Field {
                name: d.and_then(|d| d.names.first().cloned()).unwrap_or(name),
                required,
                single_value: d.is_some_and(|d| d.single_value),
                read_only: d.is_some_and(|d| d.no_user_modification),
            });
        }
        fields
    }

    /// The attribute type named `name` (its own flags: SINGLE-VALUE is
    /// not inherited through SUP).
    fn attribute(&self, name: &str) -> Option<&Description> {
        self.attributes.get(&name.to_ascii_lowercase())
    }

    /// Whether `name` is single-valued or read-only, for attributes an
    /// entry holds beyond its form (operational ones).
    pub(crate) fn field(&self, name: &str) -> Field {
        let d = self.attribute(name);
        Field {
            name: name.to_owned(),
            required: false,
            single_value: d.is_some_and(|d| d.single_value),
            read_only: d.is_some_and(|d| d.no_user_modification),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_give_names_lists_and_flags() {
        let d = parse(
            "( 2.5.6.6 NAME 'person' DESC 'RFC2256: a person' SUP top STRUCTURAL MUST ( sn $ cn ) MAY ( userPassword $ telephoneNumber ) )",
        );
        assert_eq!(d.names, ["person"]);
        assert_eq!(d.sup, ["top"]);
        assert_eq!(d.must, ["sn", "cn"]);
        assert_eq!(d.may, ["userPassword", "telephoneNumber"]);
        let a = parse(
            "( 1.3.6.1.1.16.4 NAME ( 'entryUUID' 'uuid' ) SYNTAX 1.3.6.1.1.16.1 SINGLE-VALUE NO-USER-MODIFICATION USAGE directoryOperation )",
        );
        assert_eq!(a.names, ["entryUUID", "uuid"]);
        assert!(a.single_value && a.no_user_modification);
    }

    #[test]
    fn a_form_follows_superclasses_once() {
        let schema = Schema::read(
            &[
                "( 2.5.6.0 NAME 'top' ABSTRACT MUST objectClass )".into(),
                "( 2.5.6.6 NAME 'person' SUP top MUST ( sn $ cn ) MAY ( description ) )".into(),
                "( 2.5.6.7 NAME 'organizationalPerson' SUP person MAY ( title $ description ) )"
                    .into(),
            ],
            &["( 2.5.4.12 NAME 'title' SINGLE-VALUE )".into()],
        );
        let form = schema.form(&["organizationalPerson".into(), "top".into()]);
        let names: Vec<&str> = form.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["objectClass", "sn", "cn", "title", "description"]);
        assert!(
            form.iter()
                .find(|f| f.name == "title")
                .unwrap()
                .single_value
        );
        assert!(form.iter().find(|f| f.name == "sn").unwrap().required);
    }
}
