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

use super::located::{one_line, toml_error as located_toml_error, value_line};
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
    /// The oldest torch the project runs (`"2.11"`), over what its pin files say.
    pub min_torch: Option<String>,
}

/// A configuration file that was read.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub path: PathBuf,
    /// The folder paths in the file are relative to.
    pub dir: PathBuf,
    pub config: Config,
    /// The file's text, to say on which line a value the run refuses was given.
    pub text: String,
}

impl Loaded {
    /// `PATH:LINE: `key`: ` for an error about `value` given to `key`.
    fn at(&self, key: &str, value: &str) -> String {
        format!(
            "{}:{}: `{key}`",
            one_line(&self.path.display().to_string()),
            value_line(&self.text, key, value)
        )
    }
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
            "{}: no [tool.tpuport] table; add one (see docs/configuration.md) or pass another file to --config",
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
        text,
    }))
}

/// `path:line: `key`: message; what to do`.
fn toml_error(path: &Path, text: &str, e: &toml::de::Error) -> String {
    let (line, message) = located_toml_error(text, e);
    format!(
        "{}:{line}: {message}; fix the configuration (see docs/configuration.md) or pass --isolated to ignore it",
        one_line(&path.display().to_string())
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
    pub min_torch: Option<&'a str>,
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
    pub min_torch: Option<(u32, u32)>,
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
        let codes = [
            ("select", &c.select),
            ("extend-select", &c.extend_select),
            ("ignore", &c.ignore),
        ];
        for (key, list) in codes {
            for code in list.iter().flatten() {
                if !rules.rules.iter().any(|r| r.id.starts_with(code.as_str())) {
                    bail!(
                        "{}: no rule matches `{}`; run `tpuport rule --all` to list the rule ids (rules from `rules` folders count)",
                        l.at(key, code),
                        one_line(code)
                    );
                }
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
            Some(Exclude::new(&l.dir, patterns).map_err(|(p, e)| {
                anyhow::anyhow!(
                    "{}: pattern `{}`: {e}; write a gitignore-style pattern such as `build/` or `tests/fixtures/**`",
                    l.at("exclude", &p),
                    one_line(&p)
                )
            })?)
        }
        _ => None,
    };
    let min_torch = match (cli.min_torch, &c.min_torch) {
        (Some(v), _) => Some(torch_version(v).map_err(|e| anyhow::anyhow!("--min-torch: {e}"))?),
        (None, Some(v)) => Some(torch_version(v).map_err(|e| match loaded {
            Some(l) => anyhow::anyhow!("{}: {e}", l.at("min-torch", v)),
            None => anyhow::anyhow!("min-torch: {e}"),
        })?),
        (None, None) => None,
    };
    Ok(Effective {
        min_torch,
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

/// A torch version as `MAJOR.MINOR` (`2.11`, `2.11.0`, `2.11.0+cu128`).
pub fn torch_version(text: &str) -> std::result::Result<(u32, u32), String> {
    let mut parts = text.trim().split(['.', '+']);
    let (Some(Ok(major)), Some(Ok(minor))) = (
        parts.next().map(str::parse::<u32>),
        parts.next().map(str::parse::<u32>),
    ) else {
        return Err(format!(
            "`{}` is not a torch version: write the oldest torch the project runs as MAJOR.MINOR, such as 2.11",
            one_line(text)
        ));
    };
    Ok((major, minor))
}

/// The rule folders of the file (relative to its folder) and then of the command line. Only
/// the folders are listed here: loading them is the caller's. A folder the file names that is
/// not there is an error naming the file and line.
pub fn rule_dirs(loaded: Option<&Loaded>, cli: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut dirs = vec![];
    if let Some(l) = loaded {
        for r in l.config.rules.iter().flatten() {
            let dir = l.dir.join(r);
            let has_rules = std::fs::read_dir(&dir).map(|entries| {
                entries
                    .flatten()
                    .any(|e| e.path().extension().is_some_and(|x| x == "toml"))
            });
            let why = match has_rules {
                Ok(true) => None,
                Ok(false) => Some("holds no *.toml rule files"),
                Err(_) if dir.exists() => Some("is not a folder tpuport can read"),
                Err(_) => Some("is not a folder"),
            };
            if let Some(why) = why {
                let shown = r.display().to_string();
                bail!(
                    "{}: `{}` {why} ({}); give a folder of *.toml rule files, relative to the configuration's folder",
                    l.at("rules", &shown),
                    one_line(&shown),
                    one_line(&dir.display().to_string())
                );
            }
            dirs.push(dir);
        }
    }
    dirs.extend(cli.iter().cloned());
    Ok(dirs)
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
    /// The patterns, relative to `root`; the error is the pattern at fault and why.
    pub fn new(root: &Path, patterns: &[String]) -> Result<Exclude, (String, String)> {
        let root = normalize(root);
        let mut b = GitignoreBuilder::new(&root);
        for p in patterns {
            if let Err(e) = b.add_line(None, p) {
                return Err((p.clone(), one_line(&e.to_string())));
            }
        }
        let matcher = b.build().map_err(|e| {
            let first = patterns.first().cloned().unwrap_or_default();
            (first, one_line(&e.to_string()))
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
    use crate::port::test_support::write;

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
        // A value of the wrong type: the key is named, and the line.
        let p = write(
            t.path(),
            "typed/pyproject.toml",
            "[tool.tpuport]\nignore = []\nselect = \"DEV\"\n",
        );
        let e = load(&p).unwrap_err().to_string();
        assert!(
            e.contains("pyproject.toml:3: `tool.tpuport.select`: invalid type: string \"DEV\", expected a sequence"),
            "{e}"
        );
        // A bad exclude pattern: its line.
        let p = write(
            t.path(),
            "globs/tpuport.toml",
            "exclude = [\n  \"build/\",\n  \"src/{a\",\n]\n",
        );
        let l = load(&p).unwrap();
        let e = settle(Some(&l), &Overrides::default(), &RuleSet::builtin()).unwrap_err();
        assert!(
            e.to_string()
                .contains("tpuport.toml:3: `exclude`: pattern `src/{a`: "),
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
        let t = tempfile::tempdir().unwrap();
        let p = t.path();
        std::fs::create_dir(p.join("team")).unwrap();
        std::fs::write(p.join("team/TEAM.toml"), "").unwrap();
        let loaded = Loaded {
            path: p.join("pyproject.toml"),
            dir: p.to_path_buf(),
            text: "[tool.tpuport]\nignore = [\"NOPE\"]\n".into(),
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
            rule_dirs(Some(&loaded), &cli_rules).unwrap(),
            [p.join("team"), PathBuf::from("mine")]
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
        let at = format!(
            "{}:2: `ignore`: no rule matches `NOPE`",
            p.join("pyproject.toml").display()
        );
        assert!(err.to_string().contains(&at), "{err}");
        // A rule folder that is not there: the file, the line and the key.
        let gone = Loaded {
            text: "[tool.tpuport]\n\nrules = [\"gone\"]\n".into(),
            config: Config {
                rules: Some(vec!["gone".into()]),
                ..Config::default()
            },
            ..bad
        };
        let err = rule_dirs(Some(&gone), &[]).unwrap_err().to_string();
        assert!(
            err.contains("pyproject.toml:3: `rules`: `gone` is not a folder"),
            "{err}"
        );
        // A folder without rule files (found by the fuzz harness: `rules = ["/"]` was refused
        // without naming the configuration file).
        let empty = Loaded {
            config: Config {
                rules: Some(vec![".".into()]),
                ..Config::default()
            },
            text: "rules = [\".\"]\n".into(),
            ..gone
        };
        let err = rule_dirs(Some(&empty), &[]).unwrap_err().to_string();
        assert!(
            err.contains("pyproject.toml:1: `rules`: `.` holds no *.toml rule files"),
            "{err}"
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
