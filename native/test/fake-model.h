// A deterministic stand-in for a real model, for executor tests. Its "KV cache" stores, per position, the token
// id and the position itself in the block/slot the executor assigned. The logits of a row depend on a hash of
// every (token, position) read back from that storage for positions [0, p], so a wrong block table, a block
// shared by two sequences, a lost or stale KV entry, or a resume that does not recompute the cache all change the
// generated tokens (or throw, when a slot holds the wrong position).
#pragma once
#include <omp.h>

#include <atomic>
#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/model.h"

namespace test {

class FakeModel : public engine::Model {
 public:
  explicit FakeModel(int32_t vocab = 64, int32_t max_positions = 512) {
    config_.architecture_name = "FakeForCausalLM";
    config_.vocab_size = vocab;
    config_.max_position_embeddings = max_positions;
    config_.num_layers = 1;
  }

  const engine::ModelConfig& config() const override { return config_; }
  size_t kv_bytes_per_token() const override { return 16; }
  size_t weight_bytes() const override { return 1000; }

  void allocate_kv(int32_t num_blocks, int32_t tokens_per_block) override {
    num_blocks_ = num_blocks;
    tokens_per_block_ = tokens_per_block;
    // "Contents start undefined": poison, so reading an unwritten slot is detected.
    kv_.assign(static_cast<size_t>(num_blocks) * tokens_per_block, Slot{-7, -7});
  }

  void copy_kv_block(int32_t src, int32_t dst) override {
    if (src < 0 || src >= num_blocks_ || dst < 0 || dst >= num_blocks_) throw std::runtime_error("copy_kv_block out of range");
    ++kv_copies;
    for (int32_t i = 0; i < tokens_per_block_; ++i)
      kv_[static_cast<size_t>(dst) * tokens_per_block_ + i] = kv_[static_cast<size_t>(src) * tokens_per_block_ + i];
  }

  int32_t host_threads() const override { return host_threads_value; }

  void forward(const std::vector<engine::SequenceChunk>& chunks, engine::ForwardOutput& out) override {
    ++forward_calls;
    omp_threads_seen = omp_get_max_threads();
    if (fail_on_call >= 0 && forward_calls.load() == fail_on_call) throw std::runtime_error("injected forward failure");
    max_chunks_seen = std::max<int>(max_chunks_seen.load(), static_cast<int>(chunks.size()));

    std::set<int32_t> used;
    for (const auto& c : chunks) {
      const int64_t end = c.past_len + static_cast<int64_t>(c.tokens.size());
      if (c.tokens.empty()) throw std::runtime_error("empty chunk");
      if (static_cast<int64_t>(c.block_ids.size()) * tokens_per_block_ < end)
        throw std::runtime_error("block table too short for position " + std::to_string(end - 1));
      for (int32_t b : c.block_ids)
        if (b < 0 || b >= num_blocks_) throw std::runtime_error("block id out of range: " + std::to_string(b));
      // Beams may share blocks they only read; two chunks writing one block would corrupt each other.
      for (int64_t i = c.past_len / tokens_per_block_; i * tokens_per_block_ < end; ++i) {
        const int32_t b = c.block_ids[static_cast<size_t>(i)];
        if (!used.insert(b).second) throw std::runtime_error("block " + std::to_string(b) + " written by two chunks");
      }
    }
    // Prefix reuse shares only full blocks nobody writes again: a block one chunk writes must not be read by another.
    for (const auto& c : chunks)
      for (int64_t i = 0; i < c.past_len / tokens_per_block_; ++i)
        if (used.count(c.block_ids[static_cast<size_t>(i)]) && !writes(c, c.block_ids[static_cast<size_t>(i)]))
          throw std::runtime_error("block " + std::to_string(c.block_ids[static_cast<size_t>(i)]) + " read while another chunk writes it");

    const int32_t V = config_.vocab_size;
    out.vocab_size = V;
    out.logits.clear();
    out.first_row.clear();
    for (const auto& c : chunks) {
      out.first_row.push_back(static_cast<int32_t>(out.logits.size() / V));
      for (size_t i = 0; i < c.tokens.size(); ++i) slot(c, c.past_len + static_cast<int32_t>(i)) = {c.tokens[i], c.past_len + static_cast<int32_t>(i)};
      const size_t first = c.all_logits ? 0 : c.tokens.size() - 1;
      for (size_t i = first; i < c.tokens.size(); ++i) {
        const int32_t p = c.past_len + static_cast<int32_t>(i);
        uint64_t h = 1469598103934665603ull;
        std::vector<int32_t> seq;
        for (int32_t q = 0; q <= p; ++q) {
          const Slot& s = slot(c, q);
          if (s.pos != q) throw std::runtime_error("KV slot for position " + std::to_string(q) + " holds position " + std::to_string(s.pos));
          h = (h ^ static_cast<uint64_t>(s.token + 1)) * 1099511628211ull;
          seq.push_back(s.token);
        }
        append_row(h, target(seq, h), out.logits);
      }
    }
  }

  // The token greedy decoding picks after the given full sequence (prompt + generated so far).
  int32_t expected_next(const std::vector<int32_t>& seq) const {
    uint64_t h = 1469598103934665603ull;
    for (int32_t t : seq) h = (h ^ static_cast<uint64_t>(t + 1)) * 1099511628211ull;
    return target(seq, h);
  }

  // The logits row forward() produces after the full sequence `seq` (for references of processors and beams).
  std::vector<float> row_for(const std::vector<int32_t>& seq) const {
    uint64_t h = 1469598103934665603ull;
    for (int32_t t : seq) h = (h ^ static_cast<uint64_t>(t + 1)) * 1099511628211ull;
    std::vector<float> row;
    append_row(h, target(seq, h), row);
    return row;
  }

  std::atomic<int> forward_calls{0};
  int32_t host_threads_value = 0;        // what host_threads() answers (a device model's threads for host work)
  std::atomic<int> omp_threads_seen{0};  // omp_get_max_threads() on the thread of the last forward()
  std::atomic<int> max_chunks_seen{0};
  std::atomic<int> fail_on_call{-1};  // throw on this forward call number (1-based); -1 never
  std::atomic<int> kv_copies{0};  // copy_kv_block calls (beam search copy-on-write)

 protected:
  // The token a row favours after `seq` (whose hash is h): pseudo-random by default.
  virtual int32_t target(const std::vector<int32_t>& seq, uint64_t h) const {
    (void)seq;
    return static_cast<int32_t>(mix(h) % static_cast<uint64_t>(config_.vocab_size));
  }
  static uint64_t mix(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
    return x;
  }

 private:
  struct Slot { int32_t token, pos; };

  bool writes(const engine::SequenceChunk& c, int32_t block) const {
    const int64_t end = c.past_len + static_cast<int64_t>(c.tokens.size());
    for (int64_t i = c.past_len / tokens_per_block_; i * tokens_per_block_ < end; ++i)
      if (c.block_ids[static_cast<size_t>(i)] == block) return true;
    return false;
  }

  Slot& slot(const engine::SequenceChunk& c, int32_t p) {
    const int32_t b = c.block_ids[static_cast<size_t>(p / tokens_per_block_)];
    return kv_[static_cast<size_t>(b) * tokens_per_block_ + p % tokens_per_block_];
  }

  // A peaked but not one-hot row: the target gets +4, the rest small pseudo-random values in [0, 1), so sampling
  // at temperature 1 is not trivially greedy.
  void append_row(uint64_t h, int32_t target, std::vector<float>& logits) const {
    const int32_t V = config_.vocab_size;
    for (int32_t t = 0; t < V; ++t) {
      float x = static_cast<float>(mix(h ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(t + 1))) >> 40) / static_cast<float>(1 << 24);
      if (t == target) x += 4.0f;
      logits.push_back(x);
    }
  }

  engine::ModelConfig config_;
  int32_t num_blocks_ = 0, tokens_per_block_ = 1;
  std::vector<Slot> kv_;
};

}  // namespace test
