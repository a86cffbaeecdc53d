//! Starts the real `meridian` binary on 127.0.0.1 and talks to it with our
//! codec or with OpenLDAP's command-line tools.
// Tests time out their waits: they read the clock directly.
#![allow(clippy::disallowed_methods)]
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use meridian_proto::{DecodeLimits, LdapMessage};

pub mod cluster;

pub const ADMIN_DN: &str = "cn=admin,dc=example,dc=com";
pub const ADMIN_PASSWORD: &str = "test-secret";

/// A running server, stopped (SIGTERM, then SIGKILL) when dropped.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    pub data_dir: PathBuf,
    pub stdout_lines: Vec<String>,
}

/// `command` (a `meridian serve`) as a bash that moves `sockets` to
/// descriptors 3, 4, ... in order, sets `LISTEN_PID` to its own PID,
/// `LISTEN_FDS` and `LISTEN_FDNAMES` to the sockets' names, and then
/// execs the server, which keeps that PID: systemd's socket activation.
/// The sockets stay this process's, so a server restarted on them keeps
/// its addresses and no port is released in between. The shell does the
/// moves: a `dup2` in `pre_exec` could overwrite the pipe the standard
/// library keeps in the child to report a failed exec.
pub fn activated(command: &Command, sockets: &[(&str, &std::net::TcpListener)]) -> Command {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let fds: Vec<i32> = sockets.iter().map(|(_, s)| s.as_raw_fd()).collect();
    // bash's `{var}<&fd` takes a free descriptor above 9, so the moves
    // hold whatever numbers the sockets have here.
    let mut script = String::from("export LISTEN_PID=$$; exec");
    for (i, fd) in fds.iter().enumerate() {
        script.push_str(&format!(" {{s{i}}}<&{fd} {fd}<&-"));
    }
    script.push_str(" && exec");
    for i in 0..fds.len() {
        script.push_str(&format!(" {}<&$s{i} {{s{i}}}<&-", 3 + i));
    }
    script.push_str(" && exec \"$0\" \"$@\"");
    let names: Vec<&str> = sockets.iter().map(|(name, _)| *name).collect();
    let mut shell = Command::new("bash");
    shell
        .arg("-c")
        .arg(script)
        .arg(command.get_program())
        .args(command.get_args())
        .env("LISTEN_FDS", fds.len().to_string())
        .env("LISTEN_FDNAMES", names.join(":"));
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => shell.env(key, value),
            None => shell.env_remove(key),
        };
    }
    // SAFETY: only fcntl, async-signal-safe, on descriptors this process
    // owns, in the child between fork and exec: they stay open through
    // the exec into bash.
    #[allow(unsafe_code)]
    unsafe {
        shell.pre_exec(move || {
            for fd in &fds {
                if libc::fcntl(*fd, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    shell
}

/// A new, empty directory for one test's files, named after this
/// process. A test's directory is kept after it ends (a failure's files
/// are there to read); those of test processes that are no longer
/// running are removed when the next one makes its first.
pub fn temp_dir(tag: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    static SWEEP: std::sync::Once = std::sync::Once::new();
    SWEEP.call_once(remove_dirs_of_finished_runs);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("meridian-test-{}-{tag}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Removes the `meridian-test-PID-*` directories whose process is gone
/// (never one of a test binary still running beside this one).
fn remove_dirs_of_finished_runs() {
    let Ok(items) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for item in items.flatten() {
        let name = item.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("meridian-test-")) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(item.path());
        }
    }
}

impl Server {
    /// Starts `meridian serve` with the given extra config (TOML) and the
    /// administrator password set through the environment.
    pub fn start(config_toml: &str) -> Server {
        Self::start_with(config_toml, Some(ADMIN_PASSWORD), None)
    }

    /// Starts the server with extra command-line arguments.
    pub fn start_with_args(config_toml: &str, args: &[&str]) -> Server {
        Self::launch(config_toml, Some(ADMIN_PASSWORD), None, args)
    }

    pub fn start_with(
        config_toml: &str,
        password: Option<&str>,
        data_dir: Option<PathBuf>,
    ) -> Server {
        Self::launch(config_toml, password, data_dir, &[])
    }

    /// Starts the server in `data_dir` with RUST_LOG unset (so the
    /// config's `[log]` decides) and its standard error to `stderr`. The
    /// config is `data_dir/test-config.toml`, which a test may rewrite
    /// before a SIGHUP.
    pub fn start_unfiltered(config_toml: &str, data_dir: PathBuf, stderr: Stdio) -> Server {
        Self::spawn(
            config_toml,
            Some(ADMIN_PASSWORD),
            Some(data_dir),
            &[],
            None,
            stderr,
        )
    }

    fn launch(
        config_toml: &str,
        password: Option<&str>,
        data_dir: Option<PathBuf>,
        args: &[&str],
    ) -> Server {
        Self::spawn(
            config_toml,
            password,
            data_dir,
            args,
            Some("warn"),
            Stdio::inherit(),
        )
    }

    /// Starts the server on `listener` (held by the test, passed as
    /// systemd passes a socket: [`activated`]), so that
    /// [`Server::restart_on`] brings it back at the same address.
    pub fn start_on(config_toml: &str, listener: &std::net::TcpListener) -> Server {
        Self::spawn_on(config_toml, None, listener)
    }

    /// Kills the server (SIGKILL) and starts it again on `listener` with
    /// the same data and configuration.
    pub fn restart_on(&mut self, listener: &std::net::TcpListener) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let config = std::fs::read_to_string(self.data_dir.join("test-config.toml")).unwrap();
        let mut again = Self::spawn_on(&config, Some(self.data_dir.clone()), listener);
        // The new process replaces the old; the data directory is kept
        // (the one `again` would remove when dropped is an empty one).
        std::mem::swap(&mut self.child, &mut again.child);
        self.addr = again.addr;
        self.stdout_lines = std::mem::take(&mut again.stdout_lines);
        again.data_dir = temp_dir("replaced");
    }

    fn spawn_on(
        config_toml: &str,
        data_dir: Option<PathBuf>,
        listener: &std::net::TcpListener,
    ) -> Server {
        Self::spawn_with(
            config_toml,
            Some(ADMIN_PASSWORD),
            data_dir,
            &[],
            Some("warn"),
            Stdio::inherit(),
            Some(listener),
        )
    }

    fn spawn(
        config_toml: &str,
        password: Option<&str>,
        data_dir: Option<PathBuf>,
        args: &[&str],
        rust_log: Option<&str>,
        stderr: Stdio,
    ) -> Server {
        Self::spawn_with(
            config_toml,
            password,
            data_dir,
            args,
            rust_log,
            stderr,
            None,
        )
    }

    fn spawn_with(
        config_toml: &str,
        password: Option<&str>,
        data_dir: Option<PathBuf>,
        args: &[&str],
        rust_log: Option<&str>,
        stderr: Stdio,
        listener: Option<&std::net::TcpListener>,
    ) -> Server {
        let data_dir = data_dir.unwrap_or_else(|| temp_dir("data"));
        let config = data_dir.join("test-config.toml");
        std::fs::write(&config, config_toml).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_meridian"));
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&config)
            .arg("--data-dir")
            .arg(&data_dir)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr);
        match rust_log {
            Some(filter) => cmd.env("RUST_LOG", filter),
            None => cmd.env_remove("RUST_LOG"),
        };
        match password {
            Some(p) => cmd.env("MERIDIAN_ADMIN_PASSWORD", p),
            None => cmd.env_remove("MERIDIAN_ADMIN_PASSWORD"),
        };
        let mut child = match listener {
            Some(listener) => activated(&cmd, &[("ldap", listener)])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .spawn(),
            None => cmd.spawn(),
        }
        .expect("start meridian");
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let mut stdout_lines = Vec::new();
        let addr = loop {
            let line = lines
                .next()
                .expect("meridian exited before listening")
                .unwrap();
            if let Some(addr) = line.strip_prefix("meridian listening on ") {
                break addr.parse().unwrap();
            }
            stdout_lines.push(line);
        };
        // Keep draining stdout so the server never blocks on it.
        std::thread::spawn(move || for _ in lines {});
        Server {
            child,
            addr,
            data_dir,
            stdout_lines,
        }
    }

    pub fn url(&self) -> String {
        format!("ldap://{}", self.addr)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident memory of the server process, from /proc.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap()
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        signal(self.pid(), "TERM");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "server did not stop after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}

pub fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

/// Runs an OpenLDAP client tool.
pub fn ldap_tool(tool: &str, args: &[&str]) -> Output {
    Command::new(tool)
        .args(args)
        .env("LDAPNOINIT", "1")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {tool} (install ldap-utils): {e}"))
}

/// `ldapwhoami` bound as `dn` with `password`: its exit code and output
/// (`dn:...` on success, 49 for invalidCredentials).
/// Whether a new connection's search of the root DSE is answered (with
/// Meridian's vendorName): the server still serves.
pub fn serves(server: &Server) -> bool {
    let out = root_dse_search(server, &["vendorName"]);
    out.status.success() && text(&out.stdout).contains("vendorName: Meridian")
}

/// `ldapsearch` of the root DSE (base scope, anonymous) with `extra`
/// (options, a filter, attributes) on a new connection.
pub fn root_dse_search(server: &Server, extra: &[&str]) -> Output {
    let url = server.url();
    let mut args = vec!["-x", "-H", &url, "-s", "base", "-b", ""];
    args.extend_from_slice(extra);
    ldap_tool("ldapsearch", &args)
}

pub fn whoami(server: &Server, dn: &str, password: &str) -> (i32, String) {
    tool(server, "ldapwhoami", &["-D", dn, "-w", password], &[], None)
}

/// Runs an OpenLDAP client tool against `server` (`-x -H url`, then
/// `bind`, then `extra`), feeding it `stdin`: the exit code and all it
/// printed.
pub fn tool(
    server: &Server,
    tool: &str,
    bind: &[&str],
    extra: &[&str],
    stdin: Option<&str>,
) -> (i32, String) {
    tool_at(&server.url(), tool, bind, extra, stdin)
}

/// [`tool`] against any server's URL (slapd's too).
pub fn tool_at(
    url: &str,
    tool: &str,
    bind: &[&str],
    extra: &[&str],
    stdin: Option<&str>,
) -> (i32, String) {
    let mut args = vec!["-x", "-H", url];
    args.extend_from_slice(bind);
    args.extend_from_slice(extra);
    let mut child = Command::new(tool)
        .args(&args)
        .env("LDAPNOINIT", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {tool} (install ldap-utils): {e}"));
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).unwrap();
    }
    drop(input);
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!("{}{}", text(&out.stdout), text(&out.stderr)),
    )
}

/// slapd and Meridian side by side for a differential test: the URL and
/// the administrator's bind arguments of each, Meridian started with
/// `config` and holding `top` (slapd loaded it at its start).
pub struct SideBySide {
    pub server: Server,
    pub theirs: String,
    pub ours: String,
    // Kept running until the test ends.
    _reference: meridian_testing::slapd::Slapd,
}

/// slapd's administrator bind (`meridian_testing::slapd`'s rootpw).
pub const SLAPD_BIND: [&str; 4] = ["-D", ADMIN_DN, "-w", "secret"];
/// Meridian's administrator bind.
pub const OUR_BIND: [&str; 4] = ["-D", ADMIN_DN, "-w", ADMIN_PASSWORD];

impl SideBySide {
    pub fn start(reference: meridian_testing::slapd::Slapd, config: &str, top: &str) -> SideBySide {
        let server = Server::start(config);
        let (code, out) = admin_tool(&server, "ldapadd", &[], Some(top));
        assert_eq!(code, 0, "{out}");
        SideBySide {
            theirs: format!("ldap://127.0.0.1:{}", reference.port),
            ours: server.url(),
            server,
            _reference: reference,
        }
    }
}

/// The entries under dc=example,dc=com with `attributes`, as LDIF text
/// made comparable between servers: each entry's lines in order, lower
/// case, DNs without spaces after commas, the entries in order.
pub fn entries_view(url: &str, bind: &[&str], attributes: &[&str]) -> String {
    let mut args = vec![
        "-LLL",
        "-o",
        "ldif-wrap=no",
        "-b",
        "dc=example,dc=com",
        "(objectClass=*)",
    ];
    args.extend_from_slice(attributes);
    let (code, out) = tool_at(url, "ldapsearch", bind, &args, None);
    assert_eq!(code, 0, "{out}");
    let mut entries: Vec<String> = out
        .split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let mut lines: Vec<String> = e
                .lines()
                .map(|l| l.to_ascii_lowercase().replace(", ", ","))
                .collect();
            lines.sort();
            lines.join("\n")
        })
        .collect();
    entries.sort();
    entries.join("\n\n")
}

/// [`tool`] bound as the administrator.
pub fn admin_tool(
    server: &Server,
    name: &str,
    extra: &[&str],
    stdin: Option<&str>,
) -> (i32, String) {
    tool(
        server,
        name,
        &["-D", ADMIN_DN, "-w", ADMIN_PASSWORD],
        extra,
        stdin,
    )
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `meridian import -i FILE --data-dir DATA` (offline, default config);
/// panics with the tool's message if it fails; returns its summary.
pub fn import(file: &std::path::Path, data: &std::path::Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["import", "-i"])
        .arg(file)
        .arg("--data-dir")
        .arg(data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "meridian import: {}",
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// A raw connection speaking our codec.
pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        Client::from_stream(TcpStream::connect(addr).unwrap())
    }

    /// A client on a stream connected elsewhere.
    pub fn from_stream(stream: TcpStream) -> Client {
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        stream.set_nodelay(true).unwrap();
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    /// A connection bound as the administrator (message 1).
    pub fn admin(addr: SocketAddr) -> Client {
        Client::bound(addr, ADMIN_DN, ADMIN_PASSWORD)
    }

    /// Connected and bound as `dn` (the bind must succeed).
    pub fn bound(addr: SocketAddr, dn: &str, password: &str) -> Client {
        let mut client = Client::connect(addr);
        let mut bytes = Vec::new();
        meridian_proto::message::encode_simple_bind(
            &mut bytes,
            1,
            dn.as_bytes(),
            password.as_bytes(),
        );
        client.send(&bytes);
        client.read_until(|m| match &m.op {
            meridian_proto::ProtocolOp::BindResponse(r) => {
                assert_eq!(r.result.code.0, 0, "bind as {dn}: {m:?}");
                true
            }
            _ => false,
        });
        client
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    pub fn send_message(&mut self, msg: &LdapMessage<'_>) {
        let mut buf = Vec::new();
        msg.encode(&mut buf);
        self.send(&buf);
    }

    /// Reads the next PDU; `None` when the server closed the connection.
    pub fn read_pdu(&mut self) -> Option<Vec<u8>> {
        loop {
            match meridian_ber::frame::pdu_length(&self.buf, 1 << 26) {
                Ok(len) => return Some(self.buf.drain(..len).collect()),
                Err(e) if e.is_incomplete() => {}
                Err(e) => panic!("server sent malformed BER: {e}"),
            }
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
                Err(e) => panic!("read failed: {e}"),
            }
        }
    }

    /// Reads PDUs, applying `f` to each decoded message, until `f` says stop.
    pub fn read_until(&mut self, mut f: impl FnMut(&LdapMessage<'_>) -> bool) {
        loop {
            let pdu = self.read_pdu().expect("connection closed early");
            let msg = LdapMessage::decode(&pdu, &DecodeLimits::default()).unwrap();
            if f(&msg) {
                return;
            }
        }
    }
}
