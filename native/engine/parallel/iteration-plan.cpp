#include "parallel/iteration-plan.h"

#include <cstring>
#include <string>

#include "errors.h"

namespace engine {
namespace {

void put(std::vector<uint8_t>& out, int32_t v) {
  uint8_t b[4];
  std::memcpy(b, &v, 4);  // x86-64 and aarch64 are both little-endian; all ranks run the same build
  out.insert(out.end(), b, b + 4);
}

void put_all(std::vector<uint8_t>& out, const std::vector<int32_t>& v) {
  const size_t at = out.size();
  out.resize(at + v.size() * 4);
  if (!v.empty()) std::memcpy(out.data() + at, v.data(), v.size() * 4);
}

void put_floats(std::vector<uint8_t>& out, const std::vector<float>& v) {
  put(out, static_cast<int32_t>(v.size()));
  const size_t at = out.size();
  out.resize(at + v.size() * 4);
  if (!v.empty()) std::memcpy(out.data() + at, v.data(), v.size() * 4);
}

struct Reader {
  const std::vector<uint8_t>& in;
  size_t at = 0;
  int32_t get() {
    if (at + 4 > in.size()) throw EngineError(ErrorCode::internal, "iteration plan truncated at byte " + std::to_string(at));
    int32_t v;
    std::memcpy(&v, in.data() + at, 4);
    at += 4;
    return v;
  }
  std::vector<int32_t> get_all(int32_t n) {
    if (n < 0 || at + static_cast<size_t>(n) * 4 > in.size()) {
      throw EngineError(ErrorCode::internal, "iteration plan: bad length " + std::to_string(n) + " at byte " + std::to_string(at));
    }
    std::vector<int32_t> v(static_cast<size_t>(n));
    if (n > 0) std::memcpy(v.data(), in.data() + at, static_cast<size_t>(n) * 4);
    at += static_cast<size_t>(n) * 4;
    return v;
  }
  std::vector<float> get_floats() {
    const std::vector<int32_t> words = get_all(get());
    std::vector<float> v(words.size());
    if (!words.empty()) std::memcpy(v.data(), words.data(), words.size() * 4);
    return v;
  }
};

}  // namespace

std::vector<uint8_t> serialize_plan(const IterationPlan& plan) {
  std::vector<uint8_t> out;
  put(out, static_cast<int32_t>(plan.op));
  put(out, plan.arg0);
  put(out, plan.arg1);
  put(out, static_cast<int32_t>(plan.chunks.size()));
  for (const SequenceChunk& c : plan.chunks) {
    put(out, static_cast<int32_t>(c.tokens.size()));
    put(out, c.past_len);
    put(out, static_cast<int32_t>(c.block_ids.size()));
    put(out, c.all_logits ? 1 : 0);
    put(out, c.window);
    put(out, c.lora_slot);
    put(out, static_cast<int32_t>(c.tree_parents.size()));
    put_all(out, c.tokens);
    put_all(out, c.block_ids);
    put_all(out, c.tree_parents);
  }
  if (plan.op == PlanOp::load_lora) {
    if (!plan.lora) throw EngineError(ErrorCode::internal, "iteration plan: load_lora without an adapter");
    put(out, static_cast<int32_t>(plan.lora->weights.size()));
    for (const LoraWeight& w : plan.lora->weights) {
      for (int64_t v : {int64_t{w.layer}, int64_t{static_cast<int32_t>(w.module)}, int64_t{w.rank}, w.in, w.out})
        put(out, static_cast<int32_t>(v));
      put_floats(out, w.a);
      put_floats(out, w.b);
    }
  }
  if (plan.op == PlanOp::head_guesses) {
    put(out, static_cast<int32_t>(plan.rows.size()));
    put_all(out, plan.rows);
  }
  return out;
}

IterationPlan deserialize_plan(const std::vector<uint8_t>& bytes) {
  Reader r{bytes};
  IterationPlan plan;
  const int32_t op = r.get();
  if (op < 1 || op > 7) throw EngineError(ErrorCode::internal, "iteration plan: unknown op " + std::to_string(op));
  plan.op = static_cast<PlanOp>(op);
  plan.arg0 = r.get();
  plan.arg1 = r.get();
  const int32_t n = r.get();
  if (n < 0) throw EngineError(ErrorCode::internal, "iteration plan: negative chunk count");
  plan.chunks.resize(static_cast<size_t>(n));
  for (SequenceChunk& c : plan.chunks) {
    const int32_t n_tokens = r.get();
    c.past_len = r.get();
    const int32_t n_blocks = r.get();
    c.all_logits = r.get() != 0;
    c.window = r.get();
    c.lora_slot = r.get();
    const int32_t n_tree = r.get();
    c.tokens = r.get_all(n_tokens);
    c.block_ids = r.get_all(n_blocks);
    c.tree_parents = r.get_all(n_tree);
  }
  if (plan.op == PlanOp::load_lora) {
    auto lora = std::make_shared<LoraAdapter>();
    const int32_t n_weights = r.get();
    if (n_weights < 0) throw EngineError(ErrorCode::internal, "iteration plan: negative LoRA weight count");
    lora->weights.resize(static_cast<size_t>(n_weights));
    for (LoraWeight& w : lora->weights) {
      w.layer = r.get();
      w.module = static_cast<LoraModule>(r.get());
      w.rank = r.get();
      w.in = r.get();
      w.out = r.get();
      w.a = r.get_floats();
      w.b = r.get_floats();
    }
    plan.lora = std::move(lora);
  }
  if (plan.op == PlanOp::head_guesses) plan.rows = r.get_all(r.get());
  if (r.at != bytes.size()) throw EngineError(ErrorCode::internal, "iteration plan: trailing bytes");
  return plan;
}

}  // namespace engine
