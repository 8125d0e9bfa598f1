//! `migrate --output-format sarif`: the findings as one SARIF 2.1.0 log (code-scanning tools,
//! GitHub's `upload-sarif`, IDE viewers). Per file, [`results`] turns findings into SARIF
//! results (in parallel, like the other formats); [`log`] puts them in one run with the rules
//! they name, and the files that could not be read or parsed as notifications.
//!
//! Columns are counted in Unicode code points, like the text and JSON output
//! (`run.columnKind = "unicodeCodePoints"`). Levels: a finding whose fix this run applies (or
//! `--write` would) is a `note`; manual findings and fixes not enabled (unsafe without
//! `--unsafe-fixes`) are `warning`s. Nothing is an `error`: errors are bad input, reported as
//! notifications.

use ruff_text_size::TextRange;
use serde_json::{Map, Value, json};

use super::diagnostic::Diagnostic;
use super::files::FileIssue;
use super::render::LineIndex;
use super::rules::{FixClass, RuleSet};

const SCHEMA: &str =
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";
const REPOSITORY: Option<&str> = option_env!("CARGO_PKG_REPOSITORY");

/// The SARIF level of a finding: `note` where the fix is applied, `warning` otherwise.
pub fn level(d: &Diagnostic, required: FixClass) -> &'static str {
    match &d.fix {
        Some(f) if f.applies(required) => "note",
        _ => "warning",
    }
}

/// A path as a SARIF URI reference: forward slashes, percent-encoded where URIs need it;
/// relative paths are relative to `%SRCROOT%`, absolute ones become `file://` URIs.
pub fn uri(path: &str) -> (String, bool) {
    let slashed = path.replace('\\', "/");
    let mut out = String::with_capacity(slashed.len());
    for b in slashed.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if slashed.starts_with('/') {
        (format!("file://{out}"), false)
    } else {
        (out, true)
    }
}

fn artifact(path: &str) -> Value {
    let (uri, relative) = uri(path);
    let mut a = json!({ "uri": uri });
    if relative {
        a["uriBaseId"] = json!("%SRCROOT%");
    }
    a
}

fn region(index: &LineIndex, text: &str, range: TextRange) -> Value {
    let (start_line, start_column) = index.line_col(text, range.start());
    let (end_line, end_column) = index.line_col(text, range.end());
    json!({
        "startLine": start_line,
        "startColumn": start_column,
        "endLine": end_line,
        "endColumn": end_column,
    })
}

/// The SARIF results for one file's findings. `ruleIndex` is filled in by [`log`].
pub fn results(
    path: &str,
    text: &str,
    diags: &[Diagnostic],
    rules: &RuleSet,
    required: FixClass,
) -> Vec<Value> {
    let index = LineIndex::new(text);
    diags
        .iter()
        .map(|d| {
            let rule = &rules.rules[d.rule];
            let class = d.fix.as_ref().map_or(FixClass::Manual, |f| f.applicability);
            let applied = d.fix.as_ref().is_some_and(|f| f.applies(required));
            let mut r = json!({
                "ruleId": rule.id,
                "level": level(d, required),
                "message": { "text": d.message },
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": artifact(path),
                        "region": region(&index, text, d.range),
                    }
                }],
                "properties": { "fixClass": class.as_str(), "fixApplied": applied },
            });
            if let Some(note) = &d.note {
                r["properties"]["note"] = json!(note);
            }
            if let Some(f) = d.fix.as_ref().filter(|f| !f.edits.is_empty()) {
                let replacements: Vec<Value> = f
                    .edits
                    .iter()
                    .map(|e| {
                        json!({
                            "deletedRegion": region(&index, text, e.range),
                            "insertedContent": { "text": e.content },
                        })
                    })
                    .collect();
                let description = if applied {
                    format!(
                        "{} fix, applied by `tpuport migrate --write`",
                        class.as_str()
                    )
                } else {
                    format!(
                        "{} fix, applied only with `tpuport migrate --write --unsafe-fixes`",
                        class.as_str()
                    )
                };
                r["fixes"] = json!([{
                    "description": { "text": description },
                    "artifactChanges": [{
                        "artifactLocation": artifact(path),
                        "replacements": replacements,
                    }],
                }]);
            }
            r
        })
        .collect()
}

fn notification(issue: &FileIssue, level: &str) -> Value {
    let mut n = json!({
        "level": level,
        "message": { "text": issue.to_string() },
    });
    let mut loc = json!({ "artifactLocation": artifact(&issue.path.display().to_string()) });
    if let Some((l, c)) = issue.location.as_deref().and_then(|s| s.split_once(':'))
        && let (Ok(l), Ok(c)) = (l.parse::<usize>(), c.parse::<usize>())
        && l > 0
        && c > 0
    {
        loc["region"] = json!({ "startLine": l, "startColumn": c });
    }
    n["locations"] = json!([{ "physicalLocation": loc }]);
    n
}

fn text(s: &str) -> Value {
    json!({ "text": s.trim() })
}

/// The whole log: one run of tpuport with the rules that `results` name (in rule order), every
/// result's `ruleIndex`, and the files with errors (and the warnings) as notifications;
/// `executionSuccessful` is false when a file could not be read or parsed.
pub fn log(
    rules: &RuleSet,
    mut results: Vec<Value>,
    errors: &[FileIssue],
    warnings: &[FileIssue],
    to: crate::port::Target,
) -> Value {
    let used: std::collections::BTreeSet<&str> = results
        .iter()
        .filter_map(|r| r["ruleId"].as_str())
        .collect();
    let mut ids: Vec<&str> = vec![];
    let mut descriptors: Vec<Value> = vec![];
    for rule in &rules.rules {
        if !used.contains(rule.id.as_str()) || ids.contains(&rule.id.as_str()) {
            continue;
        }
        ids.push(&rule.id);
        let mut d = json!({
            "id": rule.id,
            "name": rule.name,
            "shortDescription": text(&rule.message),
            "defaultConfiguration": {
                "level": if rule.fix_class(to) == FixClass::Safe { "note" } else { "warning" },
            },
            "properties": { "fixClass": rule.fix_class(to).as_str(), "family": rule.family },
        });
        if let Some(advice) = &rule.advice {
            d["fullDescription"] = text(advice);
            d["help"] = text(advice);
        }
        descriptors.push(d);
    }
    for r in &mut results {
        let id = r["ruleId"].as_str().unwrap_or_default();
        if let Some(i) = ids.iter().position(|x| *x == id) {
            r["ruleIndex"] = json!(i);
        }
    }
    let mut driver = Map::new();
    driver.insert("name".into(), json!("tpuport"));
    driver.insert("version".into(), json!(env!("CARGO_PKG_VERSION")));
    if let Some(url) = REPOSITORY.filter(|u| !u.is_empty()) {
        driver.insert("informationUri".into(), json!(url));
    }
    driver.insert("rules".into(), Value::Array(descriptors));
    let notifications: Vec<Value> = errors
        .iter()
        .map(|i| notification(i, "error"))
        .chain(warnings.iter().map(|i| notification(i, "warning")))
        .collect();
    let mut invocation = json!({ "executionSuccessful": errors.is_empty() });
    if !notifications.is_empty() {
        invocation["toolExecutionNotifications"] = Value::Array(notifications);
    }
    json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": driver },
            "invocations": [invocation],
            "columnKind": "unicodeCodePoints",
            "originalUriBaseIds": {
                "%SRCROOT%": { "description": text("the folder tpuport migrate ran in") },
            },
            "results": results,
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_become_uri_references() {
        assert_eq!(uri("src/a b.py"), ("src/a%20b.py".into(), true));
        assert_eq!(uri("dir\\x#1.py"), ("dir/x%231.py".into(), true));
        assert_eq!(uri("/tmp/é.py"), ("file:///tmp/%C3%A9.py".into(), false));
    }

    #[test]
    fn rules_are_the_ones_results_name_with_their_index() {
        let rules = RuleSet::builtin();
        let rule = rules.rules.iter().position(|r| r.id == "DEV017").unwrap();
        let d = Diagnostic {
            rule,
            range: TextRange::new(4.into(), 10.into()),
            message: "m".into(),
            fix: None,
            note: None,
        };
        let rs = results("a.py", "x = \"cuda\"\n", &[d], &rules, FixClass::Safe);
        let log = log(&rules, rs, &[], &[], crate::port::Target::Tpu);
        let run = &log["runs"][0];
        assert_eq!(run["tool"]["driver"]["rules"].as_array().unwrap().len(), 1);
        assert_eq!(run["tool"]["driver"]["rules"][0]["id"], "DEV017");
        assert_eq!(run["results"][0]["ruleIndex"], 0);
        assert_eq!(run["results"][0]["level"], "warning");
        let region = &run["results"][0]["locations"][0]["physicalLocation"]["region"];
        assert_eq!(
            (&region["startColumn"], &region["endColumn"]),
            (&json!(5), &json!(11))
        );
        assert_eq!(run["invocations"][0]["executionSuccessful"], true);
    }
}
