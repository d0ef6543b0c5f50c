#!/usr/bin/env python3
"""Per model of a fornace-bench runs CSV: decode tok/s, GB/s of weights, the run's read, % of read
and x BF16 (each run paired with the BF16 run of the same number), medians [ranges].
--split-read GBS: two tables, the runs whose read probe gave less than GBS and the others (a VM
whose bandwidth jumps between two levels)."""
import csv
import statistics as st
import sys


def table(rows):
    """The Markdown rows of runs CSV rows."""
    by = {}
    for r in rows: by.setdefault(r['model'], []).append(r)
    bf16 = {r['run']: float(r['decode_tok_s']) for r in rows if not r['model'].endswith('.gguf')}
    out = []
    for model, rs in by.items():
        tok = [float(r['decode_tok_s']) for r in rs]
        mb = float(rs[0]['weight_bytes']) / 1e6
        share = [ (float(r['weight_bytes']) + float(r['kv_bytes_per_token'])) * float(r['decode_tok_s']) / 1e9 / float(r['run_read_gbs']) for r in rs]
        gbs = [float(r['weight_bytes']) * t / 1e9 for r, t in zip(rs, tok)]
        ratio = [float(r['decode_tok_s']) / bf16[r['run']] for r in rs if r['run'] in bf16]
        reads = [float(r['run_read_gbs']) for r in rs]
        pre = [float(r['prompt_tokens']) / float(r['prefill_ms']) * 1000 for r in rs]
        f = lambda xs, p=1: f"{st.median(xs):.{p}f} [{min(xs):.{p}f}–{max(xs):.{p}f}]" if xs else "–"
        out.append(f"| {model} | {mb:.0f} | {f(tok)} | {f(gbs)} | {f(reads)} | {f([100*s for s in share],0)} % | {f(ratio,2)} | {f(pre,0)} | {len(rs)} |")
    return out


def print_table(title, rows):
    print(title)
    print("| weights | MB read/token | decode tok/s | GB/s | run's read GB/s | % of read | × BF16 | prefill tok/s | runs |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    print("\n".join(table(rows)))


args = sys.argv[1:]
split = None
if args[:1] == ["--split-read"]:
    try:
        split = float(args[1])
    except (IndexError, ValueError):
        sys.exit("error: --split-read needs a bandwidth in GB/s")
    args = args[2:]
if not args:
    sys.exit("usage: decode-shares.py [--split-read GBS] RUNS.csv [RUNS.csv ...]")
for p in args:
    try:
        rows = list(csv.DictReader(open(p)))
        if split is None:
            print_table(p, rows)
        else:
            print_table(f"{p}: runs whose read was below {split:g} GB/s",
                        [r for r in rows if float(r['run_read_gbs']) < split])
            print_table(f"{p}: runs whose read was {split:g} GB/s or more",
                        [r for r in rows if float(r['run_read_gbs']) >= split])
    except (OSError, KeyError, ValueError, ZeroDivisionError) as problem:
        sys.exit(f"error: {p}: {problem!r} (expected a fornace-bench runs CSV with a BF16 run)")
