// likeliest_allowed (the guided budget check's candidates) against a full sort of the allowed ids: random rows of
// many sizes, dense and sparse masks, ties, NaN and -inf scores, masks with words past the vocabulary.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "check.h"
#include "sampling/likeliest-allowed.h"

using namespace engine;

static std::vector<int32_t> by_sorting(const std::vector<float>& row, const std::vector<uint64_t>& mask, size_t k) {
  std::vector<std::pair<float, int32_t>> all;
  for (int32_t id = 0; id < static_cast<int32_t>(row.size()); ++id)
    if (static_cast<size_t>(id >> 6) < mask.size() && ((mask[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1u))
      all.emplace_back(std::isnan(row[static_cast<size_t>(id)]) ? -INFINITY : row[static_cast<size_t>(id)], id);
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  std::vector<int32_t> ids;
  for (size_t i = 0; i < std::min(k, all.size()); ++i) ids.push_back(all[i].second);
  std::sort(ids.begin(), ids.end());
  return ids;
}

static void test_against_sorting() {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  int mismatches = 0;
  for (int trial = 0; trial < 240; ++trial) {
    const int32_t vocab = 1 + static_cast<int32_t>(rng() % (trial < 120 ? 3000 : 130000));
    const int kind = trial % 4;  // 0 plain, 1 many ties, 2 NaN among them, 3 -inf among them
    std::vector<float> row(static_cast<size_t>(vocab));
    for (float& x : row) {
      x = kind == 1 ? std::round(normal(rng) * 2.0f) : normal(rng);
      if (kind == 2 && rng() % 20 == 0) x = NAN;
      if (kind == 3 && rng() % 3 == 0) x = -INFINITY;
    }
    // Dense (a string position), sparse, very sparse; some masks a word longer than the vocabulary needs, all set.
    const int density = static_cast<int>(rng() % 3);
    std::vector<uint64_t> mask((static_cast<size_t>(vocab) + 63) / 64 + (trial % 2), 0);
    for (int32_t id = 0; id < vocab; ++id)
      if (density == 0 || rng() % (density == 1 ? 7 : 400) == 0) mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    if (trial % 2) mask.back() = ~uint64_t{0};
    const size_t k = trial % 5 == 0 ? 1 : 256;
    std::vector<int32_t> got = likeliest_allowed(row.data(), vocab, mask, k);
    std::sort(got.begin(), got.end());
    const std::vector<int32_t> want = by_sorting(row, mask, k);
    if (got != want) {
      if (++mismatches <= 5)
        std::printf("trial %d (vocab %d, kind %d, density %d, k %zu): %zu ids, the full sort's %zu\n", trial, vocab, kind,
                    density, k, got.size(), want.size());
    }
    CHECK(got == want);
  }
}

static void test_nothing_allowed() {
  std::vector<float> row(100, 1.0f);
  CHECK(likeliest_allowed(row.data(), 100, std::vector<uint64_t>(2, 0), 256).empty());
}

TEST_MAIN({
  test_against_sorting();
  test_nothing_allowed();
})
