//! Rules are data: the TOML schema of `rules/*.toml`, loading (built in, plus `--rules DIR`),
//! and validation with errors that name the file, the line and what to change.
//!
//! A rule file holds one family (`family = "DEV"`), optional named *position classes* (where a
//! string literal counts as a device or a backend), and `[[rule]]` entries. Each rule has an id
//! (family prefix + 3 digits), a `[rule.match]` (call, reference, method, attribute, keyword or
//! string), an optional `[rule.action]` (rename, replace, call-argument mapping, string rewrite,
//! removal), a fix class (`safe`, `unsafe`, `manual`), a one-line message, advice, and a
//! before/after example that the test suite runs.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use regex::Regex;
use serde::Deserialize;

/// The built-in rule files, compiled into the binary.
pub const BUILTIN: &[(&str, &str)] = &[
    ("rules/DEV.toml", include_str!("../../rules/DEV.toml")),
    ("rules/CUD.toml", include_str!("../../rules/CUD.toml")),
    ("rules/MEM.toml", include_str!("../../rules/MEM.toml")),
    ("rules/RNG.toml", include_str!("../../rules/RNG.toml")),
    ("rules/PRC.toml", include_str!("../../rules/PRC.toml")),
    ("rules/DST.toml", include_str!("../../rules/DST.toml")),
    ("rules/ENV.toml", include_str!("../../rules/ENV.toml")),
    ("rules/XLA.toml", include_str!("../../rules/XLA.toml")),
    ("rules/XM.toml", include_str!("../../rules/XM.toml")),
    ("rules/XR.toml", include_str!("../../rules/XR.toml")),
    ("rules/XMP.toml", include_str!("../../rules/XMP.toml")),
    ("rules/XPL.toml", include_str!("../../rules/XPL.toml")),
    ("rules/XMET.toml", include_str!("../../rules/XMET.toml")),
    ("rules/XS.toml", include_str!("../../rules/XS.toml")),
    ("rules/XAMP.toml", include_str!("../../rules/XAMP.toml")),
    ("rules/XU.toml", include_str!("../../rules/XU.toml")),
];

/// How far a fix may be trusted. Ordered: `Manual < Unsafe < Safe`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, serde::Serialize,
)]
#[serde(rename_all = "lowercase")]
pub enum FixClass {
    /// Diagnostic only: no rewrite, advice says what to do.
    Manual,
    /// A rewrite that may change meaning; applied only with `--unsafe-fixes`.
    Unsafe,
    /// A rewrite that keeps the program's meaning on TPU; applied by default.
    Safe,
}

impl FixClass {
    pub fn as_str(self) -> &'static str {
        match self {
            FixClass::Manual => "manual",
            FixClass::Unsafe => "unsafe",
            FixClass::Safe => "safe",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StringForm {
    /// `"cuda:0"`
    Plain,
    /// `f"cuda:{rank}"`
    Fstring,
    /// `"cuda:{}".format(rank)`
    Format,
    /// `"cuda:%d" % rank`
    Percent,
    /// `"cuda:" + str(rank)`
    Concat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArgKind {
    Missing,
    None,
    Int,
    String,
    /// `True` (falls back to `other` where no `true` template is given).
    True,
    /// `False` (falls back to `other`).
    False,
    Other,
}

impl ArgKind {
    /// Whether a list of kinds (`unsafe = [...]`, `manual = [...]`) covers this kind; booleans
    /// are also covered by `other`.
    pub fn listed_in(self, list: &[ArgKind]) -> bool {
        list.contains(&self)
            || (matches!(self, ArgKind::True | ArgKind::False) && list.contains(&ArgKind::Other))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RemoveKind {
    /// The statement that holds the match (an expression statement, or an assignment that binds
    /// no name).
    Statement,
    /// The matched keyword argument.
    Keyword,
}

// ---------------------------------------------------------------------------------------------
// File schema

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFileDef {
    family: String,
    title: String,
    #[serde(default)]
    about: Option<String>,
    #[serde(default)]
    positions: BTreeMap<String, Vec<String>>,
    /// Key words for the file pre-filter of every rule here that names none itself (instead of
    /// the segments of its qualified names): `["torch_xla"]`.
    #[serde(default)]
    needles: Option<Vec<String>>,
    #[serde(default, rename = "rule")]
    rules: Vec<RuleDef>,
    /// Helper definitions that fixes may call (`_tpuport_rank()`), inserted once per file.
    #[serde(default)]
    helpers: BTreeMap<String, HelperDef>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HelperDef {
    /// The top-level definition, as Python source (`def NAME(...): ...`).
    code: String,
    /// Modules the code needs imported (`os`, `torch`).
    #[serde(default)]
    imports: Vec<String>,
}

/// A helper function that fixes may call; see [`super::helpers`].
#[derive(Debug, Clone)]
pub struct Helper {
    pub name: String,
    pub code: String,
    pub imports: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleDef {
    id: String,
    name: String,
    message: String,
    #[serde(default)]
    advice: Option<String>,
    fix: FixClass,
    #[serde(rename = "match")]
    matcher: MatchDef,
    #[serde(default)]
    action: Option<ActionDef>,
    #[serde(default)]
    example: Option<Example>,
    #[serde(default)]
    needles: Option<Vec<String>>,
    /// The fix is shown as unsafe when the file (as given) uses one of these qualified names...
    #[serde(default)]
    unsafe_if_uses: Vec<String>,
    /// ...and none of these.
    #[serde(default)]
    unless_uses: Vec<String>,
    /// The rule only applies in files that use one of these qualified names...
    #[serde(default)]
    only_if_uses: Vec<String>,
    /// ...and never in files that use one of these.
    #[serde(default)]
    not_if_uses: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct MatchDef {
    call: Option<Vec<String>>,
    reference: Option<Vec<String>>,
    method: Option<Vec<String>>,
    attribute: Option<Vec<String>>,
    keyword: Option<Vec<String>>,
    string: Option<String>,
    #[serde(rename = "in")]
    positions: Option<Vec<String>>,
    forms: Option<Vec<StringForm>>,
    receiver: Option<String>,
    min_args: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ActionDef {
    rename: Option<RenameDef>,
    replace: Option<String>,
    to: Option<String>,
    args: Option<Vec<String>>,
    params: Option<Vec<String>>,
    #[serde(default)]
    pass_rest: bool,
    #[serde(default)]
    convert: BTreeMap<String, ConvertDef>,
    string: Option<String>,
    remove: Option<RemoveKind>,
    /// `unwrap = "with"`: replace the `with` statement the matched call opens by its body.
    unwrap: Option<UnwrapKind>,
    /// A one-line comment left where the statement was rewritten or removed.
    note: Option<String>,
    /// Where the note is left: `"always"` (default) or only `"loop"` (inside a for/while).
    note_in: Option<NoteWhere>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnwrapKind {
    With,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NoteWhere {
    Always,
    Loop,
}

/// A comment that a fix leaves in the code.
#[derive(Debug, Clone)]
pub struct Note {
    pub text: String,
    pub only_in_loop: bool,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RenameDef {
    One(String),
    Map(BTreeMap<String, String>),
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConvertDef {
    pub missing: Option<String>,
    pub none: Option<String>,
    pub int: Option<String>,
    pub string: Option<String>,
    #[serde(rename = "true")]
    pub true_: Option<String>,
    #[serde(rename = "false")]
    pub false_: Option<String>,
    pub other: Option<String>,
    /// Argument kinds for which the fix is only unsafe.
    #[serde(default, rename = "unsafe")]
    pub unsafe_for: Vec<ArgKind>,
    /// Argument kinds for which no fix is offered.
    #[serde(default, rename = "manual")]
    pub manual_for: Vec<ArgKind>,
}

impl ConvertDef {
    pub fn template(&self, kind: ArgKind) -> Option<&str> {
        match kind {
            ArgKind::Missing => self.missing.as_deref(),
            ArgKind::None => self.none.as_deref(),
            ArgKind::Int => self.int.as_deref(),
            ArgKind::String => self.string.as_deref(),
            ArgKind::True => self.true_.as_deref().or(self.other.as_deref()),
            ArgKind::False => self.false_.as_deref().or(self.other.as_deref()),
            ArgKind::Other => self.other.as_deref(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Example {
    pub before: String,
    pub after: String,
}

// ---------------------------------------------------------------------------------------------
// Compiled rules

#[derive(Debug)]
pub enum Matcher {
    /// A call whose callee resolves to one of these qualified names.
    Call(Vec<String>),
    /// A reference (name or attribute chain) resolving to one of these; `prefix.*` matches any
    /// chain under the prefix (and the prefix itself) and is a fallback.
    Reference {
        exact: Vec<String>,
        prefixes: Vec<String>,
    },
    /// `<value>.name(...)` where the receiver is not an imported module.
    Method(Vec<String>),
    /// `<value>.name` (not called) where the receiver is not an imported module.
    Attribute(Vec<String>),
    /// A keyword argument, optionally only in calls to these qualified names.
    Keyword {
        names: Vec<String>,
        calls: Vec<String>,
    },
    /// A string literal whose static text matches, in one of these position classes.
    String {
        regex: Regex,
        /// None = any position (a fallback rule).
        positions: Option<Vec<String>>,
        forms: Vec<StringForm>,
    },
}

#[derive(Debug)]
pub enum Action {
    /// Replace the matched expression (for calls: the callee) with a qualified name; a map
    /// chooses by the matched qualified name.
    Rename(BTreeMap<String, String>),
    /// Replace the `with` statement opened by the matched call with its body, dedented.
    Unwrap,
    /// Replace the whole matched expression with a template.
    Replace(String),
    /// Rewrite a call: new callee (qualified name, or `.method` on the same receiver) and
    /// argument list built from the source parameters.
    Call {
        to: Option<String>,
        args: Vec<String>,
    },
    /// Rewrite the static text of a string with a regex replacement.
    String(String),
    Remove(RemoveKind),
}

#[derive(Debug)]
pub struct Rule {
    pub id: String,
    pub family: String,
    pub name: String,
    pub message: String,
    pub advice: Option<String>,
    pub fix: FixClass,
    pub matcher: Matcher,
    pub action: Option<Action>,
    pub params: Vec<String>,
    pub pass_rest: bool,
    pub convert: BTreeMap<String, ConvertDef>,
    pub receiver: Option<Regex>,
    pub min_args: Option<usize>,
    pub example: Option<Example>,
    /// A comment the fix leaves at the statement.
    pub note: Option<Note>,
    /// The fix is unsafe in files that use one of these names and none of `unless_uses`.
    pub unsafe_if_uses: Vec<String>,
    pub unless_uses: Vec<String>,
    /// The rule applies only in files that use one of these (empty: any file)...
    pub only_if_uses: Vec<String>,
    /// ...and none of these.
    pub not_if_uses: Vec<String>,
    /// Substrings that must all occur in a file for this rule to possibly fire (ASCII
    /// case-insensitive; `a|b` = either); empty = always check.
    pub needles: Vec<String>,
    /// Where the rule came from (for messages).
    pub origin: String,
    pub line: usize,
}

impl Rule {
    /// What else decides the rule's effect, one line each, for `tpuport rule ID`: the files it
    /// applies to, when its fix is only unsafe, the comment it leaves.
    pub fn conditions(&self) -> Vec<String> {
        let mut out = vec![];
        if !self.only_if_uses.is_empty() {
            out.push(format!(
                "applies only in files that use {}",
                self.only_if_uses.join(", ")
            ));
        }
        if !self.not_if_uses.is_empty() {
            out.push(format!(
                "not in files that use {}",
                self.not_if_uses.join(", ")
            ));
        }
        if !self.unsafe_if_uses.is_empty() {
            let unless = if self.unless_uses.is_empty() {
                String::new()
            } else {
                format!(", unless they use {}", self.unless_uses.join(", "))
            };
            out.push(format!(
                "unsafe in files that use {}{unless}",
                self.unsafe_if_uses.join(", ")
            ));
        }
        if let Some(n) = &self.note {
            let place = if n.only_in_loop {
                " (inside loops)"
            } else {
                ""
            };
            out.push(format!(
                "leaves the comment{place}: # tpuport {}: {}",
                self.id, n.text
            ));
        }
        out
    }

    /// Does the rule look at what the file uses (`unsafe_if_uses`, `only_if_uses`, `not_if_uses`)?
    pub fn depends_on_uses(&self) -> bool {
        !(self.unsafe_if_uses.is_empty()
            && self.only_if_uses.is_empty()
            && self.not_if_uses.is_empty())
    }

    /// A fallback rule only fires where no other rule matched.
    pub fn is_fallback(&self) -> bool {
        match &self.matcher {
            Matcher::Reference { prefixes, .. } => !prefixes.is_empty(),
            Matcher::String { positions, .. } => positions.is_none(),
            _ => false,
        }
    }
}

/// A position pattern: an identifier glob (`*device*`) or a call slot (`torch.device:0`,
/// `.to:device`).
#[derive(Debug, Clone)]
pub enum PositionPattern {
    Ident(Regex),
    Slot { callee: String, key: String },
}

pub struct RuleFile {
    pub family: String,
    pub title: String,
    pub about: Option<String>,
    pub origin: String,
}

/// All loaded rules, with their position classes.
pub struct RuleSet {
    pub rules: Vec<Rule>,
    /// Helpers fixes may call, sorted by name.
    pub helpers: Vec<Helper>,
    pub files: Vec<RuleFile>,
    pub positions: HashMap<String, Vec<PositionPattern>>,
}

/// A problem in a rule file, located as precisely as we can.
#[derive(Debug, thiserror::Error)]
#[error("{path}:{line}: {message}")]
pub struct RuleError {
    pub path: String,
    pub line: usize,
    pub message: String,
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
                let line = e.span().map(|s| line_of_offset(text, s.start)).unwrap_or(1);
                RuleError {
                    path: path.clone(),
                    line,
                    message: format!("{}; see README.md, \"Writing your own rules\"", e.message()),
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
                if !h.code.starts_with(&head) || !super::parse::is_valid(&h.code) {
                    return Err(bad(format!(
                        "`code` must be valid Python starting with `{head}`"
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
                let line = find_line(&text, &format!("\"{}\"", def.id));
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
                let rule = compile_rule(def, &file.family, &path, line, &set.positions)
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

    /// Keep only rules selected by `select` (id prefixes; empty = all) and not in `ignore`.
    pub fn filter(&mut self, select: &[String], ignore: &[String]) -> Result<()> {
        for code in select.iter().chain(ignore) {
            if !self.rules.iter().any(|r| r.id.starts_with(code.as_str())) {
                bail!("no rule matches `{code}`; run `tpuport rule --all` to list the rule ids");
            }
        }
        self.rules.retain(|r| {
            (select.is_empty() || select.iter().any(|s| r.id.starts_with(s.as_str())))
                && !ignore.iter().any(|s| r.id.starts_with(s.as_str()))
        });
        Ok(())
    }

    pub fn get(&self, id: &str) -> Vec<&Rule> {
        self.rules.iter().filter(|r| r.id == id).collect()
    }

    /// Roots of every qualified name the rules mention (`torch`, `torch_xla`, `os`).
    pub fn module_roots(&self) -> HashSet<String> {
        let mut roots: HashSet<String> = ["torch", "os", "sys"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        for r in &self.rules {
            let names: Vec<&String> = match &r.matcher {
                Matcher::Call(n) => n.iter().collect(),
                Matcher::Reference { exact, prefixes } => exact.iter().chain(prefixes).collect(),
                Matcher::Keyword { calls, .. } => calls.iter().collect(),
                _ => vec![],
            };
            for n in names {
                if let Some(root) = n.split('.').next() {
                    roots.insert(root.to_string());
                }
            }
        }
        roots
    }
}

fn read_rule_dir(dir: &Path) -> Result<Vec<(String, String)>> {
    let mut out = vec![];
    let entries = std::fs::read_dir(dir).with_context(|| {
        format!(
            "cannot read rule folder {}: pass a folder that holds *.toml rule files",
            dir.display()
        )
    })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    paths.sort();
    if paths.is_empty() {
        bail!(
            "rule folder {} holds no *.toml files; see README.md, \"Writing your own rules\"",
            dir.display()
        );
    }
    for p in paths {
        let text = std::fs::read_to_string(&p)
            .with_context(|| format!("cannot read rule file {}", p.display()))?;
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

fn line_of_offset(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

fn find_line(text: &str, needle: &str) -> usize {
    text.find(needle)
        .map(|o| line_of_offset(text, o))
        .unwrap_or(1)
}

fn glob_to_regex(glob: &str) -> Result<Regex, String> {
    let mut re = String::from("(?i)^");
    for c in glob.chars() {
        match c {
            '*' => re.push_str(".*"),
            c if c.is_alphanumeric() || c == '_' => re.push(c),
            c => return Err(format!("unexpected `{c}` in identifier pattern `{glob}`")),
        }
    }
    re.push('$');
    Regex::new(&re).map_err(|e| e.to_string())
}

fn compile_position(p: &str) -> Result<PositionPattern, String> {
    match p.rsplit_once(':') {
        Some((callee, key)) => {
            if callee.is_empty() || key.is_empty() {
                return Err(format!(
                    "`{p}`: a call slot is `qualified.name:INDEX`, `qualified.name:keyword` or `.method:INDEX`"
                ));
            }
            Ok(PositionPattern::Slot {
                callee: callee.to_string(),
                key: key.to_string(),
            })
        }
        None => glob_to_regex(p).map(PositionPattern::Ident),
    }
}

fn compile_rule(
    def: RuleDef,
    family: &str,
    origin: &str,
    line: usize,
    positions: &HashMap<String, Vec<PositionPattern>>,
) -> Result<Rule> {
    let m = def.matcher;
    let kinds = [
        m.call.is_some(),
        m.reference.is_some(),
        m.method.is_some(),
        m.attribute.is_some(),
        m.string.is_some(),
        m.keyword.is_some(),
    ]
    .iter()
    .filter(|b| **b)
    .count();
    let calls_as_filter = m.keyword.is_some() && m.call.is_some();
    if kinds != 1 && !(calls_as_filter && kinds == 2) {
        bail!(
            "[rule.match] needs exactly one of `call`, `reference`, `method`, `attribute`, `keyword` (optionally with `call` as a filter) or `string`"
        );
    }
    let mut needles: Vec<String> = vec![];
    let matcher = if let Some(names) = m.keyword {
        needles.extend(names.iter().cloned());
        Matcher::Keyword {
            names,
            calls: m.call.unwrap_or_default(),
        }
    } else if let Some(names) = m.call {
        check_qualified(&names)?;
        Matcher::Call(names)
    } else if let Some(names) = m.reference {
        let mut exact = vec![];
        let mut prefixes = vec![];
        for n in names {
            match n.strip_suffix(".*") {
                Some(p) => prefixes.push(p.to_string()),
                None => exact.push(n),
            }
        }
        check_qualified(&exact)?;
        check_qualified(&prefixes)?;
        Matcher::Reference { exact, prefixes }
    } else if let Some(names) = m.method {
        needles.extend(names.iter().cloned());
        Matcher::Method(names)
    } else if let Some(names) = m.attribute {
        needles.extend(names.iter().cloned());
        Matcher::Attribute(names)
    } else if let Some(re) = m.string {
        let regex = Regex::new(&re).map_err(|e| anyhow!("`string` is not a valid regex: {e}"))?;
        if let Some(lit) = leading_literal(&re) {
            needles.push(lit);
        }
        let positions_used = match m.positions {
            None => bail!(
                "a `string` match needs `in = [...]`: position classes such as \"device\", or \"*\" for anywhere"
            ),
            Some(p) if p.iter().any(|x| x == "*") => None,
            Some(p) => {
                for class in &p {
                    if !positions.contains_key(class) {
                        let mut known: Vec<&String> = positions.keys().collect();
                        known.sort();
                        bail!(
                            "unknown position class `{class}`; known classes: {}; or define it under [positions]",
                            known
                                .iter()
                                .map(|s| s.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        );
                    }
                }
                Some(p)
            }
        };
        Matcher::String {
            regex,
            positions: positions_used,
            forms: m.forms.unwrap_or_else(|| vec![StringForm::Plain]),
        }
    } else {
        unreachable!()
    };
    // Every segment of a qualified name must be spelled somewhere in a file that uses it.
    if let Matcher::Call(names) | Matcher::Reference { exact: names, .. } = &matcher {
        if names.len() == 1 {
            needles.extend(names[0].split('.').map(str::to_string));
        } else if !names.is_empty() {
            // Several names: only what they all share is required.
            let mut common: Vec<String> = names[0].split('.').map(str::to_string).collect();
            for n in &names[1..] {
                let segs: HashSet<&str> = n.split('.').collect();
                common.retain(|s| segs.contains(s.as_str()));
            }
            needles.extend(common);
        }
    }
    if let Matcher::Reference { exact, prefixes } = &matcher
        && exact.is_empty()
        && !prefixes.is_empty()
    {
        let mut common: Vec<String> = prefixes[0].split('.').map(str::to_string).collect();
        for n in &prefixes[1..] {
            let segs: HashSet<&str> = n.split('.').collect();
            common.retain(|s| segs.contains(s.as_str()));
        }
        needles.extend(common);
    }
    if let Some(n) = def.needles {
        needles = n;
    }
    needles.sort();
    needles.dedup();

    let receiver = m
        .receiver
        .map(|r| Regex::new(&r).map_err(|e| anyhow!("`receiver` is not a valid regex: {e}")))
        .transpose()?;

    let act = def.action.unwrap_or_default();
    let params = act.params.clone().unwrap_or_default();
    let action = compile_action(&act, &matcher)?;
    if def.fix != FixClass::Manual && action.is_none() {
        bail!(
            "fix = \"{}\" needs an [rule.action]; use fix = \"manual\" for a diagnostic-only rule",
            def.fix.as_str()
        );
    }
    if def.fix == FixClass::Manual && action.is_some() {
        bail!("fix = \"manual\" rules must not have an [rule.action]; use \"safe\" or \"unsafe\"");
    }
    for p in act.convert.keys() {
        if !params.contains(p) {
            bail!("[rule.action.convert.{p}]: `{p}` is not in `params`");
        }
    }
    // Placeholders in templates must name parameters (or the built-ins).
    let templates: Vec<&String> = act
        .replace
        .iter()
        .chain(act.args.iter().flatten())
        .chain(act.convert.values().flat_map(|c| {
            [
                &c.missing, &c.none, &c.int, &c.string, &c.true_, &c.false_, &c.other,
            ]
            .into_iter()
            .flatten()
        }))
        .collect();
    for t in templates {
        for ph in placeholders(t).map_err(|e| anyhow!("template `{t}`: {e}"))? {
            let known =
                params.contains(&ph) || ["receiver", "value", "matched"].contains(&ph.as_str());
            if !known {
                bail!(
                    "template `{t}` uses `{{{ph}}}`, which is not a parameter; declare it in `params = [...]`"
                );
            }
        }
    }
    let note = act.note.clone().map(|text| Note {
        text,
        only_in_loop: act.note_in == Some(NoteWhere::Loop),
    });
    if note.as_ref().is_some_and(|n| n.text.contains('\n')) {
        bail!("`note` must be one line");
    }
    if act.note_in.is_some() && note.is_none() {
        bail!("`note_in` needs a `note`");
    }
    check_qualified(&def.unsafe_if_uses)?;
    check_qualified(&def.unless_uses)?;
    check_qualified(&def.only_if_uses)?;
    check_qualified(&def.not_if_uses)?;
    Ok(Rule {
        id: def.id,
        family: family.to_string(),
        name: def.name,
        message: def.message,
        advice: def.advice,
        fix: def.fix,
        matcher,
        action,
        params,
        pass_rest: act.pass_rest,
        convert: act.convert,
        receiver,
        min_args: m.min_args,
        example: def.example,
        note,
        unsafe_if_uses: def.unsafe_if_uses,
        unless_uses: def.unless_uses,
        only_if_uses: def.only_if_uses,
        not_if_uses: def.not_if_uses,
        needles,
        origin: origin.to_string(),
        line,
    })
}

fn compile_action(act: &ActionDef, matcher: &Matcher) -> Result<Option<Action>> {
    let n = [
        act.rename.is_some(),
        act.replace.is_some(),
        act.args.is_some() || act.to.is_some(),
        act.string.is_some(),
        act.remove.is_some(),
        act.unwrap.is_some(),
    ]
    .iter()
    .filter(|b| **b)
    .count();
    if n > 1 {
        bail!(
            "[rule.action] takes one of `rename`, `replace`, `to`/`args`, `string`, `remove` or `unwrap`"
        );
    }
    let is_string = matches!(matcher, Matcher::String { .. });
    Ok(if let Some(r) = &act.rename {
        if !matches!(matcher, Matcher::Call(_) | Matcher::Reference { .. }) {
            bail!("`rename` works with `call` and `reference` matches");
        }
        let map = match r {
            RenameDef::One(to) => {
                let mut m = BTreeMap::new();
                m.insert("*".to_string(), to.clone());
                m
            }
            RenameDef::Map(m) => m.clone(),
        };
        Some(Action::Rename(map))
    } else if let Some(t) = &act.replace {
        Some(Action::Replace(t.clone()))
    } else if act.args.is_some() || act.to.is_some() {
        if !matches!(matcher, Matcher::Call(_) | Matcher::Method(_)) {
            bail!("`to`/`args` rewrite a call: use them with `call` or `method` matches");
        }
        Some(Action::Call {
            to: act.to.clone(),
            args: act.args.clone().unwrap_or_default(),
        })
    } else if let Some(s) = &act.string {
        if !is_string {
            bail!("`string` rewrites work with `string` matches only");
        }
        Some(Action::String(s.clone()))
    } else if let Some(k) = act.remove {
        if k == RemoveKind::Keyword && !matches!(matcher, Matcher::Keyword { .. }) {
            bail!("remove = \"keyword\" works with `keyword` matches only");
        }
        Some(Action::Remove(k))
    } else if act.unwrap.is_some() {
        if !matches!(matcher, Matcher::Call(_)) {
            bail!("unwrap = \"with\" works with `call` matches only");
        }
        Some(Action::Unwrap)
    } else {
        None
    })
}

fn check_qualified(names: &[String]) -> Result<()> {
    for n in names {
        let ok = !n.is_empty()
            && n.split('.')
                .all(|s| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_'));
        if !ok {
            bail!("`{n}` is not a dotted qualified name such as `torch.cuda.synchronize`");
        }
    }
    Ok(())
}

/// Placeholders `{name}` in a template (`{{`/`}}` are literal braces).
pub fn placeholders(t: &str) -> Result<Vec<String>, String> {
    let mut out = vec![];
    let b = t.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'{' if b.get(i + 1) == Some(&b'{') => i += 2,
            b'}' if b.get(i + 1) == Some(&b'}') => i += 2,
            b'{' => {
                let end = t[i..].find('}').ok_or("unclosed `{`")? + i;
                let name = &t[i + 1..end];
                if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
                    return Err(format!(
                        "`{{{name}}}` is not a placeholder; write `{{{{` for a literal brace"
                    ));
                }
                out.push(name.to_string());
                i = end + 1;
            }
            b'}' => return Err("unmatched `}`; write `}}` for a literal brace".into()),
            _ => i += 1,
        }
    }
    Ok(out)
}

/// The literal word a regex starts with (`^cuda:(\d+)$` → `cuda`), for the file pre-filter.
fn leading_literal(re: &str) -> Option<String> {
    let s = re.trim_start_matches("(?i)").trim_start_matches('^');
    let s = s.strip_prefix("(?:").unwrap_or(s);
    let lit: String = s
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    // A trailing quantifier would make the last character optional.
    let next = s[lit.len()..].chars().next();
    let lit = match next {
        Some('?' | '*' | '{') => lit[..lit.len().saturating_sub(1)].to_string(),
        _ => lit,
    };
    (lit.len() >= 3).then_some(lit)
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

    #[test]
    fn leading_literals() {
        assert_eq!(
            leading_literal("^cuda:([1-9]\\d*)$").as_deref(),
            Some("cuda")
        );
        assert_eq!(leading_literal("(?i)^nccl$").as_deref(), Some("nccl"));
        assert_eq!(leading_literal("^x?"), None);
        assert_eq!(leading_literal("^cudas?$").as_deref(), Some("cuda"));
    }

    #[test]
    fn placeholder_parsing() {
        assert_eq!(placeholders("f({a}, {{b}})").unwrap(), vec!["a"]);
        assert!(placeholders("f({a)").is_err());
        assert!(placeholders("}").is_err());
    }
}
