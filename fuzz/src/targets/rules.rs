//! Rule files (`rules/*.toml`, `tests/rules_*`) and configuration (`[tool.tpuport]` in a
//! `pyproject.toml`, a `tpuport.toml`), mutated as TOML (wrong types, unknown keys, deleted or
//! duplicated keys, bad regexes, globs and templates) and as text. The first line of an input,
//! `# fuzz: rules`, `# fuzz: pyproject` or `# fuzz: tpuport`, says which file it is (a TOML
//! comment, so an artifact is the file itself). Invariants: no panic; a refused file gets one
//! line that starts `PATH:LINE:` with a line of the file (a file that is not UTF-8: `PATH:` and
//! what to do); a rule file that loads explains itself and migrates Python without breaking it.

use std::path::{Path, PathBuf};

use tpuport::port::config::{self, Overrides};
use tpuport::port::{RuleIndex, RuleSet, Settings, Target as Port, migrate_source_at, testrules};

use super::outcome_holds;
use crate::mutate;
use crate::rng::Rng;
use crate::runner::{Input, Target, hash_of};
use crate::seeds;
use crate::structured;

const TOML_DICT: &[&str] = &[
    "family",
    "title",
    "about",
    "id",
    "name",
    "message",
    "advice",
    "fix",
    "match",
    "call",
    "reference",
    "method",
    "attribute",
    "keyword",
    "string",
    "in",
    "forms",
    "min_args",
    "lint",
    "when",
    "receiver",
    "action",
    "rename",
    "replace",
    "to",
    "params",
    "args",
    "remove",
    "assign",
    "unwrap",
    "note",
    "note_in",
    "convert",
    "unsafe_if_uses",
    "unless_uses",
    "only_if_uses",
    "not_if_uses",
    "remove_after",
    "needles",
    "example",
    "before",
    "after",
    "helpers",
    "code",
    "imports",
    "positions",
    "safe",
    "unsafe",
    "manual",
    "statement",
    "with",
    "loop",
    "{device}",
    "{qualified}",
    "{matched}",
    "{receiver}",
    "torch.cuda.*",
    "torch.cuda.synchronize",
    "*device*",
    "host-sync-in-loop",
    "TEAM001",
    "DEV001",
    "select",
    "extend-select",
    "ignore",
    "unsafe-fixes",
    "rules",
    "exclude",
    "max-file-size",
    "DEV",
    "CUD999",
    "build/",
    "*_pb2.py",
    "tests/fixtures/**",
    "!keep.py",
    "[[rule]]\n",
    "[rule.action]\n",
    "[tool.tpuport]\n",
    "[tool]\n",
    "\"\"\"",
    "'''",
    "=",
    "\n",
    "[",
    "]",
    "{",
    "}",
    ",",
    ".",
    "#",
    "\\",
    "\"",
];

#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Rules,
    Pyproject,
    Tpuport,
}

fn kind_of(input: &[u8]) -> Kind {
    let first = input.split(|b| *b == b'\n').next().unwrap_or_default();
    match first {
        b"# fuzz: pyproject" => Kind::Pyproject,
        b"# fuzz: tpuport" => Kind::Tpuport,
        _ => Kind::Rules,
    }
}

fn with_header(kind: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!("# fuzz: {kind}\n").into_bytes();
    out.extend_from_slice(body);
    out
}

pub struct Rules {
    dir: tempfile::TempDir,
    python: Vec<String>,
    n: u64,
}

impl Rules {
    pub fn new() -> Rules {
        let python = seeds::from_repo(&["examples/cuda", "examples/xla"], &["py"])
            .into_iter()
            .map(|i| String::from_utf8_lossy(&i.data).into_owned())
            .collect();
        Rules {
            dir: tempfile::tempdir().expect("a temporary folder"),
            python,
            n: 0,
        }
    }
}

const CONFIG_SEED: &str = r#"[project]
name = "trainer"

[tool.tpuport]
select = ["DEV", "CUD", "AMP"]
extend-select = ["MEM"]
ignore = ["CUD999", "DEV017"]
unsafe-fixes = false
rules = ["team-rules"]
exclude = ["third_party/", "*_pb2.py", "tests/fixtures"]
max-file-size = 8
"#;

impl Target for Rules {
    fn name(&self) -> &'static str {
        "rules"
    }

    fn ext(&self) -> &'static str {
        "toml"
    }

    fn seeds(&self) -> Vec<Input> {
        let mut out: Vec<Input> = seeds::from_repo(
            &["rules", "tests/rules_valid", "tests/rules_invalid"],
            &["toml"],
        )
        .into_iter()
        .map(|i| Input {
            name: i.name,
            data: with_header("rules", &i.data),
        })
        .collect();
        let root = seeds::repo().join("pyproject.toml");
        if let Ok(p) = std::fs::read(&root) {
            out.push(Input {
                name: "pyproject.toml (no [tool.tpuport])".into(),
                data: with_header("pyproject", &p),
            });
            let mut with_table = p.clone();
            with_table.extend_from_slice(b"\n[tool.tpuport]");
            with_table.extend_from_slice(
                CONFIG_SEED
                    .split_once("[tool.tpuport]")
                    .map_or("", |x| x.1)
                    .as_bytes(),
            );
            out.push(Input {
                name: "pyproject.toml with [tool.tpuport]".into(),
                data: with_header("pyproject", &with_table),
            });
        }
        out.push(Input {
            name: "README's [tool.tpuport]".into(),
            data: with_header("pyproject", CONFIG_SEED.as_bytes()),
        });
        let top_level = CONFIG_SEED
            .split_once("[tool.tpuport]\n")
            .map_or("", |x| x.1);
        out.push(Input {
            name: "tpuport.toml".into(),
            data: with_header("tpuport", top_level.as_bytes()),
        });
        out
    }

    fn mutate(&mut self, rng: &mut Rng, input: &[u8], others: &[&[u8]]) -> Vec<u8> {
        let kind = kind_of(input);
        let header = match kind {
            Kind::Rules => "rules",
            Kind::Pyproject => "pyproject",
            Kind::Tpuport => "tpuport",
        };
        let body = body_of(input);
        if rng.one_in(2)
            && let Ok(text) = std::str::from_utf8(body)
            && let Ok(mut v) = toml::from_str::<toml::Value>(text)
        {
            for _ in 0..1 + rng.small(3) {
                structured::mutate_toml(rng, &mut v, TOML_DICT);
            }
            if let Ok(t) = toml::to_string(&v) {
                return with_header(header, t.as_bytes());
            }
        }
        // Text damage; the header is kept most of the time.
        let m = mutate::mutate(rng, body, TOML_DICT, others);
        if rng.one_in(20) {
            m
        } else {
            with_header(header, &m)
        }
    }

    fn check(&mut self, input: &[u8], seed: u64) -> Result<u64, String> {
        self.n += 1;
        let case = self.dir.path().join(format!("case{}", self.n % 8));
        let _ = std::fs::remove_dir_all(&case);
        std::fs::create_dir_all(&case).map_err(|e| e.to_string())?;
        match kind_of(input) {
            Kind::Rules => self.rule_file(&case, input, seed),
            kind => self.config_file(&case, input, kind),
        }
    }
}

/// The input without its `# fuzz:` line.
fn body_of(input: &[u8]) -> &[u8] {
    if !input.starts_with(b"# fuzz: ") {
        return input;
    }
    match input.iter().position(|b| *b == b'\n') {
        Some(i) => &input[i + 1..],
        None => &[],
    }
}

/// A refusal: one line, `PATH:LINE: ...` with a line of the file, or `PATH: ...` for a file
/// that cannot be read as text.
fn located(msg: &str, path: &Path, input: &[u8]) -> Result<(), String> {
    if msg.contains('\n') {
        return Err(format!("the error is not one line: {msg:?}"));
    }
    let shown = path.display().to_string();
    let Some(rest) = msg.find(&shown).map(|i| &msg[i + shown.len()..]) else {
        return Err(format!("the error does not name the file: {msg}"));
    };
    if std::str::from_utf8(input).is_err() {
        return Ok(());
    }
    let line: Option<usize> = rest
        .strip_prefix(':')
        .and_then(|r| r.split(':').next())
        .and_then(|n| n.parse().ok());
    match line {
        Some(n) if n >= 1 && n <= input.split(|b| *b == b'\n').count() => Ok(()),
        Some(n) => Err(format!(
            "the error's line {n} is not a line of the file: {msg}"
        )),
        None => Err(format!("the error names no line: {msg}")),
    }
}

impl Rules {
    fn rule_file(&self, case: &Path, input: &[u8], seed: u64) -> Result<u64, String> {
        let file = case.join("TEAM.toml");
        std::fs::write(&file, input).map_err(|e| e.to_string())?;
        let set = match RuleSet::load(&[case.to_path_buf()]) {
            Err(e) => {
                let msg = format!("{e:#}");
                located(&msg, &file, input)?;
                return Ok(hash_of(("refused", msg.split(": ").nth(1).unwrap_or(""))));
            }
            Ok(set) => set,
        };
        let index = RuleIndex::new(&set);
        let origin = file.display().to_string();
        let own: Vec<&tpuport::port::rules::Rule> =
            set.rules.iter().filter(|r| r.origin == origin).collect();
        let mut sources: Vec<&str> = own
            .iter()
            .filter_map(|r| r.example.as_ref().map(|e| e.before.as_str()))
            .collect();
        if !self.python.is_empty() {
            sources.push(&self.python[(seed as usize) % self.python.len()]);
        }
        for r in &own {
            let _ = tpuport::port::explain(&set, Some(&r.id), false);
        }
        let _ = testrules::example_problems(&set);
        let settings = Settings {
            unsafe_fixes: seed & 2 == 2,
            // Both ports: the portable default and the literal `--to tpu`.
            to: if seed & 4 == 4 {
                Port::Tpu
            } else {
                Port::Portable
            },
            // A declared torch too (the plain portable forms), or none (both forms kept).
            min_torch: (seed & 8 == 8).then_some((2, 11)),
        };
        for src in sources {
            let out = migrate_source_at(src, None, &set, &index, settings);
            outcome_holds(src, &out, &set)?;
        }
        Ok(hash_of((
            "loaded",
            own.len(),
            own.iter().map(|r| r.literal.fix).collect::<Vec<_>>(),
        )))
    }

    fn config_file(&self, case: &Path, input: &[u8], kind: Kind) -> Result<u64, String> {
        let name = if kind == Kind::Pyproject {
            "pyproject.toml"
        } else {
            "tpuport.toml"
        };
        let file = case.join(name);
        std::fs::write(&file, input).map_err(|e| e.to_string())?;
        // A rule folder the configuration may name, and a file to walk.
        let rules_dir = case.join("team-rules");
        std::fs::create_dir_all(&rules_dir).map_err(|e| e.to_string())?;
        let valid = seeds::repo().join("tests/rules_valid/TEAM.toml");
        let _ = std::fs::copy(valid, rules_dir.join("TEAM.toml"));
        std::fs::write(
            case.join("train.py"),
            "import torch\nx = torch.zeros(1).cuda()\n",
        )
        .map_err(|e| e.to_string())?;
        let loaded = match config::discover(None, false, &[case.join("train.py")]) {
            Err(e) => {
                let msg = format!("{e:#}");
                located(&msg, &file, input)?;
                return Ok(hash_of((
                    "config refused",
                    msg.split(": ").nth(1).unwrap_or(""),
                )));
            }
            Ok(None) => return Ok(hash_of("no table")),
            Ok(Some(l)) => l,
        };
        let dirs = match config::rule_dirs(Some(&loaded), &[]) {
            Err(e) => {
                let msg = format!("{e:#}");
                located(&msg, &file, input)?;
                return Ok(hash_of("rule folder refused"));
            }
            Ok(d) => d,
        };
        let mut rules = match RuleSet::load(&dirs) {
            Err(e) => {
                let msg = format!("{e:#}");
                located(&msg, &file, input)?;
                return Ok(hash_of("rules refused"));
            }
            Ok(r) => r,
        };
        let settled = match config::settle(Some(&loaded), &Overrides::default(), &rules) {
            Err(e) => {
                let msg = format!("{e:#}");
                located(&msg, &file, input)?;
                return Ok(hash_of((
                    "settle refused",
                    msg.split(": ").nth(1).unwrap_or(""),
                )));
            }
            Ok(s) => s,
        };
        if let Err(e) = rules.filter(&settled.select, &settled.ignore) {
            let msg = format!("{e:#}");
            located(&msg, &file, input)?;
        }
        let found = tpuport::port::files::discover_with(
            &[case.to_path_buf()],
            false,
            settled.exclude.as_ref(),
        );
        if let Some(x) = &settled.exclude {
            for p in ["train.py", "team-rules", "a/b/c.py", "../x.py", "/"] {
                let _ = x.excluded(&PathBuf::from(p), false);
            }
        }
        Ok(hash_of((
            "settled",
            settled.select.len(),
            settled.ignore.len(),
            found.files.len(),
            settled.unsafe_fixes,
        )))
    }
}
