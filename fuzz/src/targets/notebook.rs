//! Notebooks (`.ipynb`): the recorded notebook of the tests and notebooks made from the Python
//! seeds (cells split at blank lines, sources as lists or strings, Jupyter's one-space layout or
//! minified), mutated as JSON (cells of odd shapes: missing or mistyped `source` and
//! `cell_type`, nested values, unknown keys), as text (broken JSON) and inside a code cell's
//! source (as Python). Invariants: no panic; a notebook refused although its JSON holds a `cells`
//! list names the cell at fault; a migrated notebook is still JSON with the same cells, only code
//! cells' `source` changed; migrating it again changes nothing; findings render by cell.

use std::path::Path;

use serde_json::{Value, json};
use tpuport::port::notebook::{self, View};
use tpuport::port::{RuleIndex, RuleSet, Settings, Target as Port, files};

use super::{PYTHON_DICT, counts_add_up, outcome_signature};
use crate::mutate;
use crate::rng::Rng;
use crate::runner::{Input, Target, hash_of};
use crate::seeds::{self, Extra};
use crate::structured;

const JSON_DICT: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "\\",
    "\\u",
    "\\ud800",
    "null",
    "true",
    "1e999",
    "\"cells\"",
    "\"source\"",
    "\"cell_type\"",
    "\"code\"",
    "\"markdown\"",
    "\"raw\"",
    "\"outputs\": []",
    "\"metadata\": {}",
    "\"execution_count\": null",
    "\"nbformat\": 4",
    "\"worksheets\": []",
    "\"kernelspec\"",
    "\"language\": \"R\"",
    "%matplotlib inline",
    "!pip install torch",
    "%%time",
    "x?",
    "get_ipython()",
    "\"source\": \"\"",
];

pub struct Notebook {
    rules: RuleSet,
    index: RuleIndex,
    extra: Extra,
}

impl Notebook {
    pub fn new(extra: Extra) -> Notebook {
        let rules = RuleSet::builtin();
        let index = RuleIndex::new(&rules);
        Notebook {
            rules,
            index,
            extra,
        }
    }
}

/// A notebook made of a Python file: cells split at blank lines, a markdown cell first.
fn notebook_of(py: &str, list_sources: bool, minified: bool) -> Vec<u8> {
    let mut cells =
        vec![json!({"cell_type": "markdown", "metadata": {}, "source": ["# Made from a seed\n"]})];
    for chunk in py.split("\n\n").filter(|c| !c.trim().is_empty()) {
        let text = format!("{chunk}\n");
        let source = if list_sources {
            json!(text.split_inclusive('\n').collect::<Vec<_>>())
        } else {
            json!(text)
        };
        cells.push(
            json!({"cell_type": "code", "execution_count": null, "metadata": {},
                          "outputs": [], "source": source}),
        );
    }
    let nb = json!({"cells": cells, "metadata": {"kernelspec": {"language": "python", "name": "python3"}},
                    "nbformat": 4, "nbformat_minor": 5});
    if minified {
        serde_json::to_vec(&nb).unwrap_or_default()
    } else {
        let mut out = vec![];
        let fmt = serde_json::ser::PrettyFormatter::with_indent(b" ");
        let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
        let _ = serde::Serialize::serialize(&nb, &mut ser);
        out.push(b'\n');
        out
    }
}

impl Target for Notebook {
    fn name(&self) -> &'static str {
        "notebook"
    }

    fn ext(&self) -> &'static str {
        "ipynb"
    }

    fn seeds(&self) -> Vec<Input> {
        let mut out = seeds::from_repo(&["tests/data"], &["ipynb"]);
        let py = seeds::from_repo(
            &[
                "examples",
                "tests/data/areas",
                "tests/fixtures/DEV",
                "tests/fixtures/XLA",
            ],
            &["py"],
        );
        for (i, s) in py.iter().enumerate() {
            let text = String::from_utf8_lossy(&s.data);
            out.push(Input {
                name: format!("{} as a notebook", s.name),
                data: notebook_of(&text, i % 3 != 0, i % 4 == 0),
            });
        }
        out.extend(self.extra.inputs("ipynb", 4 << 20));
        out
    }

    fn mutate(&mut self, rng: &mut Rng, input: &[u8], others: &[&[u8]]) -> Vec<u8> {
        let parsed: Option<Value> = serde_json::from_slice(input).ok();
        match (rng.below(3), parsed) {
            (0, Some(mut v)) => {
                for _ in 0..1 + rng.small(3) {
                    structured::mutate_json(rng, &mut v, JSON_DICT);
                }
                structured::write_json(rng, &v)
            }
            (1, Some(mut v)) => {
                // A code cell's source, mutated as Python.
                if let Some(cells) = v.get_mut("cells").and_then(Value::as_array_mut)
                    && !cells.is_empty()
                {
                    let i = rng.below(cells.len());
                    let src = match &cells[i]["source"] {
                        Value::Array(items) => {
                            items.iter().filter_map(Value::as_str).collect::<String>()
                        }
                        Value::String(s) => s.clone(),
                        _ => String::new(),
                    };
                    let m = mutate::mutate(rng, src.as_bytes(), PYTHON_DICT, &[]);
                    let m = String::from_utf8_lossy(&m).into_owned();
                    cells[i]["source"] = if rng.one_in(2) {
                        json!(m.split_inclusive('\n').collect::<Vec<_>>())
                    } else {
                        json!(m)
                    };
                }
                structured::write_json(rng, &v)
            }
            _ => mutate::mutate(rng, input, JSON_DICT, others),
        }
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
        let path = Path::new("fuzz.ipynb");
        let Ok(source) = files::decode_source(path, input.to_vec()) else {
            return Ok(hash_of("refused"));
        };
        let text = source.text;
        let m = match notebook::migrate(path, &text, &self.rules, &self.index, settings) {
            Err(msg) => return refused_well(&text, &msg),
            Ok(m) => m,
        };
        counts_add_up(&m.outcome)?;
        if m.refused.is_some() && m.outcome.output.is_some() {
            return Err("a refused rewrite still wrote the notebook".into());
        }
        let sig = outcome_signature(&m.outcome);
        if let Some(new) = &m.outcome.output {
            same_shape(&text, new)?;
            let again = notebook::migrate(path, new, &self.rules, &self.index, settings)
                .map_err(|e| format!("the migrated notebook does not read back: {e}"))?;
            if let Some(third) = &again.outcome.output {
                return Err(format!(
                    "a second run changed the notebook:\n{}",
                    tpuport::port::render::unified_diff("fuzz.ipynb", new, third)
                ));
            }
        }
        for json in [false, true] {
            let view = View {
                json,
                findings: !json,
                diff: true,
                show_source: true,
            };
            let r = notebook::process(
                path,
                "fuzz.ipynb",
                &text,
                &self.rules,
                &self.index,
                settings,
                view,
            );
            if !json && r.text.contains("fuzz.ipynb:") && !r.text.contains("fuzz.ipynb:cell ") {
                return Err("a finding in a notebook is not located by cell".into());
            }
        }
        Ok(sig)
    }
}

/// A refused notebook: the message says why in one line, and names the cell when the file is
/// JSON with a list of cells (so the fault is in one of them).
fn refused_well(text: &str, msg: &str) -> Result<u64, String> {
    if msg.trim().is_empty() || msg.contains('\n') {
        return Err(format!("the refusal is not one line: {msg:?}"));
    }
    if let Ok(v) = serde_json::from_str::<Value>(text)
        && let Some(cells) = v.get("cells").and_then(Value::as_array)
    {
        let named = (1..=cells.len()).any(|n| msg.contains(&format!("cell {n}")));
        if !named && v.is_object() {
            return Err(format!("the refusal does not name the cell: {msg}"));
        }
    }
    Ok(hash_of(("refused", msg.split(':').next().unwrap_or(""))))
}

/// The migrated notebook holds the same cells; only code cells' `source` differs.
fn same_shape(before: &str, after: &str) -> Result<(), String> {
    let a: Value = serde_json::from_str(before).map_err(|e| format!("input: {e}"))?;
    let b: Value = serde_json::from_str(after)
        .map_err(|e| format!("the migrated notebook is not JSON: {e}"))?;
    let strip = |v: &Value| -> Value {
        let mut v = v.clone();
        if let Some(cells) = v.get_mut("cells").and_then(Value::as_array_mut) {
            for c in cells {
                if c.get("cell_type").and_then(Value::as_str) == Some("code")
                    && let Some(o) = c.as_object_mut()
                {
                    o.remove("source");
                }
            }
        }
        v
    };
    if strip(&a) != strip(&b) {
        return Err("the migration changed more than code cells' sources".into());
    }
    Ok(())
}
