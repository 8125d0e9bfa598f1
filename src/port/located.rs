//! Errors in the TOML files a person writes (rule files, `[tool.tpuport]` tables) as one line
//! they can act on: `PATH:LINE: `key`: what is wrong; what to do`. Values quoted in a message
//! are shown with their control characters escaped, so a stray newline cannot split the line.

/// `s` with control characters escaped (`\n`, `\t`, `\u{1b}`, ...), everything else as it is.
pub fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}') {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// The 1-based line of byte `offset` in `text` (the last line when past the end).
pub fn line_of_offset(text: &str, offset: usize) -> usize {
    let bytes = text.as_bytes();
    bytes[..offset.min(bytes.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// The dotted key a TOML deserialisation error is about (`rule.2.fix`), if it says.
pub fn toml_key(e: &toml::de::Error) -> Option<String> {
    // The error keeps the keys to itself and prints them only without the input: "in `a.b`".
    let mut bare = e.clone();
    bare.set_input(None);
    let text = bare.to_string();
    let line = text.lines().rev().find(|l| l.starts_with("in `"))?;
    Some(
        line.trim_start_matches("in `")
            .trim_end_matches('`')
            .to_string(),
    )
}

/// A TOML error as `(line, message)`: the line where it is (1 when the parser does not say),
/// and the message in one line, led by the key it is about.
pub fn toml_error(text: &str, e: &toml::de::Error) -> (usize, String) {
    let line = e.span().map(|s| line_of_offset(text, s.start)).unwrap_or(1);
    let message = one_line(e.message().trim_end());
    let message = match toml_key(e) {
        Some(k) if !message.contains(&format!("`{k}`")) => format!("`{}`: {message}", one_line(&k)),
        _ => message,
    };
    (line, message)
}

/// The line where `value` is given to `key` (`select = ["DEV", "X"]`: the line of `"X"`), found
/// in the text: the first line from the key's on that quotes the value; else the key's line;
/// else 1.
pub fn value_line(text: &str, key: &str, value: &str) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    let key_at = lines.iter().position(|l| {
        let l = l.trim_start();
        l.strip_prefix(key)
            .or_else(|| l.strip_prefix(&format!("\"{key}\"")))
            .is_some_and(|rest| rest.trim_start().starts_with('='))
    });
    let Some(k) = key_at else { return 1 };
    let quoted = [format!("\"{value}\""), format!("'{value}'")];
    lines[k..]
        .iter()
        .take(200)
        .position(|l| quoted.iter().any(|q| l.contains(q.as_str())))
        .map(|i| k + i + 1)
        .unwrap_or(k + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Rule {
        id: String,
        fix: Option<String>,
    }

    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct File {
        rule: Vec<Rule>,
    }

    #[test]
    fn type_errors_name_the_key_and_the_line() {
        let text = "[[rule]]\nid = \"A\"\n\n[[rule]]\nid = \"B\"\nfix = 3\n";
        let e = toml::from_str::<File>(text).unwrap_err();
        let (line, msg) = toml_error(text, &e);
        assert_eq!(line, 6, "{msg}");
        assert!(msg.starts_with("`rule.fix`: invalid type"), "{msg}");
    }

    #[test]
    fn control_characters_stay_on_one_line() {
        let text = "[[rule]]\nid = \"A\"\nfix = \"safe\\n\"\nnope\u{1b} = 1\n";
        let e = toml::from_str::<File>(text).unwrap_err();
        let (_, msg) = toml_error(text, &e);
        assert!(!msg.contains('\n'), "{msg:?}");
        assert_eq!(one_line("a\nb\u{feff}\t"), "a\\nb\\u{feff}\\t");
    }

    #[test]
    fn values_are_found_under_their_key() {
        let text = "[tool.tpuport]\nignore = [\"X\"]\nselect = [\n  \"DEV\",\n  \"X\",\n]\n";
        assert_eq!(value_line(text, "select", "X"), 5);
        assert_eq!(value_line(text, "ignore", "X"), 2);
        assert_eq!(value_line(text, "exclude", "X"), 1);
        assert_eq!(value_line(text, "select", "nowhere"), 3);
    }
}
