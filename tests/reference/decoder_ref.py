#!/usr/bin/env python3
"""An independent NumPy (float64) forward pass of Hugging Face Llama, Qwen2, Qwen3 and Gemma 3 text.

Written from the transformers modeling code (modeling_llama.py, modeling_qwen2.py, modeling_qwen3.py,
modeling_gemma3.py, modeling_rope_utils.py, masking_utils.py and the config classes), not from the
engine. Two forward paths check each other: a batched causal pass with an explicit mask matrix and
vectorised half-split RoPE, and a token-by-token pass with per-head loops, pairwise RoPE and a KV
cache that keeps only the window on sliding-window layers. The safetensors reader (single file or
model.safetensors.index.json shards) and the CLI helpers come from qwen2_ref.py.

  decoder_ref.py --model DIR --prompt-ids 1,2,3 [--continuation-ids 4,5] --out LOGITS.npy
      float64 [1 + len(continuation), vocab]: the last-position logits after the prompt and after
      each continuation token (teacher forcing).
  decoder_ref.py --model DIR --prompt-ids 1,2,3 --print-greedy N
      prints the N greedy ids after the prompt as a JSON list.
  decoder_ref.py --model DIR --self-test [--prompt-ids ...]
      compares the two forward paths and checks that logits are finite and not flat.
  --kv-cache-type f32|f16|bf16|q8_0|q4_0 (with any of the above)
      rounds every key (after RoPE) and value to what a KV cache of that type holds, before
      attention reads it: float32, float16 or bfloat16 (nearest even), or GGML's Q8_0 / Q4_0 blocks
      of 32 along head_dim, as ggml-quants.c's quantize_row_q8_0_ref / quantize_row_q4_0_ref
      round them (float32 steps, an f16 scale).

config.json fields read ("-" = required), by model_type:

  field                    llama        qwen2        qwen3        gemma3_text
  hidden_size              -            -            -            -
  intermediate_size        -            -            -            -
  num_hidden_layers        -            -            -            -
  num_attention_heads      -            -            -            -
  vocab_size               -            -            -            -
  num_key_value_heads      heads        heads        heads        4
  head_dim                 hidden/heads hidden/heads 128          256
  rms_norm_eps             1e-6         1e-6         1e-6         1e-6
  tie_word_embeddings      false        false        false        true
  attention_bias           false        (ignored)    false        false
  rope_theta               10000        10000        10000        1000000 (global layers)
  rope_scaling             null         null         null         null (global layers only)
  hidden_act               silu         silu         silu         -
  hidden_activation        -            -            -            gelu_pytorch_tanh
  mlp_bias                 false        -            -            -
  use_sliding_window       -            false        false        -
  query_pre_attn_scalar    -            -            -            256
  sliding_window           -            -            -            4096
  layer_types              -            -            -            from sliding_window_pattern
  sliding_window_pattern   -            -            -            6
  rope_local_base_freq     -            -            -            10000 (sliding layers)
  final_logit_softcapping  -            -            -            null
  attn_logit_softcapping   -            -            -            null
  use_bidirectional_attention -         -            -            false

  - A null head_dim or num_key_value_heads counts as absent.
  - attention_bias true puts a bias on q, k, v and o; qwen2 always has q/k/v biases and no o bias;
    mlp_bias true puts a bias on gate, up and down.
  - rope_scaling: null, or {"rope_type" (or legacy "type"): "default" | "linear" with "factor" |
    "llama3" with "factor", "low_freq_factor", "high_freq_factor",
    "original_max_position_embeddings"}. Other types are refused.
  - Gemma 3 layer i is global ("full_attention") when layer_types says so, or, without layer_types,
    when (i + 1) % sliding_window_pattern == 0; other layers are "sliding_attention". Sliding layers
    use rope_local_base_freq and no scaling; global layers use rope_theta and rope_scaling.
  - The transformers v5 spelling "rope_parameters" (llama/qwen: one dict with rope_theta and the
    scaling keys; gemma3_text: {"full_attention": {...}, "sliding_attention": {...}}) is read when
    present, in place of rope_theta / rope_scaling / rope_local_base_freq.
  - Anything else refused (unknown model_type, activation, rope type or layer type, sliding windows
    on qwen, bidirectional Gemma) raises ConfigError naming config.json and the field.

Semantics taken from transformers:
  - RoPE: inverse frequencies theta^(-2i/d), i < d/2; rotation of the half-split pairs (i, i + d/2).
    linear: divided by factor. llama3: wavelength 2*pi/f; above original/low_freq_factor: f/factor;
    below original/high_freq_factor: f; between: (1 - s) * f/factor + s * f with
    s = (original/wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor).
  - Sliding window (masking_utils.sliding_window_overlay and causal_mask_function): a query at
    position p sees key positions k with p - sliding_window < k <= p, i.e. the last sliding_window
    positions including itself.
  - Gemma 3 embeddings are multiplied by sqrt(hidden_size) held as a float32 tensor and cast to the
    embedding weights' dtype (the checkpoint's dtype of model.embed_tokens.weight): bf16 weights
    scale by bf16(sqrt(hidden)). RMSNorm is x / sqrt(mean(x^2) + eps) * (1 + w) on every Gemma norm
    (q_norm and k_norm over head_dim included). Layer order: input_layernorm, attention,
    post_attention_layernorm, residual add; pre_feedforward_layernorm, GeGLU MLP (tanh GELU),
    post_feedforward_layernorm, residual add. Scores are scaled by query_pre_attn_scalar^-0.5 and
    soft-capped (tanh(x / cap) * cap) before the mask; final logits likewise. Note: transformers'
    Gemma3Attention (unlike Gemma2Attention) does not pass attn_logit_softcapping to its attention
    function, so HF ignores that field; every published Gemma 3 config sets it null. This
    reference applies it when set (as Gemma 2 and Candle do), so that the engine and the reference
    agree on synthetic checkpoints that set it.
  - Llama / Qwen: x / sqrt(mean(x^2) + eps) * w; Qwen3's q_norm / k_norm act per head over head_dim
    before RoPE; scores scaled by head_dim^-0.5.

GGML block formats (ggml-common.h, ggml-quants.c), per block of 32 values x of a row:
  - Q8_0: d = max|x| / 127, q = roundf(x * (1 / d)) (half away from zero; 1/d = 0 when d = 0),
    d stored as f16; the block stands for q * d.
  - Q4_0: m = the x of largest magnitude (the first one), d = m / -8, q = min(15, trunc(x * (1 / d)
    + 8.5)), d stored as f16; the block stands for (q - 8) * d.
"""

import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen2_ref import Checkpoint, run_command_line, self_test  # noqa: E402

FAMILIES = ("llama", "qwen2", "qwen3", "gemma3_text")
FULL = "full_attention"
SLIDING = "sliding_attention"


class ConfigError(ValueError):
    """A config.json this reference does not implement; the message names the file and field."""


# ---------------------------------------------------------------------------------------------
# Pieces that have a closed form and a unit test of their own.

def rope_scaling_from(entry, where):
    """None (plain RoPE) or a dict {"type": "linear"|"llama3", ...} from a rope_scaling entry."""
    if not entry:
        return None
    kind = entry.get("rope_type", entry.get("type", "default"))
    if kind == "default":
        return None
    required = {"linear": ["factor"],
                "llama3": ["factor", "low_freq_factor", "high_freq_factor",
                           "original_max_position_embeddings"]}.get(kind)
    if required is None:
        raise ConfigError(f"{where}: unsupported rope type {kind!r} (default, linear, llama3)")
    scaling = {"type": kind}
    for key in required:
        if entry.get(key) is None:
            raise ConfigError(f"{where}: rope type {kind!r} needs {key!r}")
        scaling[key] = float(entry[key])
    return scaling


def inverse_frequencies(theta, head_dim, scaling=None):
    """[head_dim / 2] RoPE inverse frequencies, scaled as modeling_rope_utils scales them."""
    plain = theta ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    if scaling is None:
        return plain
    factor = scaling["factor"]
    if scaling["type"] == "linear":
        return plain / factor
    original = scaling["original_max_position_embeddings"]
    low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
    wavelength = 2 * math.pi / plain
    scaled = np.where(wavelength > original / low, plain / factor, plain)
    smooth = (original / wavelength - low) / (high - low)
    medium = (wavelength >= original / high) & (wavelength <= original / low)
    return np.where(medium, (1 - smooth) * plain / factor + smooth * plain, scaled)


def visible(query_position, key_position, window=None):
    """Whether a query attends to a key: causal, and within the last `window` positions."""
    causal = key_position <= query_position
    if window is None:
        return causal
    return causal & (key_position > query_position - window)


def bf16_round(value):
    """Rounds a float32 value to bfloat16, nearest-even, as torch's .to(torch.bfloat16)."""
    bits = int(np.array([value], dtype=np.float32).view(np.uint32)[0])
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return float(np.array([bits & 0xFFFFFFFF], dtype=np.uint32).view(np.float32)[0])


def f16_scale(d):
    """The f16 scale a GGML block stores, back as float32."""
    return d.astype(np.float16).astype(np.float32)


def q8_0_values(blocks):
    """float32 blocks [n, 32] -> the values their Q8_0 blocks stand for."""
    d = (np.abs(blocks).max(axis=1) / np.float32(127)).astype(np.float32)
    inverse = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)
    scaled = blocks * inverse[:, None]
    # roundf, half away from zero (exact in float64: scaled is a float32).
    q = np.sign(scaled) * np.floor(np.abs(scaled).astype(np.float64) + 0.5)
    return (q * f16_scale(d)[:, None]).astype(np.float32)


def q4_0_values(blocks):
    """float32 blocks [n, 32] -> the values their Q4_0 blocks stand for."""
    largest = blocks[np.arange(len(blocks)), np.argmax(np.abs(blocks), axis=1)]
    d = (largest / np.float32(-8)).astype(np.float32)
    inverse = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)
    shifted = (blocks * inverse[:, None]).astype(np.float32) + np.float32(8.5)
    q = np.minimum(15, np.trunc(shifted))
    return ((q - 8) * f16_scale(d)[:, None]).astype(np.float32)


def kv_cache_values(x, cache_type):
    """x [..., head_dim] as a KV cache of `cache_type` holds it (float64 back), or x for None."""
    if cache_type is None:
        return x
    single = np.asarray(x, dtype=np.float32)
    if cache_type == "f32":
        held = single
    elif cache_type == "f16":
        held = single.astype(np.float16)
    elif cache_type == "bf16":
        bits = np.ascontiguousarray(single).view(np.uint32).astype(np.uint64)
        bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
        held = (bits & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
    elif cache_type in ("q8_0", "q4_0"):
        if single.shape[-1] % 32:
            raise ValueError(f"a {cache_type} cache needs a head_dim that is a multiple of 32")
        blocks = single.reshape(-1, 32)
        held = (q8_0_values if cache_type == "q8_0" else q4_0_values)(blocks).reshape(x.shape)
    else:
        raise ValueError(f"unknown KV cache type {cache_type!r}")
    return np.asarray(held, dtype=np.float64)


def gemma_embedding_scale(hidden_size, weight_dtype):
    """sqrt(hidden) as a float32 buffer, cast to the embedding weights' dtype."""
    single = np.float32(math.sqrt(hidden_size))
    if weight_dtype == "BF16":
        return bf16_round(single)
    if weight_dtype == "F16":
        return float(np.float16(single))
    if weight_dtype == "F32":
        return float(single)
    raise ValueError(f"no embedding scale for dtype {weight_dtype}")


def gemma_layer_types(config, where):
    layers = config["num_hidden_layers"]
    kinds = config.get("layer_types")
    if kinds is None:
        pattern = int(config.get("sliding_window_pattern") or 6)
        return [SLIDING if (i + 1) % pattern else FULL for i in range(layers)]
    if len(kinds) != layers:
        raise ConfigError(f"{where}: layer_types has {len(kinds)} entries for {layers} layers")
    for kind in kinds:
        if kind not in (FULL, SLIDING):
            raise ConfigError(f"{where}: unknown layer_types entry {kind!r}")
    return list(kinds)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    return x / (1.0 + np.exp(-x))


def soft_cap(x, cap):
    return x if cap is None else np.tanh(x / cap) * cap


# ---------------------------------------------------------------------------------------------
# config.json -> architecture.

class Architecture:
    """What differs between the families, read from config.json with transformers' defaults."""

    def __init__(self, config, where="config.json"):
        family = config.get("model_type")
        if family not in FAMILIES:
            raise ConfigError(f"{where}: model_type {family!r} is not one of {', '.join(FAMILIES)}")
        gemma = family == "gemma3_text"
        for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                    "vocab_size"):
            if config.get(key) is None:
                raise ConfigError(f"{where}: {key} is missing")
        self.family = family
        self.hidden = int(config["hidden_size"])
        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.vocab = int(config["vocab_size"])
        self.intermediate = int(config["intermediate_size"])
        self.kv_heads = int(config.get("num_key_value_heads") or (4 if gemma else self.heads))
        if self.heads % self.kv_heads:
            raise ConfigError(f"{where}: num_key_value_heads {self.kv_heads} does not divide "
                              f"num_attention_heads {self.heads}")
        head_dim = config.get("head_dim")
        if head_dim is None:
            head_dim = {"qwen3": 128, "gemma3_text": 256}.get(family)
        if head_dim is None:
            if self.hidden % self.heads:
                raise ConfigError(f"{where}: head_dim is absent and num_attention_heads "
                                  f"{self.heads} does not divide hidden_size {self.hidden}")
            head_dim = self.hidden // self.heads
        self.head_dim = int(head_dim)
        if self.head_dim % 2:
            raise ConfigError(f"{where}: head_dim {self.head_dim} is odd")
        self.eps = float(config.get("rms_norm_eps", 1e-6))
        self.tied = bool(config.get("tie_word_embeddings", gemma))

        attention_bias = bool(config.get("attention_bias", False))
        self.qkv_bias = attention_bias or family == "qwen2"
        self.o_bias = attention_bias and family != "qwen2"
        self.mlp_bias = family == "llama" and bool(config.get("mlp_bias", False))

        # Gemma's norms scale by (1 + w), and it adds the sandwich norms and the embedding scale.
        self.norm_offset = 1.0 if gemma else 0.0
        self.qk_norm = family in ("qwen3", "gemma3_text")
        self.sandwich_norms = gemma
        self.scales_embedding = gemma

        if gemma:
            activation_key, activation = "hidden_activation", "gelu_pytorch_tanh"
        else:
            activation_key, activation = "hidden_act", "silu"
        name = config.get(activation_key) or activation
        if name != activation:
            raise ConfigError(f"{where}: {activation_key} {name!r} is not supported ({activation})")
        self.activation = gelu_tanh if gemma else silu

        if family in ("qwen2", "qwen3") and config.get("use_sliding_window"):
            raise ConfigError(f"{where}: use_sliding_window true is not supported")
        if gemma and config.get("use_bidirectional_attention"):
            raise ConfigError(f"{where}: use_bidirectional_attention true is not supported")

        self.final_cap = config.get("final_logit_softcapping") if gemma else None
        self.attention_cap = config.get("attn_logit_softcapping") if gemma else None
        scalar = float(config.get("query_pre_attn_scalar", 256)) if gemma else self.head_dim
        self.attention_scale = scalar ** -0.5

        self.layer_types = gemma_layer_types(config, where) if gemma else [FULL] * self.layers
        window = config.get("sliding_window", 4096) if gemma else None
        if SLIDING in self.layer_types and not window:
            raise ConfigError(f"{where}: sliding_window is needed by the sliding-attention layers")
        self.windows = [int(window) if kind == SLIDING else None for kind in self.layer_types]

        frequencies = {}
        for kind in set(self.layer_types):
            theta, scaling = self.rope_of(config, kind, where)
            frequencies[kind] = inverse_frequencies(theta, self.head_dim, scaling)
        self.inverse_frequencies = [frequencies[kind] for kind in self.layer_types]

    def rope_of(self, config, kind, where):
        """(theta, scaling) of a layer kind."""
        parameters = config.get("rope_parameters")
        if self.family != "gemma3_text":
            if parameters:
                theta = parameters.get("rope_theta", config.get("rope_theta", 10000.0))
                return float(theta), rope_scaling_from(parameters, f"{where}: rope_parameters")
            return (float(config.get("rope_theta", 10000.0)),
                    rope_scaling_from(config.get("rope_scaling"), f"{where}: rope_scaling"))
        if parameters:
            entry = parameters.get(kind) or {}
            default = config.get("rope_theta", 1e6) if kind == FULL else \
                config.get("rope_local_base_freq", 10000.0)
            return (float(entry.get("rope_theta", default)),
                    rope_scaling_from(entry, f"{where}: rope_parameters.{kind}"))
        if kind == SLIDING:
            return float(config.get("rope_local_base_freq", 10000.0)), None
        return (float(config.get("rope_theta", 1e6)),
                rope_scaling_from(config.get("rope_scaling"), f"{where}: rope_scaling"))


def tensor_shapes(a):
    """{HF tensor name: shape} of every tensor an architecture reads."""
    shapes = {"model.embed_tokens.weight": (a.vocab, a.hidden), "model.norm.weight": (a.hidden,)}
    if not a.tied:
        shapes["lm_head.weight"] = (a.vocab, a.hidden)
    norms = ["input_layernorm", "post_attention_layernorm"]
    if a.sandwich_norms:
        norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
    for layer in range(a.layers):
        prefix = f"model.layers.{layer}"
        for name, rows in (("q_proj", a.heads * a.head_dim), ("k_proj", a.kv_heads * a.head_dim),
                           ("v_proj", a.kv_heads * a.head_dim)):
            shapes[f"{prefix}.self_attn.{name}.weight"] = (rows, a.hidden)
            if a.qkv_bias:
                shapes[f"{prefix}.self_attn.{name}.bias"] = (rows,)
        shapes[f"{prefix}.self_attn.o_proj.weight"] = (a.hidden, a.heads * a.head_dim)
        if a.o_bias:
            shapes[f"{prefix}.self_attn.o_proj.bias"] = (a.hidden,)
        if a.qk_norm:
            shapes[f"{prefix}.self_attn.q_norm.weight"] = (a.head_dim,)
            shapes[f"{prefix}.self_attn.k_norm.weight"] = (a.head_dim,)
        for name in norms:
            shapes[f"{prefix}.{name}.weight"] = (a.hidden,)
        for name, shape in (("gate_proj", (a.intermediate, a.hidden)),
                            ("up_proj", (a.intermediate, a.hidden)),
                            ("down_proj", (a.hidden, a.intermediate))):
            shapes[f"{prefix}.mlp.{name}.weight"] = shape
            if a.mlp_bias:
                shapes[f"{prefix}.mlp.{name}.bias"] = shape[:1]
    return shapes


# ---------------------------------------------------------------------------------------------
# The model.

class DecoderReference:
    def __init__(self, directory):
        config_path = os.path.join(directory, "config.json")
        with open(config_path) as handle:
            self.arch = Architecture(json.load(handle), config_path)
        self.vocab = self.arch.vocab
        self.weights = Checkpoint(directory)
        self.check_tensor_shapes()
        self.kv_cache_type = None  # Keys and values as attention reads them: exact.
        self.embedding_scale = 1.0
        if self.arch.scales_embedding:
            self.embedding_scale = gemma_embedding_scale(
                self.arch.hidden, self.dtype_of("model.embed_tokens.weight"))

    def dtype_of(self, name):
        return self.weights.reader_of[name].header[name]["dtype"]

    def check_tensor_shapes(self):
        """Every tensor the architecture reads, present and of the expected shape."""
        for name, shape in tensor_shapes(self.arch).items():
            if list(self.shape_of(name)) != list(shape):
                raise ValueError(f"tensor {name} has shape {self.shape_of(name)}, "
                                 f"expected {list(shape)}")

    def shape_of(self, name):
        if name not in self.weights:
            raise ValueError(f"the checkpoint lacks tensor {name}")
        return self.weights.reader_of[name].header[name]["shape"]

    def w(self, name):
        return self.weights[name]

    # --- Shared by both paths: everything but RoPE, masking and the attention itself.

    def norm(self, x, name):
        scale = self.w(name) + self.arch.norm_offset
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.arch.eps) * scale

    def linear(self, x, prefix, bias):
        y = x @ self.w(prefix + ".weight").T
        return y + self.w(prefix + ".bias") if bias else y

    def embed(self, ids):
        return self.w("model.embed_tokens.weight")[np.asarray(ids)] * self.embedding_scale

    def project(self, h, prefix):
        """q [T, heads, d], k and v [T, kv_heads, d] of rows h [T, hidden], q/k norms applied."""
        a = self.arch
        x = self.norm(h, prefix + ".input_layernorm.weight")
        q = self.linear(x, prefix + ".self_attn.q_proj", a.qkv_bias)
        k = self.linear(x, prefix + ".self_attn.k_proj", a.qkv_bias)
        v = self.linear(x, prefix + ".self_attn.v_proj", a.qkv_bias)
        q = q.reshape(len(h), a.heads, a.head_dim)
        k = k.reshape(len(h), a.kv_heads, a.head_dim)
        v = v.reshape(len(h), a.kv_heads, a.head_dim)
        if a.qk_norm:
            q = self.norm(q, prefix + ".self_attn.q_norm.weight")
            k = self.norm(k, prefix + ".self_attn.k_norm.weight")
        return q, k, v

    def finish_layer(self, h, attention, prefix):
        """The residual stream after o_proj and the MLP, given attention rows [T, heads * d]."""
        a = self.arch
        out = self.linear(attention, prefix + ".self_attn.o_proj", a.o_bias)
        if a.sandwich_norms:
            h = h + self.norm(out, prefix + ".post_attention_layernorm.weight")
            x = self.norm(h, prefix + ".pre_feedforward_layernorm.weight")
            return h + self.norm(self.mlp(x, prefix + ".mlp"),
                                 prefix + ".post_feedforward_layernorm.weight")
        h = h + out
        x = self.norm(h, prefix + ".post_attention_layernorm.weight")
        return h + self.mlp(x, prefix + ".mlp")

    def mlp(self, x, prefix):
        gate = self.linear(x, prefix + ".gate_proj", self.arch.mlp_bias)
        up = self.linear(x, prefix + ".up_proj", self.arch.mlp_bias)
        return self.linear(self.arch.activation(gate) * up, prefix + ".down_proj", self.arch.mlp_bias)

    def logits_of(self, h):
        """Logits of residual rows h: final norm, lm_head (or the tied embedding), soft-cap."""
        states = self.norm(h, "model.norm.weight")
        head = self.w("model.embed_tokens.weight" if self.arch.tied else "lm_head.weight")
        return soft_cap(states @ head.T, self.arch.final_cap)

    # --- Path 1: the whole sequence at once, with a mask matrix (as HF runs a prompt).

    @staticmethod
    def rope_batched(x, positions, frequencies):
        """x [heads, T, d]: x * cos + rotate_half(x) * sin."""
        angles = positions[:, None] * frequencies[None, :]
        cos = np.cos(np.concatenate([angles, angles], axis=-1))
        sin = np.sin(np.concatenate([angles, angles], axis=-1))
        half = x.shape[-1] // 2
        return x * cos + np.concatenate([-x[..., half:], x[..., :half]], axis=-1) * sin

    def residual_full(self, ids):
        a = self.arch
        count = len(ids)
        positions = np.arange(count, dtype=np.float64)
        group = a.heads // a.kv_heads
        query_index = np.arange(count)[:, None]
        key_index = np.arange(count)[None, :]
        h = self.embed(ids)
        for layer in range(a.layers):
            prefix = f"model.layers.{layer}"
            q, k, v = (t.transpose(1, 0, 2) for t in self.project(h, prefix))
            q = self.rope_batched(q, positions, a.inverse_frequencies[layer])
            k = self.rope_batched(k, positions, a.inverse_frequencies[layer])
            k = kv_cache_values(k, self.kv_cache_type)
            v = kv_cache_values(v, self.kv_cache_type)
            k = np.repeat(k, group, axis=0)
            v = np.repeat(v, group, axis=0)
            scores = soft_cap(q @ k.transpose(0, 2, 1) * a.attention_scale, a.attention_cap)
            mask = visible(query_index, key_index, a.windows[layer])
            scores = np.where(mask, scores, -np.inf)
            probabilities = np.exp(scores - scores.max(axis=-1, keepdims=True))
            probabilities /= probabilities.sum(axis=-1, keepdims=True)
            attention = (probabilities @ v).transpose(1, 0, 2).reshape(count, -1)
            h = self.finish_layer(h, attention, prefix)
        return h

    def logits_full(self, ids, rows=None):
        """Logits [len(rows), vocab] at the given positions (default: all)."""
        h = self.residual_full(ids)
        return self.logits_of(h if rows is None else h[np.asarray(rows)])

    # --- Path 2: one token at a time, per-head loops, pairwise RoPE, windowed KV cache.

    @staticmethod
    def rope_pairwise(vector, position, frequencies):
        """One head's vector [d]: rotates each pair (i, i + d/2) by position * frequencies[i]."""
        half = len(vector) // 2
        out = np.empty_like(vector)
        for i in range(half):
            cos, sin = math.cos(position * frequencies[i]), math.sin(position * frequencies[i])
            out[i] = vector[i] * cos - vector[i + half] * sin
            out[i + half] = vector[i + half] * cos + vector[i] * sin
        return out

    def logits_incremental(self, ids):
        """Logits [T, vocab] of every position, computed step by step with a KV cache."""
        a = self.arch
        group = a.heads // a.kv_heads
        d = a.head_dim
        # cache[layer][kv_head] = list of (key, value); a sliding layer keeps its last `window`.
        cache = [[[] for _ in range(a.kv_heads)] for _ in range(a.layers)]
        rows = []
        for position, token in enumerate(ids):
            h = self.embed([token])
            for layer in range(a.layers):
                prefix = f"model.layers.{layer}"
                frequencies = a.inverse_frequencies[layer]
                q, k, v = self.project(h, prefix)
                for kv_head in range(a.kv_heads):
                    entries = cache[layer][kv_head]
                    key = self.rope_pairwise(k[0, kv_head], position, frequencies)
                    entries.append((kv_cache_values(key, self.kv_cache_type),
                                    kv_cache_values(v[0, kv_head], self.kv_cache_type)))
                    if a.windows[layer] is not None and len(entries) > a.windows[layer]:
                        entries.pop(0)
                attention = np.empty(a.heads * d)
                for head in range(a.heads):
                    query = self.rope_pairwise(q[0, head], position, frequencies)
                    entries = cache[layer][head // group]
                    keys = np.stack([key for key, _ in entries])
                    values = np.stack([value for _, value in entries])
                    scores = soft_cap(keys @ query * a.attention_scale, a.attention_cap)
                    weights = np.exp(scores - scores.max())
                    attention[head * d:(head + 1) * d] = weights @ values / weights.sum()
                h = self.finish_layer(h, attention[None, :], prefix)
            rows.append(self.logits_of(h)[0])
        return np.stack(rows)

    # --- What the CLI asks for.

    def teacher_forced_logits(self, prompt, continuation):
        """[1 + len(continuation), vocab]: logits after the prompt and after each continuation id."""
        ids = list(prompt) + list(continuation)
        return self.logits_full(ids, rows=list(range(len(prompt) - 1, len(ids))))

    def greedy(self, prompt, count):
        ids = list(prompt)
        for _ in range(count):
            ids.append(int(np.argmax(self.logits_full(ids, rows=[len(ids) - 1])[0])))
        return ids[len(prompt):]


def default_prompt(vocab):
    """Twelve ids spread over the vocabulary: longer than the tiny checkpoints' windows."""
    return [(37 * i + 11) % vocab for i in range(12)]


def describe_self_test(model, prompt):
    a = model.arch
    windows = sorted({w for w in a.windows if w is not None})
    print(f"{a.family}: {a.layers} layers {' '.join(k[0] for k in a.layer_types)} "
          f"(f = full, s = sliding), windows {windows}, prompt length {len(prompt)}, "
          f"embedding scale {model.embedding_scale!r}")


def load_reference(directory):
    try:
        return DecoderReference(directory)
    except ConfigError as error:
        raise ValueError(str(error)) from error


def main(argv):
    return run_command_line(argv, __doc__.splitlines()[0], load_reference, default_prompt,
                            describe_self_test)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
