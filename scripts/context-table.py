#!/usr/bin/env python3
"""One table of a long-context bench (scripts/bench-context.sh) from its runs.

    scripts/context-table.py runs/<date>-<commit>-context/manifest.tsv [MORE.tsv ...]

Several manifests make one table (runs of one machine). A manifest holds one line per CSV: engine,
weights, cache type and the CSV's path (tab-separated), fornace-bench's runs CSVs and
bench/llamacpp/context.mjs's. Prints, per context and row (the mean over its runs): prefill tok/s
and % of the GEMM peak (projections and attention FLOPs), decode tok/s and % of the read bandwidth
(weights plus the K and V read at that context), the KV cache's MiB and the process's peak RSS.

llama.cpp's rows take the roofs (read GB/s, GEMM GFLOP/s), the weights' bytes per token and the
prefill's GFLOP from fornace-bench's rows of the same weights and prompt (same arithmetic, same
machine); their KV bytes per position come from the cache llama.cpp reports (MiB over cells).
"""
import csv
import statistics
import sys
from collections import OrderedDict

MIB = 1024 * 1024


def mean(values):
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def number(row, column):
    text = row.get(column, '')
    return float(text) if text not in ('', None) else None


def run_figures(row):
    """What both engines' CSVs hold alike: the prompt, prefill's and decode's rates, peak RSS."""
    prompt_tokens = number(row, 'prompt_tokens')
    prefill_ms = number(row, 'prefill_ms')
    return {
        'prompt_tokens': int(prompt_tokens),
        'prefill_tok_s': 1000 * prompt_tokens / prefill_ms,
        'prefill_s': prefill_ms / 1000,
        'decode_tok_s': number(row, 'decode_tok_s'),
        'peak_mib': number(row, 'peak_mib'),
    }


def fornace_row(row):
    """A fornace-bench run: its figures and the roofs it measured."""
    figures = run_figures(row)
    # A prealloc cache holds the prompt and every new token.
    positions = figures['prompt_tokens'] + number(row, 'decode_steps') + 1
    figures.update(
        kv_read_per_token=number(row, 'kv_bytes_per_token'),
        kv_mib=number(row, 'kv_bytes_per_position') * positions / MIB,
        weight_bytes=number(row, 'weight_bytes'),
        prefill_gflop=number(row, 'prefill_gflop'),
        read_gbs=number(row, 'run_read_gbs') or number(row, 'read_gbs'),
        peak_gflops=number(row, 'run_peak_gflops') or number(row, 'peak_gflops'))
    return figures


def llamacpp_row(row):
    """A context.mjs run; the roofs and the model's arithmetic come from fornace's rows."""
    figures = run_figures(row)
    per_position = number(row, 'kv_mib') * MIB / number(row, 'context_size')
    # Step i reads the prompt and i + 1 new positions: the mean over the steps.
    mean_positions = figures['prompt_tokens'] + (number(row, 'decode_steps') + 1) / 2
    figures.update(kv_read_per_token=per_position * mean_positions, kv_mib=number(row, 'kv_mib'))
    return figures


def read_manifest(path):
    rows = []
    with open(path) as manifest:
        for line in manifest:
            if not line.strip():
                continue
            engine, weights, cache_type, csv_path = line.rstrip('\n').split('\t')
            try:
                with open(csv_path, newline='') as file:
                    runs = list(csv.DictReader(file))
            except OSError as error:
                print(f'warning: {csv_path}: {error.strerror} (a run that failed?)',
                      file=sys.stderr)
                continue
            convert = fornace_row if engine == 'fornace' else llamacpp_row
            for run in runs:
                rows.append({'engine': engine, 'weights': weights, 'cache_type': cache_type,
                             **convert(run)})
    return rows


def summarize(rows):
    """Mean of the runs of each (context, engine, weights, cache type), in the order first seen;
    llama.cpp's rows completed with fornace's roofs and arithmetic."""
    groups = OrderedDict()
    for row in rows:
        key = (row['prompt_tokens'], row['engine'], row['weights'], row['cache_type'])
        groups.setdefault(key, []).append(row)
    fornace = {}  # (prompt_tokens, weights) -> its runs
    for row in rows:
        if row['engine'] == 'fornace':
            fornace.setdefault((row['prompt_tokens'], row['weights']), []).append(row)
    table = []
    for key in sorted(groups, key=lambda k: (k[0], k[2], k[3], k[1] != 'fornace')):
        runs = groups[key]
        summary = {column: mean([run.get(column) for run in runs]) for column in runs[0]
                   if column not in ('engine', 'weights', 'cache_type')}
        summary.update(prompt_tokens=key[0], engine=key[1], weights=key[2], cache_type=key[3])
        reference = fornace.get((key[0], key[2]), [])
        for column in ('weight_bytes', 'prefill_gflop', 'read_gbs', 'peak_gflops'):
            if summary.get(column) is None:
                summary[column] = mean([run[column] for run in reference])
        shares = []
        for run in runs:
            read_gbs = run.get('read_gbs') or summary['read_gbs']
            peak = run.get('peak_gflops') or summary['peak_gflops']
            weight_bytes = run.get('weight_bytes') or summary['weight_bytes']
            gflop = run.get('prefill_gflop') or summary['prefill_gflop']
            read = (100 * (weight_bytes + run['kv_read_per_token']) * run['decode_tok_s'] / 1e9
                    / read_gbs) if read_gbs and weight_bytes else None
            compute = 100 * gflop / run['prefill_s'] / peak if peak and gflop else None
            shares.append((read, compute))
        summary['read_share'] = mean([read for read, _ in shares])
        summary['peak_share'] = mean([compute for _, compute in shares])
        summary['runs'] = len(runs)
        table.append(summary)
    return table


def cell(value, digits=1, suffix=''):
    return '–' if value is None else f'{value:,.{digits}f}{suffix}'


def format_table(table):
    header = ['Context', 'Engine', 'Weights', 'KV cache', 'Runs', 'Prefill tok/s', '% of peak',
              'Decode tok/s', '% of read (weights+KV)', 'KV MiB', 'Peak RSS MiB']
    lines = ['| ' + ' | '.join(header) + ' |', '|' + '|'.join(['---'] * len(header)) + '|']
    for row in table:
        cells = [f"{row['prompt_tokens']:,}", row['engine'], row['weights'], row['cache_type'],
                 str(row['runs']), cell(row['prefill_tok_s']), cell(row['peak_share'], 0, ' %'),
                 cell(row['decode_tok_s'], 2), cell(row['read_share'], 0, ' %'),
                 cell(row['kv_mib'], 0), cell(row['peak_mib'], 0)]
        lines.append('| ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines) + '\n'


def main():
    if len(sys.argv) < 2:
        print('usage: scripts/context-table.py MANIFEST.tsv [MORE.tsv ...]', file=sys.stderr)
        return 2
    rows = []
    for path in sys.argv[1:]:
        try:
            rows += read_manifest(path)
        except OSError as error:
            print(f'error: {path}: {error.strerror}', file=sys.stderr)
            return 1
        except (KeyError, ValueError, TypeError, ZeroDivisionError) as error:
            print(f'error: {path}: a CSV without the bench\'s columns ({error})', file=sys.stderr)
            return 1
    if not rows:
        print(f'error: {" ".join(sys.argv[1:])}: no runs', file=sys.stderr)
        return 1
    sys.stdout.write(format_table(summarize(rows)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
