#!/usr/bin/env bash
# emulation_speed.sh: what each no-TPU target costs per training step. The time per step of
# the same script on the host (as written, on the CPU), on the sim, and on xla-cpu (TorchTPU
# itself on XLA:CPU), for two workloads:
#   gpt        examples/tpu/train_gpt.py (small GPT, torch.compile, bf16 autocast)
#   host-bound bench/scripts/host_bound.py (60 Linear+LayerNorm+GELU blocks, batch 4: hundreds
#              of tiny ops a step, so per-op host time is the step, as under a TPU's async dispatch)
# Each run: `tpuport run --target T --no-tui --hbm-track off`, the wall time per step between two
# of the script's own syncs after the first WARMUP steps (compiles and first-call costs out; see
# step_time: xla-cpu dispatches asynchronously, as a TPU does, so single steps time dispatch). Goal (issue 24): each emulating target within
# 1.5x of the host on the host-bound loop, or the README says where the time goes.
#
# Run:   bash bench/emulation_speed.sh            (RUNS=3 STEPS=60 WARMUP=10 TARGETS="host sim xla-cpu")
# Env:   TPUPORT_BIN=path   use this binary (default: cargo build --release)
# Prints a table (median of RUNS runs per cell, and the ratio to the host) and the machine.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNS="${RUNS:-3}"; STEPS="${STEPS:-60}"; WARMUP="${WARMUP:-10}"
TARGETS="${TARGETS:-host sim xla-cpu}"
VENV=$(bash "$REPO/scripts/bootstrap" | tail -1)
if [[ -z "${TPUPORT_BIN:-}" ]]; then
  (cd "$REPO" && cargo build --release --locked --quiet)
  TPUPORT_BIN="${CARGO_TARGET_DIR:-$REPO/target}/release/tpuport"
fi
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

step_time() {  # events file, sync period -> seconds per step between two of the script's syncs
  # TorchTPU dispatches asynchronously (as on a TPU): a step returns before its work is done, and
  # the work is waited for at the script's next `.item()` (every PERIOD steps: after the optimizer
  # step of 0-based steps 0, P, 2P, ...). A median step would time the dispatch alone, so each
  # cell is the wall time between the end of two such syncs divided by the steps in between: the
  # dt of 1-based step k covers the time since step k-1's event, and the sync after 0-based step s
  # ends inside the dt of 1-based step s+2. The window: from the first sync at or after WARMUP to
  # the last complete one.
  python3 - "$1" "$WARMUP" "$2" <<'PY'
import json, sys
warmup, period = int(sys.argv[2]), int(sys.argv[3])
dts = {}
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("type") == "step":
        dts[e["step"]] = e["dt"]
last = max(dts) if dts else 0
s0 = -(-warmup // period) * period
s1 = s0
while s1 + period + 2 <= last:
    s1 += period
if s1 == s0:
    print("nan")
else:
    window = range(s0 + 3, s1 + 3)
    print("%.6f" % (sum(dts[k] for k in window) / len(window)))
PY
}

declare -A RESULT
for workload in host-bound gpt; do
  for target in $TARGETS; do
    device=tpu; [[ $target == host ]] && device=cpu
    case $workload in
      gpt) script="$REPO/examples/tpu/train_gpt.py"; args=(--steps "$STEPS" --device "$device"); period=10 ;;
      host-bound) script="$REPO/bench/scripts/host_bound.py"; args=(--steps "$STEPS" --device "$device"); period=20 ;;
    esac
    meds=()
    for r in $(seq "$RUNS"); do
      ev="$OUT/$workload-$target-$r.jsonl"
      VIRTUAL_ENV="$VENV" "$TPUPORT_BIN" run --target "$target" --no-tui --hbm-track off --events "$ev" \
        "$script" "${args[@]}" > "$OUT/$workload-$target-$r.out" 2>&1 \
        || { echo "error: $workload on $target failed; see below" >&2; tail -20 "$OUT/$workload-$target-$r.out" >&2; exit 2; }
      meds+=("$(step_time "$ev" "$period")")
    done
    RESULT[$workload,$target]=$(printf '%s\n' "${meds[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    echo "$workload on $target: ${meds[*]} s (median ${RESULT[$workload,$target]})" >&2
  done
done

printf '\n| workload | %s |\n|---|%s\n' "$(echo $TARGETS | sed 's/ / | /g')" "$(for t in $TARGETS; do printf -- '---|'; done)"
for workload in host-bound gpt; do
  row="| $workload |"
  for target in $TARGETS; do
    ms=$(python3 -c "print('%.1f' % (float('${RESULT[$workload,$target]}') * 1e3))")
    if [[ $target == host ]]; then
      row="$row $ms ms |"
    else
      ratio=$(python3 -c "h=float('${RESULT[$workload,host]:-nan}'); t=float('${RESULT[$workload,$target]}'); print('%.2f' % (t / h))")
      row="$row $ms ms (x$ratio) |"
    fi
  done
  echo "$row"
done
echo "($(nproc) cores, $(uname -m); median of $RUNS runs, each the wall time per step between two of the script's syncs after the first $WARMUP of $STEPS steps)"
