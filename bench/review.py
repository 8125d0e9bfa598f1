#!/usr/bin/env python3
"""review.py: migrate a copy of the real-code corpus and write a review sheet of every fix.

Called by bench/review.sh (which builds the corpus, tpuport and a pyflakes venv). Steps:
  1. copy the corpus packages to OUT/work/ (the corpus itself stays the "before");
  2. `tpuport migrate --statistics --output-format json`, without and with --unsafe-fixes:
     per rule found + revealed must equal fixed + left + absorbed;
  3. `tpuport migrate --unsafe-fixes --output-format json` (the findings and their byte-offset
     edits), then `--unsafe-fixes --write`;
  4. every rewritten file must parse (Python's ast) if it parsed before; a second run must
     change nothing (`--diff` prints nothing);
  5. pyflakes on every rewritten file before and after: messages the rewrite added;
  6. OUT/review.md: the summary, then every fix grouped by class and rule, each with its
     file:line and the lines around it before and after that one fix (applied alone), then the
     changes no listed fix explains (imports, helpers, fixes of findings a fix revealed);
     OUT/fixes.jsonl (one fix a line, to split the review) and OUT/changes.patch.
Exit status: 0 when every check passed, 1 when one failed, 2 when a tool could not run.
"""

import argparse
import ast
import collections
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import time

PYFLAKES_RUNNER = r"""
import json, sys
from pyflakes import api
class Collect:
    def __init__(self): self.msgs = []
    def unexpectedError(self, filename, msg): self.msgs.append(["error", 0, str(msg)])
    def syntaxError(self, filename, msg, lineno, offset, text):
        self.msgs.append(["SyntaxError", lineno or 0, str(msg)])
    def flake(self, m): self.msgs.append([type(m).__name__, m.lineno, m.message % m.message_args])
out = {}
for f in sys.stdin.read().splitlines():
    r = Collect()
    api.checkPath(f, r)
    out[f] = r.msgs
json.dump(out, sys.stdout)
"""
UNDEFINED = {"UndefinedName", "UndefinedExport", "UndefinedLocal"}
ERRORS = {"SyntaxError", "error"}
CONTEXT = 2
IMPORTISH = re.compile(r"\s*(import |from \S+ import |$|pass$|\)$|[\w, ]+,?$)")


def run(argv, cwd, ok=(0, 1)):
    p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if p.returncode not in ok:
        sys.exit(f"error: {' '.join(argv)} exited {p.returncode}\n{p.stderr[-3000:]}")
    return p


def read_text(path):
    with open(path, "rb") as f:
        b = f.read()
    return b[3:] if b.startswith(b"\xef\xbb\xbf") else b


def parses(b):
    try:
        ast.parse(b)
        return True
    except (SyntaxError, ValueError):
        return False


def stat_check(rows):
    """Rows whose counts do not add up."""
    return [r for r in rows
            if r["found"] + r["revealed"] != r["fixed"] + r["left"] + r["absorbed"]]


def isolated(before, edits):
    """The text with one fix's edits applied alone, and the changed line span in `before`."""
    out, last = [], 0
    for e in sorted(edits, key=lambda e: e["start"]):
        out.append(before[last:e["start"]])
        out.append(e["content"].encode())
        last = e["end"]
    out.append(before[last:])
    first = before.count(b"\n", 0, min(e["start"] for e in edits))
    end = before.count(b"\n", 0, max(e["end"] for e in edits))
    return b"".join(out), (first, end)


def hunk(a, b, n=CONTEXT):
    """A unified diff body of two texts (no file headers)."""
    lines = list(difflib.unified_diff(a.decode(errors="replace").splitlines(),
                                      b.decode(errors="replace").splitlines(), n=n, lineterm=""))
    return "\n".join(lines[2:])


def hunks_with_spans(a, b):
    """The real diff's hunks: (old first line, old last line, text), 0-based lines."""
    al = a.decode(errors="replace").splitlines()
    bl = b.decode(errors="replace").splitlines()
    out = []
    for group in difflib.SequenceMatcher(None, al, bl, autojunk=False).get_grouped_opcodes(CONTEXT):
        lo, hi = group[0][1], group[-1][2]
        body = []
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                body += [" " + x for x in al[i1:i2]]
                continue
            body += ["-" + x for x in al[i1:i2]] + ["+" + x for x in bl[j1:j2]]
        changed = [(i1, i2, al[i1:i2], bl[j1:j2]) for tag, i1, i2, j1, j2 in group
                   if tag != "equal"]
        out.append((changed, f"@@ -{lo + 1} @@\n" + "\n".join(body)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tpuport", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--python", required=True, help="a Python with pyflakes")
    ap.add_argument("--packages", nargs="*", help="folders under the corpus (default: current)")
    a = ap.parse_args()
    t0 = time.time()
    pkgs = a.packages or open(os.path.join(a.corpus, "current")).read().split()
    work = os.path.join(a.out, "work")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    for p in pkgs:
        shutil.copytree(os.path.join(a.corpus, p), os.path.join(work, p))
    tp = [a.tpuport, "migrate"]
    failures = []

    # 2. --statistics adds up, without and with --unsafe-fixes.
    stats = {}
    for mode, extra in (("safe", []), ("unsafe", ["--unsafe-fixes"])):
        p = run(tp + extra + ["--statistics", "--output-format", "json", "--quiet"] + pkgs, work)
        stats[mode] = json.loads(p.stdout)
        for r in stat_check(stats[mode]["rules"]):
            failures.append(f"--statistics ({mode}) does not add up for {r['name']}: {r}")

    # 3. Findings with their edits, then the rewrite.
    p = run(tp + ["--unsafe-fixes", "--output-format", "json", "--quiet"] + pkgs, work, ok=(0, 1, 2))
    findings = json.loads(p.stdout)
    p = run(tp + ["--unsafe-fixes", "--write"] + pkgs, work, ok=(0, 1, 2))
    write_errors = [l for l in p.stderr.splitlines() if l.startswith("error: ")]
    summary_lines = [l for l in p.stderr.splitlines() if l.startswith(("tpuport migrate:", "  "))]
    broken = {l[7:].split(":", 1)[0] for l in write_errors if "internal error" in l}

    files = sorted({os.path.relpath(os.path.join(dp, f), work)
                    for p_ in pkgs for dp, _, fs in os.walk(os.path.join(work, p_))
                    for f in fs if f.endswith(".py")})
    before = {}
    changed = []
    for f in files:
        old = read_text(os.path.join(a.corpus, f))
        if old != read_text(os.path.join(work, f)):
            changed.append(f)
            before[f] = old

    # 4. Parse and idempotence.
    parse_bad, parse_skipped = [], []
    for f in changed:
        if not parses(before[f]):
            parse_skipped.append(f)
        elif not parses(read_text(os.path.join(work, f))):
            parse_bad.append(f)
            failures.append(f"{f}: the rewritten file does not parse")
    second = run(tp + ["--unsafe-fixes", "--diff", "--quiet"] + pkgs, work, ok=(0, 1, 2))
    second_changed = sorted(set(re.findall(r"^\+\+\+ b/(.*)$", second.stdout, re.M)))
    for f in second_changed:
        failures.append(f"{f}: a second run changes it again")

    # 5. pyflakes before and after, on the rewritten files.
    def flakes(root):
        p = subprocess.run([a.python, "-c", PYFLAKES_RUNNER], cwd=root, input="\n".join(changed),
                           capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"error: pyflakes failed: {p.stderr[-2000:]}")
        return json.loads(p.stdout)
    fl_before, fl_after = flakes(a.corpus), flakes(work)
    norm = lambda m: (m[0], re.sub(r"line \d+", "line N", m[2]))
    new_flakes = {}
    for f in changed:
        old = collections.Counter(norm(m) for m in fl_before.get(f, []))
        new = []
        for m in fl_after.get(f, []):
            k = norm(m)
            if old[k] > 0:
                old[k] -= 1
            else:
                new.append(m)
        if new:
            new_flakes[f] = new
    new_undefined = sum(1 for ms in new_flakes.values() for m in ms if m[0] in UNDEFINED)
    new_errors = sum(1 for ms in new_flakes.values() for m in ms if m[0] in ERRORS)
    if new_undefined or new_errors:
        failures.append(f"pyflakes: {new_undefined} new undefined names, {new_errors} new errors")

    # 6. The sheet.
    fixes = [d for d in findings if d["edits"] and d["fix_applied"]]
    by_class = collections.defaultdict(lambda: collections.defaultdict(list))
    for d in fixes:
        by_class[d["fix_class"]][d["rule"]].append(d)
    manual = collections.Counter(d["rule"] for d in findings if not d["fix_applied"])
    explained = collections.defaultdict(list)
    jsonl = []
    blocks = {}
    for cls in by_class:
        for rule, ds in by_class[cls].items():
            out = []
            for n, d in enumerate(ds, 1):
                fid = f"{rule}#{n}"
                src = before.get(d["path"]) or read_text(os.path.join(a.corpus, d["path"]))
                after, span = isolated(src, d["edits"])
                explained[d["path"]].append(span)
                status = "" if d["path"] not in broken else " — NOT APPLIED (internal error, file left as it was)"
                body = hunk(src, after)
                out.append(f"#### {fid} `{d['path']}:{d['line']}`{status}\n\n{d['message']}\n\n"
                           f"```diff\n{body}\n```\n")
                jsonl.append({"id": fid, "rule": rule, "class": cls, "path": d["path"],
                              "line": d["line"], "message": d["message"], "diff": body})
            blocks[(cls, rule)] = out

    other, imports_only = [], []
    for f in changed:
        spans = explained.get(f, [])
        # A changed old line is explained when a fix's edits touch it (an insertion: the line
        # after a fix's last line counts too); the rest is the import and helper bookkeeping
        # when it only removes or adds imports, blank lines and `_tpuport_` helpers.
        lines = {i for s, e in spans for i in range(s, e + 2)}
        for ranges, text in hunks_with_spans(before[f], read_text(os.path.join(work, f))):
            rest = [(old, new) for i1, i2, old, new in ranges
                    if not all(i in lines for i in range(i1, max(i2, i1 + 1)))]
            if not rest:
                continue
            bookkeeping = all(IMPORTISH.match(x) for old, new in rest for x in old) and \
                all(IMPORTISH.match(x) or "_tpuport_" in x or x.startswith((" ", '"""', "\t"))
                    for old, new in rest for x in new)
            (imports_only if bookkeeping else other).append((f, text))

    patch = []
    for f in changed:
        patch += difflib.unified_diff(before[f].decode(errors="replace").splitlines(True),
                                      read_text(os.path.join(work, f)).decode(errors="replace").splitlines(True),
                                      f"a/{f}", f"b/{f}")
    with open(os.path.join(a.out, "changes.patch"), "w") as fp:
        fp.writelines(patch)
    with open(os.path.join(a.out, "fixes.jsonl"), "w") as fp:
        for j in jsonl:
            fp.write(json.dumps(j) + "\n")

    n_safe = sum(len(v) for v in by_class.get("safe", {}).values())
    n_unsafe = sum(len(v) for v in by_class.get("unsafe", {}).values())
    md = [f"# tpuport migrate review sheet\n",
          f"Corpus `{a.corpus}`: {', '.join(pkgs)}. Binary `{a.tpuport}`. "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {time.time() - t0:.0f}s.\n",
          "## Summary\n",
          "| what | result |", "| --- | --- |",
          f"| files scanned | {len(files)} |",
          f"| files rewritten (`--unsafe-fixes --write`) | {len(changed)} |",
          f"| fixes listed (first round) | {len(fixes)}: {n_safe} safe, {n_unsafe} unsafe |",
          f"| findings without an applied fix | {sum(manual.values())} |",
          f"| fixes in files left untouched (internal error) | "
          f"{sum(1 for d in fixes if d['path'] in broken)} in {len(broken)} files |",
          f"| diff hunks no listed fix explains | {len(other)} "
          f"(+ {len(imports_only)} that only change imports or helpers) |",
          f"| rewritten files that do not parse | {len(parse_bad)} "
          f"({len(parse_skipped)} did not parse before with Python {sys.version.split()[0]}) |",
          f"| files a second run changes | {len(second_changed)} |",
          f"| new pyflakes messages | {sum(len(v) for v in new_flakes.values())} in {len(new_flakes)} files "
          f"({new_undefined} undefined names, {new_errors} errors) |",
          f"| `--statistics` rules not adding up | "
          f"{len(stat_check(stats['safe']['rules']))} safe, {len(stat_check(stats['unsafe']['rules']))} unsafe |",
          f"| checks | {'ALL PASSED' if not failures else 'FAILED: ' + str(len(failures))} |", ""]
    md += ["tpuport's summary of the write:\n", "```", *summary_lines, *write_errors[:50], "```\n"]
    if failures:
        md += ["### Failures\n", *[f"- {x}" for x in failures[:200]], ""]
    if new_flakes:
        md += ["### New pyflakes messages\n"]
        for f, ms in sorted(new_flakes.items()):
            md += [f"- `{f}:{m[1]}` {m[0]}: {m[2]}" for m in ms]
        md.append("")
    md += ["## Statistics (`--unsafe-fixes`)\n",
           "| rule | found | revealed | fixed | left | absorbed |", "| --- | --- | --- | --- | --- | --- |"]
    md += [f"| {r['name']} | {r['found']} | {r['revealed']} | {r['fixed']} | {r['left']} | {r['absorbed']} |"
           for r in stats["unsafe"]["rules"] + [stats["unsafe"]["total"]]]
    md += ["", "## Fixes by rule\n", "| class | rule | fixes |", "| --- | --- | --- |"]
    for cls in ("safe", "unsafe"):
        for rule, ds in sorted(by_class.get(cls, {}).items()):
            md.append(f"| {cls} | [{rule}](#{rule.lower()}-{cls}) | {len(ds)} |")
    md += ["", "Findings without an applied fix (manual): " +
           ", ".join(f"{k} ×{v}" for k, v in sorted(manual.items())), ""]
    for cls in ("safe", "unsafe"):
        md.append(f"## {cls.capitalize()} fixes\n")
        for rule, ds in sorted(by_class.get(cls, {}).items()):
            md.append(f"### {rule} {cls}\n\n{len(ds)} fixes: {ds[0]['message']}\n")
            md += blocks[(cls, rule)]
    md.append("## Changes no listed fix explains\n")
    md.append("Fixes of findings a fix revealed, and anything else not on a listed fix's lines.\n")
    for f, text in other:
        md.append(f"#### `{f}`\n\n```diff\n{text}\n```\n")
    md.append("## Import and helper changes\n")
    md.append("Imports the rewrite left unused removed, imports and `_tpuport_` helpers added.\n")
    for f, text in imports_only:
        md.append(f"#### `{f}`\n\n```diff\n{text}\n```\n")
    with open(os.path.join(a.out, "review.md"), "w") as fp:
        fp.write("\n".join(md))
    print("\n".join(md[3:md.index("tpuport's summary of the write:\n")]))
    print(f"\nreview sheet: {os.path.join(a.out, 'review.md')}")
    for x in failures[:20]:
        print(f"FAIL: {x}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
