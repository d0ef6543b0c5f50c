#!/usr/bin/env python3
"""Writes tiny seeded-random Hugging Face checkpoints (config.json + safetensors) for decoder_ref.py.

  make_tiny_checkpoint.py --out DIR [--variant NAME ...] [--dtype f32|bf16 ...] [--shards N]
      writes DIR/<variant>-<dtype>/ for every variant and dtype asked (default: all of both).

Each variant switches on its family's special features:
  llama-llama3      llama, rope_scaling llama3 (the 8 frequencies fall in all three bands), untied
  llama-tied        llama, no rope_scaling, tied embeddings, head_dim absent (hidden / heads)
  llama-bias        llama, attention_bias and mlp_bias
  qwen2             qwen2, q/k/v biases, tied
  qwen3             qwen3, head_dim 32 with hidden 64 and 4 heads, q_norm / k_norm
  gemma3-types      gemma3_text, layer_types [s, s, f, s], sliding_window 3, linear rope_scaling on
                    the global layer, query_pre_attn_scalar != head_dim, both soft-caps, hidden 48
                    (sqrt(48) rounds differently in bf16 and f32)
  gemma3-pattern    the same weights with sliding_window_pattern 3 instead of layer_types
"""

import argparse
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from decoder_ref import Architecture, tensor_shapes  # noqa: E402

LLAMA_BASE = {
    "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
    "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "vocab_size": 97, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "max_position_embeddings": 256, "hidden_act": "silu",
}

GEMMA_BASE = {
    "model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"], "hidden_size": 48,
    "intermediate_size": 80, "num_hidden_layers": 4, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 101, "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "query_pre_attn_scalar": 24,
    "sliding_window": 3, "rope_scaling": {"rope_type": "linear", "factor": 4.0},
    "final_logit_softcapping": 5.0, "attn_logit_softcapping": 2.0,
    "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": True,
    "max_position_embeddings": 512,
}

VARIANTS = {
    "llama-llama3": dict(LLAMA_BASE, head_dim=16, tie_word_embeddings=False, rope_scaling={
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64}),
    "llama-tied": dict(LLAMA_BASE, num_key_value_heads=4, tie_word_embeddings=True),
    "llama-bias": dict(LLAMA_BASE, attention_bias=True, mlp_bias=True),
    "qwen2": dict(LLAMA_BASE, model_type="qwen2", architectures=["Qwen2ForCausalLM"],
                  tie_word_embeddings=True, rope_theta=1000000.0),
    "qwen3": dict(LLAMA_BASE, model_type="qwen3", architectures=["Qwen3ForCausalLM"],
                  head_dim=32, rope_theta=1000000.0, rms_norm_eps=1e-6),
    "gemma3-types": dict(GEMMA_BASE, layer_types=[
        "sliding_attention", "sliding_attention", "full_attention", "sliding_attention"]),
    "gemma3-pattern": dict(GEMMA_BASE, sliding_window_pattern=3),
}


def random_weights(config, seed):
    """Seeded weights scaled so that activations stay O(1) and the logits are far from flat."""
    generator = np.random.default_rng(seed)
    architecture = Architecture(config)
    gemma, tied = architecture.family == "gemma3_text", architecture.tied
    weights = {}
    for name, shape in tensor_shapes(architecture).items():
        if name.endswith("norm.weight"):
            # Llama-style norms multiply by w (around 1), Gemma's by 1 + w (w around 0).
            values = (0.0 if gemma else 1.0) + 0.2 * generator.standard_normal(shape)
        elif name.endswith(".bias"):
            values = 0.1 * generator.standard_normal(shape)
        elif name == "model.embed_tokens.weight":
            # A tied embedding is also the lm_head: keep it small enough not to echo the input.
            values = generator.standard_normal(shape) * (0.3 if tied else 1.0)
        else:
            values = generator.standard_normal(shape) / np.sqrt(shape[1])
        weights[name] = values.astype(np.float32)
    return weights


def encode(values, dtype):
    if dtype == "f32":
        return "F32", values.astype("<f4").tobytes()
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # round to nearest even
    return "BF16", bits.astype("<u2").tobytes()


def write_safetensors(path, tensors, dtype):
    header, chunks, offset = {}, [], 0
    for name in sorted(tensors):
        code, raw = encode(tensors[name], dtype)
        header[name] = {"dtype": code, "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(encoded)) + encoded + b"".join(chunks))


def write_checkpoint(directory, variant, dtype="f32", shards=1, seed=None):
    """Writes one variant; the same variant name gives the same weights (seeded by its family)."""
    config = dict(VARIANTS[variant], torch_dtype="float32" if dtype == "f32" else "bfloat16")
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as handle:
        json.dump(config, handle, indent=2)
    if seed is None:
        seed = sum(ord(c) for c in variant.replace("-pattern", "-types"))
    weights = random_weights(config, seed)
    if shards == 1:
        write_safetensors(os.path.join(directory, "model.safetensors"), weights, dtype)
        return directory
    names = sorted(weights)
    weight_map = {}
    for index in range(shards):
        shard = f"model-{index + 1:05d}-of-{shards:05d}.safetensors"
        part = names[index::shards]
        write_safetensors(os.path.join(directory, shard), {n: weights[n] for n in part}, dtype)
        weight_map.update({name: shard for name in part})
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as handle:
        json.dump({"metadata": {}, "weight_map": weight_map}, handle, indent=2)
    return directory


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="parent directory")
    parser.add_argument("--variant", action="append", choices=sorted(VARIANTS))
    parser.add_argument("--dtype", action="append", choices=["f32", "bf16"])
    parser.add_argument("--shards", type=int, default=1)
    args = parser.parse_args(argv)
    for variant in args.variant or sorted(VARIANTS):
        for dtype in args.dtype or ["f32", "bf16"]:
            print(write_checkpoint(os.path.join(args.out, f"{variant}-{dtype}"), variant, dtype,
                                   args.shards))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
