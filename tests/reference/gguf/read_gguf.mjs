// Prints a GGUF file's metadata and tensor infos as JSON, as @huggingface/gguf reads them.
// usage: node read_gguf.mjs FILE
// 64-bit integers (BigInt) are printed as decimal strings, non-finite floats as "NaN" etc.
import { gguf } from "@huggingface/gguf";

const path = process.argv[2];
if (!path) {
  console.error("usage: node read_gguf.mjs FILE");
  process.exit(2);
}
const parsed = await gguf(path, { allowLocalFile: true, typedMetadata: true });
const header = new Set(["version", "tensor_count", "kv_count"]);
const metadata = {};
for (const [key, entry] of Object.entries(parsed.typedMetadata)) {
  if (header.has(key)) continue;
  metadata[key] = { type: entry.type, sub_type: entry.subType ?? null, value: entry.value };
}
const result = {
  version: parsed.metadata.version,
  tensor_count: parsed.metadata.tensor_count,
  kv_count: parsed.metadata.kv_count,
  little_endian: parsed.littleEndian,
  tensor_data_offset: parsed.tensorDataOffset,
  metadata,
  tensors: parsed.tensorInfos.map((info) => ({
    name: info.name,
    n_dims: info.n_dims,
    shape: info.shape,
    dtype: info.dtype,
    offset: info.offset,
  })),
};
const plain = (key, value) => {
  if (typeof value === "bigint") return value.toString();
  if (typeof value === "number" && !Number.isFinite(value)) return String(value);
  return value;
};
process.stdout.write(JSON.stringify(result, plain) + "\n");
