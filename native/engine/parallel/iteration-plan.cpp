#include "parallel/iteration-plan.h"

#include <algorithm>
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

// The rows of `c`'s table its virtual tokens use (each once, in first-use order): what a follower's embedding reads.
std::vector<int32_t> used_rows(const SequenceChunk& c, int32_t vocab_size) {
  std::vector<int32_t> rows;
  if (!c.prompt_table) return rows;
  if (vocab_size <= 0) throw EngineError(ErrorCode::internal, "iteration plan: a prompt table without the vocab_size");
  for (int32_t t : c.tokens) {
    if (prompt_table_row(c.prompt_table.get(), t, vocab_size) == nullptr) continue;
    const int32_t row = t - vocab_size;
    if (std::find(rows.begin(), rows.end(), row) == rows.end()) rows.push_back(row);
  }
  return rows;
}

void put_table_rows(std::vector<uint8_t>& out, const SequenceChunk& c, int32_t vocab_size) {
  const std::vector<int32_t> rows = used_rows(c, vocab_size);
  put(out, static_cast<int32_t>(rows.size()));
  if (rows.empty()) return;
  const PromptTable& t = *c.prompt_table;
  put(out, t.rows);
  put(out, t.hidden);
  for (int32_t row : rows) {
    put(out, row);
    const size_t at = out.size(), bytes = static_cast<size_t>(t.hidden) * 4;
    out.resize(at + bytes);
    std::memcpy(out.data() + at, t.data.data() + static_cast<size_t>(row) * static_cast<size_t>(t.hidden), bytes);
  }
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
  std::shared_ptr<const PromptTable> get_table_rows() {
    const int32_t n = get();
    if (n == 0) return nullptr;
    const int32_t rows = get(), hidden = get();
    if (n < 0 || rows < n || hidden < 1) {
      throw EngineError(ErrorCode::internal, "iteration plan: bad prompt table (" + std::to_string(n) + " of " +
                                                 std::to_string(rows) + " rows, width " + std::to_string(hidden) + ")");
    }
    std::vector<float> data(static_cast<size_t>(rows) * static_cast<size_t>(hidden), 0.0f);
    for (int32_t k = 0; k < n; ++k) {
      const int32_t row = get();
      if (row < 0 || row >= rows) throw EngineError(ErrorCode::internal, "iteration plan: prompt table row " + std::to_string(row));
      const std::vector<int32_t> words = get_all(hidden);
      std::memcpy(data.data() + static_cast<size_t>(row) * static_cast<size_t>(hidden), words.data(), words.size() * 4);
    }
    auto table = std::make_shared<PromptTable>();  // (no key: followers never look blocks up)
    table->rows = rows;
    table->hidden = hidden;
    table->data = std::move(data);
    return table;
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
    put(out, c.tree_past);
    put_all(out, c.tokens);
    put_all(out, c.block_ids);
    put_all(out, c.tree_parents);
    put_table_rows(out, c, plan.vocab_size);
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
    c.tree_past = r.get();
    c.tokens = r.get_all(n_tokens);
    c.block_ids = r.get_all(n_blocks);
    c.tree_parents = r.get_all(n_tree);
    c.prompt_table = r.get_table_rows();
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
