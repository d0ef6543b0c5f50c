#!/usr/bin/env python3
"""An independent NumPy (float64) implementation of the Hugging Face Qwen2 forward pass.

Written from the architecture, not from the engine: its own safetensors parser, its own config
reading, and two forward paths (a batched causal pass and a token-by-token pass with a KV cache)
that check each other.

  qwen2_ref.py --model DIR --prompt-ids 1,2,3 [--continuation-ids 4,5] --out LOGITS.npy
      float64 [1 + len(continuation), vocab]: the last-position logits after the prompt and after
      each continuation token (teacher forcing).
  qwen2_ref.py --model DIR --prompt-ids 1,2,3 --print-greedy N
      prints the N greedy ids after the prompt as a JSON list.
  qwen2_ref.py --model DIR --self-test [--prompt-ids ...]
      compares the two forward paths and checks that logits are finite and not flat.
"""

import argparse
import json
import os
import struct
import sys

import numpy as np


# ---------------------------------------------------------------------------------------------
# safetensors: an 8-byte little-endian header length, a JSON header, then the raw data section.

def _decode_tensor(raw, dtype, shape):
    if dtype == "F32":
        values = np.frombuffer(raw, dtype="<f4").astype(np.float64)
    elif dtype == "F16":
        values = np.frombuffer(raw, dtype="<f2").astype(np.float64)
    elif dtype == "BF16":
        # bfloat16 is the top half of a float32.
        halves = np.frombuffer(raw, dtype="<u2").astype(np.uint32)
        values = (halves << 16).view(np.float32).astype(np.float64)
    else:
        raise ValueError(f"unsupported dtype {dtype}")
    return values.reshape(shape)


class SafetensorsReader:
    """Lazily decodes tensors of one .safetensors file into float64 arrays."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as handle:
            (header_length,) = struct.unpack("<Q", handle.read(8))
            self.header = json.loads(handle.read(header_length))
        self.data_start = 8 + header_length
        self.header.pop("__metadata__", None)
        self.data = np.memmap(path, dtype=np.uint8, mode="r")

    def names(self):
        return list(self.header)

    def get(self, name):
        entry = self.header[name]
        begin, end = entry["data_offsets"]
        raw = self.data[self.data_start + begin:self.data_start + end].tobytes()
        return _decode_tensor(raw, entry["dtype"], entry["shape"])


class Checkpoint:
    """model.safetensors, or the shards of model.safetensors.index.json."""

    def __init__(self, directory):
        index_path = os.path.join(directory, "model.safetensors.index.json")
        self.reader_of = {}
        if os.path.exists(index_path):
            with open(index_path) as handle:
                weight_map = json.load(handle)["weight_map"]
            readers = {}
            for name, shard in weight_map.items():
                if shard not in readers:
                    readers[shard] = SafetensorsReader(os.path.join(directory, shard))
                self.reader_of[name] = readers[shard]
        else:
            reader = SafetensorsReader(os.path.join(directory, "model.safetensors"))
            for name in reader.names():
                self.reader_of[name] = reader
        self.cache = {}

    def __contains__(self, name):
        return name in self.reader_of

    def __getitem__(self, name):
        if name not in self.cache:
            self.cache[name] = self.reader_of[name].get(name)
        return self.cache[name]


# ---------------------------------------------------------------------------------------------
# The model.

class Qwen2Reference:
    def __init__(self, directory):
        with open(os.path.join(directory, "config.json")) as handle:
            config = json.load(handle)
        self.hidden = config["hidden_size"]
        self.layers = config["num_hidden_layers"]
        self.heads = config["num_attention_heads"]
        self.kv_heads = config.get("num_key_value_heads", self.heads)
        self.head_dim = self.hidden // self.heads
        self.theta = float(config.get("rope_theta", 10000.0))
        self.eps = float(config.get("rms_norm_eps", 1e-6))
        self.tied = bool(config.get("tie_word_embeddings", False))
        self.vocab = config["vocab_size"]
        self.weights = Checkpoint(directory)

    def w(self, name):
        return self.weights[name]

    def lm_head(self):
        return self.w("model.embed_tokens.weight" if self.tied else "lm_head.weight")

    def rms_norm(self, x, weight):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * weight

    def linear(self, x, prefix, bias=False):
        y = x @ self.w(prefix + ".weight").T
        return y + self.w(prefix + ".bias") if bias else y

    def mlp(self, x, prefix):
        gate = self.linear(x, prefix + ".gate_proj")
        up = self.linear(x, prefix + ".up_proj")
        silu = gate / (1.0 + np.exp(-gate))
        return self.linear(silu * up, prefix + ".down_proj")

    def inverse_frequencies(self):
        # theta^(-2i/d) for i in [0, d/2).
        return self.theta ** (-np.arange(0, self.head_dim, 2, dtype=np.float64) / self.head_dim)

    # --- Path 1: the whole sequence at once, with a causal mask (as HF runs a prompt).

    def rope_batched(self, x, positions):
        """x [heads, T, d]; the half-split rotation: x * cos + rotate_half(x) * sin."""
        angles = positions[:, None] * self.inverse_frequencies()[None, :]  # [T, d/2]
        cos = np.cos(np.concatenate([angles, angles], axis=-1))
        sin = np.sin(np.concatenate([angles, angles], axis=-1))
        half = self.head_dim // 2
        rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return x * cos + rotated * sin

    def hidden_states_full(self, ids):
        """Final-norm hidden states [T, hidden] of every position of `ids`."""
        count = len(ids)
        positions = np.arange(count, dtype=np.float64)
        group = self.heads // self.kv_heads
        h = self.w("model.embed_tokens.weight")[np.asarray(ids)]
        mask = np.triu(np.full((count, count), -np.inf), k=1)
        for layer in range(self.layers):
            prefix = f"model.layers.{layer}"
            x = self.rms_norm(h, self.w(prefix + ".input_layernorm.weight"))
            q = self.linear(x, prefix + ".self_attn.q_proj", bias=True)
            k = self.linear(x, prefix + ".self_attn.k_proj", bias=True)
            v = self.linear(x, prefix + ".self_attn.v_proj", bias=True)
            q = q.reshape(count, self.heads, self.head_dim).transpose(1, 0, 2)
            k = k.reshape(count, self.kv_heads, self.head_dim).transpose(1, 0, 2)
            v = v.reshape(count, self.kv_heads, self.head_dim).transpose(1, 0, 2)
            q = self.rope_batched(q, positions)
            k = self.rope_batched(k, positions)
            # Grouped-query attention: query head i reads key/value head i // group.
            k = np.repeat(k, group, axis=0)
            v = np.repeat(v, group, axis=0)
            scores = q @ k.transpose(0, 2, 1) / np.sqrt(self.head_dim) + mask
            scores = scores - scores.max(axis=-1, keepdims=True)
            probabilities = np.exp(scores)
            probabilities /= probabilities.sum(axis=-1, keepdims=True)
            attention = (probabilities @ v).transpose(1, 0, 2).reshape(count, self.hidden)
            h = h + self.linear(attention, prefix + ".self_attn.o_proj")
            x = self.rms_norm(h, self.w(prefix + ".post_attention_layernorm.weight"))
            h = h + self.mlp(x, prefix + ".mlp")
        return self.rms_norm(h, self.w("model.norm.weight"))

    def logits_full(self, ids, rows=None):
        """Logits [len(rows), vocab] at the given positions (default: all)."""
        states = self.hidden_states_full(ids)
        if rows is not None:
            states = states[np.asarray(rows)]
        return states @ self.lm_head().T

    # --- Path 2: one token at a time with a KV cache, loops per head, pairwise RoPE.

    def rope_pairwise(self, vector, position):
        """One head's vector [d]: rotates each pair (i, i + d/2) by position * theta^(-2i/d)."""
        half = self.head_dim // 2
        out = np.empty_like(vector)
        for i in range(half):
            angle = position * self.theta ** (-2.0 * i / self.head_dim)
            first, second = vector[i], vector[i + half]
            out[i] = first * np.cos(angle) - second * np.sin(angle)
            out[i + half] = second * np.cos(angle) + first * np.sin(angle)
        return out

    def logits_incremental(self, ids):
        """Logits [T, vocab] of every position, computed step by step with a KV cache."""
        group = self.heads // self.kv_heads
        keys = [[[] for _ in range(self.kv_heads)] for _ in range(self.layers)]
        values = [[[] for _ in range(self.kv_heads)] for _ in range(self.layers)]
        embedding = self.w("model.embed_tokens.weight")
        head = self.lm_head()
        rows = []
        for position, token in enumerate(ids):
            h = embedding[token].copy()
            for layer in range(self.layers):
                prefix = f"model.layers.{layer}"
                x = self.rms_norm(h, self.w(prefix + ".input_layernorm.weight"))
                q = self.linear(x, prefix + ".self_attn.q_proj", bias=True)
                k = self.linear(x, prefix + ".self_attn.k_proj", bias=True)
                v = self.linear(x, prefix + ".self_attn.v_proj", bias=True)
                d = self.head_dim
                for kv_head in range(self.kv_heads):
                    keys[layer][kv_head].append(
                        self.rope_pairwise(k[kv_head * d:(kv_head + 1) * d], position))
                    values[layer][kv_head].append(v[kv_head * d:(kv_head + 1) * d])
                attention = np.empty(self.hidden)
                for query_head in range(self.heads):
                    query = self.rope_pairwise(q[query_head * d:(query_head + 1) * d], position)
                    cached_keys = np.stack(keys[layer][query_head // group])
                    cached_values = np.stack(values[layer][query_head // group])
                    scores = cached_keys @ query / np.sqrt(d)
                    weights = np.exp(scores - scores.max())
                    weights /= weights.sum()
                    attention[query_head * d:(query_head + 1) * d] = weights @ cached_values
                h = h + self.linear(attention, prefix + ".self_attn.o_proj")
                x = self.rms_norm(h, self.w(prefix + ".post_attention_layernorm.weight"))
                h = h + self.mlp(x, prefix + ".mlp")
            rows.append(self.rms_norm(h, self.w("model.norm.weight")) @ head.T)
        return np.stack(rows)

    # --- What the CLI asks for.

    def teacher_forced_logits(self, prompt, continuation):
        """[1 + len(continuation), vocab]: logits after the prompt and after each continuation id."""
        ids = list(prompt) + list(continuation)
        rows = range(len(prompt) - 1, len(ids))
        return self.logits_full(ids, rows=list(rows))

    def greedy(self, prompt, count):
        ids = list(prompt)
        produced = []
        for _ in range(count):
            next_id = int(np.argmax(self.logits_full(ids, rows=[len(ids) - 1])[0]))
            produced.append(next_id)
            ids.append(next_id)
        return produced


# ---------------------------------------------------------------------------------------------

def self_test(model, prompt):
    """Checks the two paths against each other and that logits are usable; returns problems."""
    problems = []
    full = model.logits_full(prompt)
    incremental = model.logits_incremental(prompt)
    difference = np.linalg.norm(full - incremental) / np.linalg.norm(full)
    print(f"batched vs incremental: relative L2 difference {difference:.3e}")
    if not difference < 1e-10:
        problems.append(f"the two forward paths disagree (relative L2 {difference:.3e})")
    if not np.all(np.isfinite(full)):
        problems.append("logits are not finite")
    for position, row in enumerate(full):
        ordered = np.sort(row)
        spread = row.std()
        margin = ordered[-1] - ordered[-2]
        print(f"position {position}: logit std {spread:.3f}, max {ordered[-1]:.3f}, "
              f"top-2 margin {margin:.2e}, argmax {int(np.argmax(row))}")
        if spread < 0.1:
            problems.append(f"logits at position {position} are flat (std {spread:.3e})")
    if len(prompt) > 1 and len(set(np.argmax(full, axis=-1).tolist())) == 1:
        print("note: every position has the same argmax")
    return problems


def parse_ids(text):
    if not text:
        return []
    return [int(item) for item in text.split(",") if item.strip()]


def save_npy_atomically(path, array):
    temporary = f"{path}.tmp.{os.getpid()}"
    try:
        with open(temporary, "wb") as handle:
            np.save(handle, array)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def run_command_line(argv, description, load, default_prompt, describe=None):
    """The command line that qwen2_ref.py and decoder_ref.py share. `load(directory)` returns the
    model or raises ValueError with a message; `describe(model, prompt)` prints a self-test's
    header."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model", required=True, help="checkpoint directory")
    parser.add_argument("--prompt-ids", default="", help="comma-separated token ids")
    parser.add_argument("--continuation-ids", default="", help="comma-separated token ids")
    parser.add_argument("--out", help="write teacher-forced logits to this .npy")
    parser.add_argument("--print-greedy", type=int, metavar="N", help="print N greedy ids")
    parser.add_argument("--self-test", action="store_true")
    parser.add_argument("--kv-cache-type", choices=("f32", "f16", "bf16", "q8_0", "q4_0"),
                        help="keys and values as a KV cache of this type holds them "
                             "(decoder_ref.py only)")
    args = parser.parse_args(argv)

    try:
        model = load(args.model)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if args.kv_cache_type:
        if not hasattr(model, "kv_cache_type"):
            parser.error("--kv-cache-type: this reference keeps keys and values exact")
        model.kv_cache_type = args.kv_cache_type
    prompt = parse_ids(args.prompt_ids)
    continuation = parse_ids(args.continuation_ids)
    for token in prompt + continuation:
        if not 0 <= token < model.vocab:
            parser.error(f"token id {token} is outside the vocabulary [0, {model.vocab})")

    if args.self_test:
        prompt = prompt or default_prompt(model.vocab)
        if describe:
            describe(model, prompt)
        problems = self_test(model, prompt)
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        return 1 if problems else 0
    if not prompt:
        parser.error("--prompt-ids needs at least one id")
    if args.out is None and args.print_greedy is None:
        parser.error("nothing to do: give --out, --print-greedy or --self-test")
    if args.print_greedy is not None:
        print(json.dumps(model.greedy(prompt, args.print_greedy)))
    if args.out:
        save_npy_atomically(args.out, model.teacher_forced_logits(prompt, continuation))
    return 0


def main(argv):
    return run_command_line(argv, __doc__.splitlines()[0], Qwen2Reference,
                            lambda vocab: [9707, 11, 1879, 0, 151644, 872, 198])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
