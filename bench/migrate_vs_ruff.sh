#!/usr/bin/env bash
# migrate_vs_ruff.sh: wall-clock benchmark of `tpuport migrate --check` against
# `ruff check` (default rules) on the same large real corpus: every file of the
# transformers 5.23.0 wheel (~2,860 .py files, ~1.2 M lines).
#
# Goal: tpuport's median wall time <= ruff's (ratio tpuport/ruff <= 1.0).
# It is a measurement: it exits 0 whether or not the goal is met, and non-zero
# only when a tool cannot be run at all.
#
# Run:   bash bench/migrate_vs_ruff.sh
# Env:   RUNS=7                           timed runs per tool (alternating)
#        TPUPORT_BIN=path                 use this binary instead of building
#        TPUPORT_CACHE=~/.cache/tpuport   cache root; everything lives in $TPUPORT_CACHE/bench
# Downloads (the wheel, ruff) happen once; re-runs reuse the cache, offline.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${TPUPORT_CACHE:-$HOME/.cache/tpuport}/bench"
RUNS="${RUNS:-7}"
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || { echo "error: RUNS must be a positive integer" >&2; exit 2; }
TF_VERSION=5.23.0
RUFF_PIN=0.17.6
CORPUS="$CACHE/corpus/transformers-$TF_VERSION"
VENV="$CACHE/ruff-venv"
mkdir -p "$CACHE/wheels" "$CACHE/corpus"

# 1. Corpus: the transformers wheel, downloaded and unpacked once.
WHEEL="$CACHE/wheels/transformers-$TF_VERSION-py3-none-any.whl"
if [[ ! -f "$WHEEL" ]]; then
  echo "downloading transformers==$TF_VERSION wheel into $CACHE/wheels"
  python3 -m pip download "transformers==$TF_VERSION" --no-deps --only-binary=:all: \
    -d "$CACHE/wheels" --quiet --disable-pip-version-check
fi
[[ -f "$WHEEL" ]] || { echo "error: wheel not found at $WHEEL" >&2; exit 2; }
if [[ ! -d "$CORPUS" ]]; then
  echo "unpacking $WHEEL"
  rm -rf "$CORPUS.tmp"
  if command -v unzip >/dev/null; then unzip -q "$WHEEL" -d "$CORPUS.tmp"
  else python3 -m zipfile -e "$WHEEL" "$CORPUS.tmp"; fi
  mv "$CORPUS.tmp" "$CORPUS"   # only a complete unpack gets the final name
fi
PY_FILES=$(find "$CORPUS" -name '*.py' -type f | wc -l)
PY_LINES=$(find "$CORPUS" -name '*.py' -type f -print0 | xargs -0 cat | wc -l)
printf 'corpus: %s  (%d .py files, %d lines)\n' "$CORPUS" "$PY_FILES" "$PY_LINES"

# 2. ruff, pinned, in its own venv (created once).
if [[ ! -x "$VENV/bin/ruff" ]]; then
  echo "creating $VENV with ruff==$RUFF_PIN"
  python3 -m venv "$VENV"
  if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "ruff==$RUFF_PIN"; then
    echo "ruff==$RUFF_PIN not installable; installing the newest ruff instead"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check ruff
  fi
fi
RUFF="$VENV/bin/ruff"
RUFF_VERSION=$("$RUFF" --version) || { echo "error: cannot run $RUFF" >&2; exit 2; }
if [[ "$RUFF_VERSION" == "ruff $RUFF_PIN" ]]; then echo "ruff: $RUFF_VERSION (pinned)"
else echo "ruff: $RUFF_VERSION (pin $RUFF_PIN was not installable; newest used)"; fi

# 3. tpuport, release build (unless TPUPORT_BIN is given).
if [[ -z "${TPUPORT_BIN:-}" ]]; then
  echo "building tpuport (cargo build --release) in $REPO"
  (cd "$REPO" && cargo build --release --quiet)
  TPUPORT_BIN="${CARGO_TARGET_DIR:-$REPO/target}/release/tpuport"
fi
[[ -x "$TPUPORT_BIN" ]] || { echo "error: tpuport binary not executable: $TPUPORT_BIN" >&2; exit 2; }
echo "tpuport: $TPUPORT_BIN"

# 4. Warm-up + alternating timed runs, statistics, table.
RUNS="$RUNS" NPROC="$(nproc)" CORPUS="$CORPUS" CACHE="$CACHE" \
TPUPORT_BIN="$TPUPORT_BIN" RUFF="$RUFF" RUFF_VERSION="$RUFF_VERSION" python3 - <<'PY'
import os, statistics, subprocess, sys, time

env = os.environ
runs, corpus, cache = int(env["RUNS"]), env["CORPUS"], env["CACHE"]
tools = {
    "tpuport": ([env["TPUPORT_BIN"], "migrate", "--check", corpus], {0, 1, 2}),
    "ruff": ([env["RUFF"], "check", "--no-cache", "--isolated", "--exit-zero", "--quiet", corpus], {0}),
}
logs = {name: os.path.join(cache, f"{name}-output.txt") for name in tools}

def run(name):
    """One run; output goes to a file under the cache. Returns (seconds, exit code)."""
    argv, _ = tools[name]
    with open(logs[name], "wb") as out:
        t0 = time.perf_counter()
        try:
            rc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT).returncode
        except OSError as e:
            sys.exit(f"error: cannot run {name}: {e}")
        return time.perf_counter() - t0, rc

times = {name: [] for name in tools}
codes = {name: [] for name in tools}
for name, (argv, ok) in tools.items():          # untimed warm-up (file cache)
    _, rc = run(name)
    if rc not in ok:
        sys.exit(f"error: {name} warm-up exited {rc}: {' '.join(argv)}\n"
                 f"  output: {logs[name]}")
for i in range(runs):                           # alternate so drift hits both
    for name in tools:
        t, rc = run(name)
        times[name].append(t)
        codes[name].append(rc)

print(f"\n=== tpuport migrate --check vs {env['RUFF_VERSION']} check: {runs} runs each ===")
print(f"{'tool':<10}{'median s':>10}{'min s':>10}   exit codes")
for name in tools:
    print(f"{name:<10}{statistics.median(times[name]):>10.3f}{min(times[name]):>10.3f}"
          f"   {sorted(set(codes[name]))}")
ratio = statistics.median(times["tpuport"]) / statistics.median(times["ruff"])
print(f"{'ratio tpuport/ruff (median)':<30}{ratio:.3f}")
print(f"{'CPU cores (nproc)':<30}{env['NPROC']}")
print(f"{'goal (ratio <= 1.0)':<30}{'MET' if ratio <= 1.0 else 'MISSED'}")
bad = [c for c in codes["tpuport"] if c not in (0, 1)]
if bad:
    print(f"WARNING: tpuport exited 2 (errors) in {len(bad)}/{runs} runs")
if any(c != 0 for c in codes["ruff"]):
    print(f"WARNING: ruff exited non-zero in some runs: {codes['ruff']}")

with open(logs["tpuport"], errors="replace") as f:
    tail = f.read().splitlines()[-15:]
print(f"\n--- tpuport output, last {len(tail)} lines of the final run ({logs['tpuport']}) ---")
print("\n".join(tail) if tail else "(no output)")
PY
