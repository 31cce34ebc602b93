// The attention's row groups (cuda/attention-rows.h, planned on the host): consecutive rows of one sequence share a
// thread block up to the group size, rows of different sequences never do, and every row lands in exactly one group.
#include <vector>

#include "check.h"
#include "cuda/attention-rows.h"

using engine::cuda::AttnGroup;
using engine::cuda::AttnRow;
using engine::cuda::group_attention_rows;

namespace {

std::vector<AttnGroup> plan(const std::vector<AttnRow>& rows, int32_t per_group) {
  std::vector<AttnGroup> out(rows.size());
  out.resize(static_cast<size_t>(group_attention_rows(rows.data(), static_cast<int32_t>(rows.size()), per_group,
                                                      out.data())));
  return out;
}

// Every row covered once, in order; one table per group; no group over the limit.
bool well_formed(const std::vector<AttnRow>& rows, const std::vector<AttnGroup>& groups, int32_t per_group) {
  int32_t next = 0;
  for (const AttnGroup& g : groups) {
    if (g.first != next || g.count < 1 || g.count > per_group) return false;
    for (int32_t i = g.first; i < g.first + g.count; ++i)
      if (rows[static_cast<size_t>(i)].table != rows[static_cast<size_t>(g.first)].table) return false;
    next += g.count;
  }
  return next == static_cast<int32_t>(rows.size());
}

}  // namespace

TEST_MAIN({
  // A decode batch: one group per row, whatever the group size.
  std::vector<AttnRow> decode;
  for (int32_t i = 0; i < 7; ++i) decode.push_back(AttnRow{i, 100 + i, 3 * i});
  for (int32_t per : {1, 4, 16}) {
    const auto g = plan(decode, per);
    CHECK(g.size() == 7 && well_formed(decode, g, per));
  }

  // A prefill chunk of 10 tokens (table 0), a decode row (table 2), a chunk of 3 (table 5): groups of 4.
  std::vector<AttnRow> mixed;
  for (int32_t i = 0; i < 10; ++i) mixed.push_back(AttnRow{i, 21 + i, 0});
  mixed.push_back(AttnRow{10, 57, 2});
  for (int32_t i = 0; i < 3; ++i) mixed.push_back(AttnRow{11 + i, 1 + i, 5});
  const auto g4 = plan(mixed, 4);
  CHECK(well_formed(mixed, g4, 4));
  CHECK(g4.size() == 5);  // 4 + 4 + 2 of the chunk, the decode row, the chunk of 3
  CHECK(g4.size() == 5 && g4[2].first == 8 && g4[2].count == 2 && g4[3].first == 10 && g4[3].count == 1 &&
        g4[4].count == 3);
  const auto g16 = plan(mixed, 16);
  CHECK(g16.size() == 3 && well_formed(mixed, g16, 16));
  const auto g1 = plan(mixed, 1);
  CHECK(g1.size() == mixed.size() && well_formed(mixed, g1, 1));

  // Two sequences whose rows happen to sit next to each other never share a group.
  std::vector<AttnRow> two = {AttnRow{0, 5, 0}, AttnRow{1, 6, 0}, AttnRow{2, 1, 1}, AttnRow{3, 2, 1}};
  const auto gt = plan(two, 16);
  CHECK(gt.size() == 2 && well_formed(two, gt, 16));
  CHECK(plan({}, 4).empty());
})
