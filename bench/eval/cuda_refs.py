#!/usr/bin/env python3
"""Count the CUDA references in a tree of Python code, before and after a migration.

Usage:
    python3 bench/eval/cuda_refs.py TREE                 # counts per file and in total
    python3 bench/eval/cuda_refs.py BEFORE AFTER         # both trees, the share ported
    python3 bench/eval/cuda_refs.py BEFORE AFTER --json  # the same as one JSON object
    python3 bench/eval/cuda_refs.py TREE --list          # every reference, file:line kind text

Only the standard library is used (Python 3.9+; run it with a Python at least as new as the
code it reads: a file that does not parse is listed and left out).

What is read: every `*.py` file under TREE, and the code cells of every `*.ipynb` notebook
(IPython syntax is blanked before parsing: `%`, `!` and `?` lines with their backslash
continuations, and a `%%` cell magic's whole cell; a cell that still does not parse is left
out). Hidden folders (`.git`, `.venv`, ...), `__pycache__` and `node_modules` are skipped.
With two trees, files are matched by their path relative to the tree, and a file (or notebook
cell) that does not parse in one of them is left out of both, so the two counts are over the
same code.

A **CUDA reference** is one of these syntax-tree nodes (Python's `ast`; comments and
docstrings are never counted, nor is anything inside them):

1. `string`: a string literal (`str` or `bytes`, an f-string counted once as a whole) whose
   text contains `cuda`, `cudnn` or `nccl`, any case: `"cuda"`, `"cuda:0"`, `f"cuda:{r}"`,
   `"nccl"`, `"CUDA_VISIBLE_DEVICES"`. Docstrings (a string statement) are not counted, nor
   the `help=` argument of a call (prose for the user, which no migration rewrites).
2. `attribute`: an attribute named `cuda`, `cudnn`, `nccl` or `is_cuda`, or whose name
   starts with one of `cuda`/`cudnn`/`nccl`, or is `is_nccl_available`, any case; once per
   dotted chain (at its first CUDA-named part): `x.cuda()`, `torch.cuda.synchronize()` and
   `torch.cuda.cudart()` (once each: the `.cuda` node),
   `torch.backends.cudnn.benchmark`, `t.is_cuda`, `dist.Backend.NCCL`,
   `cudart().cudaProfilerStart`. A user's own attributes that merely contain the word
   (`self.use_cuda`, `args.no_cuda`) are not references.
3. `name`: a bare name bound by an import of this file whose module path has a
   `cuda`/`cudnn`/`nccl` component or whose name contains the word (`import
   torch.backends.cudnn as cudnn` makes each `cudnn.benchmark` one reference;
   `CUDAExtension` imported from `torch.utils.cpp_extension`), and the names `GradScaler`,
   `autocast`, `custom_fwd`, `custom_bwd` as bare names or attributes that are not under a
   counted `torch.cuda` (`torch.amp.GradScaler()`, `autocast(...)` imported from
   `torch.cuda.amp`), except in a call that names its device by a string literal as first
   argument or `device_type=`/`device=`: then a CUDA string there is the one reference
   (`torch.autocast("cuda")` counts 1) and another device makes none
   (`torch.autocast("cpu")`, `GradScaler("tpu")`); `GradScaler()` and
   `torch.autocast(device_type=dev)` count 1. A user's variables (`use_cuda = ...`) are not
   references: the call or attribute they were computed from is.
4. `import`: each imported name of an `import`/`from ... import` whose module path has a
   `cuda`/`cudnn`/`nccl` component (`from torch.cuda.amp import autocast` is one per name),
   and each import of a CUDA-only library: `apex`, `flash_attn`, `xformers`, `triton`,
   `cupy`, `pycuda`, `numba.cuda`, `nvidia` (DALI, ...), `bitsandbytes`,
   `transformer_engine`, `pynvml`, `nvtx`.
5. `device_ids`: a `device_ids=` or `output_device=` keyword argument (DDP's CUDA device
   indices; `DataParallel`'s GPU list).

Not counted either: the CUDA name a portable form falls back to where torch has no
accelerator (a CPU-only build): the `"cuda"` of `getattr(torch.accelerator.current_accelerator(),
"type", "cuda")` and of `torch.accelerator.current_accelerator() or "cuda"`. On a machine with an
accelerator the form names that accelerator; it is not a reference to CUDA.

Not counted (known gaps): integer device ids outside those keywords (`device = 0`,
`.to(rank)`), CUDA names reached through an assignment (`cuda = torch.cuda; cuda.foo()`
counts the assignment only), shell scripts and configuration files (YAML `device: cuda`).

**Beside a TPU.** A portable port may keep a CUDA reference next to the TPU one
(`device.type in ("cuda", "tpu")`). A reference is counted as *beside a TPU* when the
statement that holds it (for `if`/`while`/`for`/`with`/`def`, only its header: the test, the
iterable, the context managers, the defaults) also names the TPU: a string containing `tpu`,
a name or attribute `tpu`/`accelerator`/`current_accelerator`, or
`get_default_backend_for_device`. The comparison reports both shares:

    share ported          = (before - after) / before
    share ported, portable = (before - after + after beside a TPU) / before

The `else` branch of a two-form port (`if hasattr(torch, "accelerator"): <portable> else:
<original>`, the form written for a project that supports a torch without `torch.accelerator`)
counts as beside a TPU too: it runs only where torch has no accelerator API, and the TPU path
is the branch above it.

(with references beside a TPU in the *before* tree subtracted from both counts first, so
code that was already portable counts for nothing). `--list` marks them with `[tpu]`.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import sys
from collections import Counter

WORD = re.compile(r"cuda|cudnn|nccl", re.IGNORECASE)
TPU_STR = re.compile(r"tpu", re.IGNORECASE)
TPU_NAMES = {"tpu", "accelerator", "current_accelerator", "get_default_backend_for_device"}
AMP_NAMES = {"GradScaler", "autocast", "custom_fwd", "custom_bwd"}
DEVICE_KW = {"device_ids", "output_device"}
CUDA_LIBS = {
    "apex",
    "flash_attn",
    "xformers",
    "triton",
    "cupy",
    "pycuda",
    "nvidia",
    "bitsandbytes",
    "transformer_engine",
    "pynvml",
    "nvtx",
}
SKIP_DIRS = {"__pycache__", "node_modules"}
BODY_FIELDS = {"body", "orelse", "finalbody", "handlers", "cases"}
KINDS = ("string", "attribute", "name", "import", "device_ids")


def _is_cuda_str(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and bool(WORD.search(node.value))


def _is_accelerator(node: ast.AST) -> bool:
    """`torch.accelerator.current_accelerator()` (any spelling that ends so)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "current_accelerator"


def _const_device_arg(call: ast.Call) -> bool:
    """True when an AMP call names its device by a string literal: `autocast("cpu")` is not
    CUDA's, and in `autocast("cuda")` the string is the one reference."""
    cands = []
    if call.args:
        cands.append(call.args[0])
    cands += [k.value for k in call.keywords if k.arg in ("device_type", "device")]
    return any(isinstance(c, ast.Constant) and isinstance(c.value, str) for c in cands)


def _header_nodes(stmt: ast.stmt) -> list[ast.AST]:
    """The parts of a compound statement that belong to its own line, not its body."""
    if isinstance(stmt, (ast.If, ast.While)):
        return [stmt.test]
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return [stmt.target, stmt.iter]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return list(stmt.items)
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return list(stmt.decorator_list) + [stmt.args] + ([stmt.returns] if stmt.returns else [])
    if isinstance(stmt, ast.ClassDef):
        return list(stmt.decorator_list) + list(stmt.bases) + list(stmt.keywords)
    if isinstance(stmt, ast.Try):
        return []
    if hasattr(ast, "Match") and isinstance(stmt, ast.Match):
        return [stmt.subject]
    return [stmt]


def _mentions_tpu(nodes: list[ast.AST]) -> bool:
    for root in nodes:
        for n in ast.walk(root):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and TPU_STR.search(n.value):
                return True
            if isinstance(n, ast.Name) and n.id in TPU_NAMES:
                return True
            if isinstance(n, ast.Attribute) and n.attr in TPU_NAMES:
                return True
    return False


def _is_probe(test: ast.AST) -> bool:
    """`hasattr(torch, "accelerator")`, alone or first of an `and` of `hasattr` tests."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return all(_is_probe(v) or _is_hasattr(v) for v in test.values) and _is_probe(test.values[0])
    return _is_hasattr(test) and isinstance(test.args[0], ast.Name) and test.args[1].value == "accelerator"


def _is_hasattr(n: ast.AST) -> bool:
    return (
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Name)
        and n.func.id == "hasattr"
        and len(n.args) == 2
        and not n.keywords
        and isinstance(n.args[1], ast.Constant)
        and isinstance(n.args[1].value, str)
    )


class _Finder(ast.NodeVisitor):
    def __init__(self) -> None:
        self.refs: list[tuple[int, str, str, bool]] = []  # line, kind, text, beside TPU
        self._tpu = False
        self._old = False  # in the old-torch branch of a two-form port
        self._skip: set[int] = set()  # ids of nodes not to count (docstrings, help=, ...)
        self._bound: set[str] = set()  # names that imports of CUDA modules bind

    def _add(self, node: ast.AST, kind: str, text: str) -> None:
        self.refs.append((getattr(node, "lineno", 0), kind, text, self._tpu or self._old))

    # Statements: a statement's own line (for a compound one, its header) decides whether the
    # references in it are beside a TPU; its body is judged statement by statement.
    def generic_visit(self, node: ast.AST) -> None:
        if not isinstance(node, ast.stmt):
            super().generic_visit(node)
            return
        saved = self._tpu
        flag = _mentions_tpu(_header_nodes(node))
        old_torch = isinstance(node, ast.If) and _is_probe(node.test)
        for field, value in ast.iter_fields(node):
            self._tpu = saved if field in BODY_FIELDS else flag
            old = self._old
            self._old = old or (old_torch and field == "orelse")
            if isinstance(value, list):
                _visit_list(self, value)
            elif isinstance(value, ast.AST):
                self.visit(value)
            self._old = old
        self._tpu = saved

    def visit_Module(self, node: ast.Module) -> None:
        for n in ast.walk(node):
            if isinstance(n, ast.Import):
                for a in n.names:
                    if a.asname and any(WORD.search(p) for p in a.name.split(".")):
                        self._bound.add(a.asname)
            elif isinstance(n, ast.ImportFrom):
                cuda_mod = any(WORD.search(p) for p in (n.module or "").split("."))
                for a in n.names:
                    if cuda_mod or WORD.search(a.name):
                        self._bound.add(a.asname or a.name)
        self._bound.discard("*")
        self._mark_docstring(node)
        _visit_list(self, node.body)

    def _mark_docstring(self, node: ast.AST) -> None:
        body = getattr(node, "body", None)
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            if isinstance(body[0].value.value, str):
                self._skip.add(id(body[0].value))

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._mark_docstring(node)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._mark_docstring(node)
        self.generic_visit(node)

    def visit_Expr(self, node: ast.Expr) -> None:
        # A bare string statement anywhere is prose (a docstring or a commented-out block).
        if isinstance(node.value, (ast.Constant, ast.JoinedStr)):
            return
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if id(node) in self._skip:
            return
        v = node.value
        if isinstance(v, bytes):
            v = v.decode("latin-1")
        if isinstance(v, str) and WORD.search(v):
            self._add(node, "string", repr(node.value)[:60])

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        if id(node) in self._skip:
            return
        text = "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
        if WORD.search(text):
            self._add(node, "string", ("f" + repr(text))[:60])
        for v in node.values:
            if isinstance(v, ast.FormattedValue):
                self.visit(v.value)

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        if isinstance(f, ast.Name) and f.id == "getattr" and len(node.args) == 3 and _is_accelerator(node.args[0]):
            self._skip.add(id(node.args[2]))
        for k in node.keywords:
            if k.arg == "help":
                self._skip.add(id(k.value))
            if k.arg in DEVICE_KW:
                self._add(k.value, "device_ids", k.arg + "=")
        f = node.func
        amp = (isinstance(f, ast.Name) and f.id in AMP_NAMES) or (isinstance(f, ast.Attribute) and f.attr in AMP_NAMES)
        if amp and _const_device_arg(node):
            self._skip.add(id(f))
        self.generic_visit(node)

    def visit_keyword(self, node: ast.keyword) -> None:
        if id(node.value) in self._skip and isinstance(node.value, (ast.Constant, ast.JoinedStr)):
            return
        self.visit(node.value)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        # `current_accelerator() or "cuda"`: the fallback where there is no accelerator.
        if isinstance(node.op, ast.Or) and len(node.values) == 2 and _is_accelerator(node.values[0]):
            self._skip.add(id(node.values[1]))
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if _cuda_attr(node.attr):
            # One reference per dotted chain: `torch.cuda.cudart` counts at `.cuda` only.
            if not _under_cuda(node.value):
                self._add(node, "attribute", "." + node.attr)
            # Count `torch.cuda.amp.GradScaler` once, at `.cuda`: do not look for AMP names above.
            self.visit(node.value)
            return
        if node.attr in AMP_NAMES and id(node) not in self._skip and not _under_cuda(node.value):
            self._add(node, "name", "." + node.attr)
        self.visit(node.value)

    def visit_Name(self, node: ast.Name) -> None:
        if id(node) in self._skip:
            return
        if node.id in self._bound or node.id in AMP_NAMES:
            self._add(node, "name", node.id)

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            parts = a.name.split(".")
            if any(WORD.search(p) for p in parts) or parts[0] in CUDA_LIBS:
                self._add(node, "import", "import " + a.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = node.module or ""
        parts = mod.split(".")
        cuda_mod = any(WORD.search(p) for p in parts) or (node.level == 0 and parts[0] in CUDA_LIBS)
        for a in node.names:
            if cuda_mod or WORD.search(a.name):
                self._add(node, "import", f"from {mod} import {a.name}")


def _cuda_attr(attr: str) -> bool:
    a = attr.lower()
    return a in ("is_cuda", "is_nccl_available") or a.startswith(("cuda", "cudnn", "nccl"))


def _under_cuda(node: ast.AST) -> bool:
    while isinstance(node, ast.Attribute):
        if _cuda_attr(node.attr):
            return True
        node = node.value
    return False


def _visit_list(v: ast.NodeVisitor, items: list) -> None:
    for item in items:
        if isinstance(item, ast.AST):
            v.visit(item)


def refs_in_source(src: str) -> list[tuple[int, str, str, bool]] | None:
    """The CUDA references of one source text, or None when it does not parse."""
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError):
        return None
    f = _Finder()
    f.visit(tree)
    return f.refs


IPY_LINE = re.compile(r"^\s*[%!?]")


def _blank_ipython(src: str) -> str:
    """Blank IPython syntax: a `%%` cell magic's whole cell, `%`/`!`/`?` lines and their
    backslash continuations (line numbers are kept)."""
    lines = src.split("\n")
    if lines and lines[0].lstrip().startswith("%%"):
        return "\n" * (len(lines) - 1)
    out, cont = [], False
    for line in lines:
        if cont or IPY_LINE.match(line):
            cont = line.rstrip().endswith("\\")
            out.append("")
        else:
            out.append(line)
    return "\n".join(out)


def units(path: str) -> dict[str, str]:
    """The parse units of a file: the file itself, or one per notebook code cell."""
    if path.endswith(".ipynb"):
        try:
            with open(path, encoding="utf-8") as fh:
                nb = json.load(fh)
        except (OSError, ValueError, UnicodeDecodeError):
            return {}
        out = {}
        for i, cell in enumerate(nb.get("cells", [])):
            if cell.get("cell_type") != "code":
                continue
            src = cell.get("source", "")
            if isinstance(src, list):
                src = "".join(src)
            out[f"cell {i}"] = _blank_ipython(src)
        return out
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as fh:
            return {"": fh.read()}
    except OSError:
        return {}


def walk(tree: str) -> list[str]:
    found = []
    for root, dirs, files in os.walk(tree):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS)
        for name in sorted(files):
            if name.endswith((".py", ".ipynb")):
                found.append(os.path.relpath(os.path.join(root, name), tree))
    return found


def scan(tree: str) -> dict[str, dict[str, list | None]]:
    """{relative path: {unit: refs or None}}"""
    return {rel: {u: refs_in_source(s) for u, s in units(os.path.join(tree, rel)).items()} for rel in walk(tree)}


def tally(refs: list) -> dict:
    c = Counter(kind for _, kind, _, _ in refs)
    out = {k: c.get(k, 0) for k in KINDS}
    out["total"] = len(refs)
    out["beside_tpu"] = sum(1 for r in refs if r[3])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trees", nargs="+", metavar="TREE", help="one tree, or BEFORE AFTER")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--list", action="store_true", help="print every reference (one tree, or AFTER)")
    ap.add_argument("--files", action="store_true", help="a line per file with references")
    a = ap.parse_args()
    if len(a.trees) > 2:
        ap.error("one tree, or BEFORE AFTER")
    scans = [scan(t) for t in a.trees]
    # Units that do not parse in any tree are left out of all of them.
    paths = sorted(set().union(*[set(s) for s in scans]))
    skipped = []
    per_file = {}
    for p in paths:
        unit_names = sorted(set().union(*[set(s.get(p, {})) for s in scans]))
        rows = []
        for s in scans:
            rows.append([])
        for u in unit_names:
            got = [s.get(p, {}).get(u) for s in scans]
            if any(g is None for g in got):
                skipped.append(p + (f" ({u})" if u else ""))
                continue
            for i, g in enumerate(got):
                rows[i].extend(g)
        per_file[p] = rows
    totals = [tally([r for rows in per_file.values() for r in rows[i]]) for i in range(len(scans))]
    result: dict = {"trees": a.trees, "files": len(paths), "left_out": skipped}
    if len(scans) == 1:
        result["count"] = totals[0]
    else:
        b, f = totals
        base = b["total"] - b["beside_tpu"]
        after = f["total"] - b["beside_tpu"]
        result["before"] = b
        result["after"] = f
        result["share_ported"] = None if base <= 0 else round((base - after) / base, 4)
        result["share_ported_portable"] = (
            None if base <= 0 else round((base - after + f["beside_tpu"] - b["beside_tpu"]) / base, 4)
        )
    result["per_file"] = {
        p: [len(r) for r in rows] for p, rows in per_file.items() if any(rows)
    }
    if a.json:
        print(json.dumps(result, indent=1))
        return 0
    if a.list:
        i = len(scans) - 1
        for p, rows in per_file.items():
            for line, kind, text, tpu in rows[i]:
                print(f"{p}:{line}: {kind:10} {text}{' [tpu]' if tpu else ''}")
        return 0
    if a.files:
        for p, counts in result["per_file"].items():
            print(p, *counts)
    print(f"files: {len(paths)}; left out (do not parse): {len(skipped)}")
    for t, tot in zip(a.trees, totals):
        kinds = ", ".join(f"{k} {tot[k]}" for k in KINDS)
        print(f"{t}: {tot['total']} CUDA references ({kinds}); beside a TPU: {tot['beside_tpu']}")
    if len(scans) == 2:
        for key in ("share_ported", "share_ported_portable"):
            v = result[key]
            print(f"{key.replace('_', ' ')}: {'-' if v is None else f'{100 * v:.1f} %'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
