#include "medusa/medusa-heads.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu/gemm.h"

namespace engine {

size_t MedusaHeads::bytes() const {
  size_t n = 0;
  for (const MedusaHead& h : heads) {
    n += h.out.size();
    for (const MedusaHead::Block& b : h.blocks) n += b.w.size() + b.b.size();
  }
  return n * sizeof(float);
}

void medusa_guesses(const MedusaHeads& heads, const float* xn, int64_t rows, int32_t* guesses,
                    std::vector<float>& scratch) {
  const int64_t H = heads.hidden, V = heads.vocab, K = heads.num_heads();
  if (rows <= 0 || K == 0) return;
  scratch.resize(static_cast<size_t>(rows * (2 * H + V)));
  float* x = scratch.data();       // [rows, H]: the head's running hidden state
  float* t = x + rows * H;         // [rows, H]: one block's linear output
  float* logits = t + rows * H;    // [rows, V]
  static thread_local std::vector<int32_t> order;  // vocabulary ids, partially sorted by a row's logits
  for (int64_t k = 0; k < K; ++k) {
    const MedusaHead& head = heads.heads[static_cast<size_t>(k)];
    std::memcpy(x, xn, sizeof(float) * static_cast<size_t>(rows * H));
    for (const MedusaHead::Block& b : head.blocks) {
      cpu::gemm_xwt(rows, H, H, x, H, b.w.data(), t, H, false);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t d = 0; d < H; ++d) {
          const float v = t[r * H + d] + b.b[static_cast<size_t>(d)];
          x[r * H + d] += v / (1.0f + std::exp(-v));  // x + SiLU(W x + b)
        }
    }
    cpu::gemm_xwt(rows, V, H, x, H, head.out.data(), logits, V, false);
    const int64_t top = std::min<int64_t>(kMedusaTopK, V);
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = logits + r * V;
      int32_t* out = guesses + (r * K + k) * kMedusaTopK;
      order.resize(static_cast<size_t>(V));
      for (int64_t v = 0; v < V; ++v) order[static_cast<size_t>(v)] = static_cast<int32_t>(v);
      std::partial_sort(order.begin(), order.begin() + top, order.end(), [&](int32_t a, int32_t b) {
        return row[a] > row[b] || (row[a] == row[b] && a < b);
      });
      for (int64_t j = 0; j < kMedusaTopK; ++j) out[j] = j < top ? order[static_cast<size_t>(j)] : -1;
    }
  }
}

}  // namespace engine
