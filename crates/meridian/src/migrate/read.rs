//! Reading an OpenLDAP configuration, `slapd.conf` or `slapd.d`
//! (cn=config), into one form: directives with their arguments, global
//! or per database, each with where it came from.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// One directive: `index cn,uid eq` or the `olcDbIndex` value it is in
/// slapd.d, as lower-case name and arguments.
#[derive(Debug, Clone)]
pub(crate) struct Directive {
    /// slapd.conf's name, lower case (slapd.d's `olcDbIndex` is `index`).
    pub(crate) name: String,
    pub(crate) args: Vec<String>,
    /// `file:line` (slapd.conf) or `file: attribute` (slapd.d).
    pub(crate) origin: String,
}

/// One `database` section.
#[derive(Debug, Clone)]
pub(crate) struct Database {
    /// mdb, hdb, config, monitor, frontend...
    pub(crate) kind: String,
    pub(crate) directives: Vec<Directive>,
    /// Overlays by name, each with its directives.
    pub(crate) overlays: Vec<(String, Vec<Directive>)>,
    pub(crate) origin: String,
}

impl Database {
    /// The arguments of every directive named `name`.
    pub(crate) fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Directive> + 'a {
        self.directives.iter().filter(move |d| d.name == name)
    }

    /// The first value of the first directive named `name`.
    pub(crate) fn first<'a>(&'a self, name: &'a str) -> Option<&'a str> {
        self.all(name)
            .next()
            .and_then(|d| d.args.first())
            .map(String::as_str)
    }
}

/// A whole configuration.
#[derive(Debug, Default)]
pub(crate) struct SlapdConfig {
    pub(crate) global: Vec<Directive>,
    pub(crate) databases: Vec<Database>,
    /// Schema files, in order: slapd.conf's `include`s, slapd.d's
    /// `cn=schema` entries.
    pub(crate) schema: Vec<(PathBuf, String)>,
}

/// Splits a directive line into words: whitespace separates, double
/// quotes group (and are removed), a backslash escapes the next
/// character.
pub(crate) fn words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let (mut quoted, mut in_word) = (false, false);
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    word.push(next);
                    in_word = true;
                }
            }
            '"' => {
                quoted = !quoted;
                in_word = true;
            }
            c if c.is_whitespace() && !quoted => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// Whether `name` is a directive of overlay `overlay` (slapd.conf keeps
/// them after its `overlay` line). Overlays name their directives after
/// themselves (`ppolicy_default`, `memberof-group-oc`, `syncprov-checkpoint`,
/// `unique_uri`, `refint_attributes`, `pcacheAttrset`); accesslog's are
/// `log*`.
fn overlay_directive(overlay: &str, name: &str) -> bool {
    let overlay = overlay.to_ascii_lowercase();
    // `pcacheAttrset` has no separator; every overlay's name starts its own.
    name.starts_with(overlay.as_str()) || (overlay == "accesslog" && name.starts_with("log"))
}

/// Reads `slapd.conf`: comments, continuation lines (starting with
/// white space), `database` and `overlay` sections.
pub(crate) fn slapd_conf(path: &Path) -> anyhow::Result<SlapdConfig> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let name = path.display().to_string();
    // Logical lines: a line starting with white space continues the last.
    let mut lines: Vec<(usize, String)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        if raw.trim_start().starts_with('#') || raw.trim().is_empty() {
            continue;
        }
        if raw.starts_with([' ', '\t'])
            && let Some((_, last)) = lines.last_mut()
        {
            last.push(' ');
            last.push_str(raw.trim());
            continue;
        }
        lines.push((i + 1, raw.trim().to_owned()));
    }
    let mut config = SlapdConfig::default();
    let mut overlay: Option<usize> = None;
    for (number, line) in lines {
        let mut words = words(&line);
        if words.is_empty() {
            continue;
        }
        let directive = Directive {
            name: words.remove(0).to_ascii_lowercase(),
            args: words,
            origin: format!("{name}:{number}"),
        };
        match directive.name.as_str() {
            "database" => {
                config.databases.push(Database {
                    kind: directive.args.first().cloned().unwrap_or_default(),
                    directives: Vec::new(),
                    overlays: Vec::new(),
                    origin: directive.origin,
                });
                overlay = None;
            }
            "include" => {
                if let Some(file) = directive.args.first() {
                    config.schema.push((PathBuf::from(file), directive.origin));
                }
            }
            "overlay" => match config.databases.last_mut() {
                Some(db) => {
                    db.overlays.push((
                        directive.args.first().cloned().unwrap_or_default(),
                        Vec::new(),
                    ));
                    overlay = Some(db.overlays.len() - 1);
                }
                None => config.global.push(directive),
            },
            _ => match (config.databases.last_mut(), overlay) {
                (Some(db), Some(at))
                    if db
                        .overlays
                        .get(at)
                        .is_some_and(|(name, _)| overlay_directive(name, &directive.name)) =>
                {
                    if let Some((_, directives)) = db.overlays.get_mut(at) {
                        directives.push(directive);
                    }
                }
                // slapd offers a directive to the overlays first and
                // gives the database what none of them takes: an index or
                // an access rule after an `overlay` line is the
                // database's.
                (Some(db), _) => db.directives.push(directive),
                (None, _) => config.global.push(directive),
            },
        }
    }
    Ok(config)
}

/// Reads a `slapd.d` directory: `cn=config.ldif` (global), the
/// `olcDatabase={n}kind.ldif` files (databases, with their overlays in the
/// folder of the same name) and the `cn=schema` entries.
pub(crate) fn slapd_d(dir: &Path) -> anyhow::Result<SlapdConfig> {
    let mut config = SlapdConfig::default();
    let global = dir.join("cn=config.ldif");
    config.global = directives_of(&global)?;
    let sub = dir.join("cn=config");
    let mut schema: Vec<PathBuf> = list(&sub.join("cn=schema"))?;
    schema.sort_by_key(|p| ordinal(p));
    for file in schema {
        let origin = file.display().to_string();
        config.schema.push((file, origin));
    }
    for (file, kind) in entries_named(&sub, "olcDatabase=")? {
        let mut db = Database {
            kind,
            directives: directives_of(&file)?,
            overlays: Vec::new(),
            origin: file.display().to_string(),
        };
        for (overlay, name) in entries_named(&file.with_extension(""), "olcOverlay=")? {
            db.overlays.push((name, directives_of(&overlay)?));
        }
        config.databases.push(db);
    }
    Ok(config)
}

/// The cn=config entries of `dir` whose file names start with `prefix`
/// (`olcDatabase=`), in their `{n}` order, each with the name after the
/// order (`mdb` of `olcDatabase={1}mdb.ldif`).
fn entries_named(dir: &Path, prefix: &str) -> anyhow::Result<Vec<(PathBuf, String)>> {
    let mut files: Vec<PathBuf> = list(dir)?
        .into_iter()
        .filter(|p| file_name(p).starts_with(prefix))
        .collect();
    files.sort_by_key(|p| ordinal(p));
    Ok(files
        .into_iter()
        .map(|file| {
            let name = file_name(&file)
                .trim_start_matches(prefix)
                .trim_end_matches(".ldif")
                .rsplit('}')
                .next()
                .unwrap_or_default()
                .to_owned();
            (file, name)
        })
        .collect())
}

/// The `.ldif` files of a directory (none if it does not exist).
fn list(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "ldif") {
            files.push(path);
        }
    }
    Ok(files)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The `{n}` of `olcDatabase={1}mdb.ldif` or `cn={2}nis.ldif`.
fn ordinal(path: &Path) -> i64 {
    let name = file_name(path);
    name.split_once('{')
        .and_then(|(_, rest)| rest.split_once('}'))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or(i64::MAX)
}

/// cn=config attributes whose values are lists of words.
const SPLIT: &[&str] = &[
    "access",
    "index",
    "limits",
    "sizelimit",
    "timelimit",
    "serverid",
    "checkpoint",
    "dynlist-attrset",
];

/// slapd.d's names (after `olc`, lower case) of the overlay settings
/// `migrate` translates, and their slapd.conf names.
const OVERLAY_NAMES: &[(&str, &str)] = &[
    ("memberofgroupoc", "memberof-group-oc"),
    ("memberofmemberad", "memberof-member-ad"),
    ("memberofmemberofad", "memberof-memberof-ad"),
    ("memberofdangling", "memberof-dangling"),
    ("memberofrefint", "memberof-refint"),
    ("refintattribute", "refint_attributes"),
    ("refintnothing", "refint_nothing"),
    ("refintmodifiersname", "refint_modifiersname"),
    ("uniqueuri", "unique_uri"),
    ("uniquebase", "unique_base"),
    ("uniqueattributes", "unique_attributes"),
    ("uniqueattribute", "unique_attributes"),
    ("dynlistattrset", "dynlist-attrset"),
];

/// The `olc*` attributes of one cn=config entry as directives:
/// `olcDbIndex: cn,uid eq` is `index cn,uid eq`, `olcAccess: {0}to ...`
/// is `access to ...`.
fn directives_of(file: &Path) -> anyhow::Result<Vec<Directive>> {
    let input = std::fs::File::open(file).with_context(|| format!("reading {}", file.display()))?;
    let reader = meridian_ldif::RecordReader::new(
        std::io::BufReader::new(input),
        file.display().to_string(),
        meridian_ldif::Limits::default(),
    );
    let mut directives = Vec::new();
    for record in reader {
        let record = record.with_context(|| format!("reading {}", file.display()))?;
        for attr in record.entry_attributes().unwrap_or_default() {
            let name = attr.description.as_str();
            let Some(bare) = name
                .strip_prefix("olc")
                .or_else(|| name.strip_prefix("OLC"))
            else {
                continue;
            };
            let lower = bare.to_ascii_lowercase();
            // olcDbIndex, olcDbDirectory: the database's own keys.
            let lower = lower
                .strip_prefix("db")
                .map_or(lower.clone(), str::to_owned);
            // Overlays' attributes whose slapd.conf names differ by more
            // than the prefix (`olcMemberOfGroupOC` is `memberof-group-oc`).
            let lower = OVERLAY_NAMES
                .iter()
                .find(|(olc, _)| *olc == lower)
                .map_or(lower, |(_, conf)| (*conf).to_owned());
            let value = String::from_utf8_lossy(&attr.value);
            // `{0}to * by ...`: the order slapd.d keeps values in.
            let value = match value.strip_prefix('{').and_then(|v| v.split_once('}')) {
                Some((n, rest)) if n.parse::<i64>().is_ok() => rest.to_owned(),
                _ => value.into_owned(),
            };
            // Values with a grammar of words are split as slapd.conf's
            // lines are; the others (a DN, a path) are one value, spaces
            // and all.
            let args = if SPLIT.contains(&lower.as_str()) {
                words(&value)
            } else {
                vec![value]
            };
            directives.push(Directive {
                name: lower,
                args,
                origin: format!("{}: {name}", file.display()),
            });
        }
    }
    Ok(directives)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slapd_d_overlay_settings_take_their_slapd_conf_names() {
        let dir = std::env::temp_dir().join(format!("meridian-olc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("olcOverlay={0}dynlist.ldif");
        std::fs::write(
            &file,
            "dn: olcOverlay={0}dynlist\nobjectClass: olcDynListConfig\n\
             olcDynListAttrSet: {0}groupOfURLs memberURL member+memberOf@groupOfNames\n\
             olcMemberOfGroupOC: groupOfUniqueNames\nolcRefintAttribute: manager\n",
        )
        .unwrap();
        let directives = directives_of(&file).unwrap();
        let found: Vec<(&str, Vec<&str>)> = directives
            .iter()
            .map(|d| (d.name.as_str(), d.args.iter().map(String::as_str).collect()))
            .collect();
        assert_eq!(
            found,
            [
                (
                    "dynlist-attrset",
                    vec!["groupOfURLs", "memberURL", "member+memberOf@groupOfNames"]
                ),
                ("memberof-group-oc", vec!["groupOfUniqueNames"]),
                ("refint_attributes", vec!["manager"]),
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn words_keep_quoted_groups() {
        assert_eq!(
            words(r#"access to dn.subtree="ou=People, dc=x" by * read"#),
            [
                "access",
                "to",
                "dn.subtree=ou=People, dc=x",
                "by",
                "*",
                "read"
            ]
        );
        assert_eq!(words(r#"a "" b\ c"#), ["a", "", "b c"]);
    }
}
