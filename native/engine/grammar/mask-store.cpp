#include "grammar/mask-store.h"

namespace engine::grammar {

size_t TupleHash::operator()(const std::vector<int32_t>& v) const {
  uint64_t h = 1469598103934665603ull;
  for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
  return static_cast<size_t>(h ^ (h >> 29));
}

MaskStore::MaskStore(bool long_lived, size_t max_bytes) : max_bytes_(max_bytes) {
  if (long_lived) tuples_.reserve(kMaxTuples);
}

bool MaskStore::bind(const void* vocabulary) {
  if (!vocabulary_) vocabulary_ = vocabulary;
  return vocabulary_ == vocabulary;
}

int32_t MaskStore::intern(const std::vector<int32_t>& tuple) {
  const auto it = tuples_.find(tuple);
  if (it != tuples_.end()) return it->second;
  if (tuples_.size() >= kMaxTuples) return -1;
  return tuples_.emplace(tuple, static_cast<int32_t>(tuples_.size())).first->second;
}

int32_t MaskStore::byte_set(const ByteSet& set) {
  return sets_.emplace(set.bits, static_cast<int32_t>(sets_.size())).first->second;
}

bool MaskStore::ask(int32_t cut, int32_t whole) {
  const auto [it, added] = askers_.emplace(cut, whole);
  if (!added && it->second != whole) it->second = -1;
  return it->second == -1;
}

const PositionMask* MaskStore::find(int32_t signature) const {
  const auto it = masks_.find(signature);
  return it == masks_.end() ? nullptr : it->second.get();
}

const PositionMask* MaskStore::keep(int32_t signature, std::unique_ptr<PositionMask>& mask) {
  if (const PositionMask* earlier = find(signature)) return earlier;
  const size_t size = mask_size(*mask);
  if (bytes_ + size > max_bytes_) return nullptr;
  bytes_ += size;
  return (masks_[signature] = std::move(mask)).get();
}

size_t mask_size(const PositionMask& mask) {
  return mask.accepted_bits.size() * sizeof(uint64_t) + (mask.accepted_ids.size() + mask.uncertain.size()) * sizeof(int32_t);
}

}  // namespace engine::grammar
