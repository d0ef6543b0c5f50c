#!/usr/bin/env python3
"""`fornace chat --json`: time to first token of turn 1 and turn 5 (same length of new text), and of
turn 5 when turns 1-4 are /load-ed into a fresh process (the whole conversation prefilled).

usage: bench/load/chat_turns.py --model DIR [--runs 5] [--fornace build/bin/fornace] [-- flags]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

MESSAGE = "Please describe item number {} of the list in a few sentences."


def chat(fornace, model, lines, flags):
    output = subprocess.run(
        [fornace, "chat", "--model", model, "--json", "--max-new-tokens", "64", "--ignore-eos"]
        + flags,
        input="".join(line + "\n" for line in lines), capture_output=True, text=True, check=True)
    return [json.loads(line) for line in output.stdout.splitlines()]


def summary(name, values, unit):
    return (f"{name}: median {statistics.median(values):.1f} {unit}, "
            f"range {min(values):.1f}-{max(values):.1f} over {len(values)} runs")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--fornace", default="build/bin/fornace")
    parser.add_argument("flags", nargs="*")
    args = parser.parse_args()
    turn1, turn5, loaded5 = [], [], []
    prefilled = {"turn 1": set(), "turn 5": set(), "turn 5 loaded": set()}
    with tempfile.TemporaryDirectory() as directory:
        saved = os.path.join(directory, "turns.json")
        for _ in range(args.runs):
            lines = [MESSAGE.format(k) for k in range(1, 5)] + ["/save " + saved, MESSAGE.format(5)]
            answers = chat(args.fornace, args.model, lines, args.flags)
            turn1.append(answers[0]["ttft_ms"])
            turn5.append(answers[4]["ttft_ms"])
            prefilled["turn 1"].add(answers[0]["prefilled_tokens"])
            prefilled["turn 5"].add(
                f'{answers[4]["prefilled_tokens"]} of {answers[4]["prompt_tokens"]}')
            fresh = chat(args.fornace, args.model, ["/load " + saved, MESSAGE.format(5)], args.flags)
            loaded5.append(fresh[0]["ttft_ms"])
            prefilled["turn 5 loaded"].add(
                f'{fresh[0]["prefilled_tokens"]} of {fresh[0]["prompt_tokens"]}')
    print(summary("turn 1 ttft", turn1, "ms"))
    print(summary("turn 5 ttft (history in the cache)", turn5, "ms"))
    print(summary("turn 5 ttft (history /load-ed, all prefilled)", loaded5, "ms"))
    print("prompt tokens prefilled:", {name: sorted(values) for name, values in prefilled.items()})


if __name__ == "__main__":
    main()
