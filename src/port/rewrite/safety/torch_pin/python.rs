//! The Python a project's environment runs, and so the newest torch it can have. torch 2.6, the
//! first with `torch.accelerator`, needs Python 3.9: a project that runs Python 3.8 or older
//! runs a torch without it, whether or not it names torch's version (set O: a Music
//! Transformer whose requirements pin numpy 1.16.4 and a 2019 Python 3.6 stack, and name no
//! torch). Read: a package's Python minimum (`python_requires`, `requires-python`, Poetry's
//! `python`), a conda environment's `python=3.6`, a Dockerfile's `FROM python:3.7`, a
//! `.python-version`, the Pythons a CI tests (`python-version: [3.6, 3.7]`, tox's `py36`), and
//! an exact numpy pin older than the first numpy for Python 3.9 (1.19.3).

use std::sync::LazyLock;

use regex::Regex;

use super::versions::Version;

/// `python_requires=">=3.6"`, `requires-python = ">=3.8"`, `python = "^3.7"`, `- python=3.6`,
/// `FROM python:3.7-slim`: the Python version a declaration starts at.
static DECLARED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?m)(?:python_requires|requires-python|python_version)[ \t]*=[ \t]*["']?[ \t]*(>=|~=|==|\^|>)?[ \t]*(\d)\.(\d+)|^[ \t]*python[ \t]*=[ \t]*"[ \t]*(>=|~=|==|\^|~)?[ \t]*(\d)\.(\d+)|^[ \t]*-[ \t]*python[ \t]*(>=|==|=)[ \t]*(\d)\.(\d+)|(?i)^FROM[ \t]+(?:docker\.io/)?(?:library/)?python:(\d)\.(\d+)"#)
        .unwrap()
});

/// A CI's Python versions: `python-version: [3.6, "3.7"]`, `python: "3.7"`, or the key alone
/// with the versions as list items on the lines after it.
static TESTED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^[ \t]*-?[ \t]*python(?:[-_]versions?)?[ \t]*:[ \t]*([^\n]*)((?:\r?\n[ \t]*-[ \t]*[^\n]*)*)")
        .unwrap()
});

/// One Python version in a list: `3.6`, `'3.10'`.
static DOTTED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"(?:^|[\s\[,'"])(\d)\.(\d+)"#).unwrap());

/// tox's environments: `envlist = py36, py37`, `envlist = py{36,37}-torch{14,15}`.
static TOX: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?m)^envlist[ \t]*=([^\n]*)").unwrap());
static TOX_ENV: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\bpy(?:(\d)(\d+)\b|\{([\d, \t]+)\})").unwrap());

/// `numpy==1.16.4`: an exact pin of a numpy older than 1.19.3 installs on Python 3.8 at most.
static NUMPY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)(?:^|[\s\x22'])numpy[ \t]*==?[ \t]*1\.(\d+)(?:\.(\d+))?").unwrap()
});

/// The newest torch that installs on this Python (None from 3.9: torch.accelerator's own).
pub(super) fn newest_torch(python: (u32, u32)) -> Option<Version> {
    match python {
        (2, _) | (3, 0..=5) => Some((1, 4)),
        (3, 6) => Some((1, 10)),
        (3, 7) => Some((1, 13)),
        (3, 8) => Some((2, 4)),
        _ => None,
    }
}

/// The oldest Python a file of this name says the project runs, with how it says it.
fn oldest_python(text: &str, name: &str) -> Option<((u32, u32), String)> {
    let mut found: Vec<((u32, u32), String)> = vec![];
    let num = |m: Option<regex::Match>| m.and_then(|m| m.as_str().parse::<u32>().ok());
    for c in DECLARED.captures_iter(text) {
        let (op, major, minor) = match [2, 5, 8, 10].into_iter().find(|i| c.get(*i).is_some()) {
            Some(10) => (None, num(c.get(10)), num(c.get(11))),
            Some(i) => (c.get(i - 1), num(c.get(i)), num(c.get(i + 1))),
            None => continue,
        };
        let (Some(major), Some(minor)) = (major, minor) else {
            continue;
        };
        // `>3.6` starts at 3.7.
        let minor = minor + u32::from(op.is_some_and(|o| o.as_str() == ">"));
        found.push(((major, minor), format!("Python {major}.{minor}")));
    }
    if name == ".python-version" {
        let v = text.trim();
        if let Some(c) = DOTTED.captures(&format!(" {v}")) {
            found.push((
                (num(c.get(1)).unwrap_or(0), num(c.get(2)).unwrap_or(0)),
                format!("Python {v}"),
            ));
        }
    }
    for c in TESTED.captures_iter(text) {
        let values = format!("{} {}", &c[1], c.get(2).map_or("", |m| m.as_str()));
        for v in DOTTED.captures_iter(&values) {
            if let (Some(major), Some(minor)) = (num(v.get(1)), num(v.get(2))) {
                found.push(((major, minor), format!("tested on Python {major}.{minor}")));
            }
        }
    }
    if name == "tox.ini"
        && let Some(c) = TOX.captures(text)
    {
        for v in TOX_ENV.captures_iter(&c[1]) {
            let braced = v.get(3).map_or("", |m| m.as_str());
            let pairs = braced
                .split(',')
                .map(str::trim)
                .filter(|d| d.len() >= 2 && d.is_ascii())
                .map(|d| (d[..1].parse::<u32>().ok(), d[1..].parse::<u32>().ok()))
                .chain([(num(v.get(1)), num(v.get(2)))]);
            for (major, minor) in pairs {
                if let (Some(major), Some(minor)) = (major, minor) {
                    found.push(((major, minor), format!("tested on Python {major}.{minor}")));
                }
            }
        }
    }
    for c in NUMPY.captures_iter(text) {
        let (minor, patch) = (num(c.get(1)).unwrap_or(99), num(c.get(2)).unwrap_or(0));
        if minor < 19 || (minor == 19 && patch < 3) {
            let pin = c[0].trim().trim_start_matches(['"', '\'']).to_string();
            found.push(((3, 8), format!("`{pin}`, which needs Python 3.8 or older")));
        }
    }
    found
        .into_iter()
        .filter(|((m, _), _)| (2..=3).contains(m))
        .min_by_key(|(v, _)| *v)
}

/// The newest torch the Python this file names allows, where that torch has no
/// `torch.accelerator`, with how the file says so.
pub(super) fn torch_for_python(text: &str, name: &str) -> Option<(Version, String)> {
    let (python, why) = oldest_python(text, name)?;
    Some((newest_torch(python)?, why))
}

#[cfg(test)]
mod tests {
    use super::torch_for_python as t;

    #[test]
    fn the_python_a_project_runs_bounds_its_torch() {
        assert_eq!(
            t("setup(python_requires=\">=3.6\")", "setup.py"),
            Some(((1, 10), "Python 3.6".into()))
        );
        assert_eq!(
            t("[project]\nrequires-python = \">=3.8\"\n", "pyproject.toml").map(|x| x.0),
            Some((2, 4))
        );
        assert_eq!(
            t("[project]\nrequires-python = \">=3.9\"\n", "pyproject.toml"),
            None
        );
        assert_eq!(
            t(
                "[tool.poetry.dependencies]\npython = \"^3.7\"\n",
                "pyproject.toml"
            )
            .map(|x| x.0),
            Some((1, 13))
        );
        assert_eq!(
            t(
                "dependencies:\n  - python=3.6\n  - pip\n",
                "environment.yml"
            )
            .map(|x| x.0),
            Some((1, 10))
        );
        assert_eq!(
            t(
                "FROM python:3.7-slim\nRUN pip install torch\n",
                "Dockerfile"
            )
            .map(|x| x.0),
            Some((1, 13))
        );
        assert_eq!(t("FROM python:3.11\n", "Dockerfile"), None);
        assert_eq!(t("3.8.10\n", ".python-version").map(|x| x.0), Some((2, 4)));
        assert_eq!(
            t("    python-version: [3.8, \"3.10\"]\n", "ci.yml").map(|x| x.0),
            Some((2, 4))
        );
        assert_eq!(t("    python-version: ['3.10', '3.11']\n", "ci.yml"), None);
        assert_eq!(
            t("python:\n  - \"3.6\"\n  - \"3.7\"\n", ".travis.yml").map(|x| x.0),
            Some((1, 10))
        );
        assert_eq!(
            t("[tox]\nenvlist = py37, py38\n", "tox.ini").map(|x| x.0),
            Some((1, 13))
        );
        assert_eq!(
            t(
                "[tox]\nenvlist = py{38,39,310}-torch{24,26}, lint\n",
                "tox.ini"
            )
            .map(|x| x.0),
            Some((2, 4))
        );
        assert_eq!(t("[tox]\nenvlist = py{39, 310}\n", "tox.ini"), None);
        let (v, w) = t(
            "tensorboardX\nnumpy==1.16.4\nPillow==6.2.0\n",
            "requirements.txt",
        )
        .unwrap();
        assert_eq!(
            (v, w.as_str()),
            ((2, 4), "`numpy==1.16.4`, which needs Python 3.8 or older")
        );
        assert_eq!(t("numpy==1.19.5\nnumpy>=1.16\n", "requirements.txt"), None);
        // Python 2 in a CI matrix counts; a version that no Python had does not.
        assert_eq!(
            t("python-version: [2.7]\n", "ci.yml").map(|x| x.0),
            Some((1, 4))
        );
        assert_eq!(t("python-version: ${{ matrix.python }}\n", "ci.yml"), None);
    }
}
