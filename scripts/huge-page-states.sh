#!/usr/bin/env bash
# The weights' share in 2 MiB pages and its load-time cost per page-cache state and per
# FORNACE_HUGE_PAGES mode, each mode from a fresh copy of the checkpoint: the state a copy or a
# download leaves ("written"), and the state read() leaves after the page cache was dropped
# ("read", needs root for /proc/sys/vm/drop_caches). Two processes per case: the first places the
# pages, the second shows what later processes find.
#
# usage: scripts/huge-page-states.sh FORNACE_BINARY CHECKPOINT_DIR [WORK_DIR]
set -euo pipefail
binary=$1
checkpoint=$2
work=${3:-$(mktemp -d)}
copy="$work/checkpoint"

load() {
  FORNACE_HUGE_PAGES=$1 "$binary" --model "$copy" --prompt-ids 1,2,3 --max-new-tokens 1 --trace \
    2>&1 | sed -n 's/^trace: weights mapped //p'
}

fresh_copy() {
  rm -rf "$copy" && mkdir -p "$copy"
  cp "$checkpoint"/*.json "$checkpoint"/*.safetensors "$copy"/
  sync
}

for state in written read; do
  if [ "$state" = read ] && ! [ -w /proc/sys/vm/drop_caches ]; then
    echo "read: skipped (dropping the page cache needs root)"
    continue
  fi
  for mode in file reread copy both; do
    fresh_copy
    if [ "$state" = read ]; then
      echo 1 >/proc/sys/vm/drop_caches
      cat "$copy"/*.safetensors >/dev/null
    fi
    setting=$mode
    [ "$mode" = both ] && setting=1
    echo "$state, $mode, first process: $(load "$setting")"
    echo "$state, $mode, second process: $(load "$setting")"
  done
done
rm -rf "$copy"
