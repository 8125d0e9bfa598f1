//! `migrate` on mutated Python: the library in process for every input (decode as the driver
//! does, migrate, check [`outcome_holds`](super::outcome_holds), migrate the result again and
//! require no change), and every fourth input also through the driver on a real file, as
//! `tpuport migrate --write --statistics --output-format json` runs it: the file ends exactly as
//! the library said (a refused or failed file byte-identical, BOM kept), the JSON table adds up
//! on every row, and a second `--write` changes nothing.

use std::path::{Path, PathBuf};

use tpuport::port::driver::{self, Format, Mode, Options};
use tpuport::port::{RuleIndex, RuleSet, Settings, Target as Port, files, migrate_source_at};

use super::{PYTHON_DICT, outcome_holds, outcome_signature};
use crate::mutate;
use crate::rng::Rng;
use crate::runner::{Input, Target, hash_of};
use crate::seeds::{self, Extra};

pub struct Migrate {
    rules: RuleSet,
    index: RuleIndex,
    dir: tempfile::TempDir,
    extra: Extra,
}

impl Migrate {
    pub fn new(extra: Extra) -> Migrate {
        let rules = RuleSet::builtin();
        let index = RuleIndex::new(&rules);
        Migrate {
            rules,
            index,
            dir: tempfile::tempdir().expect("a temporary folder"),
            extra,
        }
    }
}

/// The Python seeds: every `.py` file of the repository's fixtures, examples and test data, and
/// every rule's documented example.
pub fn python_seeds(extra: &Extra) -> Vec<Input> {
    let mut out = seeds::from_repo(
        &[
            "tests/fixtures",
            "examples",
            "tests/data",
            "tests/scripts",
            "tests/rules_valid",
            "bench",
        ],
        &["py"],
    );
    for r in &RuleSet::builtin().rules {
        if let Some(ex) = &r.example {
            out.push(Input {
                name: format!("{} example", r.id),
                data: ex.before.clone().into_bytes(),
            });
        }
    }
    out.extend(extra.inputs("py", 128 * 1024));
    out
}

impl Target for Migrate {
    fn name(&self) -> &'static str {
        "migrate"
    }

    fn ext(&self) -> &'static str {
        "py"
    }

    fn seeds(&self) -> Vec<Input> {
        python_seeds(&self.extra)
    }

    fn mutate(&mut self, rng: &mut Rng, input: &[u8], others: &[&[u8]]) -> Vec<u8> {
        mutate::mutate(rng, input, PYTHON_DICT, others)
    }

    fn check(&mut self, input: &[u8], seed: u64) -> Result<u64, String> {
        let settings = Settings {
            unsafe_fixes: seed & 1 == 1,
            // Both ports: the portable default and the literal `--to tpu`.
            to: if seed & 4 == 4 {
                Port::Tpu
            } else {
                Port::Portable
            },
            // A declared torch too (the plain portable forms), or none (both forms kept).
            min_torch: (seed & 8 == 8).then_some((2, 11)),
        };
        // The file the driver writes: the library reads the same project around it (an empty
        // folder but for the file itself), not the working folder's.
        let file = self.dir.path().join("fuzz.py");
        let path = file.as_path();
        let expected: Vec<u8> = match files::decode_source(path, input.to_vec()) {
            Err(issue) => {
                if issue.message.is_empty() || issue.location.is_none() {
                    return Err(format!("a refused file is not located: {issue}"));
                }
                input.to_vec()
            }
            Ok(source) => {
                let out =
                    migrate_source_at(&source.text, Some(path), &self.rules, &self.index, settings);
                outcome_holds(&source.text, &out, &self.rules)?;
                let Some(new) = &out.output else {
                    return self.on_file(
                        input,
                        input,
                        seed,
                        settings,
                        hash_of(("same", outcome_signature(&out))),
                    );
                };
                let again = migrate_source_at(new, Some(path), &self.rules, &self.index, settings);
                outcome_holds(new, &again, &self.rules)?;
                if let Some(third) = &again.output {
                    return Err(format!(
                        "a second run changed the file:\n{}",
                        tpuport::port::render::unified_diff("fuzz.py", new, third)
                    ));
                }
                if let Some(e) = &again.internal_error {
                    return Err(format!("a second run failed: {e}"));
                }
                let mut bytes = if source.bom {
                    "\u{feff}".as_bytes().to_vec()
                } else {
                    vec![]
                };
                bytes.extend_from_slice(new.as_bytes());
                let sig = outcome_signature(&out);
                return self.on_file(input, &bytes, seed, settings, sig);
            }
        };
        self.on_file(
            input,
            &expected,
            seed,
            settings,
            hash_of(("refused", input.is_empty())),
        )
    }
}

impl Migrate {
    /// Every fourth input: the driver on a real file must leave `expected` in it.
    fn on_file(
        &mut self,
        input: &[u8],
        expected: &[u8],
        seed: u64,
        settings: Settings,
        sig: u64,
    ) -> Result<u64, String> {
        if !seed.is_multiple_of(4) {
            return Ok(sig);
        }
        let file = self.dir.path().join("fuzz.py");
        std::fs::write(&file, input).map_err(|e| format!("cannot write the input: {e}"))?;
        let (code, json, err) = self.driver(&file, settings)?;
        table_adds_up(&json)?;
        let after = std::fs::read(&file).map_err(|e| format!("cannot read back: {e}"))?;
        if after != expected {
            return Err(format!(
                "the driver left other bytes than the library's result (exit {code}; stderr: {err})"
            ));
        }
        if err.contains("error: ") && code != driver::EXIT_ERROR {
            return Err(format!("a file with an error exits {code}, not 2"));
        }
        let (code2, _, err2) = self.driver(&file, settings)?;
        let again = std::fs::read(&file).map_err(|e| format!("cannot read back: {e}"))?;
        if again != after {
            return Err(format!(
                "a second --write changed the file (exit {code2}; stderr: {err2})"
            ));
        }
        Ok(sig)
    }

    /// `tpuport migrate --write --statistics --output-format json FILE`, in process.
    fn driver(
        &self,
        file: &Path,
        settings: Settings,
    ) -> Result<(u8, serde_json::Value, String), String> {
        let opts = Options {
            paths: vec![PathBuf::from(file)],
            mode: Mode::Write,
            format: Format::Json,
            settings,
            no_ignore: true,
            max_file_size: 8_000_000,
            quiet: true,
            statistics: true,
            exclude: None,
        };
        let (mut out, mut err) = (vec![], vec![]);
        let code = driver::run_to(&self.rules, &opts, &mut out, &mut err)
            .map_err(|e| format!("the driver failed: {e:#}"))?;
        let json = serde_json::from_slice(&out).map_err(|e| {
            format!(
                "--statistics JSON does not parse ({e}): {}",
                String::from_utf8_lossy(&out)
            )
        })?;
        Ok((code, json, String::from_utf8_lossy(&err).into_owned()))
    }
}

/// found + revealed = fixed + left + absorbed on every row of the `--statistics` JSON.
pub fn table_adds_up(json: &serde_json::Value) -> Result<(), String> {
    let rows = json["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(json["families"].as_array().into_iter().flatten())
        .chain(std::iter::once(&json["total"]));
    for row in rows {
        let n = |k: &str| row[k].as_u64().unwrap_or(0);
        if n("found") + n("revealed") != n("fixed") + n("left") + n("absorbed") {
            return Err(format!("--statistics row does not add up: {row}"));
        }
    }
    Ok(())
}
