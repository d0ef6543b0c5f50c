#!/usr/bin/env python3
"""A/B of one fornace command under two settings, run in turns.

    scripts/compare-runs.py --rounds 10 --a "--kv-cache cat" --b "--kv-cache prealloc" -- \
        build/bin/fornace --model models/synth-qwen2.5-0.5b \
        --prompt-file bench/prompts/alice-2048.txt --max-new-tokens 128 --ignore-eos

A setting is a list of NAME=VALUE environment assignments and extra arguments, as a shell would
split it (for example "FORNACE_HUGE_PAGES=0" or "--kv-cache cat"). --a-program and --b-program
run another build's binary in place of the command's first word, to pair two builds:

    scripts/compare-runs.py --a "" --b "" --a-program /tmp/old/build/bin/fornace -- \
        build/bin/fornace --model models/synth-qwen2.5-0.5b \
        --prompt-file bench/prompts/alice-512.txt

The command runs with --json --quiet added, A then B in every round, so that a drift in the
machine's speed falls on both.
Prints, per setting, the median and range of decode and prefill tok/s and of the load's
milliseconds, and the median and range of the per-round ratio A/B: on a machine whose speed
drifts, the paired ratio is the steady figure.
"""
import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys


def parse_setting(text):
    """(environment assignments, extra arguments) of a setting."""
    environment, arguments = {}, []
    try:
        words = shlex.split(text)
    except ValueError as error:
        sys.exit(f"error: cannot split the setting '{text}': {error}")
    for word in words:
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", word):
            name, _, value = word.partition("=")
            environment[name] = value
        else:
            arguments.append(word)
    return environment, arguments


def run_once(command, setting, program):
    environment, arguments = setting
    if program:
        command = [program] + command[1:]
    done = subprocess.run(command + arguments + ["--json", "--quiet"],
                          env=dict(os.environ, **environment), capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"error: {' '.join(command)} exited with {done.returncode}: "
                 f"{done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def describe(values):
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--a", required=True, help='setting A, e.g. "--kv-cache cat"')
    parser.add_argument("--b", required=True, help='setting B, e.g. "FORNACE_HUGE_PAGES=0"')
    parser.add_argument("--a-program", help="binary run for A instead of the command's first word")
    parser.add_argument("--b-program", help="binary run for B instead of the command's first word")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    command = options.command[1:] if options.command[:1] == ["--"] else options.command
    if not command:
        sys.exit("error: give the fornace command after --")
    if options.rounds < 1:
        sys.exit("error: --rounds must be at least 1")
    settings = {"A": parse_setting(options.a), "B": parse_setting(options.b)}
    programs = {"A": options.a_program, "B": options.b_program}
    labels = {name: " ".join(filter(None, [programs[name], text]))
              for name, text in (("A", options.a), ("B", options.b))}
    results = {"A": [], "B": []}
    for round_number in range(options.rounds):
        for name in ("A", "B"):
            summary = run_once(command, settings[name], programs[name])
            results[name].append(summary)
            print(f"round {round_number + 1}/{options.rounds} {name}: "
                  f"decode {summary['decode_tok_s']:.1f} tok/s, "
                  f"prefill {summary['prefill_tok_s']:.1f} tok/s, "
                  f"load {summary['load_ms']:.0f} ms", file=sys.stderr)
    for name in ("A", "B"):
        decode = [summary["decode_tok_s"] for summary in results[name]]
        prefill = [summary["prefill_tok_s"] for summary in results[name]]
        load = [summary["load_ms"] for summary in results[name]]
        print(f"{name} ({labels[name]}): decode tok/s {describe(decode)}, prefill tok/s "
              f"{describe(prefill)}, load ms {describe(load)}")
    # Speeds are faster when larger, the load when smaller.
    for key, name, larger_is_faster in (("decode_tok_s", "decode", True),
                                        ("prefill_tok_s", "prefill", True),
                                        ("load_ms", "load time", False)):
        ratios = [a[key] / b[key] for a, b in zip(results["A"], results["B"]) if b[key] > 0]
        if ratios:
            faster = sum((ratio > 1) == larger_is_faster and ratio != 1 for ratio in ratios)
            print(f"A/B {name}, per round: median {statistics.median(ratios):.3f}"
                  f" ({min(ratios):.3f}-{max(ratios):.3f}), A faster in "
                  f"{faster} of {len(ratios)} rounds")


if __name__ == "__main__":
    main()
