//! `meridian gen`: entries from a template, as LDIF or as a stream of BER
//! AddRequests (what `meridian import` and seed 000's loader read), to
//! files, FIFOs or standard output, several streams in parallel.
//!
//! A template is LDIF-shaped text whose values are [`Template`]s:
//!
//! ```text
//! dn: uid=user{seq},ou=People,dc=example,dc=com
//! objectClass: inetOrgPerson
//! cn: {pick:Ann|Bob|Eve} {alpha:8}
//! carLicense: {alnum:8}
//! ```
//!
//! Entry number `n` renders with `{seq}` = `n` (and `{key}` = `n`), so
//! the same template, count and start always give the same DNs; random
//! parts come from `--seed`. With several outputs, output `i` gets the
//! `i`-th contiguous share of the numbers and its own thread.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::{Context as _, bail};

use crate::rng::Rng;
use crate::template::{Template, Values};

/// A rendered entry: its DN and each attribute's values.
pub type Rendered<'t> = (Vec<u8>, Vec<(&'t str, Vec<Vec<u8>>)>);

/// An entry template: the DN and the attributes with their values.
#[derive(Debug, Clone)]
pub struct EntryTemplate {
    dn: Template,
    /// Attribute name and value templates; one attribute per name.
    attributes: Vec<(String, Vec<Template>)>,
}

impl EntryTemplate {
    /// Parses template text: a `dn:` line, then `attribute: value` lines;
    /// `#` comments and blank lines are skipped.
    pub fn parse(text: &str) -> anyhow::Result<EntryTemplate> {
        let mut dn = None;
        let mut attributes: Vec<(String, Vec<Template>)> = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, value) = line.split_once(':').with_context(|| {
                format!("template line {}: expected `attribute: value`", number + 1)
            })?;
            let value = value.strip_prefix(' ').unwrap_or(value);
            let template =
                Template::parse(value).with_context(|| format!("template line {}", number + 1))?;
            if dn.is_none() {
                if !name.eq_ignore_ascii_case("dn") {
                    bail!(
                        "template line {}: the first line must be `dn: ...`",
                        number + 1
                    );
                }
                dn = Some(template);
                continue;
            }
            match attributes
                .iter_mut()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
            {
                Some((_, values)) => values.push(template),
                None => attributes.push((name.to_owned(), vec![template])),
            }
        }
        let dn = dn.context("the template has no `dn:` line")?;
        if attributes.is_empty() {
            bail!("the template has a DN but no attributes");
        }
        Ok(EntryTemplate { dn, attributes })
    }

    /// Renders entry `seq`: the DN and each attribute's values.
    pub fn render(&self, seq: u64, rng: &mut Rng) -> Rendered<'_> {
        let mut values = Values {
            key: seq,
            seq,
            unique: seq,
            run: 0,
            rng,
        };
        let mut dn = Vec::new();
        self.dn.render(&mut values, &mut dn);
        let attributes = self
            .attributes
            .iter()
            .map(|(name, templates)| {
                let rendered = templates
                    .iter()
                    .map(|t| {
                        let mut v = Vec::new();
                        t.render(&mut values, &mut v);
                        v
                    })
                    .collect();
                (name.as_str(), rendered)
            })
            .collect();
        (dn, attributes)
    }
}

/// The seed workloads' data models.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// Seed 000: inetOrgPerson with an 8-byte carLicense under ou=People.
    Seed000,
    /// Seed 002: account + posixAccount users under ou=People.
    Seed002,
    /// Seed 003: dynamic (RFC 2589) users with 20 attributes under ou=Dynamic.
    Seed003,
}

impl Model {
    /// The model a flag names (`seed000`, `seed002`, `seed003`).
    pub fn from_name(name: &str) -> Option<Model> {
        match name {
            "seed000" => Some(Model::Seed000),
            "seed002" => Some(Model::Seed002),
            "seed003" => Some(Model::Seed003),
            _ => None,
        }
    }

    /// The container under which the model's entries live.
    pub fn container(self) -> &'static str {
        match self {
            Model::Seed000 | Model::Seed002 => "People",
            Model::Seed003 => "Dynamic",
        }
    }

    /// The entry template under `suffix`.
    pub fn template(self, suffix: &str) -> String {
        let suffix = suffix.replace('{', "{{").replace('}', "}}");
        match self {
            Model::Seed000 => format!(
                "dn: uid=user{{seq}},ou=People,{suffix}\nobjectClass: inetOrgPerson\nuid: user{{seq}}\n\
                 cn: User {{seq}}\nsn: S{{seq}}\ncarLicense: {{alnum:8}}\n"
            ),
            Model::Seed002 => format!(
                "dn: uid=user{{seq}},ou=People,{suffix}\nobjectClass: account\nobjectClass: posixAccount\n\
                 uid: user{{seq}}\ncn: User {{seq}}\nuidNumber: {{seq+10000}}\ngidNumber: 100\n\
                 homeDirectory: /home/user{{seq}}\nloginShell: /bin/bash\ngecos: User {{seq}}\n"
            ),
            Model::Seed003 => format!(
                "dn: uid=dyn{{seq}},ou=Dynamic,{suffix}\nobjectClass: inetOrgPerson\nobjectClass: dynamicObject\n\
                 uid: dyn{{seq}}\ncn: Dyn {{seq}}\nsn: {{pick:Ann|Bob|Eve|Ian|Kim|Lea|Max|Noa}} {{alpha:8}}\n\
                 givenName: {{alpha:6}}\ndisplayName: Dynamic user {{seq}}\nmail: dyn{{seq}}@example.com\n\
                 telephoneNumber: +1 555 {{digits:7}}\nmobile: +1 555 {{digits:7}}\ntitle: {{pick:guest|member|admin}}\n\
                 ou: {{pick:sales|support|research|operations}}\nl: {{alpha:8}}\nst: {{alpha:2}}\n\
                 postalCode: {{digits:5}}\nstreet: {{num:1:999}} {{alpha:8}} Street\nemployeeNumber: {{seq}}\n\
                 departmentNumber: {{num:1:50}}\npreferredLanguage: {{pick:en|fr|de|es}}\n\
                 description: session {{alnum:16}}\nroomNumber: {{num:1:500}}\n"
            ),
        }
    }

    /// The suffix and container entries the model's entries need.
    pub fn containers(self, suffix: &str) -> Vec<(String, Vec<(&'static str, String)>)> {
        let first_rdn = suffix.split(',').next().unwrap_or(suffix);
        let (attr, value) = first_rdn.split_once('=').unwrap_or(("dc", first_rdn));
        let top = if attr.eq_ignore_ascii_case("dc") {
            vec![
                ("objectClass", "dcObject".to_owned()),
                ("objectClass", "organization".to_owned()),
                ("dc", value.to_owned()),
                ("o", value.to_owned()),
            ]
        } else {
            vec![
                ("objectClass", "organization".to_owned()),
                ("o", value.to_owned()),
            ]
        };
        vec![
            (suffix.to_owned(), top),
            (
                format!("ou={},{suffix}", self.container()),
                vec![
                    ("objectClass", "organizationalUnit".to_owned()),
                    ("ou", self.container().to_owned()),
                ],
            ),
        ]
    }
}

/// Output encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// LDIF (RFC 2849) content records.
    Ldif,
    /// LDAPMessage-wrapped AddRequests, back to back.
    Ber,
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The entries.
    pub template: EntryTemplate,
    /// Entries written before the generated ones, to the first output.
    pub containers: Vec<(String, Vec<(&'static str, String)>)>,
    /// How many entries.
    pub count: u64,
    /// First `{seq}`.
    pub start: u64,
    /// Outputs (`-` for standard output); entries are shared out.
    pub outputs: Vec<PathBuf>,
    /// Encoding.
    pub format: Format,
    /// Seed of random parts.
    pub seed: u64,
}

/// Writes every output; returns the entries written (containers included).
pub fn generate(plan: &Plan) -> anyhow::Result<u64> {
    if plan.outputs.is_empty() {
        bail!("no output given");
    }
    let n = plan.outputs.len() as u64;
    std::thread::scope(|scope| {
        let handles: Vec<_> = plan
            .outputs
            .iter()
            .enumerate()
            .map(|(i, path)| {
                let i = i as u64;
                let from = plan.start + plan.count * i / n;
                let to = plan.start + plan.count * (i + 1) / n;
                scope.spawn(move || write_stream(plan, path, i == 0, from..to))
            })
            .collect();
        let mut total = 0;
        for handle in handles {
            total += handle
                .join()
                .map_err(|_| anyhow::anyhow!("a generator thread panicked"))??;
        }
        Ok(total)
    })
}

fn write_stream(
    plan: &Plan,
    path: &PathBuf,
    first: bool,
    range: std::ops::Range<u64>,
) -> anyhow::Result<u64> {
    let sink: Box<dyn Write> = if path.as_os_str() == "-" {
        Box::new(std::io::stdout().lock())
    } else {
        // Opening a FIFO blocks until its reader opens it; truncation is
        // ignored for FIFOs.
        Box::new(File::create(path).with_context(|| format!("cannot write {}", path.display()))?)
    };
    let mut out = BufWriter::with_capacity(1 << 20, sink);
    let mut rng = Rng::new(plan.seed ^ range.start.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut written = 0;
    // No `version: 1` line: slapcat writes none and slapadd refuses one
    // (it reads it as an entry without a DN, or as an attribute), while
    // every LDIF reader, ours included, accepts a file without it.
    if first {
        for (dn, attributes) in &plan.containers {
            let rendered: Vec<(&str, Vec<Vec<u8>>)> = attributes
                .iter()
                .map(|(name, value)| (*name, vec![value.as_bytes().to_vec()]))
                .collect();
            encode(plan.format, written + 1, dn.as_bytes(), &rendered, &mut buf);
            written += 1;
        }
    }
    for seq in range {
        let (dn, attributes) = plan.template.render(seq, &mut rng);
        encode(plan.format, seq + 1, &dn, &attributes, &mut buf);
        written += 1;
        if buf.len() >= 60 * 1024 {
            out.write_all(&buf)
                .with_context(|| format!("writing {}", path.display()))?;
            buf.clear();
        }
    }
    out.write_all(&buf)
        .and_then(|()| out.flush())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(written)
}

/// Appends one entry in `format`.
fn encode(
    format: Format,
    number: u64,
    dn: &[u8],
    attributes: &[(&str, Vec<Vec<u8>>)],
    out: &mut Vec<u8>,
) {
    match format {
        Format::Ldif => {
            meridian_ldif::write::attr_value(out, "dn", dn);
            for (name, values) in attributes {
                for value in values {
                    meridian_ldif::write::attr_value(out, name, value);
                }
            }
            out.push(b'\n');
        }
        Format::Ber => meridian_proto::message::encode_add(
            out,
            (number % i32::MAX as u64).max(1) as i32,
            dn,
            attributes
                .iter()
                .map(|(name, vs)| (name.as_bytes(), vs.iter().map(Vec::as_slice))),
        ),
    }
}

#[cfg(test)]
mod tests {
    use meridian_proto::{DecodeLimits, LdapMessage, ProtocolOp};

    use super::*;

    fn plan(model: Model, count: u64, outputs: Vec<PathBuf>, format: Format) -> Plan {
        Plan {
            template: EntryTemplate::parse(&model.template("dc=example,dc=com")).unwrap(),
            containers: model.containers("dc=example,dc=com"),
            count,
            start: 0,
            outputs,
            format,
            seed: 1,
        }
    }

    fn temp(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("meridian-gen-{}-{name}", std::process::id()))
    }

    #[test]
    fn ldif_output_parses_and_shares_numbers_out() {
        let outputs = vec![temp("a.ldif"), temp("b.ldif")];
        let written = generate(&plan(Model::Seed002, 101, outputs.clone(), Format::Ldif)).unwrap();
        assert_eq!(written, 103);
        let mut dns = Vec::new();
        for path in &outputs {
            let text = std::fs::read(path).unwrap();
            for record in
                meridian_ldif::RecordReader::new(&text[..], "t", meridian_ldif::Limits::default())
            {
                dns.push(String::from_utf8(record.unwrap().dn).unwrap());
            }
            std::fs::remove_file(path).unwrap();
        }
        assert_eq!(dns.len(), 103);
        assert_eq!(dns[0], "dc=example,dc=com");
        assert!(dns.contains(&"uid=user0,ou=People,dc=example,dc=com".to_owned()));
        assert!(dns.contains(&"uid=user100,ou=People,dc=example,dc=com".to_owned()));
        dns.sort();
        dns.dedup();
        assert_eq!(dns.len(), 103, "every entry once");
    }

    #[test]
    fn ber_output_is_a_stream_of_add_requests() {
        let path = temp("x.ber");
        generate(&plan(Model::Seed003, 10, vec![path.clone()], Format::Ber)).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let mut rest = &bytes[..];
        let mut adds = 0;
        while !rest.is_empty() {
            let (message, used) =
                LdapMessage::decode_prefix(rest, &DecodeLimits::default()).unwrap();
            let ProtocolOp::AddRequest(add) = message.op else {
                panic!("not an add")
            };
            if adds >= 2 {
                // 20 attributes; objectClass holds two values.
                assert_eq!(add.attributes.len(), 20);
            }
            adds += 1;
            rest = &rest[used..];
        }
        assert_eq!(adds, 12);
    }

    #[test]
    fn bad_templates_are_refused() {
        for (text, needle) in [
            ("cn: x\n", "first line must be `dn"),
            ("dn: x\n", "no attributes"),
            ("dn: x\ncn {seq}\n", "expected `attribute: value`"),
            ("dn: x\ncn: {nope}\n", "line 2"),
            ("", "no `dn:` line"),
        ] {
            let err = format!("{:#}", EntryTemplate::parse(text).unwrap_err());
            assert!(err.contains(needle), "{text:?}: {err}");
        }
    }
}
