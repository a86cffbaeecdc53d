//! Files and folders that hold entries or password hashes are the
//! server's alone: files 0600, folders 0700, whatever the umask. LMDB
//! creates its own files 0600; everything else the store and the tools
//! write (journal segments, base copies, exports) goes through here.

use std::fs::{File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::Path;

/// Mode of files that hold entries.
pub const FILE_MODE: u32 = 0o600;
/// Mode of folders that hold them.
pub const DIR_MODE: u32 = 0o700;

/// Creates (or truncates) `path` for writing and reading, 0600. A file
/// that already existed with a wider mode is narrowed first, before a
/// byte is written to it.
pub fn create_file(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .read(true)
        .mode(FILE_MODE)
        .open(path)?;
    file.set_permissions(Permissions::from_mode(FILE_MODE))?;
    Ok(file)
}

/// Narrows an existing file to 0600 (a copy made by another tool).
pub fn restrict(path: &Path) -> io::Result<()> {
    std::fs::set_permissions(path, Permissions::from_mode(FILE_MODE))
}

/// Creates `dir` and any missing parents; the folders created are 0700.
pub fn create_dir(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)
}

/// Opens `path` for reading and writing where the caller says (creating
/// it 0600, narrowing an existing one first).
pub fn open_read_write(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .read(true)
        .write(true)
        .mode(FILE_MODE)
        .open(path)?;
    file.set_permissions(Permissions::from_mode(FILE_MODE))?;
    Ok(file)
}

/// Replaces `path` with `bytes`, durably and atomically: written to
/// `<path>.new` (0600) and synced, renamed over `path`, the folder
/// synced. A crash leaves the old file or the new one, never a mix.
pub fn replace_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write as _;
    let staged = path.with_extension("new");
    {
        let mut file = create_file(&staged)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    std::fs::rename(&staged, path)?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

/// Bytes available to unprivileged users on the file system of `path`
/// (None if it cannot be asked).
pub fn free_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c_path` is a valid NUL-terminated string and `stat` points
    // to writable memory of the right type; statvfs initialises it fully
    // when it returns 0, and we read it only then.
    #[allow(unsafe_code)]
    let stat = unsafe {
        if libc::statvfs(c_path.as_ptr(), stat.as_mut_ptr()) != 0 {
            return None;
        }
        stat.assume_init()
    };
    // fsblkcnt_t and c_ulong are u64 on 64-bit Linux, narrower elsewhere.
    #[allow(clippy::useless_conversion)]
    Some(u64::from(stat.f_bavail).saturating_mul(u64::from(stat.f_frsize)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_folders_are_private_whatever_existed() {
        let dir = std::env::temp_dir().join(format!("meridian-private-{}", std::process::id()));
        create_dir(&dir.join("a/b")).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir.join("a/b")), 0o700);
        let path = dir.join("a/b/file");
        std::fs::write(&path, b"old").unwrap();
        std::fs::set_permissions(&path, Permissions::from_mode(0o644)).unwrap();
        drop(create_file(&path).unwrap());
        assert_eq!(mode(&path), 0o600);
        assert_eq!(std::fs::read(&path).unwrap(), b"");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
