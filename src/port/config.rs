//! Configuration files for `tpuport migrate`: `[tool.tpuport]` in `pyproject.toml`, or the top
//! level of `tpuport.toml` / `.tpuport.toml`, found like ruff finds its own: upward from the
//! first path given (one configuration for the whole run), or named with `--config`, or none
//! with `--isolated`. Command-line flags override what the file says ([`settle`]).
//!
//! Paths in the file (`rules`, `exclude`) are relative to the file's folder. Unknown keys and
//! TOML syntax errors stop the run with `FILE:LINE: what is wrong`.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use anyhow::{Result, bail};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use serde::Deserialize;

use super::rules::{RuleSet, Target};

/// The file names looked for in each folder, in this order (as ruff: `.ruff.toml`, `ruff.toml`,
/// `pyproject.toml`). A `pyproject.toml` counts only with a `[tool.tpuport]` table.
const NAMES: [&str; 3] = [".tpuport.toml", "tpuport.toml", "pyproject.toml"];

/// Largest file read when neither the command line nor the file says (megabytes).
pub const DEFAULT_MAX_FILE_SIZE_MB: u64 = 8;

/// The keys of `[tool.tpuport]`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// Rule ids or prefixes to run (default: all).
    pub select: Option<Vec<String>>,
    /// Added to `select` (useful when `select` is left at its default elsewhere).
    pub extend_select: Option<Vec<String>>,
    /// Rule ids or prefixes to skip.
    pub ignore: Option<Vec<String>>,
    /// Apply unsafe fixes too.
    pub unsafe_fixes: Option<bool>,
    /// Which machine the fixes write for: `"portable"` (the default) or `"tpu"`.
    pub to: Option<Target>,
    /// Extra rule folders, relative to the file's folder.
    pub rules: Option<Vec<PathBuf>>,
    /// Gitignore-style patterns, relative to the file's folder, of paths the walk skips.
    pub exclude: Option<Vec<String>>,
    /// Largest file read, in megabytes.
    pub max_file_size: Option<u64>,
}

/// A configuration file that was read.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub path: PathBuf,
    /// The folder paths in the file are relative to.
    pub dir: PathBuf,
    pub config: Config,
}

#[derive(Deserialize)]
struct Pyproject {
    tool: Option<Tool>,
}

#[derive(Deserialize)]
struct Tool {
    tpuport: Option<Config>,
}

/// The configuration of a run: `explicit` (`--config`) if given, none if `isolated`, else the
/// nearest file above the first of `paths`.
pub fn discover(
    explicit: Option<&Path>,
    isolated: bool,
    paths: &[PathBuf],
) -> Result<Option<Loaded>> {
    if isolated {
        return Ok(None);
    }
    if let Some(p) = explicit {
        return load(p).map(Some);
    }
    let Some(first) = paths.first() else {
        return Ok(None);
    };
    let start = normalize(first);
    let start = if start.is_dir() {
        start
    } else {
        start.parent().map(Path::to_path_buf).unwrap_or(start)
    };
    for dir in start.ancestors() {
        for name in NAMES {
            let candidate = dir.join(name);
            if candidate.is_file()
                && let Some(found) = read(&candidate, name == "pyproject.toml")?
            {
                return Ok(Some(found));
            }
        }
    }
    Ok(None)
}

/// Read the file `--config` names: a `pyproject.toml` must hold `[tool.tpuport]`; any other
/// file holds the keys at its top level.
pub fn load(path: &Path) -> Result<Loaded> {
    let is_pyproject = path.file_name().is_some_and(|n| n == "pyproject.toml");
    match read(&normalize(path), is_pyproject)? {
        Some(l) => Ok(l),
        None => bail!(
            "{}: no [tool.tpuport] table; add one (see README, \"Configuration\") or pass another file to --config",
            path.display()
        ),
    }
}

/// `None` for a `pyproject.toml` without `[tool.tpuport]`.
fn read(path: &Path, pyproject: bool) -> Result<Option<Loaded>> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        anyhow::anyhow!(
            "{}: cannot read the configuration file: {e}; check the path, or pass --isolated to ignore configuration files",
            path.display()
        )
    })?;
    let config = if pyproject {
        // Most pyproject.toml files have nothing for tpuport: skip them without a full parse.
        if !text.contains("tpuport") {
            return Ok(None);
        }
        match toml::from_str::<Pyproject>(&text) {
            Ok(p) => match p.tool.and_then(|t| t.tpuport) {
                Some(c) => c,
                None => return Ok(None),
            },
            Err(e) => bail!(toml_error(path, &text, &e)),
        }
    } else {
        toml::from_str::<Config>(&text).map_err(|e| anyhow::anyhow!(toml_error(path, &text, &e)))?
    };
    let dir = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    Ok(Some(Loaded {
        path: path.to_path_buf(),
        dir,
        config,
    }))
}

/// `path:line: message; what to do`.
fn toml_error(path: &Path, text: &str, e: &toml::de::Error) -> String {
    let line = e
        .span()
        .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
    let at = match line {
        Some(l) => format!("{}:{l}", path.display()),
        None => path.display().to_string(),
    };
    let message = e.message().trim_end().replace('\n', " ");
    format!(
        "{at}: {message}; fix the configuration (see README, \"Configuration\") or pass --isolated to ignore it"
    )
}

/// What the command line says; `None`/empty = not given.
#[derive(Debug, Default)]
pub struct Overrides<'a> {
    pub select: &'a [String],
    pub ignore: &'a [String],
    pub unsafe_fixes: Option<bool>,
    pub to: Option<Target>,
    pub max_file_size_mb: Option<u64>,
}

/// The settings of a run, the command line over the file.
#[derive(Debug, Default)]
pub struct Effective {
    pub select: Vec<String>,
    pub ignore: Vec<String>,
    pub unsafe_fixes: bool,
    pub to: Target,
    pub exclude: Option<Exclude>,
    pub max_file_size_mb: u64,
}

/// Merge the file and the command line, like ruff: `--select` on the command line replaces the
/// file's `select`, `extend-select` and `ignore` (the selection starts again); `--ignore` adds to
/// the file's `ignore`; `--unsafe-fixes`/`--no-unsafe-fixes` and `--max-file-size` win. Codes
/// the file names that match no rule of `rules` (loaded from [`rule_dirs`]) are an error
/// naming the file.
pub fn settle(loaded: Option<&Loaded>, cli: &Overrides, rules: &RuleSet) -> Result<Effective> {
    let empty = Config::default();
    let c = loaded.map_or(&empty, |l| &l.config);
    if let Some(l) = loaded {
        let codes = [&c.select, &c.extend_select, &c.ignore];
        for code in codes.into_iter().flatten().flatten() {
            if !rules.rules.iter().any(|r| r.id.starts_with(code.as_str())) {
                bail!(
                    "{}: no rule matches `{code}`; run `tpuport rule --all` to list the rule ids (rules from `rules` folders count)",
                    l.path.display()
                );
            }
        }
    }
    let (select, ignore) = if cli.select.is_empty() {
        let mut select = c.select.clone().unwrap_or_default();
        if !select.is_empty() {
            select.extend(c.extend_select.iter().flatten().cloned());
        }
        let mut ignore = c.ignore.clone().unwrap_or_default();
        ignore.extend(cli.ignore.iter().cloned());
        (select, ignore)
    } else {
        (cli.select.to_vec(), cli.ignore.to_vec())
    };
    let exclude = match (loaded, &c.exclude) {
        (Some(l), Some(patterns)) if !patterns.is_empty() => {
            Some(Exclude::new(&l.dir, patterns, &l.path)?)
        }
        _ => None,
    };
    Ok(Effective {
        select,
        ignore,
        unsafe_fixes: cli.unsafe_fixes.or(c.unsafe_fixes).unwrap_or(false),
        to: cli.to.or(c.to).unwrap_or_default(),
        exclude,
        max_file_size_mb: cli
            .max_file_size_mb
            .or(c.max_file_size)
            .unwrap_or(DEFAULT_MAX_FILE_SIZE_MB),
    })
}

/// The rule folders of the file (relative to its folder) and then of the command line. Only
/// the folders are listed here: loading them is the caller's.
pub fn rule_dirs(loaded: Option<&Loaded>, cli: &[PathBuf]) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = loaded
        .map(|l| {
            l.config
                .rules
                .iter()
                .flatten()
                .map(|r| l.dir.join(r))
                .collect()
        })
        .unwrap_or_default();
    dirs.extend(cli.iter().cloned());
    dirs
}

/// `exclude` patterns: gitignore syntax, anchored at the configuration file's folder.
#[derive(Debug, Clone)]
pub struct Exclude {
    matcher: Arc<Gitignore>,
    /// The folder the patterns are relative to, absolute and without `.`/`..`.
    root: PathBuf,
    /// The current folder, to make walked paths absolute without a system call each.
    cwd: PathBuf,
}

impl Exclude {
    pub fn new(root: &Path, patterns: &[String], file: &Path) -> Result<Exclude> {
        let root = normalize(root);
        let mut b = GitignoreBuilder::new(&root);
        for p in patterns {
            if let Err(e) = b.add_line(None, p) {
                bail!(
                    "{}: exclude pattern `{p}`: {e}; write a gitignore-style pattern such as `build/` or `tests/fixtures/**`",
                    file.display()
                );
            }
        }
        let matcher = b.build().map_err(|e| {
            anyhow::anyhow!(
                "{}: exclude patterns: {e}; fix the patterns",
                file.display()
            )
        })?;
        Ok(Exclude {
            matcher: Arc::new(matcher),
            root,
            cwd: std::env::current_dir().unwrap_or_default(),
        })
    }

    /// Whether the walk skips `path` (a folder: everything in it). Paths outside the
    /// configuration's folder are never excluded.
    pub fn excluded(&self, path: &Path, is_dir: bool) -> bool {
        let abs = if path.is_absolute() {
            normalize_lexically(path)
        } else {
            normalize_lexically(&self.cwd.join(path))
        };
        match abs.strip_prefix(&self.root) {
            Ok(rel) if !rel.as_os_str().is_empty() => self.matcher.matched(rel, is_dir).is_ignore(),
            _ => false,
        }
    }
}

/// `path` made absolute, with `.` and `..` resolved by name (not through symbolic links, so it
/// stays comparable with the paths the walk produces).
fn normalize(path: &Path) -> PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    normalize_lexically(&abs)
}

fn normalize_lexically(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn finds_the_nearest_pyproject_with_a_tpuport_table() {
        let t = tempfile::tempdir().unwrap();
        write(
            t.path(),
            "pyproject.toml",
            "[tool.tpuport]\nignore = [\"DEV\"]\n",
        );
        // A nearer pyproject.toml without the table is passed over, as ruff does.
        write(t.path(), "pkg/pyproject.toml", "[project]\nname = \"x\"\n");
        let f = write(t.path(), "pkg/src/a.py", "");
        let l = discover(None, false, &[f]).unwrap().unwrap();
        assert_eq!(l.path, normalize(&t.path().join("pyproject.toml")));
        assert_eq!(l.config.ignore, Some(vec!["DEV".to_string()]));
        assert!(
            discover(None, true, &[t.path().to_path_buf()])
                .unwrap()
                .is_none()
        );
        // tpuport.toml wins over pyproject.toml in the same folder.
        write(t.path(), "pkg/tpuport.toml", "unsafe-fixes = true\n");
        let l = discover(None, false, &[t.path().join("pkg/src")])
            .unwrap()
            .unwrap();
        assert_eq!(l.config.unsafe_fixes, Some(true));
    }

    #[test]
    fn unknown_keys_and_syntax_errors_name_the_file_and_line() {
        let t = tempfile::tempdir().unwrap();
        let p = write(
            t.path(),
            "pyproject.toml",
            "[project]\nname = \"x\"\n\n[tool.tpuport]\nselect = [\"DEV\"]\nunsafe_fixes = true\n",
        );
        let e = load(&p).unwrap_err().to_string();
        assert!(e.contains("pyproject.toml:6:"), "{e}");
        assert!(e.contains("unsafe_fixes"), "{e}");
        assert!(e.contains("unsafe-fixes"), "{e}");
        let p = write(t.path(), "tpuport.toml", "select = [\"DEV\"\n");
        let e = load(&p).unwrap_err().to_string();
        assert!(
            e.contains("tpuport.toml:1:") || e.contains("tpuport.toml:2:"),
            "{e}"
        );
        let p = write(t.path(), "other/pyproject.toml", "[tool.black]\n");
        assert!(
            load(&p)
                .unwrap_err()
                .to_string()
                .contains("no [tool.tpuport]")
        );
    }

    #[test]
    fn command_line_overrides_the_file() {
        let rules = RuleSet::builtin();
        let loaded = Loaded {
            path: PathBuf::from("/p/pyproject.toml"),
            dir: PathBuf::from("/p"),
            config: Config {
                select: Some(vec!["DEV".into(), "CUD".into()]),
                extend_select: Some(vec!["AMP".into()]),
                ignore: Some(vec!["DEV001".into()]),
                unsafe_fixes: Some(true),
                rules: Some(vec!["team".into()]),
                max_file_size: Some(2),
                ..Config::default()
            },
        };
        let e = settle(Some(&loaded), &Overrides::default(), &rules).unwrap();
        assert_eq!(e.select, ["DEV", "CUD", "AMP"]);
        assert_eq!(e.ignore, ["DEV001"]);
        assert!(e.unsafe_fixes);
        let cli_rules = [PathBuf::from("mine")];
        assert_eq!(
            rule_dirs(Some(&loaded), &cli_rules),
            [PathBuf::from("/p/team"), PathBuf::from("mine")]
        );
        assert_eq!(e.max_file_size_mb, 2);
        let ignore = ["CUD004".to_string()];
        let e = settle(
            Some(&loaded),
            &Overrides {
                ignore: &ignore,
                unsafe_fixes: Some(false),
                max_file_size_mb: Some(9),
                ..Overrides::default()
            },
            &rules,
        )
        .unwrap();
        assert_eq!(e.ignore, ["DEV001", "CUD004"]);
        assert!(!e.unsafe_fixes);
        assert_eq!(e.max_file_size_mb, 9);
        let select = ["DEV".to_string()];
        let e = settle(
            Some(&loaded),
            &Overrides {
                select: &select,
                ..Overrides::default()
            },
            &rules,
        )
        .unwrap();
        assert_eq!(e.select, ["DEV"]);
        assert!(e.ignore.is_empty());
        let bad = Loaded {
            config: Config {
                ignore: Some(vec!["NOPE".into()]),
                ..Config::default()
            },
            ..loaded
        };
        let err = settle(Some(&bad), &Overrides::default(), &rules).unwrap_err();
        assert!(
            err.to_string()
                .contains("/p/pyproject.toml: no rule matches `NOPE`")
        );
        let e = settle(None, &Overrides::default(), &rules).unwrap();
        assert_eq!(e.max_file_size_mb, DEFAULT_MAX_FILE_SIZE_MB);
        assert!(!e.unsafe_fixes && e.select.is_empty() && e.exclude.is_none());
    }

    #[test]
    fn exclude_patterns_are_relative_to_the_file() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        let ex = Exclude::new(
            root,
            &["build/".into(), "tests/fixtures".into(), "*_pb2.py".into()],
            &root.join("pyproject.toml"),
        )
        .unwrap();
        assert!(ex.excluded(&root.join("build"), true));
        assert!(ex.excluded(&root.join("src/build"), true));
        assert!(!ex.excluded(&root.join("build"), false));
        assert!(ex.excluded(&root.join("tests/fixtures"), true));
        assert!(!ex.excluded(&root.join("src/tests/fixtures"), true));
        assert!(ex.excluded(&root.join("src/x_pb2.py"), false));
        assert!(!ex.excluded(&root.join("src/x.py"), false));
        assert!(ex.excluded(&root.join("src/../build"), true));
        // Outside the file's folder nothing is excluded.
        assert!(!ex.excluded(Path::new("/elsewhere/build"), true));
    }
}
