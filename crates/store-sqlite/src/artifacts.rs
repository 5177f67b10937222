//! Content-addressed artifact files: `artifacts/sha256/<2 hex>/<62 hex>`, written to a temporary file,
//! fsynced and renamed into place, so a reader never sees a partial artifact.

use std::io::Write;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use clutch_store::{Artifact, Error, Result, sha256_hex};

pub(crate) struct Dir {
    root: PathBuf,
}

impl Dir {
    pub(crate) fn open(root: &Path) -> std::io::Result<Dir> {
        std::fs::create_dir_all(root.join("sha256"))?;
        std::fs::create_dir_all(root.join("tmp"))?;
        Ok(Dir { root: root.to_path_buf() })
    }

    fn path(&self, sha: &str) -> PathBuf {
        self.root.join("sha256").join(&sha[..2]).join(&sha[2..])
    }

    pub(crate) fn put(&self, bytes: &[u8]) -> Result<Artifact> {
        let sha = sha256_hex(bytes);
        let reference = format!("{}{sha}", clutch_proto::id::ARTIFACT_PREFIX);
        let size = bytes.len() as u64;
        let path = self.path(&sha);
        if path.exists() {
            return Ok(Artifact { reference, size, existed: true });
        }
        let io = |e: std::io::Error| Error::Backend(format!("writing artifact {sha}: {e}"));
        let parent = path.parent().expect("artifact path has a parent");
        std::fs::create_dir_all(parent).map_err(io)?;
        let mut tmp = tempfile_in(&self.root.join("tmp")).map_err(io)?;
        tmp.1.write_all(bytes).map_err(io)?;
        tmp.1.sync_all().map_err(io)?;
        std::fs::rename(&tmp.0, &path).map_err(io)?;
        std::fs::File::open(parent).and_then(|d| d.sync_all()).map_err(io)?;
        Ok(Artifact { reference, size, existed: false })
    }

    pub(crate) fn get(&self, sha: &str) -> Result<Option<Bytes>> {
        if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(None);
        }
        match std::fs::read(self.path(sha)) {
            Ok(data) => Ok(Some(Bytes::from(data))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::Backend(format!("reading artifact {sha}: {e}"))),
        }
    }
}

/// A new file in `dir` with a unique name.
fn tempfile_in(dir: &Path) -> std::io::Result<(PathBuf, std::fs::File)> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("{}-{n}.part", std::process::id()));
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(f) => return Ok((path, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}
