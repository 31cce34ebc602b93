// The leader's plan survives serialisation exactly, and a damaged buffer is an error, not a crash.
#include <vector>

#include "check.h"
#include "errors.h"
#include "parallel/iteration-plan.h"

using namespace engine;

TEST_MAIN({
  IterationPlan plan;
  plan.op = PlanOp::forward;
  SequenceChunk a;
  a.tokens = {5, 6, 7};
  a.past_len = 0;
  a.block_ids = {3};
  a.all_logits = true;
  SequenceChunk b;
  b.tokens = {9};
  b.past_len = 130;
  b.block_ids = {-1, 8, 2};  // a block a sliding window released
  b.window = 100;
  plan.chunks = {a, b};
  std::vector<uint8_t> bytes = serialize_plan(plan);
  CHECK(bytes.size() == 4 * (4 + 5 + 3 + 1 + 5 + 1 + 3));
  IterationPlan back = deserialize_plan(bytes);
  CHECK(back.op == PlanOp::forward && back.chunks.size() == 2);
  CHECK(back.chunks[0].tokens == a.tokens && back.chunks[0].block_ids == a.block_ids && back.chunks[0].all_logits);
  CHECK(back.chunks[1].tokens == b.tokens && back.chunks[1].past_len == 130 && back.chunks[1].block_ids == b.block_ids);
  CHECK(!back.chunks[1].all_logits && back.chunks[1].window == 100 && back.chunks[0].window == 0);

  IterationPlan copy;
  copy.op = PlanOp::copy_kv_block;
  copy.arg0 = 4;
  copy.arg1 = 11;
  IterationPlan copy_back = deserialize_plan(serialize_plan(copy));
  CHECK(copy_back.op == PlanOp::copy_kv_block && copy_back.arg0 == 4 && copy_back.arg1 == 11 && copy_back.chunks.empty());

  std::vector<uint8_t> cut(bytes.begin(), bytes.end() - 3);
  CHECK_THROWS(deserialize_plan(cut), "iteration plan");
  std::vector<uint8_t> bad = bytes;
  bad[0] = 99;
  CHECK_THROWS(deserialize_plan(bad), "unknown op 99");
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  CHECK_THROWS(deserialize_plan(longer), "trailing bytes");
})
