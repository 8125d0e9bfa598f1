#!/usr/bin/env bash
# review.sh: migrate a copy of the real-code corpus (scripts/corpus) with --unsafe-fixes and
# write a review sheet of every fix, with the checks a safe migration must pass: every
# rewritten file parses, a second run changes nothing, pyflakes finds no new undefined name or
# error, and --statistics adds up per rule. See bench/README.md.
#
# Run:   bash bench/review.sh [PACKAGE-FOLDER...]   (default: every package of the corpus)
# Env:   TPUPORT_BIN=path                 use this binary instead of building
#        TPUPORT_CACHE=~/.cache/tpuport   cache root: corpus/, review/ (sheet, work copy, venv)
# Writes $TPUPORT_CACHE/review/review.md, fixes.jsonl, changes.patch and work/ (the rewritten
# copy). Exits 0 when every check passed, 1 when one failed, 2 when a tool could not run.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROOT="${TPUPORT_CACHE:-$HOME/.cache/tpuport}"
OUT="$ROOT/review"
VENV="$OUT/pyflakes-venv"
PYFLAKES_PIN=4.1.0
mkdir -p "$OUT"

CORPUS=$(bash "$REPO/scripts/corpus" | tail -1)

# pyflakes, pinned, in its own venv (created once).
if [[ ! -f "$VENV/.complete" ]]; then
  echo "creating $VENV with pyflakes==$PYFLAKES_PIN" >&2
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "pyflakes==$PYFLAKES_PIN" >&2
  touch "$VENV/.complete"
fi

if [[ -z "${TPUPORT_BIN:-}" ]]; then
  echo "building tpuport (cargo build --release) in $REPO" >&2
  (cd "$REPO" && cargo build --release --locked --quiet)
  TPUPORT_BIN="${CARGO_TARGET_DIR:-$REPO/target}/release/tpuport"
fi
[[ -x "$TPUPORT_BIN" ]] || { echo "error: tpuport binary not executable: $TPUPORT_BIN" >&2; exit 2; }

args=()
[[ $# -gt 0 ]] && args=(--packages "$@")
exec "$VENV/bin/python" "$REPO/bench/review.py" --tpuport "$(realpath "$TPUPORT_BIN")" \
  --corpus "$CORPUS" --out "$OUT" --python "$VENV/bin/python" "${args[@]}"
