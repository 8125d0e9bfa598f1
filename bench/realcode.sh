#!/usr/bin/env bash
# realcode.sh: the real-code success rate. Real training scripts shipped in PyPI sdists
# (bench/realcode/scripts.toml) are migrated with `tpuport migrate --write` (default settings)
# and run for a few steps with synthetic data on the sim and on xla-cpu (TorchTPU itself on
# XLA:CPU, where installed: scripts/bootstrap-xla-cpu), losses compared with the host's; each is
# recorded per target as ran, on-cpu (xla-cpu: the model trained on the CPU), tpu-gap
# (TorchTPU's own error for an op it lacks) or failed (why). See bench/README.md.
#
# Run:   bash bench/realcode.sh [SCRIPT-ID...]     (default: every script of scripts.toml)
# Env:   TPUPORT_BIN=path                 use this binary instead of building
#        TPUPORT_CACHE=~/.cache/tpuport   cache root: realcode/{sdists,site-<hash>,out}
#        STEPS=4  TIMEOUT=900             steps per script (--max-steps), seconds per script
#        TARGETS=sim,xla-cpu               the targets (default: both, or sim where xla-cpu is not installed)
# Writes $TPUPORT_CACHE/realcode/out/results.{md,jsonl} and one folder per script (migrated
# copy, events, output). Exits 0 when every failure is explained in scripts.toml, 1 otherwise,
# 2 when a tool could not run.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HERE="$REPO/bench/realcode"
ROOT="${TPUPORT_CACHE:-$HOME/.cache/tpuport}/realcode"
SDISTS="$ROOT/sdists"
mkdir -p "$SDISTS"

VENV=$(bash "$REPO/scripts/bootstrap" | tail -1)
PY="$VENV/bin/python"
[[ -x "$PY" ]] || { echo "error: no torch venv at $VENV (scripts/bootstrap failed?)" >&2; exit 2; }

# The scripts' libraries (torchvision, opacus, ignite, ...), pinned, as wheels, into a folder
# keyed by requirements.txt: the torch venv stays as scripts/bootstrap made it.
key=$(sha256sum "$HERE/requirements.txt" | cut -c1-12)
SITE="$ROOT/site-$key"
if [[ ! -f "$SITE/.complete" ]]; then
  echo "installing the scripts' libraries into $SITE" >&2
  rm -rf "$SITE.tmp"
  "$PY" -m pip install --quiet --disable-pip-version-check --no-deps --only-binary :all: \
    --target "$SITE.tmp" -r "$HERE/requirements.txt" >&2
  rm -rf "$SITE"
  mv "$SITE.tmp" "$SITE"
  touch "$SITE/.complete"
fi

# The pinned sdists the scripts come from (downloaded once).
for spec in $(grep -oE '^sdist = "[^"]+"' "$HERE/scripts.toml" | cut -d'"' -f2 | sort -u); do
  name=${spec%%==*}; version=${spec##*==}
  stem=$(echo "$name" | tr 'A-Z.-' 'a-z__')
  if ! ls "$SDISTS" | tr 'A-Z.-' 'a-z__' | grep -q "^${stem}_${version//./_}_tar_gz$"; then
    echo "downloading the sdist of $spec" >&2
    "$PY" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
      -d "$SDISTS" "$spec" >&2
  fi
done

if [[ -z "${TPUPORT_BIN:-}" ]]; then
  echo "building tpuport (cargo build --release) in $REPO" >&2
  (cd "$REPO" && cargo build --release --locked --quiet)
  TPUPORT_BIN="${CARGO_TARGET_DIR:-$REPO/target}/release/tpuport"
fi
[[ -x "$TPUPORT_BIN" ]] || { echo "error: tpuport binary not executable: $TPUPORT_BIN" >&2; exit 2; }

if [[ -z "${TARGETS:-}" ]]; then
  TARGETS=sim
  [[ -n "$(bash "$REPO/scripts/bootstrap-xla-cpu" 2>/dev/null | tail -n 1)" ]] && TARGETS=sim,xla-cpu
fi

exec python3 "$HERE/harness.py" --tpuport "$TPUPORT_BIN" --python "$PY" --site "$SITE" \
  --sdists "$SDISTS" --out "$ROOT/out" --steps "${STEPS:-4}" --timeout "${TIMEOUT:-900}" \
  --targets "$TARGETS" "$@"
