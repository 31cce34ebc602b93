// Token routing (moe-routing.h) as pure arithmetic: softmax over all experts, the top k per token with ties to the
// lower index, weights renormalised or not, and only the asking rank's experts listed.
#include <cmath>

#include "check.h"
#include "model/moe-routing.h"

using namespace engine;

namespace {
bool near(float a, double b) { return std::fabs(a - b) < 1e-6; }
}  // namespace

TEST_MAIN({
  // Two tokens over 4 experts, top 2.
  const float logits[] = {1.0f, 3.0f, 2.0f, 0.0f,   // token 0: experts 1, 2
                          0.5f, 0.5f, -1.0f, 0.5f}; // token 1: a three-way tie, experts 0 and 1 (lower index)
  std::vector<ExpertRoute> r;
  route_tokens(logits, 2, 4, 2, false, 0, 4, r);
  CHECK(r.size() == 4);
  CHECK(r[0].rows == std::vector<int32_t>({1}) && r[1].rows == std::vector<int32_t>({0, 1}));
  CHECK(r[2].rows == std::vector<int32_t>({0}) && r[3].rows.empty());
  const double z0 = std::exp(1.0) + std::exp(3.0) + std::exp(2.0) + std::exp(0.0);
  CHECK(near(r[1].weights[0], std::exp(3.0) / z0) && near(r[2].weights[0], std::exp(2.0) / z0));
  // Renormalised: the chosen pair's softmax (Mixtral's softmax over the selected logits).
  route_tokens(logits, 2, 4, 2, true, 0, 4, r);
  CHECK(near(r[1].weights[0], std::exp(3.0) / (std::exp(3.0) + std::exp(2.0))));
  CHECK(near(r[0].weights[0], 0.5) && near(r[1].weights[1], 0.5));
  // A rank holding experts 2..3 (ep rank 1 of 2) lists only those, indexed from its first.
  route_tokens(logits, 2, 4, 2, false, 2, 4, r);
  CHECK(r.size() == 2 && r[0].rows == std::vector<int32_t>({0}) && r[1].rows.empty());
  // The routes are rebuilt, not appended to, on the next call.
  route_tokens(logits, 1, 4, 1, false, 0, 4, r);
  CHECK(r[1].rows == std::vector<int32_t>({0}) && r[0].rows.empty() && r[2].rows.empty());
})
