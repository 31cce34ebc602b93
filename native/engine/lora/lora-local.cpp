#include "lora/lora-local.h"

#include <algorithm>
#include <string>
#include <utility>

#include "errors.h"

namespace engine {

namespace {

// Rows [begin, end) of B [out, rank], for a column-parallel segment; A stays whole.
LoraSegment column_slice(const LoraWeight& w, int64_t begin, int64_t end, int64_t out_offset) {
  LoraSegment seg;
  seg.out_offset = out_offset;
  seg.rank = w.rank;
  seg.in = w.in;
  seg.out = end - begin;
  seg.a = w.a;
  seg.b.assign(w.b.begin() + begin * w.rank, w.b.begin() + end * w.rank);
  return seg;
}

// Columns [begin, end) of A [rank, in], for a row-parallel segment; B stays whole: each rank's B (x_r A_rᵀ) is a
// partial sum of B (x Aᵀ), which the projection's all-reduce completes.
LoraSegment row_slice(const LoraWeight& w, int64_t begin, int64_t end) {
  LoraSegment seg;
  seg.rank = w.rank;
  seg.in = end - begin;
  seg.out = w.out;
  seg.a.reserve(static_cast<size_t>(w.rank * seg.in));
  for (int64_t r = 0; r < w.rank; ++r)
    seg.a.insert(seg.a.end(), w.a.begin() + r * w.in + begin, w.a.begin() + r * w.in + end);
  seg.b = w.b;
  return seg;
}

}  // namespace

size_t LoraLocal::bytes() const {
  size_t n = 0;
  for (const auto& targets : layers)
    for (const auto& segments : targets)
      for (const LoraSegment& seg : segments) n += (seg.a.size() + seg.b.size()) * sizeof(float);
  return n;
}

LoraLocal localize_lora(const LoraAdapter& adapter, const ModelConfig& config, const ParallelLayout& l) {
  const int64_t hd = config.head_dim;
  const int64_t q_dim = static_cast<int64_t>(config.num_heads) * hd;    // whole
  const int64_t kv_dim = static_cast<int64_t>(config.num_kv_heads) * hd;
  const int64_t q0 = l.head_begin * hd, q1 = l.head_end * hd;           // this rank's q rows / o columns
  const int64_t kv0 = l.kv_head_begin * hd, kv1 = l.kv_head_end * hd;   // this rank's k (and v) rows
  const int64_t local_q = q1 - q0, local_kv = kv1 - kv0, local_inter = l.local_inter();

  LoraLocal local;
  local.layers.resize(static_cast<size_t>(l.local_layers()));
  for (const LoraWeight& w : adapter.weights) {
    if (w.layer < l.layer_begin || w.layer >= l.layer_end) continue;  // another stage's layer
    if ((w.module == LoraModule::mlp_h_to_4h || w.module == LoraModule::mlp_gate ||
         w.module == LoraModule::mlp_4h_to_h) &&
        config.moe.sparse_layer(w.layer))
      throw EngineError(ErrorCode::internal, "localize_lora: layer " + std::to_string(w.layer) + " " +
                                                 lora_module_name(w.module) +
                                                 " is on a mixture-of-experts layer (check_lora_adapter refuses it)");
    auto& targets = local.layers[static_cast<size_t>(w.layer - l.layer_begin)];
    auto add = [&](LoraTarget t, LoraSegment seg) { targets[static_cast<size_t>(t)].push_back(std::move(seg)); };
    switch (w.module) {
      case LoraModule::attn_q: add(LoraTarget::qkv, column_slice(w, q0, q1, 0)); break;
      case LoraModule::attn_k: add(LoraTarget::qkv, column_slice(w, kv0, kv1, local_q)); break;
      case LoraModule::attn_v: add(LoraTarget::qkv, column_slice(w, kv0, kv1, local_q + local_kv)); break;
      case LoraModule::attn_qkv:  // B's rows are [q | k | v] of the whole model
        add(LoraTarget::qkv, column_slice(w, q0, q1, 0));
        add(LoraTarget::qkv, column_slice(w, q_dim + kv0, q_dim + kv1, local_q));
        add(LoraTarget::qkv, column_slice(w, q_dim + kv_dim + kv0, q_dim + kv_dim + kv1, local_q + local_kv));
        break;
      case LoraModule::attn_dense: add(LoraTarget::o, row_slice(w, q0, q1)); break;
      case LoraModule::mlp_h_to_4h: add(LoraTarget::up, column_slice(w, l.inter_begin, l.inter_end, 0)); break;
      // Only a gated MLP has mlp_gate (check_lora_adapter): its up rows follow the rank's gate rows.
      case LoraModule::mlp_gate:
        add(LoraTarget::up, column_slice(w, l.inter_begin, l.inter_end, local_inter));
        break;
      case LoraModule::mlp_4h_to_h: add(LoraTarget::down, row_slice(w, l.inter_begin, l.inter_end)); break;
    }
  }
  // A stable order per projection (by where the delta lands), whatever order the adapter listed its weights in.
  for (auto& targets : local.layers)
    for (auto& segments : targets)
      std::stable_sort(segments.begin(), segments.end(),
                       [](const LoraSegment& x, const LoraSegment& y) { return x.out_offset < y.out_offset; });
  return local;
}

}  // namespace engine
