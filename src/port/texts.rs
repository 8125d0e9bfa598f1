//! The texts of the files a run reads, each read once: the migration of a file, and every fact
//! the program model keeps about it (is it an entry script, what it imports, does it build a
//! network, does it import Triton), read the same text. On transformers' 2,860 files each was
//! opened four to six times before. A text is read again where the file changed (its
//! modification time or length), so a long-lived process (`migrate --watch`, the tests) never
//! sees a stale one. Texts are kept up to [`BUDGET`] bytes in all; past it, files are read as
//! they are asked for.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::SystemTime;

/// A file's modification time and length: a text or fact kept about it is stale when these
/// change. None where the file cannot be asked about.
pub type Stamp = Option<(SystemTime, u64)>;

pub fn stamp(path: &Path) -> Stamp {
    stamp_of(&std::fs::metadata(path).ok()?)
}

/// [`stamp`] from metadata already asked for.
pub fn stamp_of(m: &std::fs::Metadata) -> Stamp {
    Some((m.modified().ok()?, m.len()))
}

/// How many bytes of text are kept at most.
pub const BUDGET: usize = 512 << 20;

type Texts = LazyLock<Mutex<HashMap<PathBuf, (Stamp, Arc<str>)>>>;
static TEXTS: Texts = LazyLock::new(Default::default);
static KEPT_BYTES: AtomicUsize = AtomicUsize::new(0);

/// The UTF-8 text of the file at `path`, as of `now` (its [`stamp`]); None where it cannot be
/// read as UTF-8.
pub fn text_at(path: &Path, now: Stamp) -> Option<Arc<str>> {
    now?;
    if let Some((at, text)) = TEXTS.lock().ok().and_then(|t| t.get(path).cloned())
        && at == now
    {
        return Some(text);
    }
    let text: Arc<str> = std::fs::read_to_string(path).ok()?.into();
    if KEPT_BYTES.fetch_add(text.len(), Ordering::Relaxed) + text.len() <= BUDGET {
        if let Ok(mut t) = TEXTS.lock()
            && let Some((_, old)) = t.insert(path.to_path_buf(), (now, text.clone()))
        {
            // A changed file's old text is no longer kept.
            KEPT_BYTES.fetch_sub(old.len(), Ordering::Relaxed);
        }
    } else {
        KEPT_BYTES.fetch_sub(text.len(), Ordering::Relaxed);
    }
    Some(text)
}

/// [`text_at`] the file as it is now.
pub fn text(path: &Path) -> Option<Arc<str>> {
    text_at(path, stamp(path))
}

/// The kept text of the file at `path` if it has not changed since (`now`), without reading it.
pub fn kept(path: &Path, now: Stamp) -> Option<Arc<str>> {
    now?;
    let t = TEXTS.lock().ok()?;
    let (at, text) = t.get(path)?;
    (*at == now).then(|| text.clone())
}

/// A text's length and a 64-bit hash of it: the key of an answer kept for a text, whichever
/// file or form it was read from (a module as read, then from disk by another module's
/// question; a ported text gets another).
pub fn fingerprint(text: &str) -> (usize, u64) {
    use std::hash::BuildHasher;
    let hash = std::hash::BuildHasherDefault::<rustc_hash::FxHasher>::default().hash_one(text);
    (text.len(), hash)
}

/// Forget the texts (the start of a run).
pub fn forget() {
    if let Ok(mut t) = TEXTS.lock() {
        t.clear();
        KEPT_BYTES.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_file_is_read_again() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m.py");
        std::fs::write(&p, "a = 1\n").unwrap();
        assert_eq!(text(&p).as_deref(), Some("a = 1\n"));
        assert_eq!(kept(&p, stamp(&p)).as_deref(), Some("a = 1\n"));
        // Another length: a new stamp, whatever the clock's resolution.
        std::fs::write(&p, "a = 22\n").unwrap();
        assert_eq!(kept(&p, stamp(&p)), None);
        assert_eq!(text(&p).as_deref(), Some("a = 22\n"));
        assert_eq!(text(&d.path().join("gone.py")), None);
        std::fs::write(&p, b"\xff\xfe").unwrap();
        assert_eq!(text(&p), None, "not UTF-8");
    }
}
