//! The copies `tpuport check` works on: the script's folder copied twice (the original as
//! written, and the one the port rewrites), so the user's files are never written. Large files
//! (datasets, checkpoints) are linked instead of copied; tool and version-control folders are
//! left out.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Files above this size are symlinked, not copied.
pub const COPY_LIMIT: u64 = 16 << 20;
/// Folders never copied.
const SKIP: &[&str] = &[
    ".git",
    ".hg",
    "__pycache__",
    ".venv",
    "venv",
    "node_modules",
    ".tox",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    "runs",
];

/// Copy `from` (a folder) to `to` (created), leaving out `exclude` (the report folder, when it
/// lies inside); returns the number of files copied and linked.
pub fn copy_tree(from: &Path, to: &Path, exclude: &[PathBuf]) -> Result<(usize, usize)> {
    fs::create_dir_all(to).with_context(|| format!("cannot create {}", to.display()))?;
    let mut counts = (0, 0);
    let mut exclude: Vec<PathBuf> = exclude
        .iter()
        .map(|p| fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
        .collect();
    exclude.push(fs::canonicalize(to)?);
    copy_into(from, to, &exclude, &mut counts)?;
    Ok(counts)
}

fn copy_into(
    from: &Path,
    to: &Path,
    exclude: &[PathBuf],
    counts: &mut (usize, usize),
) -> Result<()> {
    let entries =
        fs::read_dir(from).with_context(|| format!("cannot read the folder {}", from.display()))?;
    for e in entries {
        let e = e?;
        let name = e.file_name();
        let src = e.path();
        let dst = to.join(&name);
        let kind = e.file_type()?;
        if kind.is_dir() {
            let canonical = fs::canonicalize(&src).unwrap_or_else(|_| src.clone());
            if SKIP.iter().any(|s| name == *s) || exclude.contains(&canonical) {
                continue;
            }
            fs::create_dir_all(&dst)?;
            copy_into(&src, &dst, exclude, counts)?;
        } else if kind.is_file() {
            let size = e.metadata()?.len();
            if size > COPY_LIMIT {
                link(&src, &dst)?;
                counts.1 += 1;
            } else {
                fs::copy(&src, &dst).with_context(|| {
                    format!("cannot copy {} to {}", src.display(), dst.display())
                })?;
                counts.0 += 1;
            }
        } else if kind.is_symlink() {
            let target = fs::read_link(&src)?;
            let absolute = if target.is_absolute() {
                target
            } else {
                from.join(target)
            };
            link(&absolute, &dst)?;
            counts.1 += 1;
        }
    }
    Ok(())
}

fn link(src: &Path, dst: &Path) -> Result<()> {
    let src = fs::canonicalize(src).unwrap_or_else(|_| src.to_path_buf());
    #[cfg(unix)]
    std::os::unix::fs::symlink(&src, dst)
        .with_context(|| format!("cannot link {} to {}", dst.display(), src.display()))?;
    #[cfg(not(unix))]
    fs::copy(&src, dst)?;
    Ok(())
}

/// The folder a check copies: the script's own.
pub fn script_folder(script: &Path) -> Result<(PathBuf, PathBuf)> {
    let script = fs::canonicalize(script).with_context(|| {
        format!(
            "{}: no such script; pass the path of a Python file (and its arguments after `--`)",
            script.display()
        )
    })?;
    let folder = script
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/"));
    let name = PathBuf::from(script.file_name().unwrap_or_default());
    Ok((folder, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_sources_links_big_files_and_skips_tool_folders() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("proj");
        fs::create_dir_all(src.join("pkg")).unwrap();
        fs::create_dir_all(src.join(".git")).unwrap();
        fs::write(src.join("train.py"), "print(1)\n").unwrap();
        fs::write(src.join("pkg/model.py"), "x = 1\n").unwrap();
        fs::write(src.join(".git/HEAD"), "ref").unwrap();
        let big = fs::File::create(src.join("data.bin")).unwrap();
        big.set_len(COPY_LIMIT + 1).unwrap();
        let dst = d.path().join("copy");
        let report = src.join("report");
        fs::create_dir_all(&report).unwrap();
        fs::write(report.join("old.md"), "x").unwrap();
        let (copied, linked) = copy_tree(&src, &dst, &[report]).unwrap();
        assert_eq!((copied, linked), (2, 1));
        assert_eq!(
            fs::read_to_string(dst.join("pkg/model.py")).unwrap(),
            "x = 1\n"
        );
        assert!(!dst.join(".git").exists() && !dst.join("report").exists());
        assert!(
            fs::symlink_metadata(dst.join("data.bin"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }
}
