#!/usr/bin/env bash
# Paired per-step comparison of two decode plans inside one process, immune to the VM's
# bandwidth drift: with 2026-12-07-zen4-per-step-ab.patch applied, odd decode steps run plan A
# and even ones plan B; prints the median of A's step time over the next B's step time.
# usage: per-step-ab.sh MODEL RUNS "STREAMS=1 PF=0" "STREAMS=4 PF=-3072"   (FORNACE_ISA, TOK)
set -euo pipefail
model=$1 runs=$2 plan_a=$3 plan_b=$4
settings=()
for setting in $plan_a; do settings+=("EXP_A_$setting"); done
for setting in $plan_b; do settings+=("EXP_B_$setting"); done
for run in $(seq "$runs"); do
  env "${settings[@]}" build/bin/fornace --model "$model" \
    --prompt-ids "$(cat bench/prompts/alice-512.ids)" --max-new-tokens "${TOK:-128}" --trace \
    2>&1 >/dev/null | awk '/step  position/ {f = 1; next} f && $1 ~ /^[0-9]+$/ {print $1, $NF} f && $1 !~ /^[0-9]+$/ {f = 0}'
done | python3 -c '
import statistics as st, sys
ratios, a_ms = [], []
pending = None
for line in sys.stdin:
    step, ms = int(line.split()[0]), float(line.split()[1])
    if step <= 8:  # warm-up steps
        pending = None
    elif step % 2 == 1:  # step k ran plan A when k is odd
        pending = ms
    elif pending is not None:
        ratios.append(pending / ms); a_ms.append(pending); pending = None
q = st.quantiles(ratios, n=4)
print(f"B speed / A speed: median {st.median(ratios):.3f} [quartiles {q[0]:.3f}-{q[2]:.3f}], {len(ratios)} pairs; A step median {st.median(a_ms):.2f} ms")
'
