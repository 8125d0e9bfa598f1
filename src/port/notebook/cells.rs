//! The code cells of a notebook as one Python module, the way a kernel sees them (an import in
//! cell 1 serves cell 5), and back.
//!
//! IPython syntax that is not Python (`%magic`, `!shell`, `x = !cmd`, `obj?`) is masked line by
//! line with a placeholder comment (`pass` inside a block) so line numbers stay, and restored
//! afterwards. A cell that starts with a cell magic (`%%time`) is left out entirely. Each cell
//! is preceded by a marker comment line; after the rewrite the markers must all be there, in
//! order, on lines of their own, and every placeholder must be found again in its cell:
//! otherwise some edit crossed a cell boundary and the rewrite is refused.

use regex::Regex;
use std::sync::LazyLock;

const MARKER: &str = "# tpuport-notebook-cell ";
/// A comment starting with `tpuport` counts as a tool directive: no fix removes it.
const MASK: &str = "# tpuport-notebook-mask";

/// `x = !ls`, `a, b = %time f()`.
static ASSIGNED_MAGIC: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[ \t]*[A-Za-z_][\w.]*([ \t]*,[ \t]*[A-Za-z_][\w.]*)*[ \t]*=[ \t]*[%!]")
        .expect("valid regex")
});

/// One code cell in the virtual module.
#[derive(Debug, Clone)]
pub struct Part {
    /// The cell's position among all cells of the notebook (0-based).
    pub cell: usize,
    /// The cell's text, as in the notebook.
    pub original: String,
    /// Byte range of the cell's (masked) text in the module, after its marker line.
    pub start: usize,
    pub end: usize,
    /// The lines masked, in order.
    masks: Vec<String>,
    /// A newline was added to end the cell's last line.
    added_newline: bool,
}

impl Part {
    /// A byte offset in the cell's masked text (`masked`) as an offset in its source.
    pub fn original_offset(&self, masked: &str, off: usize) -> usize {
        let off = off.min(masked.len());
        let line = masked[..off].matches('\n').count();
        let col = off - masked[..off].rfind('\n').map(|i| i + 1).unwrap_or(0);
        let start: usize = self
            .original
            .split_inclusive('\n')
            .take(line)
            .map(str::len)
            .sum();
        (start + col).min(self.original.len())
    }
}

/// The code cells joined into one module.
#[derive(Debug)]
pub struct Module {
    pub text: String,
    pub parts: Vec<Part>,
}

/// Whether a cell is run by a cell magic (`%%time`, `%%bash`): such cells are left alone.
pub fn is_cell_magic(source: &str) -> bool {
    source.trim_start().starts_with("%%")
}

/// Join the code cells `(position, source)` into a module.
pub fn build(cells: &[(usize, &str)]) -> Module {
    let mut text = String::new();
    let mut parts = vec![];
    for (cell, source) in cells {
        text.push_str(&format!("{MARKER}{}\n", cell + 1));
        let (masked, masks) = mask(source);
        let start = text.len();
        text.push_str(&masked);
        let added_newline = !masked.is_empty() && !masked.ends_with('\n');
        if added_newline {
            text.push('\n');
        }
        parts.push(Part {
            cell: *cell,
            original: source.to_string(),
            start,
            end: text.len(),
            masks,
            added_newline,
        });
    }
    Module { text, parts }
}

impl Module {
    /// The part that holds byte `offset` of the module (a marker line counts with the cell
    /// before it, and the first marker with the first cell).
    pub fn part_at(&self, offset: usize) -> usize {
        self.parts
            .iter()
            .rposition(|p| p.start <= offset)
            .or_else(|| (!self.parts.is_empty()).then_some(0))
            .unwrap_or(0)
    }

    /// The new text of each cell from the rewritten module, or why the rewrite must be refused.
    pub fn split(&self, new: &str) -> Result<Vec<String>, String> {
        let crossed = "a fix would cross a cell boundary";
        let mut bodies: Vec<String> = vec![];
        let mut current: Option<String> = None;
        for line in new.split_inclusive('\n') {
            if let Some(n) = line.strip_prefix(MARKER) {
                let expected = self
                    .parts
                    .get(bodies.len() + usize::from(current.is_some()));
                if expected.map(|p| (p.cell + 1).to_string()).as_deref() != Some(n.trim_end()) {
                    return Err(crossed.into());
                }
                if let Some(done) = current.take() {
                    bodies.push(done);
                }
                current = Some(String::new());
                continue;
            }
            match current.as_mut() {
                Some(body) => body.push_str(line),
                // Text before the first cell's marker.
                None => return Err(crossed.into()),
            }
        }
        bodies.extend(current);
        if bodies.len() != self.parts.len() {
            return Err(crossed.into());
        }
        bodies
            .into_iter()
            .zip(&self.parts)
            .map(|(body, part)| {
                let mut body = unmask(&body, &part.masks).ok_or_else(|| {
                    "a fix would remove or move an IPython magic, shell or help line".to_string()
                })?;
                if part.added_newline && body.ends_with('\n') {
                    body.pop();
                }
                Ok(body)
            })
            .collect()
    }
}

/// Replace the IPython lines of a cell with placeholders; returns the text and the lines taken.
fn mask(source: &str) -> (String, Vec<String>) {
    let mut out = String::with_capacity(source.len());
    let mut masks = vec![];
    let mut state = Lexer::default();
    // The indentation of a magic continued with a backslash on the next lines.
    let mut continued_magic: Option<String> = None;
    for line in source.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        let eol = &line[body.len()..];
        let at_start = state.at_logical_start();
        let own_indent = &body[..body.len() - body.trim_start().len()];
        let indent = match &continued_magic {
            Some(i) => Some(i.clone()),
            None => (at_start && is_ipython(body)).then(|| own_indent.to_string()),
        };
        if let Some(indent) = indent {
            if indent.is_empty() {
                out.push_str(MASK);
            } else {
                out.push_str(&format!("{indent}pass  {MASK}"));
            }
            out.push_str(eol);
            masks.push(body.to_string());
            continued_magic = body.ends_with('\\').then_some(indent);
            continue;
        }
        state.line(body);
        out.push_str(line);
    }
    (out, masks)
}

/// Restore the masked lines; `None` if the placeholders are not all there, once each.
fn unmask(text: &str, masks: &[String]) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut next = masks.iter();
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        let t = body.trim_start();
        if t == MASK || t.strip_prefix("pass").map(str::trim_start) == Some(MASK) {
            out.push_str(next.next()?);
            out.push_str(&line[body.len()..]);
        } else {
            out.push_str(line);
        }
    }
    next.next().is_none().then_some(out)
}

/// A line of IPython syntax rather than Python, at the start of a logical line.
fn is_ipython(line: &str) -> bool {
    let t = line.trim_start();
    if t.starts_with('%') || t.starts_with('!') || ASSIGNED_MAGIC.is_match(line) {
        return true;
    }
    // `obj?`, `obj??`, `?obj`: `?` is no Python token, outside strings and comments.
    !t.starts_with('#') && code_has_question_mark(t)
}

fn code_has_question_mark(line: &str) -> bool {
    let mut lexer = Lexer::default();
    lexer.line(line);
    lexer.question
}

/// Just enough of Python's tokenizer to know where logical lines start: brackets, strings
/// (triple-quoted ones span lines), comments and backslash continuations.
#[derive(Default)]
struct Lexer {
    depth: usize,
    /// Inside a string: its quote and whether it is triple.
    string: Option<(char, bool)>,
    continued: bool,
    /// A `?` was seen outside strings and comments.
    question: bool,
}

impl Lexer {
    fn at_logical_start(&self) -> bool {
        self.depth == 0 && self.string.is_none() && !self.continued
    }

    fn line(&mut self, line: &str) {
        self.continued = false;
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if let Some((q, triple)) = self.string {
                if c == '\\' {
                    i += 2;
                    continue;
                }
                if c == q {
                    if !triple {
                        self.string = None;
                    } else if chars.get(i + 1) == Some(&q) && chars.get(i + 2) == Some(&q) {
                        self.string = None;
                        i += 3;
                        continue;
                    }
                }
                i += 1;
                continue;
            }
            match c {
                '#' => break,
                '\'' | '"' => {
                    let triple = chars.get(i + 1) == Some(&c) && chars.get(i + 2) == Some(&c);
                    self.string = Some((c, triple));
                    i += if triple { 3 } else { 1 };
                    continue;
                }
                '(' | '[' | '{' => self.depth += 1,
                ')' | ']' | '}' => self.depth = self.depth.saturating_sub(1),
                '?' => self.question = true,
                '\\' if i + 1 == chars.len() => self.continued = true,
                _ => {}
            }
            i += 1;
        }
        // A one-quote string ends with its line (unless continued with a backslash).
        if let Some((_, false)) = self.string
            && !line.ends_with('\\')
        {
            self.string = None;
        }
        if self.string.is_some_and(|(_, triple)| !triple) {
            self.continued = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipython_lines_are_masked_and_restored() {
        let src = "%matplotlib inline\n!pip install torch \\\n    numpy\nfiles = !ls\nmodel?\n??model.cuda\nfor i in range(3):\n    %time f(i)\nx = (a\n     % b)\ns = \"\"\"\n!not shell\n\"\"\"\ny = 1  # why?";
        let (masked, masks) = mask(src);
        assert_eq!(masks.len(), 7, "{masks:?}");
        assert!(masked.starts_with(&format!("{MASK}\n{MASK}\n{MASK}\n{MASK}\n")));
        assert!(masked.contains(&format!("    pass  {MASK}\n")));
        assert!(masked.contains("     % b)\n"));
        assert!(masked.contains("!not shell\n"));
        assert!(masked.ends_with("y = 1  # why?"));
        assert!(crate::port::parse::is_valid(&masked), "{masked}");
        assert_eq!(unmask(&masked, &masks).as_deref(), Some(src));
        // A placeholder lost: refused.
        let lost = masked.replacen(&format!("{MASK}\n"), "", 1);
        assert!(unmask(&lost, &masks).is_none());
    }

    #[test]
    fn cells_round_trip_and_locate() {
        let cells = [(0, "import torch"), (2, "x = 1\n"), (3, "")];
        let m = build(&cells);
        assert_eq!(
            m.text,
            "# tpuport-notebook-cell 1\nimport torch\n# tpuport-notebook-cell 3\nx = 1\n# tpuport-notebook-cell 4\n"
        );
        assert_eq!(
            m.split(&m.text).unwrap(),
            vec!["import torch", "x = 1\n", ""]
        );
        let at = m.text.find("x = 1").unwrap();
        assert_eq!(m.parts[m.part_at(at)].cell, 2);
        // An import added after the last import stays in the first cell.
        let new = m
            .text
            .replace("import torch\n", "import torch\nimport os\n");
        assert_eq!(m.split(&new).unwrap()[0], "import torch\nimport os");
        // A marker removed or moved: refused.
        let gone = m.text.replace("# tpuport-notebook-cell 3\n", "");
        assert!(m.split(&gone).is_err());
        assert!(m.split(&format!("import os\n{}", m.text)).is_err());
    }

    #[test]
    fn cell_magics() {
        assert!(is_cell_magic("%%time\nx.cuda()"));
        assert!(is_cell_magic("\n%%bash\nls"));
        assert!(!is_cell_magic("%time x.cuda()"));
    }
}
