//! `--capture-dir`: save every extender request body, byte for byte, as `DIR/<verb>-<n>.json`.
//!
//! The golden fixtures under `tests/golden/` should be what a real kube-scheduler sends, not
//! what we think it sends. The end-to-end harness runs Gangplank with this switch and copies
//! the files. `n` counts across all verbs (so the files also tell the order of the calls) and
//! continues after the highest number already in the directory, so a restart does not
//! overwrite earlier captures.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::Bytes;

use super::{Error, Verb};

pub struct Capture {
    dir: PathBuf,
    next: AtomicU64,
}

impl Capture {
    /// Creates `dir` if needed and finds where numbering continues.
    pub fn open(dir: impl Into<PathBuf>) -> std::io::Result<Self> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir)?;
        let mut highest = 0;
        for entry in std::fs::read_dir(&dir)? {
            if let Some(n) = sequence_number(&entry?.path()) {
                highest = highest.max(n);
            }
        }
        Ok(Self {
            dir,
            next: AtomicU64::new(highest + 1),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes one request body; returns the file written.
    pub async fn save(&self, verb: Verb, body: Bytes) -> Result<PathBuf, Error> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.join(format!("{verb}-{n}.json"));
        let target = path.clone();
        let written = tokio::task::spawn_blocking(move || std::fs::write(&target, &body))
            .await
            .unwrap_or_else(|join| Err(std::io::Error::other(join)));
        written.map_err(|why| Error::Capture {
            verb,
            path: path.clone(),
            why,
        })?;
        Ok(path)
    }
}

/// `filter-12.json` -> 12, for any verb; `None` for other files.
fn sequence_number(path: &Path) -> Option<u64> {
    let stem = path.file_name()?.to_str()?.strip_suffix(".json")?;
    let (verb, n) = stem.rsplit_once('-')?;
    if !Verb::ALL.iter().any(|v| v.as_str() == verb) {
        return None;
    }
    n.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_capture_files_count_towards_numbering() {
        assert_eq!(sequence_number(Path::new("/d/filter-12.json")), Some(12));
        assert_eq!(sequence_number(Path::new("/d/bind-3.json")), Some(3));
        assert_eq!(sequence_number(Path::new("/d/notes-99.json")), None);
        assert_eq!(sequence_number(Path::new("/d/filter-x.json")), None);
        assert_eq!(sequence_number(Path::new("/d/filter-1.txt")), None);
    }

    #[tokio::test]
    async fn bodies_are_saved_verbatim_and_numbering_continues_after_a_restart() {
        let dir = std::env::temp_dir().join(format!("gangplank-capture-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);

        let capture = Capture::open(&dir).unwrap();
        let first = capture
            .save(Verb::Filter, Bytes::from_static(b"{\"Pod\":{}}"))
            .await
            .unwrap();
        let second = capture
            .save(Verb::Bind, Bytes::from_static(b"{}"))
            .await
            .unwrap();
        assert_eq!(first, dir.join("filter-1.json"));
        assert_eq!(second, dir.join("bind-2.json"));
        assert_eq!(std::fs::read(&first).unwrap(), b"{\"Pod\":{}}");

        let restarted = Capture::open(&dir).unwrap();
        let third = restarted
            .save(Verb::Preempt, Bytes::from_static(b"{}"))
            .await
            .unwrap();
        assert_eq!(third, dir.join("preempt-3.json"));

        std::fs::remove_dir_all(&dir).unwrap();
    }
}
