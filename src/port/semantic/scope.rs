//! The data of name resolution: scopes (module, class, function, comprehension) and the
//! bindings made in them.

use rustc_hash::FxHashMap as HashMap;

use ruff_python_ast::name::Name;
use ruff_text_size::TextRange;

pub type ScopeId = usize;
pub const MODULE_SCOPE: ScopeId = 0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScopeKind {
    Module,
    Class,
    Function,
    Comprehension,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindingKind {
    /// An import: the qualified name it binds (`import torch.distributed as dist` → `torch.distributed`).
    Import { qualified: String },
    /// Any other binding (assignment, parameter, def, class, loop target, ...).
    Other,
    /// `name = None`: does not hide an earlier import of the same name.
    Weak,
}

#[derive(Debug, Clone)]
pub struct Binding {
    pub name: Name,
    pub kind: BindingKind,
    /// Where the binding takes effect (for imports: the alias).
    pub range: TextRange,
    /// For imports: the whole import statement.
    pub stmt: Option<TextRange>,
    pub scope: ScopeId,
}

#[derive(Debug)]
pub struct Scope {
    pub kind: ScopeKind,
    pub parent: Option<ScopeId>,
    /// The source span whose names resolve in this scope first.
    pub span: TextRange,
    pub(super) names: HashMap<Name, Vec<usize>>,
    pub(super) globals: Vec<String>,
    pub(super) nonlocals: Vec<String>,
}
