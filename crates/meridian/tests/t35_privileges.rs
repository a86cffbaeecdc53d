//! Privileges: `serve` binds a port below 1024 as root and then becomes
//! `server.user`; and it serves sockets systemd passes it (socket
//! activation, `LISTEN_FDS`).

// Tests time out their waits: they read the clock directly.
#![allow(clippy::disallowed_methods)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use support::{ADMIN_PASSWORD, temp_dir, tool_at};

/// Starts `meridian serve` with `args` (through `sh -c` with `shell`
/// before it, when given), and waits for its listening line.
fn serve(
    data_dir: &Path,
    args: &[&str],
    shell: Option<&str>,
    prepare: impl FnOnce(&mut Command),
) -> (Child, String) {
    let binary = env!("CARGO_BIN_EXE_meridian");
    let mut command = match shell {
        Some(before) => {
            let mut sh = Command::new("sh");
            sh.arg("-c")
                .arg(format!("{before} exec \"$0\" \"$@\""))
                .arg(binary);
            sh
        }
        None => Command::new(binary),
    };
    command
        .arg("serve")
        .arg("--data-dir")
        .arg(data_dir)
        .args(args)
        .env("MERIDIAN_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    prepare(&mut command);
    let mut child = command.spawn().expect("start meridian");
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for line in lines {
        let line = line.unwrap();
        if let Some(addr) = line.strip_prefix("meridian listening on ") {
            return (child, addr.to_owned());
        }
    }
    let status = child.wait().unwrap();
    panic!("meridian exited before listening: {status}");
}

/// A server process, killed if a failed assertion leaves it running (it
/// would hold the test's output open).
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn stop(mut running: Running) {
    support::signal(running.0.id(), "TERM");
    let _ = running.0.wait();
}

#[test]
fn serve_binds_a_privileged_port_then_runs_as_server_user() {
    if !meridian_testing::root::can_run_as_root("dropping privileges needs root") {
        return;
    }
    // A free port below 1024.
    let port = (700..1000)
        .find(|p| TcpListener::bind(("127.0.0.1", *p)).is_ok())
        .expect("a free port below 1024");
    let data_dir = temp_dir("privileges");
    // The data directory belongs to the user the server becomes.
    let nobody = 65534;
    std::os::unix::fs::chown(&data_dir, Some(nobody), Some(nobody)).unwrap();
    let config = data_dir.with_extension("toml");
    std::fs::write(&config, "[server]\nuser = \"nobody\"\n").unwrap();
    let listen = format!("127.0.0.1:{port}");
    let (child, addr) = serve(
        &data_dir,
        &["--config", config.to_str().unwrap(), "--listen", &listen],
        None,
        |_| {},
    );
    let child = Running(child);
    assert_eq!(addr, listen);
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.0.id())).unwrap();
    let uid = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert!(
        uid.split_whitespace().skip(1).all(|id| id == "65534"),
        "still privileged: {uid}"
    );
    let (rc, out) = tool_at(
        &format!("ldap://{listen}"),
        "ldapsearch",
        &["-D", support::ADMIN_DN, "-w", ADMIN_PASSWORD],
        &["-b", "", "-s", "base", "vendorName"],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    // What it wrote belongs to that user.
    let secret = std::fs::metadata(data_dir.join("db")).unwrap();
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&secret), nobody);
    stop(child);
    let _ = std::fs::remove_dir_all(&data_dir);
    let _ = std::fs::remove_file(&config);
}

#[test]
fn serve_takes_the_socket_systemd_passes() {
    let socket = TcpListener::bind("127.0.0.1:0").unwrap();
    let expected = socket.local_addr().unwrap().to_string();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&socket);
    let data_dir = temp_dir("socket-activation");
    // As systemd does: the socket as descriptor 3, LISTEN_PID the
    // server's own PID: the shell's, which `exec` keeps. The shell moves
    // the socket to 3 (a dup2 in Rust's pre_exec could overwrite the
    // pipe the standard library keeps there to report exec errors).
    // SAFETY: fcntl on a descriptor this test owns, to let it live
    // through exec into the shell.
    #[allow(unsafe_code)]
    let inheritable = unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
    assert_eq!(inheritable, 0);
    let before = format!("export LISTEN_PID=$$; exec 3<&{fd};");
    let (child, addr) = serve(&data_dir, &[], Some(&before), |command| {
        command.env("LISTEN_FDS", "1").env("LISTEN_FDNAMES", "ldap");
    });
    let child = Running(child);
    assert_eq!(addr, expected, "the passed socket is the one served");
    let (rc, out) = tool_at(
        &format!("ldap://{addr}"),
        "ldapsearch",
        &["-D", support::ADMIN_DN, "-w", ADMIN_PASSWORD],
        &["-b", "", "-s", "base", "vendorName"],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    stop(child);
    drop(socket);
    let _ = std::fs::remove_dir_all(&data_dir);
}
