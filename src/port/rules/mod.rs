//! Rules are data: the TOML schema of `rules/*.toml`, loading (built in, plus `--rules DIR`),
//! and validation with errors that name the file, the line and what to change.
//!
//! A rule file holds one family (`family = "DEV"`), optional named *position classes* (where a
//! string literal counts as a device or a backend), and `[[rule]]` entries. Each rule has an id
//! (family prefix + 3 digits), a `[rule.match]` (call, reference, method, attribute, keyword or
//! string), an optional `[rule.action]` (rename, replace, call-argument mapping, string rewrite,
//! removal), a fix class (`safe`, `unsafe`, `manual`), a one-line message, advice, and a
//! before/after example that the test suite runs.
//!
//! Layout: [`schema`] (what serde reads) → [`compile`] (one definition into a [`Rule`]) →
//! [`model`] (the compiled [`Rule`], [`Matcher`], [`Action`], [`RuleSet`]); [`load`] reads the
//! files (the hand-kept [`BUILTIN`] list, then `--rules` folders) and drives the compiler.

pub mod compile;
pub mod load;
pub mod model;
pub mod schema;

pub use compile::placeholders;
pub use load::{BUILTIN, RuleError};
pub use model::{
    Action, Helper, Lint, Matcher, NETWORK_WORDS, Note, Portable, PositionPattern, REPLACES_CUDA,
    Rule, RuleFile, RuleSet, Variant,
};
pub use schema::{
    ArgKind, ConvertDef, Example, FixClass, NoteWhere, PortableKind, RemoveKind, StringForm,
    Target, UnwrapKind,
};
