#!/usr/bin/env python3
"""Checks decoder_ref.py: hand-computed values per special feature, and both paths on tiny checkpoints."""

import contextlib
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import decoder_ref as ref  # noqa: E402
import make_tiny_checkpoint as tiny  # noqa: E402
import qwen2_ref  # noqa: E402

PROMPT = [5, 17, 42, 3, 88, 60, 29, 71, 9, 50]
WORK = tempfile.mkdtemp(prefix="decoder-ref-test-")


def checkpoint(variant, dtype="f32", shards=1, edit=None):
    """A tiny checkpoint directory; `edit` changes config.json after writing (same weights)."""
    name = f"{variant}-{dtype}-{shards}-{json.dumps(edit, sort_keys=True) if edit else ''}"
    name = name.translate({ord(c): "_" for c in ' "{}:,/'})
    directory = os.path.join(WORK, name)
    if not os.path.exists(directory):
        tiny.write_checkpoint(directory, variant, dtype, shards)
        if edit:
            path = os.path.join(directory, "config.json")
            with open(path) as handle:
                config = json.load(handle)
            config.update(edit)
            with open(path, "w") as handle:
                json.dump(config, handle)
    return directory


def relative(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


class HandComputedValues(unittest.TestCase):
    def test_llama3_inverse_frequencies(self):
        # head_dim 8, theta 10000: plain frequencies 1, 0.1, 0.01, 0.001, wavelengths 2*pi times
        # 1, 10, 100, 1000. original 64, low 1, high 4: bands at wavelength 64 and 16.
        scaling = {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                   "high_freq_factor": 4.0, "original_max_position_embeddings": 64.0}
        smooth = (64 / (20 * math.pi) - 1) / 3  # wavelength 62.8 lies between 16 and 64
        expected = [1.0,                                        # 6.28 < 16: kept
                    (1 - smooth) * 0.1 / 8 + smooth * 0.1,      # between: interpolated
                    0.01 / 8,                                   # 628 > 64: divided by factor
                    0.001 / 8]
        np.testing.assert_allclose(ref.inverse_frequencies(10000.0, 8, scaling), expected,
                                   rtol=1e-14)
        # s = (1.01859163578813 - 1) / 3 = 0.00619721192937673; 0.0125 + 0.0875 * s:
        self.assertAlmostEqual(expected[1], 0.0130422560438205, places=15)

    def test_tiny_llama3_checkpoint_uses_all_three_bands(self):
        frequencies = ref.DecoderReference(checkpoint("llama-llama3")).arch.inverse_frequencies[0]
        plain = 10000.0 ** (-np.arange(8) / 8)
        self.assertEqual(frequencies[0], plain[0])
        for i in (1, 2):
            self.assertTrue(plain[i] / 8 < frequencies[i] < plain[i])
        np.testing.assert_allclose(frequencies[3:], plain[3:] / 8, rtol=1e-15)

    def test_linear_rope_scaling_divides_by_the_factor(self):
        scaling = ref.rope_scaling_from({"rope_type": "linear", "factor": 4}, "test")
        np.testing.assert_allclose(ref.inverse_frequencies(100.0, 4, scaling), [0.25, 0.025])
        self.assertIsNone(ref.rope_scaling_from({"type": "default"}, "test"))
        self.assertEqual(ref.rope_scaling_from({"type": "linear", "factor": 2}, "t")["factor"], 2.0)

    def test_sliding_window_visibility(self):
        # masking_utils: kv_idx <= q_idx and kv_idx > q_idx - sliding_window.
        keys = np.arange(8)
        self.assertEqual(keys[ref.visible(4, keys, 3)].tolist(), [2, 3, 4])
        self.assertEqual(keys[ref.visible(1, keys, 3)].tolist(), [0, 1])
        self.assertEqual(keys[ref.visible(4, keys, 1)].tolist(), [4])
        self.assertEqual(keys[ref.visible(4, keys, None)].tolist(), [0, 1, 2, 3, 4])

    def test_gemma_embedding_scale_rounds_to_the_weights_dtype(self):
        self.assertEqual(ref.gemma_embedding_scale(3072, "BF16"), 55.5)  # HF's own comment
        self.assertEqual(ref.gemma_embedding_scale(640, "BF16"), 25.25)  # gemma-3-270m
        self.assertEqual(ref.gemma_embedding_scale(1152, "BF16"), 34.0)  # gemma-3-1b
        self.assertEqual(ref.gemma_embedding_scale(48, "BF16"), 6.9375)
        self.assertEqual(ref.gemma_embedding_scale(640, "F16"), 25.296875)
        self.assertEqual(ref.gemma_embedding_scale(48, "F32"), float(np.float32(math.sqrt(48))))
        self.assertEqual(ref.DecoderReference(checkpoint("gemma3-types", "bf16")).embedding_scale,
                         6.9375)

    def test_gemma_layer_types_from_the_pattern(self):
        kinds = ref.gemma_layer_types({"num_hidden_layers": 7, "sliding_window_pattern": 6}, "t")
        self.assertEqual([k[0] for k in kinds], list("sssssfs"))
        kinds = ref.gemma_layer_types({"num_hidden_layers": 4}, "t")  # default pattern 6
        self.assertEqual([k[0] for k in kinds], list("ssss"))

    def test_rms_norms(self):
        # [3, 4] / sqrt(12.5), times (1 + w) for Gemma and times w for Llama, with w = [0, 1].
        for variant, scale in (("gemma3-types", [1.0, 2.0]), ("llama-tied", [0.0, 1.0])):
            model = ref.DecoderReference(checkpoint(variant))
            model.arch.eps = 0.0
            model.weights.cache["hand.weight"] = np.array([0.0, 1.0])
            np.testing.assert_allclose(model.norm(np.array([3.0, 4.0]), "hand.weight"),
                                       np.array([0.848528137423857, 1.131370849898476]) * scale,
                                       rtol=1e-14)

    def test_activations_and_soft_cap(self):
        self.assertAlmostEqual(ref.gelu_tanh(1.0), 0.8411919906082768, places=15)
        self.assertAlmostEqual(ref.silu(1.0), 0.7310585786300049, places=15)
        self.assertAlmostEqual(ref.soft_cap(5.0, 5.0), 3.8079707797788243, places=14)
        self.assertEqual(ref.soft_cap(7.0, None), 7.0)

    def test_head_dim_and_attention_scale(self):
        base = {"hidden_size": 64, "intermediate_size": 8, "num_hidden_layers": 1,
                "num_attention_heads": 4, "vocab_size": 10}
        for family, head_dim in (("llama", 16), ("qwen2", 16), ("qwen3", 128),
                                 ("gemma3_text", 256)):
            arch = ref.Architecture(dict(base, model_type=family))
            self.assertEqual(arch.head_dim, head_dim, family)
        self.assertEqual(ref.Architecture(dict(base, model_type="qwen3", head_dim=32))
                         .attention_scale, 32 ** -0.5)
        self.assertEqual(ref.Architecture(dict(base, model_type="gemma3_text", head_dim=16,
                                               query_pre_attn_scalar=24)).attention_scale,
                         24 ** -0.5)

    def test_gemma_rope_per_layer_kind(self):
        arch = ref.DecoderReference(checkpoint("gemma3-types")).arch
        local = 10000.0 ** (-np.arange(0, 16, 2) / 16)
        global_linear = 1e6 ** (-np.arange(0, 16, 2) / 16) / 4
        np.testing.assert_allclose(arch.inverse_frequencies[0], local, rtol=1e-15)
        np.testing.assert_allclose(arch.inverse_frequencies[2], global_linear, rtol=1e-15)
        self.assertEqual(arch.windows, [3, 3, None, 3])
        # transformers v5 spelling of the same settings.
        config = dict(tiny.VARIANTS["gemma3-types"], rope_parameters={
            "full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})
        del config["rope_scaling"], config["rope_theta"], config["rope_local_base_freq"]
        v5 = ref.Architecture(config)
        for ours, theirs in zip(arch.inverse_frequencies, v5.inverse_frequencies):
            np.testing.assert_array_equal(ours, theirs)


    def test_published_configs(self):
        # The fields of the Hugging Face config.json files that decide the architecture.
        llama = ref.Architecture({  # Llama-3.2-1B
            "model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192,
            "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 64, "vocab_size": 128256, "rope_theta": 500000.0, "rms_norm_eps": 1e-5,
            "tie_word_embeddings": True, "rope_scaling": {
                "factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                "original_max_position_embeddings": 8192, "rope_type": "llama3"}})
        self.assertEqual((llama.head_dim, llama.tied, llama.qkv_bias), (64, True, False))
        self.assertAlmostEqual(llama.inverse_frequencies[0][-1], 500000.0 ** (-62 / 64) / 32)
        qwen3 = ref.Architecture({  # Qwen3-0.6B
            "model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072,
            "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
            "head_dim": 128, "vocab_size": 151936, "rope_theta": 1000000, "rope_scaling": None,
            "tie_word_embeddings": True, "use_sliding_window": False, "sliding_window": None})
        self.assertEqual((qwen3.head_dim, qwen3.attention_scale), (128, 128 ** -0.5))
        gemma = ref.Architecture({  # gemma-3-270m
            "model_type": "gemma3_text", "hidden_size": 640, "intermediate_size": 2048,
            "num_hidden_layers": 18, "num_attention_heads": 4, "num_key_value_heads": 1,
            "head_dim": 256, "vocab_size": 262144, "query_pre_attn_scalar": 256,
            "sliding_window": 512, "rope_scaling": None, "final_logit_softcapping": None,
            "attn_logit_softcapping": None, "layer_types": (["sliding_attention"] * 5 +
                                                            ["full_attention"]) * 3})
        self.assertEqual(gemma.windows, ([512] * 5 + [None]) * 3)
        self.assertEqual(gemma.final_cap, None)


class KvCacheTypes(unittest.TestCase):
    def test_q8_0_rounds_half_away_from_zero_with_an_f16_scale(self):
        block = np.zeros(32)
        block[:5] = [127, 63.5, -0.5, 0.4, -127]
        values = ref.kv_cache_values(block, "q8_0")
        np.testing.assert_array_equal(values[:5], [127, 64, -1, 0, -127])
        # max|x| = 1: d = 1/127, stored as f16.
        scaled = ref.kv_cache_values(np.full(32, 1.0), "q8_0")
        d = np.float16(np.float32(1) / np.float32(127)).astype(np.float64)
        np.testing.assert_array_equal(scaled, d * 127)

    def test_q4_0_scales_by_the_signed_largest_value(self):
        block = np.zeros(32)
        block[:5] = [-8, 7, 3.4, -0.6, 0.4]
        values = ref.kv_cache_values(block, "q4_0")
        np.testing.assert_array_equal(values[:5], [-8, 7, 3, -1, 0])
        # Largest +8: d = -1, so +8 is q = 0 -> 8 and -8 would be 16, capped at 15 -> -7.
        block[:2] = [8, -8]
        np.testing.assert_array_equal(ref.kv_cache_values(block, "q4_0")[:2], [8, -7])
        self.assertTrue((ref.kv_cache_values(np.zeros(64), "q4_0") == 0).all())

    def test_float_types_round_to_nearest_even(self):
        x = np.array([1 + 2.0 ** -9, 1 + 3 * 2.0 ** -9, 1 + 2.0 ** -12])
        np.testing.assert_array_equal(ref.kv_cache_values(x, "bf16"), [1, 1 + 2.0 ** -7, 1])
        np.testing.assert_array_equal(ref.kv_cache_values(x, "f16"), x[:2].tolist() + [1])

    def test_each_type_changes_the_logits_and_q4_0_most(self):
        directory = checkpoint("qwen3", "f32")
        exact = ref.DecoderReference(directory).logits_full(PROMPT)
        errors = {}
        for cache_type in ("f16", "bf16", "q8_0", "q4_0"):
            model = ref.DecoderReference(directory)
            model.kv_cache_type = cache_type
            logits = model.logits_full(PROMPT)
            model_incremental = model.logits_incremental(PROMPT)
            np.testing.assert_allclose(model_incremental, logits, rtol=1e-9, atol=1e-9)
            errors[cache_type] = np.linalg.norm(logits - exact) / np.linalg.norm(exact)
        self.assertTrue(all(error > 0 for error in errors.values()), errors)
        self.assertLess(errors["q8_0"], errors["q4_0"])
        self.assertLess(errors["f16"], errors["bf16"])


class BadInput(unittest.TestCase):
    def assert_refused(self, edit, words):
        config = dict(tiny.VARIANTS["gemma3-types"], **edit)
        with self.assertRaises(ref.ConfigError) as raised:
            ref.Architecture(config, "/x/config.json")
        for word in ["/x/config.json"] + words:
            self.assertIn(word, str(raised.exception))

    def test_refusals_name_the_field(self):
        self.assert_refused({"model_type": "gemma3"}, ["model_type"])
        self.assert_refused({"rope_scaling": {"rope_type": "yarn", "factor": 2.0}}, ["yarn"])
        self.assert_refused({"rope_scaling": {"rope_type": "linear"}}, ["factor"])
        self.assert_refused({"layer_types": ["sliding_attention", "chunked_attention",
                                             "full_attention", "full_attention"]},
                            ["layer_types", "chunked_attention"])
        self.assert_refused({"layer_types": ["full_attention"]}, ["layer_types"])
        self.assert_refused({"hidden_activation": "gelu"}, ["hidden_activation"])
        self.assert_refused({"sliding_window": None}, ["sliding_window"])
        with self.assertRaises(ref.ConfigError):
            ref.Architecture(dict(tiny.VARIANTS["llama-tied"], hidden_size=66))

    def test_a_missing_tensor_is_named(self):
        directory = checkpoint("qwen3")
        broken = os.path.join(WORK, "qwen3-broken")
        shutil.copytree(directory, broken)
        with open(os.path.join(broken, "config.json")) as handle:
            config = json.load(handle)
        config["model_type"] = "gemma3_text"
        with open(os.path.join(broken, "config.json"), "w") as handle:
            json.dump(config, handle)
        with self.assertRaisesRegex(ValueError, "lacks tensor model.layers.0.pre_feedforward"):
            ref.DecoderReference(broken)


class ForwardPaths(unittest.TestCase):
    def test_batched_and_incremental_agree_on_every_tiny_checkpoint(self):
        for variant in sorted(tiny.VARIANTS):
            for dtype in ("f32", "bf16"):
                with self.subTest(variant=variant, dtype=dtype):
                    model = ref.DecoderReference(checkpoint(variant, dtype))
                    full = model.logits_full(PROMPT)
                    self.assertLess(relative(model.logits_incremental(PROMPT), full), 1e-10)
                    self.assertTrue(np.all(np.isfinite(full)))
                    self.assertGreater(full.std(axis=-1).min(), 0.1)
                    with contextlib.redirect_stdout(io.StringIO()):
                        self.assertEqual(qwen2_ref.self_test(model, PROMPT), [])

    def test_one_gemma_token_follows_the_layer_formula(self):
        # A lone token attends only to itself, so each layer is closed-form: the attention output
        # is v, whatever q, k, RoPE and the soft-caps do.
        model = ref.DecoderReference(checkpoint("gemma3-types", "bf16"))
        w = model.w

        def norm(x, name):
            return x / np.sqrt(np.mean(x * x) + 1e-6) * (1 + w(name))

        h = w("model.embed_tokens.weight")[42] * 6.9375
        for layer in range(4):
            p = f"model.layers.{layer}."
            v = (w(p + "self_attn.v_proj.weight") @ norm(h, p + "input_layernorm.weight"))
            attention = np.concatenate([v.reshape(2, 16)[head // 2] for head in range(4)])
            h = h + norm(w(p + "self_attn.o_proj.weight") @ attention,
                         p + "post_attention_layernorm.weight")
            x = norm(h, p + "pre_feedforward_layernorm.weight")
            gate = w(p + "mlp.gate_proj.weight") @ x
            gelu = 0.5 * gate * (1 + np.tanh(0.7978845608028654 * (gate + 0.044715 * gate ** 3)))
            h = h + norm(w(p + "mlp.down_proj.weight") @ (gelu * (w(p + "mlp.up_proj.weight") @ x)),
                         p + "post_feedforward_layernorm.weight")
        logits = 5.0 * np.tanh(w("model.embed_tokens.weight") @ norm(h, "model.norm.weight") / 5.0)
        np.testing.assert_allclose(model.logits_full([42])[0], logits, rtol=1e-12)

    def test_the_window_changes_exactly_the_positions_past_it(self):
        # Window 3: positions 0..2 see every earlier key, position 3 loses key 0.
        windowed = ref.DecoderReference(checkpoint("gemma3-types")).logits_full(PROMPT)
        wide = ref.DecoderReference(checkpoint("gemma3-types", edit={"sliding_window": 100}))
        wide = wide.logits_full(PROMPT)
        self.assertLess(relative(windowed[:3], wide[:3]), 1e-14)
        for position in range(3, len(PROMPT)):
            self.assertGreater(relative(windowed[position], wide[position]), 1e-6, position)

    def test_soft_caps_and_scaling_take_effect(self):
        base = ref.DecoderReference(checkpoint("gemma3-types")).logits_full(PROMPT)
        self.assertLess(np.abs(base).max(), 5.0)
        for edit in ({"final_logit_softcapping": None}, {"attn_logit_softcapping": None},
                     {"rope_scaling": None}, {"query_pre_attn_scalar": 16}):
            other = ref.DecoderReference(checkpoint("gemma3-types", edit=edit))
            self.assertGreater(relative(other.logits_full(PROMPT), base), 1e-6, edit)
        llama3 = ref.DecoderReference(checkpoint("llama-llama3")).logits_full(PROMPT)
        plain = ref.DecoderReference(checkpoint("llama-llama3", edit={"rope_scaling": None}))
        self.assertGreater(relative(plain.logits_full(PROMPT), llama3), 1e-6)

    def test_sliding_window_pattern_equals_the_same_layer_types(self):
        for dtype in ("f32", "bf16"):
            pattern = ref.DecoderReference(checkpoint("gemma3-pattern", dtype))
            types = ref.DecoderReference(checkpoint("gemma3-types", dtype))
            self.assertEqual(pattern.arch.layer_types, types.arch.layer_types)
            np.testing.assert_array_equal(pattern.logits_full(PROMPT), types.logits_full(PROMPT))

    def test_qwen2_family_matches_qwen2_ref(self):
        for dtype in ("f32", "bf16"):
            directory = checkpoint("qwen2", dtype)
            ours = ref.DecoderReference(directory).logits_full(PROMPT)
            theirs = qwen2_ref.Qwen2Reference(directory).logits_full(PROMPT)
            self.assertLess(relative(ours, theirs), 1e-13)

    def test_sharded_checkpoint_equals_the_single_file(self):
        for variant in ("llama-llama3", "gemma3-types"):
            single = ref.DecoderReference(checkpoint(variant, "bf16")).logits_full(PROMPT)
            sharded_directory = checkpoint(variant, "bf16", shards=3)
            self.assertTrue(os.path.exists(
                os.path.join(sharded_directory, "model.safetensors.index.json")))
            sharded = ref.DecoderReference(sharded_directory).logits_full(PROMPT)
            np.testing.assert_array_equal(single, sharded)


class CommandLine(unittest.TestCase):
    def run_reference(self, *arguments):
        return subprocess.run([sys.executable, os.path.join(HERE, "decoder_ref.py"), *arguments],
                              capture_output=True, text=True)

    def test_out_greedy_and_self_test(self):
        directory = checkpoint("qwen3")
        output = os.path.join(WORK, "logits.npy")
        result = self.run_reference("--model", directory, "--prompt-ids", "5,17,42",
                                    "--continuation-ids", "3,88", "--out", output,
                                    "--print-greedy", "3")
        self.assertEqual(result.returncode, 0, result.stderr)
        model = ref.DecoderReference(directory)
        logits = np.load(output)
        np.testing.assert_allclose(logits, model.logits_full([5, 17, 42, 3, 88])[2:], rtol=1e-13)
        greedy = json.loads(result.stdout)
        self.assertEqual(greedy, model.greedy([5, 17, 42], 3))
        self.assertEqual(greedy[0], int(np.argmax(logits[0])))
        result = self.run_reference("--model", checkpoint("gemma3-types", "bf16"), "--self-test")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("batched vs incremental", result.stdout)

    def test_refused_config_is_one_line_and_exit_1(self):
        directory = checkpoint("llama-tied", edit={"model_type": "mistral"})
        result = self.run_reference("--model", directory, "--self-test")
        self.assertEqual(result.returncode, 1)
        self.assertEqual(result.stderr.count("\n"), 1)
        self.assertIn("model_type 'mistral'", result.stderr)


if __name__ == "__main__":
    try:
        unittest.main(verbosity=2)
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
