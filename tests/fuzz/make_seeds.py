#!/usr/bin/env python3
"""Writes the fuzz targets' seed inputs, taken from real inputs, under OUT/<target>/.

usage: make_seeds.py SOURCE_DIR TEST_MODELS_DIR OUT
TEST_MODELS_DIR holds the tiny synthetic checkpoints (tiny-bf16, tiny-f32) that the tests write.
"""
import json
import os
import struct
import sys

# config.json of Qwen/Qwen2.5-0.5B-Instruct as published.
QWEN25_CONFIG = {
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
    "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 21,
    "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
    "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "sliding_window": 32768, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
    "transformers_version": "4.43.1", "use_cache": True, "use_sliding_window": False,
    "vocab_size": 151936,
}


def write(out, target, name, data):
    directory = os.path.join(out, target)
    os.makedirs(directory, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(directory, name), "wb") as file:
        file.write(data)


def safetensors_seed(header, data_bytes, data=b""):
    """The safetensors_header input: uint32 data size, header length, header, data prefix."""
    text = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<IQ", data_bytes, len(text)) + text + data


def real_header_seed(path):
    with open(path, "rb") as file:
        (length,) = struct.unpack("<Q", file.read(8))
        header = file.read(length)
    data_bytes = os.path.getsize(path) - 8 - length
    return struct.pack("<IQ", data_bytes, length) + header


def safetensors_seeds(models, out):
    target = "safetensors_header"
    for dtype in ("bf16", "f32"):
        write(out, target, f"tiny-{dtype}", real_header_seed(f"{models}/tiny-{dtype}/model.safetensors"))
    small = {
        "__metadata__": {"format": "pt"},
        "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
        "b": {"dtype": "BF16", "shape": [4], "data_offsets": [24, 32]},
        "c": {"dtype": "F16", "shape": [], "data_offsets": [32, 34]},
        "empty": {"dtype": "F32", "shape": [0, 5], "data_offsets": [34, 34]},
    }
    write(out, target, "small", safetensors_seed(small, 0, bytes(34)))
    write(out, target, "overlap", safetensors_seed(
        {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
         "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, 16))
    write(out, target, "unsupported-dtype", safetensors_seed(
        {"a": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}}, 8))
    write(out, target, "empty-header", safetensors_seed({}, 0))


def config_seeds(models, out):
    target = "model_config"
    write(out, target, "qwen2.5-0.5b-instruct", json.dumps(QWEN25_CONFIG, indent=2))
    for dtype in ("bf16", "f32"):
        with open(f"{models}/tiny-{dtype}/config.json", "rb") as file:
            write(out, target, f"tiny-{dtype}", file.read())
    eos_list = dict(QWEN25_CONFIG, eos_token_id=[151645, 151643])
    del eos_list["num_key_value_heads"], eos_list["rope_theta"]
    write(out, target, "eos-list-defaults", json.dumps(eos_list))


def reduced_tokenizer(tokenizer, keep_ids):
    """A tokenizer.json with the vocabulary cut to ids below keep_ids and the merges that stay
    inside it; the added tokens and the rest of the file are kept as they are."""
    vocab = {token: id for token, id in tokenizer["model"]["vocab"].items() if id < keep_ids}
    merges = []
    for merge in tokenizer["model"]["merges"]:
        left, right = merge if isinstance(merge, list) else merge.split(" ", 1)
        if left in vocab and right in vocab and left + right in vocab:
            merges.append(merge)
    reduced = dict(tokenizer)
    reduced["model"] = dict(tokenizer["model"], vocab=vocab, merges=merges)
    return reduced


def tokenizer_json_seeds(source, out):
    target = "tokenizer_json"
    with open(f"{source}/models/tokenizer.json", encoding="utf-8") as file:
        tokenizer = json.load(file)
    reduced = reduced_tokenizer(tokenizer, 300)
    write(out, target, "qwen-reduced-pair-merges", json.dumps(reduced, ensure_ascii=False))
    string_merges = dict(reduced, model=dict(
        reduced["model"], merges=[" ".join(merge) for merge in reduced["model"]["merges"]]))
    write(out, target, "qwen-reduced-string-merges", json.dumps(string_merges, ensure_ascii=False))
    # The Llama-3 style: a different split regex, no normalizer, ignore_merges.
    llama = json.loads(json.dumps(reduced))
    llama["normalizer"] = None
    llama["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = (
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
        "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
    llama["model"]["ignore_merges"] = True
    write(out, target, "llama3-style", json.dumps(llama, ensure_ascii=False))
    tiny = json.loads(json.dumps(reduced))
    tiny["model"]["vocab"] = {token: id for token, id in reduced["model"]["vocab"].items() if id < 40}
    tiny["model"]["merges"] = []
    tiny["added_tokens"] = tiny["added_tokens"][:3]
    write(out, target, "tiny", json.dumps(tiny, ensure_ascii=False))
    # Gemma 3's SentencePiece style: Replace normalizer, MergedWithPrevious split, byte fallback
    # (ids 238 to 493 are <0x00> to <0xFF>), the Replace / ByteFallback / Fuse decoder.
    with open(f"{source}/models/tokenizers/gemma3/tokenizer.json", encoding="utf-8") as file:
        gemma = reduced_tokenizer(json.load(file), 600)
    gemma["added_tokens"] = [token for token in gemma["added_tokens"] if token["id"] < 600]
    write(out, target, "gemma3-reduced", json.dumps(gemma, ensure_ascii=False))


def text_seeds(source, out):
    """Texts from the tokenizer golden cases for encode, and their ids for decode."""
    cases = []
    with open(f"{source}/tests/data/tokenizer-golden.jsonl", encoding="utf-8") as file:
        for line in file:
            cases.append(json.loads(line))
    chosen = cases[::3]
    for index, case in enumerate(chosen):
        text = case["text"].encode("utf-8")[:2000]
        write(out, "tokenizer_encode", f"golden-{index:03d}", bytes([index & 1]) + text)
        ids = case["ids"][:200]
        write(out, "tokenizer_decode", f"golden-{index:03d}",
              bytes([index & 1]) + b"".join(struct.pack("<I", id)[:3] for id in ids))
    write(out, "tokenizer_encode", "invalid-utf8", b"\x01caf\xc3 \xff\xfe <|im_start|>")


def main():
    source, models, out = sys.argv[1:4]
    safetensors_seeds(models, out)
    config_seeds(models, out)
    tokenizer_json_seeds(source, out)
    text_seeds(source, out)


if __name__ == "__main__":
    main()
