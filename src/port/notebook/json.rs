//! The notebook file as JSON text: where each cell's `source` value sits (byte spans, found by
//! a small scanner over text that `serde_json` has already validated), and writing a new
//! `source` back in the same layout, so that everything else in the file stays byte-identical.

use std::ops::Range;

use serde_json::Value;

/// One cell of the notebook, as read.
#[derive(Debug, Clone)]
pub struct CellJson {
    /// `code`, `markdown`, `raw`, ...
    pub cell_type: String,
    /// The source, joined.
    pub source: String,
    /// Where the `source` value is in the file (the whole value: string or list).
    pub span: Range<usize>,
    /// The spans of the list's strings; `None` when the source is one string.
    pub items: Option<Vec<Range<usize>>>,
}

/// A parsed notebook: its text, the cells, and the kernel's language if the metadata says.
#[derive(Debug)]
pub struct NotebookJson {
    pub cells: Vec<CellJson>,
    pub language: Option<String>,
    /// One level of indentation in the file (Jupyter writes one space); empty if minified.
    indent_unit: String,
}

/// Read a notebook; the error says what is wrong and what to do.
pub fn read(text: &str) -> Result<NotebookJson, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| {
        let cell = cell_at(text, e.line(), e.column())
            .map(|n| format!(", in cell {n}"))
            .unwrap_or_default();
        format!(
            "not a valid notebook: invalid JSON at line {} column {}{cell} ({}); repair the file (e.g. restore it from version control or re-save it in Jupyter) or exclude it",
            e.line(),
            e.column(),
            strip_position(&e.to_string())
        )
    })?;
    let Some(obj) = value.as_object() else {
        return Err(not_a_notebook("the top level is not a JSON object"));
    };
    let Some(cells) = obj.get("cells") else {
        let why = if obj.contains_key("worksheets") {
            "it is an nbformat 3 notebook (cells under `worksheets`); upgrade it with `jupyter nbconvert --to notebook --inplace` and run again"
        } else {
            "it has no `cells` list"
        };
        return Err(not_a_notebook(why));
    };
    let Some(cells) = cells.as_array() else {
        return Err(not_a_notebook("`cells` is not a list"));
    };
    let mut out = vec![];
    for (i, c) in cells.iter().enumerate() {
        let cell_type = c
            .get("cell_type")
            .and_then(Value::as_str)
            .ok_or_else(|| not_a_notebook(&format!("cell {} has no `cell_type`", i + 1)))?;
        let source = match c.get("source") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(items)) => {
                let mut s = String::new();
                for item in items {
                    let Some(line) = item.as_str() else {
                        return Err(not_a_notebook(&format!(
                            "the `source` of cell {} holds something other than text",
                            i + 1
                        )));
                    };
                    s.push_str(line);
                }
                s
            }
            _ => {
                return Err(not_a_notebook(&format!(
                    "cell {} has no `source` text",
                    i + 1
                )));
            }
        };
        out.push(CellJson {
            cell_type: cell_type.to_string(),
            source,
            span: 0..0,
            items: None,
        });
    }
    let spans = Scanner::new(text).source_spans();
    if spans.len() != out.len() {
        return Err(not_a_notebook("its cells could not be located in the text"));
    }
    for (cell, (span, items)) in out.iter_mut().zip(spans) {
        cell.span = span;
        cell.items = items;
    }
    let meta = obj.get("metadata");
    let language = meta
        .and_then(|m| m.pointer("/kernelspec/language"))
        .or_else(|| meta.and_then(|m| m.pointer("/language_info/name")))
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok(NotebookJson {
        cells: out,
        language,
        indent_unit: indent_unit(text),
    })
}

/// The cell a place in broken JSON is in, counting the `"cell_type"` keys before it (the JSON
/// cannot be parsed, so this is the best guess there is).
fn cell_at(text: &str, line: usize, column: usize) -> Option<usize> {
    let start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    let at = (start + column).min(text.len());
    let before = &text.as_bytes()[..at];
    let n = before
        .windows(11)
        .filter(|w| *w == b"\"cell_type\"")
        .count();
    (n > 0).then_some(n)
}

fn not_a_notebook(why: &str) -> String {
    format!("not a Jupyter notebook (nbformat 4): {why}; fix the file or exclude it")
}

/// serde_json's message ends with " at line L column C", which the caller already says.
fn strip_position(msg: &str) -> &str {
    msg.find(" at line ").map(|i| &msg[..i]).unwrap_or(msg)
}

/// The indentation of the first key of the top-level object.
fn indent_unit(text: &str) -> String {
    let after = text.trim_start().strip_prefix('{').unwrap_or("");
    match after.find(|c: char| !c.is_whitespace()) {
        Some(i) => {
            let ws = &after[..i];
            ws.rsplit('\n').next().unwrap_or("").to_string()
        }
        None => String::new(),
    }
}

impl NotebookJson {
    /// The file with new sources for some cells (by position); other bytes are kept.
    pub fn with_sources(&self, text: &str, new: &[(usize, String)]) -> String {
        let mut replacements: Vec<(Range<usize>, String)> = new
            .iter()
            .filter(|(i, s)| self.cells[*i].source != *s)
            .map(|(i, s)| {
                let cell = &self.cells[*i];
                (cell.span.clone(), self.encode(text, cell, s))
            })
            .collect();
        replacements.sort_by_key(|(r, _)| std::cmp::Reverse(r.start));
        let mut out = text.to_string();
        for (r, s) in replacements {
            out.replace_range(r, &s);
        }
        out
    }

    /// A new `source` value in the layout of the old one: a string stays a string; a list
    /// keeps its separators, and the lines that did not change keep their exact JSON text.
    fn encode(&self, text: &str, cell: &CellJson, new: &str) -> String {
        let Some(items) = &cell.items else {
            return to_json(new);
        };
        let lines: Vec<&str> = new.split_inclusive('\n').collect();
        if lines.is_empty() {
            return "[]".into();
        }
        let old_raw: Vec<&str> = items.iter().map(|r| &text[r.clone()]).collect();
        let old_lines: Vec<&str> = cell.source.split_inclusive('\n').collect();
        let (open, sep, close) = if items.is_empty() {
            let key_indent = line_indent(text, cell.span.start);
            if self.indent_unit.is_empty() && !text.contains('\n') {
                (String::new(), String::new(), String::new())
            } else {
                (
                    format!("\n{key_indent}{}", self.indent_unit),
                    format!("\n{key_indent}{}", self.indent_unit),
                    format!("\n{key_indent}"),
                )
            }
        } else {
            let base = cell.span.start;
            let first = &items[0];
            let open = text[base + 1..first.start].to_string();
            let sep = match items.get(1) {
                Some(second) => text[items[0].end..second.start]
                    .trim_start()
                    .trim_start_matches(',')
                    .to_string(),
                None => open.clone(),
            };
            let last = items.last().expect("not empty");
            let close = text[last.end..cell.span.end - 1].to_string();
            (open, sep, close)
        };
        // Old items and old lines correspond one to one when each item is one line, as Jupyter
        // writes them; otherwise no old text is reused (the same number of items as lines is
        // not enough: `["a\nb", "c\n"]` has two of each, and reusing them dropped the `b`).
        let reuse = old_raw.len() == old_lines.len()
            && old_raw
                .iter()
                .zip(&old_lines)
                .all(|(raw, line)| serde_json::from_str::<String>(raw).is_ok_and(|s| s == *line));
        let diff = similar::capture_diff_slices(similar::Algorithm::Myers, &old_lines, &lines);
        // Each line with the whitespace before it: a reused line keeps its own (Jupyter's
        // layout is regular, but a hand-edited notebook's need not be).
        let lead_of = |o: usize| -> &str {
            text[items[o - 1].end..items[o].start]
                .trim_start()
                .trim_start_matches(',')
        };
        let mut tokens: Vec<(String, String)> = vec![Default::default(); lines.len()];
        for op in diff {
            for (o, n) in op.iter_changes_indices() {
                if let Some(n) = n {
                    tokens[n] = match o {
                        Some(o) if reuse => {
                            let lead = match (o, n) {
                                (0, 0) => open.as_str(),
                                (0, _) => sep.as_str(),
                                _ => lead_of(o),
                            };
                            (lead.to_string(), old_raw[o].to_string())
                        }
                        _ if n == 0 => (open.clone(), to_json(lines[n])),
                        _ => (sep.clone(), to_json(lines[n])),
                    };
                }
            }
        }
        let mut out = String::from("[");
        for (n, (lead, token)) in tokens.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            out.push_str(lead);
            out.push_str(token);
        }
        format!("{out}{close}]")
    }
}

trait ChangeIndices {
    fn iter_changes_indices(&self) -> Vec<(Option<usize>, Option<usize>)>;
}

impl ChangeIndices for similar::DiffOp {
    /// Pairs (old index, new index) of this operation; `None` on the side that lacks the line.
    fn iter_changes_indices(&self) -> Vec<(Option<usize>, Option<usize>)> {
        match *self {
            similar::DiffOp::Equal {
                old_index,
                new_index,
                len,
            } => (0..len)
                .map(|k| (Some(old_index + k), Some(new_index + k)))
                .collect(),
            similar::DiffOp::Delete { .. } => vec![],
            similar::DiffOp::Insert {
                new_index, new_len, ..
            } => (0..new_len).map(|k| (None, Some(new_index + k))).collect(),
            similar::DiffOp::Replace {
                new_index, new_len, ..
            } => (0..new_len).map(|k| (None, Some(new_index + k))).collect(),
        }
    }
}

fn to_json(s: &str) -> String {
    serde_json::to_string(s).expect("a string always serialises")
}

/// The whitespace that opens the line holding `at`.
fn line_indent(text: &str, at: usize) -> &str {
    let start = text[..at].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let line = &text[start..];
    &line[..line.len() - line.trim_start_matches([' ', '\t']).len()]
}

/// Walks JSON text that is known to be valid, to find the spans of the cells' `source` values.
struct Scanner<'a> {
    text: &'a str,
    b: &'a [u8],
    i: usize,
}

type SourceSpan = (Range<usize>, Option<Vec<Range<usize>>>);

impl<'a> Scanner<'a> {
    fn new(text: &'a str) -> Self {
        Scanner {
            text,
            b: text.as_bytes(),
            i: 0,
        }
    }

    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    /// At a `"`: the string's span, quotes included.
    fn string(&mut self) -> Range<usize> {
        let start = self.i;
        self.i += 1;
        while self.i < self.b.len() {
            match self.b[self.i] {
                b'\\' => self.i += 2,
                b'"' => {
                    self.i += 1;
                    return start..self.i;
                }
                _ => self.i += 1,
            }
        }
        start..self.i
    }

    fn key(&mut self) -> String {
        let r = self.string();
        serde_json::from_str(&self.text[r]).unwrap_or_default()
    }

    fn value(&mut self) -> Range<usize> {
        self.ws();
        let start = self.i;
        match self.b.get(self.i) {
            Some(b'"') => {
                self.string();
            }
            Some(b'{') => self.object(|s, _| {
                s.value();
            }),
            Some(b'[') => {
                self.array(|s| {
                    s.value();
                });
            }
            _ => {
                while self.i < self.b.len()
                    && !matches!(
                        self.b[self.i],
                        b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'
                    )
                {
                    self.i += 1;
                }
            }
        }
        start..self.i
    }

    /// At a `{`: each key, with the scanner before its value; `f` must consume the value.
    fn object(&mut self, mut f: impl FnMut(&mut Self, String)) {
        self.i += 1;
        loop {
            self.ws();
            match self.b.get(self.i) {
                Some(b'}') | None => {
                    self.i += 1;
                    return;
                }
                Some(b',') => self.i += 1,
                _ => {
                    let k = self.key();
                    self.ws();
                    self.i += 1; // ':'
                    self.ws();
                    f(self, k);
                }
            }
        }
    }

    /// At a `[`: `f` consumes each element (the scanner is before it).
    fn array(&mut self, mut f: impl FnMut(&mut Self)) {
        self.i += 1;
        loop {
            self.ws();
            match self.b.get(self.i) {
                Some(b']') | None => {
                    self.i += 1;
                    return;
                }
                Some(b',') => self.i += 1,
                _ => f(self),
            }
        }
    }

    /// The span of each cell's `source` (the last one where a key repeats, as serde_json reads
    /// it), with the spans of its items when it is a list.
    fn source_spans(mut self) -> Vec<SourceSpan> {
        let mut cells: Vec<SourceSpan> = vec![];
        self.ws();
        if self.b.get(self.i) != Some(&b'{') {
            return cells;
        }
        self.object(|s, k| {
            if k != "cells" || s.b.get(s.i) != Some(&b'[') {
                s.value();
                return;
            }
            let mut found = vec![];
            s.array(|s| {
                let mut span: SourceSpan = (0..0, None);
                if s.b.get(s.i) != Some(&b'{') {
                    s.value();
                    found.push(span);
                    return;
                }
                s.object(|s, k| {
                    if k != "source" {
                        s.value();
                        return;
                    }
                    let start = s.i;
                    if s.b.get(s.i) == Some(&b'[') {
                        let mut items = vec![];
                        s.array(|s| items.push(s.value()));
                        span = (start..s.i, Some(items));
                    } else {
                        span = (s.value(), None);
                    }
                });
                found.push(span);
            });
            cells = found;
        });
        cells
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NB: &str = "{\n \"cells\": [\n  {\n   \"cell_type\": \"code\",\n   \"metadata\": {},\n   \"source\": [\n    \"x = 1\\n\",\n    \"y = \\\"é\\\"\"\n   ]\n  },\n  {\n   \"cell_type\": \"markdown\",\n   \"source\": \"# Title\"\n  },\n  {\n   \"cell_type\": \"code\",\n   \"source\": []\n  }\n ],\n \"metadata\": {\"kernelspec\": {\"language\": \"python\"}},\n \"nbformat\": 4\n}\n";

    #[test]
    fn cells_and_their_spans() {
        let nb = read(NB).unwrap();
        assert_eq!(nb.cells.len(), 3);
        assert_eq!(nb.cells[0].source, "x = 1\ny = \"é\"");
        assert_eq!(nb.cells[1].source, "# Title");
        assert_eq!(&NB[nb.cells[1].span.clone()], "\"# Title\"");
        assert_eq!(nb.cells[2].items.as_deref(), Some(&[][..]));
        assert_eq!(nb.language.as_deref(), Some("python"));
        assert_eq!(nb.indent_unit, " ");
    }

    #[test]
    fn unchanged_lines_keep_their_own_whitespace() {
        // A hand-edited notebook: one line indented differently from the others.
        let nb_text = "{\"cells\": [{\"cell_type\": \"code\", \"metadata\": {}, \"source\": [\n        \"a = 1\\n\",\n    \"b = 2\\n\",\n        \"c = 3\"\n      ]}], \"metadata\": {}, \"nbformat\": 4, \"nbformat_minor\": 5}\n";
        let nb = read(nb_text).unwrap();
        let out = nb.with_sources(nb_text, &[(0, "b = 2\nc = 3".into())]);
        assert_eq!(
            out,
            nb_text.replace("\n        \"a = 1\\n\",\n    \"b", "\n    \"b"),
            "{out}"
        );
    }

    #[test]
    fn rewriting_a_source_keeps_the_layout() {
        let nb = read(NB).unwrap();
        let out = nb.with_sources(NB, &[(0, "x = 2\ny = \"é\"".into())]);
        assert_eq!(out, NB.replace("\"x = 1\\n\"", "\"x = 2\\n\""));
        // Unchanged: byte-identical.
        assert_eq!(nb.with_sources(NB, &[(0, nb.cells[0].source.clone())]), NB);
        // An empty list gets Jupyter's layout; a string stays a string.
        let out = nb.with_sources(NB, &[(2, "a\nb".into()), (1, "# T".into())]);
        assert!(
            out.contains("   \"source\": [\n    \"a\\n\",\n    \"b\"\n   ]\n"),
            "{out}"
        );
        assert!(out.contains("\"source\": \"# T\""), "{out}");
        let back = read(&out).unwrap();
        assert_eq!(back.cells[2].source, "a\nb");
    }

    #[test]
    fn bad_notebooks_are_explained() {
        let e = read("{\"cells\": [").unwrap_err();
        assert!(e.contains("invalid JSON at line 1"), "{e}");
        // Broken JSON inside a cell: the cell is named (counted by its `cell_type` keys).
        let text = "{\"cells\": [\n {\"cell_type\": \"code\", \"source\": []},\n {\"cell_type\": \"code\", \"source\": [\"x\" \"y\"]}\n]}\n";
        let e = read(text).unwrap_err();
        assert!(e.contains("invalid JSON at line 3 column "), "{e}");
        assert!(e.contains(", in cell 2 (expected"), "{e}");
        let e = read("{\"metadata\": {}}").unwrap_err();
        assert!(e.contains("no `cells`"), "{e}");
        let e = read("{\"worksheets\": []}").unwrap_err();
        assert!(e.contains("nbformat 3"), "{e}");
        let e = read("[1]").unwrap_err();
        assert!(e.contains("not a JSON object"), "{e}");
    }
}
