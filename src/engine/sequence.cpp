// The sequence state machine: prompt reuse, chunked prefill, sampling and the end checks.
#include "engine/sequence.h"

#include <algorithm>
#include <span>

#include "core/error.h"
#include "cpu/copy_kernels.h"
#include "ops/creation.h"

namespace fornace {

int64_t prefill_chunk_length(int64_t remaining, int64_t chunk) {
  if (chunk <= 0) return remaining;
  return remaining / std::max<int64_t>(1, remaining / chunk);
}

Sequence::Sequence(const Model& model, KvCacheKind kind, int64_t context)
    : cache_(kind, model.config().num_hidden_layers, model.kv_cache_shape(context)) {
  memory::OpScope scope("decode_input");
  decode_input_ = Tensor::empty({1, 1}, DType::u32);
}

int64_t Sequence::start(std::vector<uint32_t> prompt, const SamplerOptions& sampling,
                        const SequenceLimits& limits, bool reuse) {
  if (prompt.empty()) fail("generate: empty prompt");
  // The prompt's last token runs again, for the logits of the first new one.
  const int64_t shared =
      reuse ? std::min<int64_t>(shared_prefix(prompt), static_cast<int64_t>(prompt.size()) - 1) : 0;
  reused_ = cache_.keep_prefix(shared);
  prefilled_ = reused_;
  prompt_length_ = prompt.size();
  tokens_ = std::move(prompt);
  limits_ = limits;
  sampler_.emplace(sampling);
  end_ = SequenceEnd::none;
  kept_logits_.clear();
  logprobs_.clear();
  started_ = true;
  return reused_;
}

int64_t Sequence::shared_prefix(const std::vector<uint32_t>& prompt) const {
  // The positions the cache holds belong to tokens_[0, cache length).
  const size_t held = std::min<size_t>(cache_.length(), tokens_.size());
  const auto [cached_end, prompt_end] =
      std::mismatch(tokens_.begin(), tokens_.begin() + static_cast<int64_t>(held), prompt.begin(),
                    prompt.end());
  return cached_end - tokens_.begin();
}

int64_t Sequence::prefill(Model& model, int64_t chunk) {
  if (!prefilling()) fail("sequence: prefill with no prompt left to run");
  const int64_t count = prefill_chunk_length(prompt_remaining(), chunk);
  std::vector<int32_t> values(tokens_.begin() + prefilled_, tokens_.begin() + prefilled_ + count);
  const bool last = count == prompt_remaining();
  Tensor output = model.forward(from_ids(values, {1, count}), cache_,
                                last ? Logits::last : Logits::none);
  prefilled_ += count;
  if (last && limits_.max_new_tokens > 0) accept(output);
  if (last && limits_.max_new_tokens == 0) end_ = SequenceEnd::length;
  return count;
}

uint32_t Sequence::decode(Model& model) {
  decode_input_.data<uint32_t>()[0] = next_input();
  return accept(model.forward(decode_input_, cache_, Logits::last));
}

uint32_t Sequence::accept(const Tensor& logits) {
  const bool logprobs = limits_.top_logprobs >= 0;
  std::span<float> row;
  if (logits.dtype() == DType::f32 && logits.is_contiguous() && !limits_.keep_logits &&
      !logprobs) {
    // The forward pass's output, rewritten at every step: sampled (and penalized) where it lies,
    // without the copy of the vocabulary's logits (608 KB, 71 us a step on Qwen2.5).
    row = {logits.data<float>(), static_cast<size_t>(logits.numel())};
  } else {
    logits_.resize(logits.numel());
    cpu::strided_to_contiguous(logits_.data(), DType::f32, logits.storage()->data(),
                               logits.dtype(), logits.layout());
    if (limits_.keep_logits) kept_logits_.push_back(logits_);
    if (logprobs) raw_logits_ = logits_;  // The sampler's penalties change logits_ in place.
    row = logits_;
  }
  const uint32_t id = sampler_->sample(row, tokens_, prompt_length_);
  if (logprobs) logprobs_.push_back(token_logprob(raw_logits_, id, limits_.top_logprobs));
  tokens_.push_back(id);
  const std::vector<int64_t>& eos = limits_.eos_ids;
  if (!limits_.ignore_eos && std::find(eos.begin(), eos.end(), id) != eos.end()) {
    end_ = SequenceEnd::eos;
  } else if (static_cast<int64_t>(tokens_.size() - prompt_length_) >= limits_.max_new_tokens) {
    end_ = SequenceEnd::length;
  }
  return id;
}

std::vector<uint32_t> Sequence::prompt() const {
  return {tokens_.begin(), tokens_.begin() + static_cast<int64_t>(prompt_length_)};
}

std::vector<uint32_t> Sequence::generated() const {
  return {tokens_.begin() + static_cast<int64_t>(prompt_length_), tokens_.end()};
}

}  // namespace fornace
