//! Start Debian's slapd on a private 127.0.0.1 port with an
//! LDIF loaded by slapadd, as the reference server.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The suffix every reference slapd serves; rootdn cn=admin under it,
/// password "secret".
pub const SUFFIX: &str = "dc=example,dc=com";

/// Where slapd's schema files are.
pub fn schema_dir() -> PathBuf {
    std::env::var_os("MERIDIAN_SLAPD_SCHEMA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/etc/ldap/schema".into())
}

/// What [`Slapd::start_with`] adds to the reference configuration.
#[derive(Debug, Clone, Copy, Default)]
pub struct Extra<'a> {
    /// Lines for the global section, after the modules are loaded (TLS
    /// certificates, `moduleload dds`).
    pub global: &'a str,
    /// Lines for the database section (`overlay dds`).
    pub database: &'a str,
    /// Listen on `ldaps://` instead of `ldap://`.
    pub ldaps: bool,
    /// The suffix of a subordinate database glued below the main one
    /// (slapd's `subordinate`), with its own files.
    pub subordinate: Option<&'a str>,
}

/// A running slapd, killed (and its files removed) when dropped.
pub struct Slapd {
    child: Child,
    /// The 127.0.0.1 port it listens on.
    pub port: u16,
    dir: PathBuf,
    ldaps: bool,
}

impl Drop for Slapd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Slapd {
    /// Loads `ldif` with slapadd and starts slapd; `tag` keeps parallel
    /// tests apart.
    pub fn start(tag: &str, ldif: &str) -> Slapd {
        Self::start_with(tag, ldif, &Extra::default())
    }

    /// The same with `extra` added to slapd.conf, listening on `ldaps://`
    /// when it says so.
    pub fn start_with(tag: &str, ldif: &str, extra: &Extra<'_>) -> Slapd {
        let Extra {
            global,
            database,
            ldaps,
            subordinate,
        } = *extra;
        let slapd = Path::new("/usr/sbin/slapd");
        assert!(
            slapd.exists(),
            "slapd is not installed: run scripts/test.sh (it installs Debian's slapd)"
        );
        let dir = std::env::temp_dir().join(format!("meridian-slapd-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("db")).unwrap();
        // A subordinate database comes before its superior.
        let glued = match subordinate {
            Some(suffix) => {
                std::fs::create_dir_all(dir.join("sub")).unwrap();
                format!(
                    "database mdb\nsuffix \"{suffix}\"\nsubordinate\nrootdn \"cn=admin,{SUFFIX}\"\n\
                     directory {d}/sub\nmaxsize 104857600\n",
                    d = dir.display()
                )
            }
            None => String::new(),
        };
        let conf = format!(
            "include {s}/core.schema\ninclude {s}/cosine.schema\ninclude {s}/inetorgperson.schema\ninclude {s}/nis.schema\n\
             modulepath /usr/lib/ldap\nmoduleload back_mdb\n{global}pidfile {d}/slapd.pid\n{glued}\
             database mdb\nsuffix \"{SUFFIX}\"\nrootdn \"cn=admin,{SUFFIX}\"\nrootpw secret\ndirectory {d}/db\nmaxsize 104857600\n\
             {database}",
            s = schema_dir().display(),
            d = dir.display()
        );
        std::fs::write(dir.join("slapd.conf"), conf).unwrap();
        std::fs::write(dir.join("data.ldif"), ldif).unwrap();
        let out = Command::new("/usr/sbin/slapadd")
            .arg("-f")
            .arg(dir.join("slapd.conf"))
            .arg("-l")
            .arg(dir.join("data.ldif"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "slapadd failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // slapd binds its own port: one is chosen below the ephemeral
        // range (where no socket bound to port 0 lands) and checked free;
        // taken meanwhile, slapd exits and another is tried.
        for _ in 0..5 {
            let port = free_port();
            if let Some(child) = run(&dir, port, ldaps) {
                return Slapd {
                    child,
                    port,
                    dir,
                    ldaps,
                };
            }
        }
        panic!("slapd did not start on any of five ports");
    }

    /// Kills slapd (SIGKILL) and starts it again on its port, with its
    /// database as the kill left it.
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(child) = run(&self.dir, self.port, self.ldaps) {
                self.child = child;
                return;
            }
            assert!(
                Instant::now() < deadline,
                "slapd did not start again on port {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// Starts slapd on `port` with the configuration in `dir`: `None` if it
/// exits before it listens (the port was taken).
fn run(dir: &Path, port: u16, ldaps: bool) -> Option<Child> {
    let mut child = Command::new("/usr/sbin/slapd")
        .arg("-f")
        .arg(dir.join("slapd.conf"))
        .args([
            "-h",
            &format!(
                "{}://127.0.0.1:{port}/",
                if ldaps { "ldaps" } else { "ldap" }
            ),
            "-d",
            "0",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if child.try_wait().unwrap().is_some() {
            return None;
        }
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Some(child);
        }
        assert!(Instant::now() < deadline, "slapd did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A port free now, between 20,000 and 32,000: below the kernel's
/// ephemeral range (32768 and up), so no socket bound to port 0 takes it
/// before slapd does, and never handed out twice by this process.
fn free_port() -> u16 {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let seed = std::process::id() as usize * 7919;
    loop {
        let i = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let port = 20_000 + ((seed + i * 7) % 12_000) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

impl Slapd {
    /// The database as `slapcat` prints it (operational attributes
    /// included), read beside the running server.
    pub fn slapcat(&self) -> String {
        let out = Command::new("/usr/sbin/slapcat")
            .arg("-f")
            .arg(self.dir.join("slapd.conf"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "slapcat failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

/// Appends an AddRequest for `dn` with `attrs` (names and values).
pub fn encode_add(bytes: &mut Vec<u8>, id: i32, dn: &str, attrs: &[(&str, &[&str])]) {
    meridian_proto::message::encode_add(
        bytes,
        id,
        dn.as_bytes(),
        attrs
            .iter()
            .map(|(ty, vs)| (ty.as_bytes(), vs.iter().map(|v| v.as_bytes()))),
    );
}

/// Standard base64 with padding (for LDIF `::` values).
pub fn base64(bytes: &[u8]) -> String {
    meridian_ldif::base64::encode(bytes)
}

/// The attributes of a test entry: names and values.
pub type Attrs = Vec<(&'static str, Vec<String>)>;

/// LDIF for `(dn, attributes)` entries, base64 where needed.
pub fn to_ldif(entries: &[(String, Attrs)]) -> String {
    let mut out = String::new();
    let line = |out: &mut String, name: &str, value: &str| {
        if value.is_ascii() && !value.starts_with(' ') {
            out.push_str(&format!("{name}: {value}\n"));
        } else {
            out.push_str(&format!("{name}:: {}\n", base64(value.as_bytes())));
        }
    };
    for (dn, attrs) in entries {
        line(&mut out, "dn", dn);
        for (name, values) in attrs {
            for v in values {
                line(&mut out, name, v);
            }
        }
        out.push('\n');
    }
    out
}

/// Test entries: (dn, attributes). Chosen to exercise case, spaces,
/// Unicode, numbers, telephone numbers, subtypes and language options.
pub fn people() -> Vec<(String, Attrs)> {
    let s = |v: &str| v.to_owned();
    let mut out = vec![
        (
            SUFFIX.to_owned(),
            vec![
                (
                    "objectClass",
                    vec![s("top"), s("dcObject"), s("organization")],
                ),
                ("dc", vec![s("example")]),
                ("o", vec![s("Example Corp")]),
            ],
        ),
        (
            format!("ou=People,{SUFFIX}"),
            vec![
                ("objectClass", vec![s("organizationalUnit")]),
                ("ou", vec![s("People")]),
                ("description", vec![s("All  the people")]),
            ],
        ),
        (
            format!("ou=Groups,{SUFFIX}"),
            vec![
                ("objectClass", vec![s("organizationalUnit")]),
                ("ou", vec![s("Groups")]),
            ],
        ),
    ];
    let given = [
        "Babs",
        "John",
        "Ünal",
        "Zoë",
        "Li",
        "Anne-Marie",
        "O'Neil",
        "Ed",
    ];
    let sn = [
        "Jensen",
        "Doe",
        "Çelik",
        "Straße",
        "Wang",
        "Smith Jones",
        "Brien",
        "Ng",
    ];
    for i in 0..32usize {
        let g = given[i % given.len()];
        let last = sn[(i / 2) % sn.len()];
        let uid = format!("user{i:02}");
        let mut attrs = vec![
            (
                "objectClass",
                if i % 3 == 0 {
                    vec![s("inetOrgPerson"), s("posixAccount")]
                } else {
                    vec![s("inetOrgPerson")]
                },
            ),
            ("uid", vec![uid.clone()]),
            (
                "cn",
                vec![
                    format!("{g} {last}"),
                    format!("{}  {}  Jr", g.to_uppercase(), last),
                ],
            ),
            ("sn", vec![last.to_owned()]),
            ("givenName", vec![g.to_owned()]),
            (
                "mail",
                vec![format!(
                    "{}.{i}@Example.COM",
                    g.to_lowercase().replace(['\'', 'ü', 'ë'], "")
                )],
            ),
            (
                "telephoneNumber",
                vec![format!("+1 512-{:03}-{:04}", 100 + i, 1000 + i * 37)],
            ),
            ("employeeNumber", vec![format!("{}", 1000 + i * 13)]),
        ];
        if i % 3 == 0 {
            attrs.push(("uidNumber", vec![format!("{}", 1000 + i * 7)]));
            attrs.push(("gidNumber", vec![format!("{}", 100 + i % 4)]));
            attrs.push(("homeDirectory", vec![format!("/home/{uid}")]));
        }
        if i % 4 == 1 {
            // Options come back lower-cased and sorted, however written.
            let german = if i % 8 == 5 {
                "cn;LANG-De"
            } else {
                "cn;lang-de"
            };
            attrs.push((german, vec![format!("Herr {last}")]));
            attrs.push(("description", vec![format!("Member of team {}", i % 3)]));
        }
        if i % 5 == 2 {
            attrs.push(("title", vec![s("Senior  Engineer")]));
        }
        out.push((format!("uid={uid},ou=People,{SUFFIX}"), attrs));
    }
    out.push((
        format!("cn=Admins,ou=Groups,{SUFFIX}"),
        vec![
            ("objectClass", vec![s("groupOfNames")]),
            ("cn", vec![s("Admins")]),
            (
                "member",
                vec![
                    format!("uid=user00,ou=People,{SUFFIX}"),
                    format!("UID=User03, OU=people,{SUFFIX}"),
                ],
            ),
        ],
    ));
    out
}
