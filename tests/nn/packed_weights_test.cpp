// PackedWeights with forms an earlier load stored: handed out while their sizes and heads match
// what packing gives now, packed anew from the first that differs.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "cpu/gemm.h"
#include "nn/packed_weights.h"
#include "ops/test_tensors.h"

namespace fornace {
namespace {

size_t aligned(size_t bytes) { return (bytes + 63) / 64 * 64; }

// Byte i of form `seed` is seed * 31 + i (mod 256).
PackedWeights::Write pattern(int seed, size_t bytes, bool* called = nullptr) {
  return [=](char* data) {
    if (called) *called = true;
    for (size_t index = 0; index < bytes; ++index) data[index] = static_cast<char>(seed * 31 + index);
  };
}

struct Form {
  size_t bytes;
  size_t head_bytes;
};
const std::vector<Form> kForms = {{100, 16}, {4097, 64}, {64, 64}};

// The forms of kForms packed anew, and stored as a cache lays them out.
StoredPackedForms stored_forms() {
  PackedWeights fresh;
  size_t total = 0;
  for (const Form& form : kForms) total += aligned(form.bytes);
  std::shared_ptr<Storage> bytes = Storage::allocate(total);
  StoredPackedForms stored{bytes, {}};
  size_t offset = 0;
  for (size_t index = 0; index < kForms.size(); ++index) {
    const Form& form = kForms[index];
    auto placed = fresh.place(form.bytes, form.head_bytes, pattern(int(index), form.bytes),
                              pattern(int(index), form.head_bytes));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(placed->data()) % 64, 0u);
    std::memcpy(static_cast<char*>(bytes->data()) + offset, placed->data(), form.bytes);
    stored.sizes.push_back(form.bytes);
    offset += aligned(form.bytes);
  }
  EXPECT_EQ(fresh.forms().size(), kForms.size());
  EXPECT_EQ(fresh.stored_forms_used(), 0u);
  return stored;
}

// Places kForms in `packed`: whether each came from `stored` (its address there, its write not
// called), and checks every form's bytes against the pattern.
std::vector<bool> place_all(PackedWeights& packed, const StoredPackedForms& stored) {
  std::vector<bool> from_stored;
  const char* base = static_cast<const char*>(stored.bytes->data());
  size_t offset = 0;
  for (size_t index = 0; index < kForms.size(); ++index) {
    const Form& form = kForms[index];
    bool written = false;
    auto placed = packed.place(form.bytes, form.head_bytes, pattern(int(index), form.bytes, &written),
                               pattern(int(index), form.head_bytes));
    std::vector<char> expected(form.bytes);
    pattern(int(index), form.bytes)(expected.data());
    EXPECT_EQ(std::memcmp(placed->data(), expected.data(), form.bytes), 0) << "form " << index;
    EXPECT_EQ(placed->bytes(), form.bytes);
    const bool at_stored = placed->data() == base + offset;
    EXPECT_NE(at_stored, written) << "form " << index << " is either stored or written";
    from_stored.push_back(at_stored);
    offset += aligned(form.bytes);
  }
  EXPECT_EQ(packed.forms().size(), kForms.size());
  return from_stored;
}

TEST(PackedWeights, StoredFormsAreHandedOutWhileTheirSizesAndHeadsMatch) {
  StoredPackedForms stored = stored_forms();
  PackedWeights all(stored);
  EXPECT_EQ(place_all(all, stored), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(all.stored_forms_used(), 3u);

  // A head that differs: that form and every later one are packed anew.
  StoredPackedForms changed_head = stored_forms();
  static_cast<char*>(const_cast<void*>(changed_head.bytes->data()))[aligned(100) + 63] ^= 1;
  PackedWeights from_second(changed_head);
  EXPECT_EQ(place_all(from_second, changed_head), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(from_second.stored_forms_used(), 1u);

  // A size that differs, and stored bytes shorter than their sizes say.
  StoredPackedForms changed_size = stored_forms();
  changed_size.sizes[0] = 99;
  PackedWeights none(changed_size);
  EXPECT_EQ(place_all(none, changed_size), (std::vector<bool>{false, false, false}));
  StoredPackedForms short_bytes = stored_forms();
  short_bytes.bytes = Storage::borrow(short_bytes.bytes, short_bytes.bytes->data(), aligned(100));
  PackedWeights first_only(short_bytes);
  EXPECT_EQ(place_all(first_only, short_bytes), (std::vector<bool>{true, false, false}));
}

// pack() checks a stored form against the weight's first panel packed now: the same weight is
// handed out from the stored bytes, another weight of the same shape is packed anew.
TEST(PackedWeights, PackHandsOutTheStoredPanelsOfTheSameWeightOnly) {
  if (!cpu::packs_bf16_weights()) GTEST_SKIP() << "the active kernels read bf16 weights as stored";
  Tensor weight = randn({70, 96}, 7, 1.0, DType::bf16);
  Tensor other = randn({70, 96}, 8, 1.0, DType::bf16);
  PackedWeights fresh;
  std::shared_ptr<const Storage> packed = fresh.pack(weight);
  std::shared_ptr<const Storage> packed_other = PackedWeights().pack(other);
  ASSERT_NE(packed, nullptr);
  StoredPackedForms stored{packed, {packed->bytes()}};

  PackedWeights again(stored);
  std::shared_ptr<const Storage> handed = again.pack(weight);
  EXPECT_EQ(handed->data(), packed->data());
  EXPECT_EQ(again.stored_forms_used(), 1u);

  PackedWeights changed(stored);
  std::shared_ptr<const Storage> repacked = changed.pack(other);
  EXPECT_NE(repacked->data(), packed->data());
  EXPECT_EQ(changed.stored_forms_used(), 0u);
  ASSERT_EQ(repacked->bytes(), packed_other->bytes());
  EXPECT_EQ(std::memcmp(repacked->data(), packed_other->data(), repacked->bytes()), 0);
}

}  // namespace
}  // namespace fornace
