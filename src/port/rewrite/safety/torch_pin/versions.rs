//! Reading the torch versions a text names: requirement specifiers, lock files, prose in a
//! README or a conda/Docker spelling, CI matrices.

use std::sync::LazyLock;

use regex::Regex;

/// A (major, minor) torch version.
pub(super) type Version = (u32, u32);

/// A torch requirement with its specifiers: `torch==2.4.0`, `torch>=2.1,<2.5`, `"torch~=2.4.1"`
/// (not `torchvision==`).
static REQUIREMENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?m)(?:^|[\s"'\[,(])torch[ \t]*((?:[<>=!~]=?[ \t]*[\w.*+]+[ \t]*,?[ \t]*)+)"#)
        .unwrap()
});

/// One specifier: `==2.4.0`, `~=2.4.1`, `<=2.7.1`, `<2.5`, `>=2.0`, `>1.13`, `>=2` (a bare
/// major is its `.0`: set M's torchgeo declares `torch>=2`).
static SPECIFIER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(==|~=|<=|<|>=|>)[ \t]*v?(\d+)(?:\.(\d+)(\.\d+)?)?").unwrap());

/// A torch version a Pipfile or a lock file pins: `torch = "==1.13.0"` or `torch = {version =
/// "==1.13.0", ...}` (Pipfile), `"torch": {..., "version": "==1.13.0"}` (Pipfile.lock), `name =
/// "torch"` then `version = "2.1.0"` (poetry.lock, uv.lock, pdm.lock). Set N: a project pinning
/// torch 1.13.0 in its Pipfile.lock only.
static LOCKED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?m)^torch[ \t]*=[ \t]*(?:"([^"]*)"|\{[^}\n]*version[ \t]*=[ \t]*"([^"]*)")|"torch":[ \t]*\{[^}]*?"version":[ \t]*"([^"]+)"|^name[ \t]*=[ \t]*"torch"[ \t]*\r?\nversion[ \t]*=[ \t]*"([^"]+)""#,
    )
    .unwrap()
});

/// A torch version said in prose or a conda or Docker spelling: "PyTorch 1.12+", "torch >=
/// 1.6", "Pytorch 1.2.0", "PyTorch>=1.8", "PyTorch-1.4.0" and "PyTorch版本：1.4" (set O: a
/// Chinese README), "install pytorch (I worked with 1.9)" (set P: a few words between, on the
/// same line), `- pytorch=1.13.1`, `pytorch/pytorch:1.13.1-cuda11.6`
/// (not "torchvision 0.8", not "torch.compile", not "segmentation-models-pytorch>=0.3.4").
static PROSE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:^|[^\w.-])(?:py)?torch(?:[ \t]*(?:version[ \t]*|版本[ \t]*)?(>=|==|~=|<=|<|>|=|:|：|-)?[ \t]*|[ \t(:,][^\n\d.]{0,29}?)v?(\d+)\.(\d+)")
        .unwrap()
});

/// A CI matrix's torch versions: `torch-version: [1.13.1, 2.0.0]`, `- torch: "1.13"`, or the
/// key alone with the versions as list items on the lines after it.
static MATRIX: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?im)^[ \t]*-?[ \t]*(?:py)?torch[-_]?(?:versions?)?[ \t]*:[ \t]*([^\n]*)((?:\r?\n[ \t]*-[ \t]*[^\n]*)*)")
        .unwrap()
});

/// One version in a matrix value: `1.13.1`, `'2.0'`.
static DOTTED: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?:^|[^\w.])(\d+)\.(\d+)").unwrap());

/// The oldest torch one text allows where it names a version: an exact pin, a lower bound, or a
/// cap (everything below a cap is allowed, so a cap below a form's torch is too old already).
pub(super) fn oldest_in(text: &str) -> Option<Version> {
    REQUIREMENT
        .captures_iter(text)
        .flat_map(|r| {
            r[1].split(',')
                .filter_map(|spec| {
                    let c = SPECIFIER.captures(spec.trim())?;
                    let major = c[2].parse::<u32>().ok()?;
                    let minor = c
                        .get(3)
                        .map_or(Some(0), |m| m.as_str().parse::<u32>().ok())?;
                    match &c[1] {
                        // `<3` allows 2.x: any torch 2 form may be too new.
                        "<" if c.get(3).is_none() => Some((major.checked_sub(1)?, 0)),
                        // `<2.0` allows the last 1.x.
                        "<" if minor == 0
                            && c.get(4)
                                .is_none_or(|p| p.as_str().trim_matches(['.', '0']).is_empty()) =>
                        {
                            Some((major.checked_sub(1)?, if major == 2 { 13 } else { 0 }))
                        }
                        "<" if c
                            .get(4)
                            .is_none_or(|p| p.as_str().trim_matches(['.', '0']).is_empty()) =>
                        {
                            Some((major, minor.checked_sub(1)?))
                        }
                        _ => Some((major, minor)),
                    }
                })
                .collect::<Vec<_>>()
        })
        .min()
}

/// A requirement of a package released in step with torch: `torchvision==0.15.2`,
/// `torchaudio>=0.13`, `torchtext` (set R: a translation project naming torchtext and no torch).
static COMPANION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?m)(?:^|[\s"'\[,(])(torchvision|torchaudio|torchtext)(?-u:\b)[ \t]*((?:[<>=!~]=?[ \t]*[\w.*+]+[ \t]*,?[ \t]*)*)"#)
        .unwrap()
});

/// The torch a release of a companion package was built for.
fn torch_of(package: &str, (major, minor): Version) -> Option<Version> {
    match (package, major, minor) {
        ("torchvision" | "torchtext", 0, 15..) => Some((2, minor - 15)),
        ("torchvision" | "torchtext", 0, 6..=14) => Some((1, minor - 1)),
        ("torchaudio", 0, 4..=13) => Some((1, minor)),
        ("torchaudio", 2, _) => Some((2, minor)),
        // Older still: a torch before 1.x's accelerator-free forms differ in nothing here.
        ("torchvision" | "torchtext" | "torchaudio", 0, _) => Some((1, 0)),
        _ => None,
    }
}

/// The oldest torch the companion packages a text requires allow: each specifier read as the
/// torch its version was built for; torchtext without a version is its last release's, torch
/// 2.3 (its development ended there).
pub(super) fn companions_in(text: &str) -> Option<Version> {
    COMPANION
        .captures_iter(text)
        .flat_map(|c| {
            let package = c[1].to_string();
            let specs = c[2].trim();
            if specs.is_empty() || specs.starts_with("==*") {
                return vec![(package == "torchtext").then_some((2, 3))];
            }
            specs
                .split(',')
                .map(|spec| {
                    let s = SPECIFIER.captures(spec.trim())?;
                    let version = (
                        s[2].parse::<u32>().ok()?,
                        s.get(3)
                            .map_or(Some(0), |m| m.as_str().parse::<u32>().ok())?,
                    );
                    let (tmaj, tmin) = torch_of(&package, version)?;
                    oldest_in(&format!("torch{}{tmaj}.{tmin}", &s[1]))
                })
                .collect()
        })
        .flatten()
        .min()
}

/// The oldest torch a README's prose names (see [`PROSE`]).
pub(super) fn said_in(text: &str) -> Option<Version> {
    PROSE
        .captures_iter(text)
        .filter_map(|c| {
            let major = c[2].parse::<u32>().ok().filter(|m| *m <= 2)?;
            let op = c.get(1).map_or("==", |o| o.as_str());
            let op = if matches!(op, "=" | ":" | "：" | "-") {
                "=="
            } else {
                op
            };
            oldest_in(&format!("torch{op}{major}.{}", &c[3]))
        })
        .min()
}

/// The oldest torch a CI matrix tests (see [`MATRIX`]).
pub(super) fn tested_in(text: &str) -> Option<Version> {
    MATRIX
        .captures_iter(text)
        .flat_map(|c| {
            let values = format!("{} {}", &c[1], c.get(2).map_or("", |m| m.as_str()));
            DOTTED
                .captures_iter(&values)
                .filter_map(|v| Some((v[1].parse::<u32>().ok()?, v[2].parse::<u32>().ok()?)))
                .filter(|(major, _)| *major <= 2)
                .collect::<Vec<_>>()
        })
        .min()
}

/// The oldest torch a Pipfile or lock file's [`LOCKED`] entries allow.
pub(super) fn locked_in(text: &str) -> Option<Version> {
    LOCKED
        .captures_iter(text)
        .filter_map(|c| {
            let spec = (1..=4).find_map(|i| c.get(i))?.as_str();
            // A lock file's bare version is an exact pin.
            let eq = if spec.starts_with(|ch: char| ch.is_ascii_digit()) {
                "=="
            } else {
                ""
            };
            oldest_in(&format!("torch{eq}{spec}"))
        })
        .min()
}

#[cfg(test)]
mod tests {
    use super::{companions_in, locked_in, oldest_in, said_in, tested_in};

    #[test]
    fn the_oldest_torch_a_pin_allows_is_read() {
        assert_eq!(
            oldest_in("torch==2.4.0\ntorchvision==0.19.0\n"),
            Some((2, 4))
        );
        assert_eq!(oldest_in("torch>=2.1,<2.5\n"), Some((2, 1)));
        assert_eq!(oldest_in("torch<2.5.1\n"), Some((2, 5)));
        assert_eq!(oldest_in("torch<2.13\n"), Some((2, 12)));
        assert_eq!(oldest_in("\"torch~=2.4.1\",\n"), Some((2, 4)));
        assert_eq!(oldest_in("\"torch >= 1.6.0\",\n"), Some((1, 6)));
        assert_eq!(oldest_in("    \"torch>=2\",\n"), Some((2, 0)));
        assert_eq!(oldest_in("torch<3\n"), Some((2, 0)));
        assert_eq!(
            locked_in("[packages]\ntorch = \"==1.13.0\"\n"),
            Some((1, 13))
        );
        assert_eq!(
            locked_in("torch = {version = \">=2.1\", index = \"pt\"}\n"),
            Some((2, 1))
        );
        assert_eq!(locked_in("torch = \"*\"\n"), None);
        let pipfile_lock = "\"torch\": {\n    \"hashes\": [\n        \"sha256:00\"\n    ],\n    \"version\": \"==1.13.0\"\n},";
        assert_eq!(locked_in(pipfile_lock), Some((1, 13)));
        let uv_lock =
            "[[package]]\nname = \"torch\"\nversion = \"2.6.0\"\nsource = { registry = \"x\" }\n";
        assert_eq!(locked_in(uv_lock), Some((2, 6)));
        assert_eq!(
            locked_in("[[package]]\nname = \"torchvision\"\nversion = \"0.15.0\"\n"),
            None
        );
        assert_eq!(oldest_in("torch\ntorchvision==0.19.0\n"), None);
        // Prose, conda and Docker spellings.
        let readme =
            "Requirements: PyTorch 1.12+ or 2.x, `torchvision`.\n> needs PyTorch 2.1 or later";
        assert_eq!(said_in(readme), Some((1, 12)));
        assert_eq!(said_in("Currently supports Pytorch >= 1.2.0"), Some((1, 2)));
        assert_eq!(said_in("- [PyTorch 4.1+](http://pytorch.org/)"), None);
        assert_eq!(said_in("* Python-3.7.11、PyTorch-1.4.0"), Some((1, 4)));
        assert_eq!(said_in("PyTorch版本：1.8"), Some((1, 8)));
        assert_eq!(said_in("install pytorch (I worked with 1.9)"), Some((1, 9)));
        assert_eq!(said_in("uses `torch.accelerator` from 2.6"), None);
        assert_eq!(said_in("PyTorch-Lightning and pytorch-cuda=11.8"), None);
        assert_eq!(said_in("(`pip install \"pytorch-lightning<2.0\"`)"), None);
        assert_eq!(said_in("uses torch.compile and torchvision 0.8"), None);
        assert_eq!(said_in("\"segmentation-models-pytorch>=0.3.4\","), None);
        assert_eq!(
            said_in("  - pytorch=1.13.1\n  - pytorch-cuda=11.7\n"),
            Some((1, 13))
        );
        assert_eq!(
            said_in("FROM pytorch/pytorch:1.13.1-cuda11.6-cudnn8-runtime\n"),
            Some((1, 13))
        );
        // CI matrices.
        assert_eq!(
            tested_in("    torch-version: [1.13.0, '2.0.0']\n"),
            Some((1, 13))
        );
        assert_eq!(
            tested_in("      torch-version:\n        - \"2.1\"\n        - \"1.12\"\nos: x\n"),
            Some((1, 12))
        );
        assert_eq!(
            tested_in("  torch-version: ${{ matrix.torch-version }}\n"),
            None
        );
        // Packages released in step with torch.
        assert_eq!(companions_in("torchvision==0.15.2\n"), Some((2, 0)));
        assert_eq!(companions_in("torchaudio>=0.13.1\n"), Some((1, 13)));
        assert_eq!(companions_in("torchtext\nspacy\n"), Some((2, 3)));
        assert_eq!(companions_in("torchtext==0.6.0\n"), Some((1, 5)));
        assert_eq!(
            companions_in("torchvision\ntorchaudio==2.5.1\n"),
            Some((2, 5))
        );
        assert_eq!(companions_in("torchvision>=0.21\n"), Some((2, 6)));
        assert_eq!(companions_in("torchvision==0.2.1\n"), Some((1, 0)));
        assert_eq!(companions_in("torchvision<0.15\n"), Some((1, 13)));
        assert_eq!(oldest_in("torch<2.0\n"), Some((1, 13)));
        assert_eq!(
            oldest_in("!pip install -q torch==2.7.1+cu126 torchvision"),
            Some((2, 7))
        );
    }

    /// This repository's README is an ancestor README of its examples and test data: the torch
    /// versions it mentions in prose would count as theirs.
    #[test]
    fn this_readme_names_no_torch_for_the_examples() {
        let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"));
        assert_eq!(said_in(&readme.unwrap()), None);
    }
}
