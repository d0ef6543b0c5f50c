#!/usr/bin/env python3
"""Writes the fuzz targets' seed inputs, taken from real inputs, under OUT/<target>/.

usage: make_seeds.py SOURCE_DIR TEST_MODELS_DIR OUT
       make_seeds.py --gguf OUT      (only the gguf_header seeds, which need no inputs)
       make_seeds.py --jinja SOURCE_DIR OUT  (only the jinja_template seeds: the templates under
                                              models/tokenizers and small hand-written ones)
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


# Small templates that exercise each construct of the chat-template subset once or twice.
JINJA_SNIPPETS = [
    "{{ messages[0].content }}",
    "{%- for m in messages %}<{{ m.role }}>{{ m['content'] | trim }}{% endfor -%}",
    "{% set ns = namespace(n=0, s='') %}{% for i in range(5) %}{% set ns.n = ns.n + i %}"
    "{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }}{{ ns.s }}",
    "{% for t in tools %}{{ t | tojson }}{{ t.function.parameters | tojson(indent=2) }}{% endfor %}",
    "{% for m in messages %}{% if m.tool_calls %}{% for c in m.tool_calls %}"
    "{% if c.function is defined %}{% set c = c.function %}{% endif %}{{ c.name }}"
    "{% if c.arguments is string %}{{ c.arguments }}{% else %}{{ c.arguments | tojson }}{% endif %}"
    "{% endfor %}{% elif m.role == 'tool' %}{{ loop.previtem.role }}{{ m.content }}{% endif %}"
    "{% endfor %}",
    "{{ 'a<think>b</think>c'.split('</think>')[-1].lstrip('\\n') }}{{ 'xx'.strip('x') }}"
    "{{ ' a  b '.split() }}{{ 'ab'.startswith('a') }}{{ 'ab'.endswith('b') }}"
    "{{ 'a-b'.replace('-', '+', 1) }}{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}",
    "{{ 7 // 2 }}{{ -7 % 3 }}{{ 2 ** 10 }}{{ 7 / 2 }}{{ 'ab' * 3 }}{{ [1] + [2] }}{{ 0.1 + 0.2 }}"
    "{{ 1e300 * 1e10 }}{{ -(3) }}{{ +True }}",
    "{{ 1 < 2 < 3 }}{{ 'b' in 'abc' }}{{ 3 not in [1, 2] }}{{ {'k': 1} == {'k': 1} }}"
    "{{ [1, 2] < [1, 3] }}{{ none is none }}{{ 3 is odd }}{{ x is not defined }}",
    "{{ 'abcdef'[1:5:2] }}{{ 'héllo'[::-1] }}{{ messages[-1:] | length }}{{ numbers[::2] }}",
    "{{ x | default('d') }}{{ '' | default('e', true) }}{{ numbers | first }}{{ numbers | last }}"
    "{{ numbers | join(', ') }}{{ 'abc' | reverse }}{{ numbers | reverse | list }}"
    "{{ 'a b' | replace(' ', '_') }}{{ 5 | string }}{{ messages | count }}",
    "{% if messages[0].role == 'system' %}{% set loop_messages = messages[1:] %}{% else %}"
    "{% set loop_messages = messages %}{% endif %}{% for m in loop_messages %}"
    "{% if (m.role == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('roles must alternate') }}{% endif %}{% endfor %}",
    "{{ {'a': [1, 'two', none, true, 1.5, {'b': '\\u00e9\\n\\t\\x01'}]} }}{{ ['it\\'s'] }}",
    "{% for k in tools[0].function.parameters.properties %}{{ k }}={{ loop.index }}/{{ loop.length }}"
    "{{ loop.revindex }}{% else %}none{% endfor %}{{ tools[0].function.get('x', 'y') }}"
    "{{ tools[0].keys() | length }}{{ tools[0].values() | length }}",
    "  {%- if true -%}  a  {%+ if false %}b{% elif 0 %}c{% else %}d{% endif +%}\n{# note -#}  e",
    "{{ bos_token }}{{ eos_token }}{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>{% endif %}"
    "{% endif %}",
]


def jinja_template_seeds(source, out):
    """Each family's chat template and the snippets above."""
    target = "jinja_template"
    directory = f"{source}/models/tokenizers"
    for family in sorted(os.listdir(directory)):
        with open(f"{directory}/{family}/tokenizer_config.json", encoding="utf-8") as file:
            template = json.load(file).get("chat_template")
        if isinstance(template, str):
            write(out, target, f"family-{family}", template)
    for index, snippet in enumerate(JINJA_SNIPPETS):
        write(out, target, f"snippet-{index:02d}", snippet)


# GGUF value type ids and struct formats, from the specification (ggml docs/gguf.md).
GGUF_SCALARS = {"u8": (0, "B"), "i8": (1, "b"), "u16": (2, "H"), "i16": (3, "h"), "u32": (4, "I"),
                "i32": (5, "i"), "f32": (6, "f"), "bool": (7, "?"), "u64": (10, "Q"),
                "i64": (11, "q"), "f64": (12, "d")}
GGUF_STRING, GGUF_ARRAY = 8, 9
# ggml tensor type ids and their (elements, bytes) per block.
GGML_TYPES = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q8_0": (8, 32, 34),
              "Q4_K": (12, 256, 144), "Q6_K": (14, 256, 210), "BF16": (30, 1, 2)}


def gguf_string(text):
    data = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(data)) + data


def gguf_value(kind, value):
    """The type id and bytes of a value; kind is a scalar name, "str", or ("array", kind)."""
    if isinstance(kind, tuple):
        element_id, _ = gguf_value(kind[1], value[0] if value else 0)
        body = b"".join(gguf_value(kind[1], item)[1] for item in value)
        return GGUF_ARRAY, struct.pack("<IQ", element_id, len(value)) + body
    if kind == "str":
        return GGUF_STRING, gguf_string(value)
    type_id, code = GGUF_SCALARS[kind]
    return type_id, struct.pack("<" + code, value)


def gguf_file(metadata, tensors, alignment=32, version=3):
    """The header and tensor infos of a GGUF file, padded to the alignment, and the size of its
    data section. metadata: (key, kind, value); tensors: (name, dims, type name)."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(metadata))
    for key, kind, value in metadata:
        type_id, body = gguf_value(kind, value)
        out += gguf_string(key) + struct.pack("<I", type_id) + body
    offset = 0
    for name, dims, type_name in tensors:
        type_id, block_elements, block_bytes = GGML_TYPES[type_name]
        out += gguf_string(name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", dim) for dim in dims)
        out += struct.pack("<IQ", type_id, offset)
        size = dims[0] // block_elements * block_bytes
        for dim in dims[1:]:
            size *= dim
        offset += (size + alignment - 1) // alignment * alignment
    out += bytes(-len(out) % alignment)
    return out, offset


def gguf_seed(file_and_data_bytes):
    """The gguf_header input: uint32 count of zero data bytes, then the file's start."""
    header, data_bytes = file_and_data_bytes
    return struct.pack("<I", data_bytes) + header


def gguf_seeds(out):
    target = "gguf_header"
    every_type = [
        ("general.architecture", "str", "qwen2"), ("u8", "u8", 255), ("i8", "i8", -1),
        ("u16", "u16", 65535), ("i16", "i16", -2), ("u32", "u32", 7), ("i32", "i32", -3),
        ("f32", "f32", 0.5), ("bool", "bool", True), ("u64", "u64", 2**64 - 1),
        ("i64", "i64", -(2**63)), ("f64", "f64", 1e-300), ("empty", "str", ""),
        ("f32s", ("array", "f32"), [1.0, -2.5]), ("i32s", ("array", "i32"), [1, -1, 151643]),
        ("bools", ("array", "bool"), [True, False]), ("u64s", ("array", "u64"), [0, 2**63]),
        ("strings", ("array", "str"), ["a", "", "<|im_start|>"]),
        ("empty_array", ("array", "u8"), []),
    ]
    tensors = [("a", [4], "F32"), ("b", [32, 2], "Q8_0"), ("c", [3, 2], "F16"),
               ("d", [256, 1, 2], "Q4_K"), ("e", [2, 2, 1, 2], "BF16")]
    write(out, target, "every-type", gguf_seed(gguf_file(every_type, tensors)))
    # The keys and tensor names of a Qwen2.5-0.5B GGUF, with a cut-down vocabulary.
    tokens = ["!", "\"", "#", "\u0120the", "\u0120a", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    qwen = [
        ("general.architecture", "str", "qwen2"), ("general.name", "str", "Qwen2.5 0.5B Instruct"),
        ("general.file_type", "u32", 7), ("general.quantization_version", "u32", 2),
        ("qwen2.block_count", "u32", 24), ("qwen2.context_length", "u32", 32768),
        ("qwen2.embedding_length", "u32", 896), ("qwen2.feed_forward_length", "u32", 4864),
        ("qwen2.attention.head_count", "u32", 14), ("qwen2.attention.head_count_kv", "u32", 2),
        ("qwen2.rope.freq_base", "f32", 1000000.0),
        ("qwen2.attention.layer_norm_rms_epsilon", "f32", 1e-6),
        ("tokenizer.ggml.model", "str", "gpt2"), ("tokenizer.ggml.pre", "str", "qwen2"),
        ("tokenizer.ggml.tokens", ("array", "str"), tokens),
        ("tokenizer.ggml.token_type", ("array", "i32"), [1] * 5 + [3] * 3),
        ("tokenizer.ggml.merges", ("array", "str"), ["\u0120 t", "\u0120t he"]),
        ("tokenizer.ggml.eos_token_id", "u32", 7), ("tokenizer.ggml.add_bos_token", "bool", False),
        ("tokenizer.chat_template", "str", "{% for message in messages %}{{ message }}{% endfor %}"),
    ]
    layer = [("blk.0.attn_norm.weight", [896], "F32"), ("blk.0.attn_q.weight", [896, 896], "Q8_0"),
             ("blk.0.attn_q.bias", [896], "F32"), ("blk.0.attn_k.weight", [896, 128], "Q8_0"),
             ("blk.0.ffn_up.weight", [896, 4864], "Q8_0"),
             ("blk.0.ffn_down.weight", [4864, 896], "Q8_0"),
             ("output_norm.weight", [896], "F32"), ("token_embd.weight", [896, 8], "Q8_0")]
    write(out, target, "qwen2-layer", gguf_seed(gguf_file(qwen, layer)))
    write(out, target, "version-2", gguf_seed(gguf_file(qwen[:3], layer[:2], version=2)))
    write(out, target, "alignment-64", gguf_seed(gguf_file(
        [("general.alignment", "u32", 64)] + every_type[:4], tensors[:3], alignment=64)))
    write(out, target, "no-tensors", gguf_seed(gguf_file(every_type[:1], [])))
    write(out, target, "empty", gguf_seed(gguf_file([], [])))
    write(out, target, "k-quants", gguf_seed(gguf_file(
        qwen[:1], [("q4k", [512, 2], "Q4_K"), ("q6k", [256, 3], "Q6_K"), ("q40", [64], "Q4_0")])))
    # Invalid variants: a nested array, a misaligned offset, overlapping tensors, a cut file.
    nested = gguf_string("nested") + struct.pack("<IIQIQI", GGUF_ARRAY, GGUF_ARRAY, 1, 4, 1, 7)
    write(out, target, "nested-array", struct.pack("<I", 0) + b"GGUF" +
          struct.pack("<IQQ", 3, 0, 1) + nested)
    header, data_bytes = gguf_file([], [("w", [4], "F32"), ("v", [4], "F32")])
    misaligned = header.replace(struct.pack("<IQ", 0, 32), struct.pack("<IQ", 0, 16))
    write(out, target, "misaligned", gguf_seed((misaligned, data_bytes)))
    overlapping = header.replace(struct.pack("<IQ", 0, 32), struct.pack("<IQ", 0, 0))
    write(out, target, "overlapping", gguf_seed((overlapping, data_bytes)))
    full, _ = gguf_file(every_type, tensors)
    write(out, target, "truncated", gguf_seed((full[: len(full) // 2], 0)))


def main():
    if sys.argv[1] == "--gguf":
        gguf_seeds(sys.argv[2])
        return
    if sys.argv[1] == "--jinja":
        jinja_template_seeds(sys.argv[2], sys.argv[3])
        return
    source, models, out = sys.argv[1:4]
    safetensors_seeds(models, out)
    config_seeds(models, out)
    tokenizer_json_seeds(source, out)
    text_seeds(source, out)
    jinja_template_seeds(source, out)
    gguf_seeds(out)


if __name__ == "__main__":
    main()
