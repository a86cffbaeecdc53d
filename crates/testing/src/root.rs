//! Tests that need root (a tmpfs of a chosen size for a full disk,
//! privileges dropped): whether they can run, and the tmpfs itself.
//!
//! CI runs as root, so under CI (`CI` set) a test that cannot run fails
//! rather than skip unseen; elsewhere it says in the output that it did
//! not run (written to the standard error itself, which the harness
//! does not capture).

// Test support: a failed mount fails the test that asked for it.
#![allow(clippy::expect_used, clippy::panic)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// This process runs as root.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// Whether a test that needs root can run: true as root; under CI a
/// panic saying `why`; elsewhere false, said in the output.
pub fn can_run_as_root(why: &str) -> bool {
    if is_root() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{why}, and CI must run this test"
    );
    let _ = writeln!(std::io::stderr(), "{why} (not root): this test did not run");
    false
}

/// A tmpfs mounted for a test, unmounted (and its directory removed)
/// when dropped.
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs of `size` (`mount -o size=`, e.g. `"6m"`) at
    /// `dir`, made first.
    pub fn mount(dir: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).expect("the mount point");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .expect("running mount");
        assert!(status.success(), "mount tmpfs at {} failed", dir.display());
        Tmpfs(dir.to_path_buf())
    }

    /// Gives it a new size (`mount -o remount,size=`): a full disk freed.
    pub fn resize(&self, size: &str) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .status()
            .expect("running mount");
        assert!(status.success(), "remounting {} failed", self.0.display());
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
