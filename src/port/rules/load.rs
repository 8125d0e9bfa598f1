//! Loading rules: the built-in files compiled into the binary plus `--rules DIR`, parsed and
//! checked with errors ([`RuleError`]) that name the file, the line and what to change.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::compile::{compile_position, compile_rule};
use super::model::{Helper, RuleFile, RuleSet};
use super::schema::RuleFileDef;
use crate::port::located::{line_of_offset, one_line, toml_error};

/// The built-in rule files, compiled into the binary.
pub const BUILTIN: &[(&str, &str)] = &[
    ("rules/DEV.toml", include_str!("../../../rules/DEV.toml")),
    ("rules/CUD.toml", include_str!("../../../rules/CUD.toml")),
    ("rules/MEM.toml", include_str!("../../../rules/MEM.toml")),
    ("rules/RNG.toml", include_str!("../../../rules/RNG.toml")),
    ("rules/PRC.toml", include_str!("../../../rules/PRC.toml")),
    ("rules/DST.toml", include_str!("../../../rules/DST.toml")),
    ("rules/ENV.toml", include_str!("../../../rules/ENV.toml")),
    ("rules/XLA.toml", include_str!("../../../rules/XLA.toml")),
    ("rules/XM.toml", include_str!("../../../rules/XM.toml")),
    ("rules/XR.toml", include_str!("../../../rules/XR.toml")),
    ("rules/XMP.toml", include_str!("../../../rules/XMP.toml")),
    ("rules/XPL.toml", include_str!("../../../rules/XPL.toml")),
    ("rules/XMET.toml", include_str!("../../../rules/XMET.toml")),
    ("rules/XS.toml", include_str!("../../../rules/XS.toml")),
    ("rules/XAMP.toml", include_str!("../../../rules/XAMP.toml")),
    ("rules/XU.toml", include_str!("../../../rules/XU.toml")),
    ("rules/STM.toml", include_str!("../../../rules/STM.toml")),
    ("rules/OPS.toml", include_str!("../../../rules/OPS.toml")),
    ("rules/AMP.toml", include_str!("../../../rules/AMP.toml")),
    ("rules/PROF.toml", include_str!("../../../rules/PROF.toml")),
    ("rules/CMP.toml", include_str!("../../../rules/CMP.toml")),
    ("rules/DYN.toml", include_str!("../../../rules/DYN.toml")),
    ("rules/PERF.toml", include_str!("../../../rules/PERF.toml")),
    ("rules/ATN.toml", include_str!("../../../rules/ATN.toml")),
    ("rules/KRN.toml", include_str!("../../../rules/KRN.toml")),
    ("rules/LIB.toml", include_str!("../../../rules/LIB.toml")),
    ("rules/PRG.toml", include_str!("../../../rules/PRG.toml")),
];

/// A problem in a rule file, located as precisely as we can; shown on one line (control
/// characters in the path or in quoted values are escaped).
#[derive(Debug, thiserror::Error)]
pub struct RuleError {
    pub path: String,
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for RuleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: {}",
            one_line(&self.path),
            self.line,
            one_line(&self.message)
        )
    }
}

impl RuleSet {
    /// The built-in rules only.
    pub fn builtin() -> RuleSet {
        Self::load(&[]).expect("built-in rules are valid (checked by the test suite)")
    }

    /// Built-in rules plus every `*.toml` in each of `dirs` (sorted by file name).
    pub fn load(dirs: &[PathBuf]) -> Result<RuleSet> {
        let mut sources: Vec<(String, String)> = BUILTIN
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect();
        for dir in dirs {
            sources.extend(read_rule_dir(dir)?);
        }
        let mut set = RuleSet {
            rules: vec![],
            helpers: vec![],
            files: vec![],
            positions: HashMap::new(),
        };
        let mut defs = vec![];
        for (path, text) in &sources {
            let file: RuleFileDef = toml::from_str(text).map_err(|e| {
                let (line, message) = toml_error(text, &e);
                RuleError {
                    path: path.clone(),
                    line,
                    message: format!("{message}; see docs/writing-rules.md"),
                }
            })?;
            for (name, pats) in &file.positions {
                let entry = set.positions.entry(name.clone()).or_default();
                for p in pats {
                    entry.push(compile_position(p).map_err(|m| RuleError {
                        path: path.clone(),
                        line: find_line(text, p),
                        message: format!("position class `{name}`: {m}"),
                    })?);
                }
            }
            for (name, h) in &file.helpers {
                let bad = |m: String| RuleError {
                    path: path.clone(),
                    line: find_line(text, name),
                    message: format!("helper `{name}`: {m}"),
                };
                if !name.starts_with("_tpuport_") {
                    return Err(bad("helper names start with `_tpuport_`".into()).into());
                }
                let head = format!("def {name}(");
                let class = [format!("class {name}:"), format!("class {name}(")];
                let starts =
                    h.code.starts_with(&head) || class.iter().any(|c| h.code.starts_with(c));
                if !starts || !crate::port::parse::is_valid(&h.code) {
                    return Err(bad(format!(
                        "`code` must be valid Python starting with `{head}` (or `class {name}`)"
                    ))
                    .into());
                }
                if set.helpers.iter().any(|x| &x.name == name) {
                    return Err(bad("defined twice".into()).into());
                }
                set.helpers.push(Helper {
                    name: name.clone(),
                    code: h.code.trim_end().to_string(),
                    imports: h.imports.clone(),
                });
            }
            defs.push((path.clone(), text.clone(), file));
        }
        let mut seen: HashMap<String, String> = HashMap::new();
        for (path, text, file) in defs {
            if !valid_family(&file.family) {
                return Err(RuleError {
                    path,
                    line: find_line(&text, "family"),
                    message: format!(
                        "family `{}` must be 2 to 5 capital letters (e.g. \"DEV\")",
                        file.family
                    ),
                }
                .into());
            }
            for mut def in file.rules {
                if def.needles.is_none() {
                    def.needles = file.needles.clone();
                }
                // The id as written: plain, or with TOML escapes (`"TEAM1\n"`).
                let line = match text.find(&format!("\"{}\"", def.id)) {
                    Some(_) => find_line(&text, &format!("\"{}\"", def.id)),
                    None => find_line(&text, &format!("\"{}\"", def.id.escape_default())),
                };
                let rid = def.id.clone();
                let err = |message: String| RuleError {
                    path: path.clone(),
                    line,
                    message: format!("rule {rid}: {message}"),
                };
                if !valid_id(&def.id, &file.family) {
                    return Err(err(format!(
                        "id must be the family prefix `{}` followed by 3 digits (e.g. {}101)",
                        file.family, file.family
                    ))
                    .into());
                }
                if let Some(other) = seen.get(&def.id)
                    && other != &path
                {
                    return Err(err(format!(
                        "id already used in {other}; ids are never reused: pick a free number"
                    ))
                    .into());
                }
                seen.insert(def.id.clone(), path.clone());
                let rule = compile_rule(
                    def,
                    &file.family,
                    &path,
                    line,
                    &set.positions,
                    file.portable,
                )
                .map_err(|e| err(e.to_string()))?;
                set.rules.push(rule);
            }
            set.files.push(RuleFile {
                family: file.family,
                title: file.title,
                about: file.about,
                origin: path,
            });
        }
        set.helpers.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(set)
    }
}

fn read_rule_dir(dir: &Path) -> Result<Vec<(String, String)>> {
    let mut out = vec![];
    let entries = std::fs::read_dir(dir).with_context(|| {
        format!(
            "cannot read rule folder {}: pass a folder that holds *.toml rule files",
            one_line(&dir.display().to_string())
        )
    })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    paths.sort();
    if paths.is_empty() {
        bail!(
            "rule folder {} holds no *.toml files; see docs/writing-rules.md",
            one_line(&dir.display().to_string())
        );
    }
    for p in paths {
        let bytes = std::fs::read(&p).with_context(|| {
            format!(
                "cannot read rule file {}",
                one_line(&p.display().to_string())
            )
        })?;
        let text = String::from_utf8(bytes).map_err(|e| RuleError {
            path: p.display().to_string(),
            line: e.as_bytes()[..e.utf8_error().valid_up_to()]
                .iter()
                .filter(|b| **b == b'\n')
                .count()
                + 1,
            message: "not valid UTF-8; save the rule file as UTF-8".into(),
        })?;
        out.push((p.display().to_string(), text));
    }
    Ok(out)
}

fn valid_family(f: &str) -> bool {
    (2..=5).contains(&f.len()) && f.chars().all(|c| c.is_ascii_uppercase())
}

fn valid_id(id: &str, family: &str) -> bool {
    id.strip_prefix(family)
        .is_some_and(|d| d.len() == 3 && d.chars().all(|c| c.is_ascii_digit()))
}

fn find_line(text: &str, needle: &str) -> usize {
    text.find(needle)
        .map(|o| line_of_offset(text, o))
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_rules_load() {
        let set = RuleSet::builtin();
        assert!(set.rules.len() > 40, "{}", set.rules.len());
        for r in &set.rules {
            assert!(r.id.starts_with(&r.family));
            assert!(
                !r.message.contains('\n'),
                "{}: message must be one line",
                r.id
            );
        }
    }

    /// Found by the fuzz harness (target rules): a value or id holding a newline (`fix =
    /// "safe\n"`, `id = "TEAM1\n"`) split the error over lines; it is one line, the key named
    /// for a value of the wrong type, and a file that is not UTF-8 is located too.
    #[test]
    fn rule_file_errors_are_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("TEAM.toml");
        let base = "family = \"TEAM\"\ntitle = \"x\"\n\n[[rule]]\nname = \"x\"\nmessage = \"x\"\nmatch.call = [\"a.b\"]\n";
        for (extra, line, says) in [
            (
                "id = \"TEAM001\"\nfix = \"safe\\n\"\n",
                9,
                "unknown variant `safe\\n`",
            ),
            (
                "id = \"TEAM1\\n\"\nfix = \"manual\"\n",
                8,
                "rule TEAM1\\n: id must be",
            ),
            (
                "id = \"TEAM001\"\nfix = 3\n",
                9,
                "`rule.fix`: wanted string or table",
            ),
        ] {
            std::fs::write(&file, format!("{base}{extra}")).unwrap();
            let e = RuleSet::load(&[dir.path().to_path_buf()])
                .err()
                .expect("refused")
                .to_string();
            assert!(!e.contains('\n'), "{e:?}");
            assert!(
                e.starts_with(&format!("{}:{line}: ", file.display())),
                "{e}"
            );
            assert!(e.contains(says), "{e}");
        }
        std::fs::write(&file, b"family = \"TEAM\"\n# caf\xe9\n").unwrap();
        let e = RuleSet::load(&[dir.path().to_path_buf()])
            .err()
            .expect("refused")
            .to_string();
        assert!(
            e.starts_with(&format!("{}:2: not valid UTF-8", file.display())),
            "{e}"
        );
    }

    /// `BUILTIN` is written by hand (its order is the load order), so check that it names
    /// exactly the `rules/*.toml` files of the repository, each once.
    #[test]
    fn builtin_names_every_rule_file() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("rules");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .map(|p| format!("rules/{}", p.file_name().unwrap().to_string_lossy()))
            .collect();
        on_disk.sort();
        let mut listed: Vec<String> = BUILTIN.iter().map(|(p, _)| p.to_string()).collect();
        listed.sort();
        assert_eq!(
            listed, on_disk,
            "BUILTIN in src/port/rules/load.rs vs rules/*.toml"
        );
        for (path, text) in BUILTIN {
            let on_disk = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path));
            assert_eq!(
                on_disk.unwrap(),
                *text,
                "{path}: include_str! names another file"
            );
        }
    }
}
