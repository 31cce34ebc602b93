// The mixture-of-experts kernels (kernels-moe.cu) against the host: routing against model/moe-routing.h's
// route_tokens (the CPU model's), the permutation's invariants (every local entry has one row in its expert's
// segment, rows of a segment are its entries, the active list and the 64-row tiles cover exactly the segments), the
// one-block top-k + permutation and moe_permute alike; the expert GEMV and tensor-core tiles against float64.
// Skipped where no GPU is visible.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <vector>

#include "check.h"
#include "cuda-test-util.h"
#include "cuda/cuda-backend.h"
#include "cuda/kernels.h"
#include "loading/safetensors.h"
#include "model/moe-routing.h"

using namespace engine;

namespace {

uint64_t g_state = 12345;
float rnd() {
  g_state = g_state * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<float>(static_cast<int64_t>(g_state >> 40) - (1 << 23)) / static_cast<float>(1 << 23);
}

template <typename T>
T* upload(const std::vector<T>& v) {
  T* d = nullptr;
  cudaMalloc(&d, std::max<size_t>(1, v.size()) * sizeof(T));
  cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
  return d;
}
template <typename T>
std::vector<T> download(const T* d, size_t n) {
  std::vector<T> v(n);
  cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost);
  return v;
}

struct Layout {
  std::vector<float> weights;
  std::vector<int32_t> offsets, active, tiles, slot_row, row_token;
};

// The layout of random logits: fused (moe_topk_permute: top k and permutation in one block) or from the host's
// top-k ids through moe_permute (the path of larger batches, after moe_route's top-k kernel).
Layout route(const std::vector<float>& logits, const std::vector<int32_t>& host_ids, int64_t rows, int32_t E, int32_t k,
             bool renorm, int32_t e0, int32_t n_local, bool fused, const char* label) {
  const int64_t entries = rows * k;
  float* dl = upload(logits);
  int32_t* ids = upload(host_ids);
  int32_t *off = nullptr, *act = nullptr, *tiles = nullptr, *slot = nullptr, *tok = nullptr;
  float* w = nullptr;
  const int64_t max_tiles = cuda::moe_max_tiles(entries, n_local);
  cudaMalloc(&w, entries * 4);
  cudaMalloc(&off, (n_local + 1) * 4);
  cudaMalloc(&act, (n_local + 1) * 4);
  cudaMalloc(&tiles, (1 + 2 * max_tiles) * 4);
  cudaMalloc(&slot, entries * 4);
  cudaMalloc(&tok, entries * 4);
  if (fused)
    cuda::moe_topk_permute(dl, rows, E, k, renorm, w, e0, n_local, off, act, tiles, slot, tok, nullptr);
  else
    cuda::moe_permute(ids, rows, k, e0, n_local, off, act, tiles, slot, tok, nullptr);
  CHECK_MSG(cudaDeviceSynchronize() == cudaSuccess, "%s: kernel failed", label);
  Layout L;
  L.weights = download(w, entries);
  L.offsets = download(off, n_local + 1);
  L.active = download(act, n_local + 1);
  L.tiles = download(tiles, 1 + 2 * max_tiles);
  L.slot_row = download(slot, entries);
  L.row_token = download(tok, entries);
  for (void* p : {static_cast<void*>(dl), static_cast<void*>(ids), static_cast<void*>(w), static_cast<void*>(off),
                  static_cast<void*>(act), static_cast<void*>(tiles), static_cast<void*>(slot), static_cast<void*>(tok)})
    cudaFree(p);
  return L;
}

// Each token's top k expert ids in order (the host's choice: larger logit first, ties to the lower index).
std::vector<int32_t> host_topk(const std::vector<float>& logits, int64_t rows, int32_t E, int32_t k) {
  std::vector<int32_t> ids;
  for (int64_t t = 0; t < rows; ++t) {
    std::vector<int32_t> order(static_cast<size_t>(E));
    for (int32_t e = 0; e < E; ++e) order[e] = e;
    const float* l = logits.data() + t * E;
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
    ids.insert(ids.end(), order.begin(), order.begin() + k);
  }
  return ids;
}

void routing_checks() {
  struct Case { int64_t rows; int32_t E, k; bool renorm; int32_t e0, n_local; };
  for (const Case& c : {Case{1, 128, 8, true, 0, 128}, Case{3, 16, 4, true, 0, 16}, Case{3, 8, 2, false, 0, 8},
                        Case{16, 128, 8, true, 64, 64}, Case{5, 60, 4, false, 15, 15}, Case{32, 8, 2, true, 0, 8}}) {
    char label[96];
    std::snprintf(label, sizeof label, "rows %lld, %d experts, top %d, local [%d, %d)", static_cast<long long>(c.rows),
                  c.E, c.k, c.e0, c.e0 + c.n_local);
    std::vector<float> logits(static_cast<size_t>(c.rows * c.E));
    for (float& v : logits) v = 4.0f * rnd();
    std::vector<ExpertRoute> want;
    route_tokens(logits.data(), c.rows, c.E, c.k, c.renorm, c.e0, c.e0 + c.n_local, want);
    for (const bool fused : {true, false}) {
      const Layout L = route(logits, host_topk(logits, c.rows, c.E, c.k), c.rows, c.E, c.k, c.renorm, c.e0, c.n_local,
                             fused, label);
      const int64_t entries = c.rows * c.k;
      // Segments: expert e's rows [offsets[e], offsets[e + 1]) hold exactly the tokens route_tokens sends it.
      bool ok = L.offsets[0] == 0;
      int32_t n_active = 0, n_tiles = 0;
      for (int32_t e = 0; e < c.n_local; ++e) {
        const int32_t b = L.offsets[e], end = L.offsets[e + 1];
        ok = ok && end - b == static_cast<int32_t>(want[e].rows.size());
        std::multiset<int32_t> got_tokens(L.row_token.begin() + b, L.row_token.begin() + std::max(b, end));
        std::multiset<int32_t> want_tokens(want[e].rows.begin(), want[e].rows.end());
        ok = ok && got_tokens == want_tokens;
        if (end > b) {
          ok = ok && L.active[n_active] == e;
          ++n_active;
          for (int32_t r = b; r < end; r += cuda::kMoeTileRows, ++n_tiles)
            ok = ok && L.tiles[1 + 2 * n_tiles] == e && L.tiles[2 + 2 * n_tiles] == r;
        }
      }
      ok = ok && L.active[c.n_local] == n_active && L.tiles[0] == n_tiles;
      CHECK_MSG(ok, "%s: segments, active list or tiles differ from the host's routing", label);
      // Every entry: a local expert's has its row (holding its token) and the weight route_tokens gives it.
      double werr = 0;
      for (int64_t i = 0; i < entries; ++i) {
        const int32_t row = L.slot_row[i];
        if (row < 0) continue;
        ok = ok && L.row_token[row] == i / c.k;
        int32_t e = 0;
        while (e < c.n_local && !(row >= L.offsets[e] && row < L.offsets[e + 1])) ++e;
        if (e == c.n_local) {
          ok = false;  // a row outside every segment
          continue;
        }
        const auto& r = want[e].rows;
        const auto it = std::find(r.begin(), r.end(), static_cast<int32_t>(i / c.k));
        ok = ok && it != r.end();
        if (fused && it != r.end())
          werr = std::max(werr, std::fabs(static_cast<double>(L.weights[i]) - want[e].weights[it - r.begin()]));
      }
      int64_t local = 0;
      for (const auto& r : want) local += static_cast<int64_t>(r.rows.size());
      ok = ok && std::count_if(L.slot_row.begin(), L.slot_row.end(), [](int32_t s) { return s >= 0; }) == local;
      std::printf("%s, %s: %d active, %d tiles, weight max abs err %.2g\n", label,
                  fused ? "top k + permutation in one block" : "moe_permute of the host's ids", n_active, n_tiles, werr);
      CHECK_MSG(ok, "%s (%s): slot rows differ from the host's routing", label, fused ? "fused" : "moe_permute");
      CHECK_MSG(werr < 1e-5, "%s: weights differ by %g", label, werr);
    }
  }
}

// The expert GEMV (decode path) and the tensor-core tiles (larger batches) over three experts with 1, 5 and 0 rows
// (a group of 4 and a remainder), x read through row_token or as permuted rows, against a float64 product.
void expert_product_checks() {
  const int64_t n = 96, k = 256;  // an output not a multiple of the 64-wide tiles
  const int32_t n_local = 3;
  const std::vector<int32_t> offsets{0, 1, 6, 6}, active{0, 1, 0, 2};  // expert 2 has no rows; 2 active
  const std::vector<int32_t> tiles{2, 0, 0, 1, 1};                     // one tile each for experts 0 and 1
  const std::vector<int32_t> row_token{4, 0, 3, 1, 2, 4};              // rows -> tokens of a 5-token xn
  std::vector<uint16_t> xn(5 * k), w(static_cast<size_t>(n_local * n * k));
  for (auto& v : xn) v = f32_to_bf16(rnd());
  for (auto& v : w) v = f32_to_bf16(0.1f * rnd());
  std::vector<uint16_t> xp(6 * k);
  for (int r = 0; r < 6; ++r)
    std::copy(xn.begin() + row_token[r] * k, xn.begin() + (row_token[r] + 1) * k, xp.begin() + r * k);
  uint16_t* dw = upload(w);
  std::vector<const void*> ptrs;
  for (int e = 0; e < n_local; ++e) ptrs.push_back(dw + e * n * k);
  const void** dptrs = upload(ptrs);
  int32_t *doff = upload(offsets), *dact = upload(active), *dtiles = upload(tiles), *dtok = upload(row_token);
  uint16_t *dxn = upload(xn), *dxp = upload(xp);
  float* dy = nullptr;
  cudaMalloc(&dy, 6 * n * 4);
  auto want = [&](int r, int64_t o) {
    const int32_t e = r < 1 ? 0 : 1;
    double acc = 0;
    for (int64_t i = 0; i < k; ++i)
      acc += static_cast<double>(bf16_to_f32(xp[r * k + i])) * bf16_to_f32(w[(e * n + o) * k + i]);
    return acc;
  };
  for (int path = 0; path < 3; ++path) {
    cudaMemset(dy, 0, 6 * n * 4);
    const char* name = path == 0 ? "GEMV through row_token" : path == 1 ? "GEMV of permuted rows" : "tensor-core tiles";
    if (path == 0)
      cuda::moe_expert_gemv(dptrs, doff, dact, n_local, 3, dxn, dtok, cuda::DType::bf16, n, k, dy, true, nullptr);
    else if (path == 1)
      cuda::moe_expert_gemv(dptrs, doff, dact, n_local, 3, dxp, nullptr, cuda::DType::bf16, n, k, dy, true, nullptr);
    else
      cuda::moe_expert_mma(dptrs, dtiles, doff, cuda::moe_max_tiles(6, n_local), dxp, cuda::DType::bf16, n, k, dy, true,
                           nullptr);
    CHECK_MSG(cudaDeviceSynchronize() == cudaSuccess, "%s: kernel failed", name);
    const std::vector<float> y = download(dy, 6 * n);
    double err = 0, scale = 0;
    for (int r = 0; r < 6; ++r)
      for (int64_t o = 0; o < n; ++o) {
        err = std::max(err, std::fabs(y[r * n + o] - want(r, o)));
        scale = std::max(scale, std::fabs(want(r, o)));
      }
    std::printf("expert products, %s: max abs err %.3g (largest value %.3g)\n", name, err, scale);
    CHECK_MSG(err < 1e-3 * scale + 1e-4, "%s: max abs err %g", name, err);
  }
  for (void* p : {static_cast<void*>(dw), static_cast<void*>(dptrs), static_cast<void*>(doff), static_cast<void*>(dact),
                  static_cast<void*>(dtiles), static_cast<void*>(dtok), static_cast<void*>(dxn), static_cast<void*>(dxp),
                  static_cast<void*>(dy)})
    cudaFree(p);
}

}  // namespace

TEST_MAIN({
  if (!cuda_backend_built() || cuda_device_count() == 0)
    return check::skip("%s; GPUs visible: %d", cuda_backend_status(), cuda_device_count());
  routing_checks();
  expert_product_checks();
})
