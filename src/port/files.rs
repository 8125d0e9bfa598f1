//! Files in and out: finding Python files (respecting .gitignore), reading them with clear
//! errors for bad input, and writing results atomically.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use ignore::WalkBuilder;

/// A problem with one input file; the run goes on with the others and exits 2.
#[derive(Debug, Clone)]
pub struct FileIssue {
    pub path: PathBuf,
    /// `line:col` where known.
    pub location: Option<String>,
    pub message: String,
}

impl std::fmt::Display for FileIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.location {
            Some(loc) => write!(f, "{}:{loc}: {}", self.path.display(), self.message),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

fn issue(path: &Path, message: impl Into<String>) -> FileIssue {
    FileIssue {
        path: path.to_path_buf(),
        location: None,
        message: message.into(),
    }
}

/// What [`discover`] found.
#[derive(Debug, Default)]
pub struct Discovered {
    /// Python files and Jupyter notebooks (`.ipynb`), sorted, without duplicates.
    pub files: Vec<PathBuf>,
    /// Errors: the run exits 2.
    pub issues: Vec<FileIssue>,
    /// Warnings (a dangling symbolic link in a walked folder): reported, exit code unaffected.
    pub warnings: Vec<FileIssue>,
    /// Hidden folders skipped while walking (`notebooks/.archive/`) that hold Python files or
    /// notebooks, with how many (at most [`HIDDEN_COUNT_CAP`]): the summary says so, since a
    /// training script there is not ported and nothing else would tell.
    pub hidden: Vec<(PathBuf, usize)>,
    /// A `.gitignore` or `.ignore` was met in a walked folder (its rules may have hidden
    /// project modules: `port::ignored`).
    pub ignore_files: bool,
}

/// How many files of one hidden folder are counted.
pub const HIDDEN_COUNT_CAP: usize = 1000;

/// Hidden folders of tools and environments, never counted: no project code lives there.
const TOOL_FOLDERS: [&str; 14] = [
    ".git",
    ".hg",
    ".svn",
    ".venv",
    ".env",
    ".tox",
    ".nox",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".ipynb_checkpoints",
    ".idea",
    ".vscode",
    ".cache",
];

/// The Python files and notebooks under the hidden folder `dir` (.gitignore honoured), at most
/// [`HIDDEN_COUNT_CAP`].
fn python_files_in(dir: &Path) -> usize {
    WalkBuilder::new(dir)
        .require_git(false)
        .hidden(false)
        .build()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_type().is_some_and(|t| t.is_file())
                && e.path()
                    .extension()
                    .is_some_and(|x| x == "py" || x == "ipynb")
        })
        .take(HIDDEN_COUNT_CAP)
        .count()
}

/// Expand the command-line paths into Python files, in a stable order.
/// Directories are walked with .gitignore/.ignore rules and hidden files skipped (unless
/// `no_ignore`); a file named explicitly is always taken.
pub fn discover(paths: &[PathBuf], no_ignore: bool) -> Discovered {
    discover_with(paths, no_ignore, None)
}

/// [`discover`], skipping what the configuration's `exclude` patterns match while walking
/// folders (a path named on the command line is still taken, as with ruff).
pub fn discover_with(
    paths: &[PathBuf],
    no_ignore: bool,
    exclude: Option<&crate::port::config::Exclude>,
) -> Discovered {
    let mut files = vec![];
    let mut issues = vec![];
    let mut warnings = vec![];
    let mut hidden = vec![];
    let ignore_files = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for p in paths {
        match fs::metadata(p) {
            Err(e) => {
                issues.push(issue(p, describe_io(&e, "cannot open")));
                continue;
            }
            Ok(m) if m.is_file() => {
                files.push(p.clone());
                continue;
            }
            Ok(m) if !m.is_dir() => {
                issues.push(issue(
                    p,
                    "not a regular file or folder; pass .py files or folders",
                ));
                continue;
            }
            Ok(_) => {}
        }
        // Hidden entries are skipped here rather than by the walker, so that the hidden folders
        // holding Python code can be named in the summary.
        let skipped_hidden = std::sync::Arc::new(std::sync::Mutex::new(Vec::<PathBuf>::new()));
        let walker = WalkBuilder::new(p)
            .follow_links(true)
            .require_git(false)
            .standard_filters(!no_ignore)
            .hidden(false)
            .filter_entry({
                let exclude = exclude.cloned();
                let skipped_hidden = skipped_hidden.clone();
                let ignore_files = ignore_files.clone();
                move |e| {
                    let dir = || e.file_type().is_some_and(|t| t.is_dir());
                    if e.depth() == 0 {
                        return true;
                    }
                    let name = e.file_name().to_string_lossy();
                    if !no_ignore && name.starts_with('.') {
                        if name == ".gitignore" || name == ".ignore" {
                            ignore_files.store(true, std::sync::atomic::Ordering::Relaxed);
                        }
                        if dir()
                            && !TOOL_FOLDERS.contains(&name.as_ref())
                            && let Ok(mut h) = skipped_hidden.lock()
                        {
                            h.push(e.path().to_path_buf());
                        }
                        return false;
                    }
                    exclude
                        .as_ref()
                        .is_none_or(|x| !x.excluded(e.path(), dir()))
                }
            })
            .build();
        for entry in walker {
            match entry {
                Ok(e) => {
                    let is_py = e
                        .path()
                        .extension()
                        .is_some_and(|x| x == "py" || x == "ipynb");
                    if is_py && e.file_type().is_some_and(|t| t.is_file()) {
                        files.push(e.into_path());
                    }
                }
                Err(err) => {
                    let i = walk_issue(p, err);
                    match dangling_link(&i.path) {
                        Some(target) => warnings.push(issue(
                            &i.path,
                            format!(
                                "dangling symbolic link (its target {} does not exist); skipped",
                                target.display()
                            ),
                        )),
                        None => issues.push(i),
                    }
                }
            }
        }
        let dirs = skipped_hidden.lock().map(|h| h.clone()).unwrap_or_default();
        for d in dirs {
            let n = python_files_in(&d);
            if n > 0 {
                hidden.push((d, n));
            }
        }
    }
    files.sort();
    files.dedup();
    hidden.sort();
    Discovered {
        files,
        issues,
        warnings,
        hidden,
        ignore_files: ignore_files.load(std::sync::atomic::Ordering::Relaxed),
    }
}

/// The target of `path` if it is a symbolic link whose target does not exist.
fn dangling_link(path: &Path) -> Option<PathBuf> {
    let meta = fs::symlink_metadata(path).ok()?;
    if !meta.file_type().is_symlink() {
        return None;
    }
    match fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => fs::read_link(path).ok(),
        _ => None,
    }
}

fn walk_issue(root: &Path, err: ignore::Error) -> FileIssue {
    let mut path = root.to_path_buf();
    let mut e = &err;
    loop {
        match e {
            ignore::Error::WithPath { path: p, err } => {
                path = p.clone();
                e = err;
            }
            ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
                e = err
            }
            ignore::Error::Loop { child, ancestor } => {
                return issue(
                    child,
                    format!(
                        "symbolic link loop (points back to {}); remove the link or exclude it in .gitignore",
                        ancestor.display()
                    ),
                );
            }
            ignore::Error::Io(io) => return issue(&path, describe_io(io, "cannot read")),
            other => return issue(&path, format!("{other}")),
        }
    }
}

fn describe_io(e: &std::io::Error, what: &str) -> String {
    use std::io::ErrorKind::*;
    let text = e.to_string();
    if e.raw_os_error() == Some(40) || text.contains("os error 40") {
        return format!(
            "{what}: symbolic link loop (too many levels of symbolic links); fix or remove the link"
        );
    }
    let hint = match e.kind() {
        NotFound => "check the path",
        PermissionDenied => "check the file's permissions",
        _ => "check that the path is readable",
    };
    format!("{what}: {text}; {hint}")
}

/// A readable UTF-8 Python source.
pub struct Source {
    /// The text without a leading BOM.
    pub text: String,
    pub bom: bool,
}

/// Read a file, refusing what is not UTF-8 Python text, with a message that says what to do.
pub fn read_source(path: &Path, max_bytes: u64) -> Result<Source, FileIssue> {
    let meta = fs::metadata(path).map_err(|e| issue(path, describe_io(&e, "cannot open")))?;
    if meta.len() > max_bytes {
        return Err(issue(
            path,
            format!(
                "file is {} MB, over the {} MB limit; it is probably generated or data: exclude it, or raise the limit with --max-file-size",
                meta.len() / 1_000_000,
                max_bytes / 1_000_000
            ),
        ));
    }
    // The text the program model read already (`texts`), where the file is unchanged.
    if let Some(text) = super::texts::kept(path, super::texts::stamp_of(&meta)) {
        // Valid UTF-8 already: only a NUL byte and a BOM are left to ask about.
        if memchr::memchr(0, text.as_bytes()).is_none() {
            let (bom, body) = match text.strip_prefix('\u{feff}') {
                Some(rest) => (true, rest),
                None => (false, &*text),
            };
            let text = body.to_string();
            return Ok(Source { text, bom });
        }
        return decode_source(path, text.as_bytes().to_vec());
    }
    let bytes = fs::read(path).map_err(|e| issue(path, describe_io(&e, "cannot read")))?;
    decode_source(path, bytes)
}

/// The text of a file's bytes, refusing what is not UTF-8 Python text (a NUL byte, invalid
/// UTF-8) with the place and what to do; a leading BOM is taken off and remembered.
pub fn decode_source(path: &Path, bytes: Vec<u8>) -> Result<Source, FileIssue> {
    if let Some(pos) = memchr::memchr(0, &bytes) {
        let (l, c) = line_col_bytes(&bytes, pos);
        return Err(FileIssue {
            path: path.to_path_buf(),
            location: Some(format!("{l}:{c}")),
            message: "binary file (contains a NUL byte), not Python source; exclude it".into(),
        });
    }
    let (bom, body) = match bytes.strip_prefix(b"\xEF\xBB\xBF") {
        Some(rest) => (true, rest.to_vec()),
        None => (false, bytes),
    };
    match String::from_utf8(body) {
        Ok(text) => Ok(Source { text, bom }),
        Err(e) => {
            let pos = e.utf8_error().valid_up_to();
            let (l, c) = line_col_bytes(e.as_bytes(), pos);
            Err(FileIssue {
                path: path.to_path_buf(),
                location: Some(format!("{l}:{c}")),
                message:
                    "not valid UTF-8; re-encode the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)"
                        .into(),
            })
        }
    }
}

fn line_col_bytes(bytes: &[u8], pos: usize) -> (usize, usize) {
    let before = &bytes[..pos];
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let start = before
        .iter()
        .rposition(|b| *b == b'\n')
        .map(|i| i + 1)
        .unwrap_or(0);
    let col = String::from_utf8_lossy(&before[start..]).chars().count() + 1;
    (line, col)
}

/// Write `contents` to `path` atomically: a temporary file in the same folder, the original's
/// permissions, then a rename. The original is never half-written.
pub fn write_atomic(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let perms = fs::metadata(path)?.permissions();
    let mut tmp = tempfile::Builder::new()
        .prefix(".tpuport-")
        .suffix(".tmp")
        .tempfile_in(dir)?;
    tmp.write_all(contents)?;
    tmp.as_file().sync_all()?;
    fs::set_permissions(tmp.path(), perms)?;
    // Write through a symlink to its target rather than replacing the link.
    let target = fs::canonicalize(path)?;
    tmp.persist(&target).map_err(|e| e.error)?;
    Ok(())
}

/// Does the text break lines with lone carriage returns (classic Mac)? Python reads them as new
/// lines; the fixes' line arithmetic reads none (a fuzz case lost the lines after a comment), so
/// such a file is refused.
pub fn lone_carriage_returns(text: &str) -> bool {
    text.split('\r')
        .skip(1)
        .any(|after| !after.starts_with('\n'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_folders_with_python_code_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for f in [
            "train.py",
            "notebooks/.archive/old.ipynb",
            "notebooks/.archive/run.py",
            ".git/hooks/x.py",
            ".hidden.py",
        ] {
            let p = root.join(f);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, "import torch\n").unwrap();
        }
        let found = discover(&[root.to_path_buf()], false);
        assert_eq!(found.files, vec![root.join("train.py")]);
        assert_eq!(found.hidden, vec![(root.join("notebooks/.archive"), 2)]);
        // --no-ignore takes them, and names nothing.
        let all = discover(&[root.to_path_buf()], true);
        assert_eq!(all.files.len(), 5);
        assert!(all.hidden.is_empty());
    }

    #[test]
    fn bad_inputs_are_explained() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("a.py");
        fs::write(&bin, b"x = 1\ny\x00z\n").unwrap();
        let e = read_source(&bin, 1 << 20).err().unwrap();
        assert_eq!(e.location.as_deref(), Some("2:2"));
        assert!(e.message.contains("NUL"));

        let latin = dir.path().join("b.py");
        fs::write(&latin, b"# caf\xe9\n").unwrap();
        let e = read_source(&latin, 1 << 20).err().unwrap();
        assert_eq!(e.location.as_deref(), Some("1:6"));
        assert!(e.message.contains("UTF-8"));

        let big = dir.path().join("c.py");
        fs::write(&big, vec![b'#'; 2000]).unwrap();
        assert!(
            read_source(&big, 1000)
                .err()
                .unwrap()
                .message
                .contains("--max-file-size")
        );

        let bom = dir.path().join("d.py");
        fs::write(&bom, b"\xEF\xBB\xBFx = 1\n").unwrap();
        let s = read_source(&bom, 1 << 20).unwrap();
        assert!(s.bom);
        assert_eq!(s.text, "x = 1\n");
    }

    #[cfg(unix)]
    #[test]
    fn a_dangling_link_in_a_folder_is_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.py"), "x = 1\n").unwrap();
        std::os::unix::fs::symlink("gone.py", dir.path().join("b.py")).unwrap();
        let found = discover(&[dir.path().to_path_buf()], false);
        assert_eq!(found.files, vec![dir.path().join("a.py")]);
        assert!(found.issues.is_empty(), "{:?}", found.issues);
        assert_eq!(found.warnings.len(), 1);
        assert_eq!(found.warnings[0].path, dir.path().join("b.py"));
        assert!(found.warnings[0].message.contains("gone.py"));
    }

    #[cfg(unix)]
    #[test]
    fn atomic_write_keeps_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("run.py");
        fs::write(&f, "old").unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o750)).unwrap();
        write_atomic(&f, b"new").unwrap();
        assert_eq!(fs::read_to_string(&f).unwrap(), "new");
        assert_eq!(
            fs::metadata(&f).unwrap().permissions().mode() & 0o777,
            0o750
        );
        let leftovers: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1);
    }
}
