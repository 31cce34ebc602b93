// The leader's plan survives serialisation exactly, and a damaged buffer is an error, not a crash.
#include <cmath>
#include <memory>
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
  b.lora_slot = 3;
  a.tree_parents = {-1, 0, 0};  // a token tree (speculation by Medusa heads)
  b.tree_parents = {-1, 0};     // one grown over passes: its root in the past (an EAGLE draft's)
  b.tree_past = 1;
  plan.chunks = {a, b};
  std::vector<uint8_t> bytes = serialize_plan(plan);
  // header 4 words; per chunk 8 words, then its tokens, block ids and tree parents, and 1 (no prompt-table rows)
  CHECK(bytes.size() == 4 * (4 + 8 + 3 + 1 + 3 + 1 + 8 + 1 + 3 + 2 + 1));
  IterationPlan back = deserialize_plan(bytes);
  CHECK(back.op == PlanOp::forward && back.chunks.size() == 2);
  CHECK(back.chunks[0].tokens == a.tokens && back.chunks[0].block_ids == a.block_ids && back.chunks[0].all_logits);
  CHECK(back.chunks[1].tokens == b.tokens && back.chunks[1].past_len == 130 && back.chunks[1].block_ids == b.block_ids);
  CHECK(!back.chunks[1].all_logits && back.chunks[1].window == 100 && back.chunks[0].window == 0);
  CHECK(back.chunks[0].lora_slot == -1 && back.chunks[1].lora_slot == 3);
  CHECK(back.chunks[0].tree_parents == a.tree_parents && back.chunks[0].tree_past == 0);
  CHECK(back.chunks[1].tree_parents == b.tree_parents && back.chunks[1].tree_past == 1);

  // P-tuning: only the table rows the chunk's virtual tokens use go (vocab 100: ids 102 and 100, 102 twice), bit for
  // bit at their indices; a follower's other rows are zeros it never reads. A decode chunk of real ids sends none.
  {
    IterationPlan p;
    p.op = PlanOp::forward;
    p.vocab_size = 100;
    SequenceChunk c;
    c.tokens = {5, 102, 7, 100, 102};
    c.block_ids = {0, 1};
    c.prompt_table = make_prompt_table(4, 2, {1, 2, 3, 4, 5.5f, -6e-9f, 7, 8});
    SequenceChunk d = c;
    d.tokens = {99};
    p.chunks = {c, d};
    const std::vector<uint8_t> table_bytes = serialize_plan(p);
    CHECK(table_bytes.size() == 4 * (4 + 8 + 5 + 2 + (3 + 2 * (1 + 2)) + 8 + 1 + 2 + 1));
    IterationPlan q = deserialize_plan(table_bytes);
    const PromptTable* t = q.chunks[0].prompt_table.get();
    CHECK(t != nullptr && t->rows == 4 && t->hidden == 2);
    if (t != nullptr) CHECK((t->data == std::vector<float>{1, 2, 0, 0, 5.5f, -6e-9f, 0, 0}));
    CHECK(q.chunks[0].tokens == c.tokens && !q.chunks[1].prompt_table);
    IterationPlan no_vocab = p;
    no_vocab.vocab_size = 0;
    CHECK_THROWS(serialize_plan(no_vocab), "a prompt table without the vocab_size");
  }

  // A LoRA adapter goes whole, its floats bit for bit.
  IterationPlan load;
  load.op = PlanOp::load_lora;
  load.arg0 = 5;
  auto adapter = std::make_shared<LoraAdapter>();
  adapter->weights.push_back({1, LoraModule::attn_v, 2, 3, 4, {0.5f, -1.25f, 3e-8f, 7, 8, -0.0f}, {1, 2, 3, 4, 5, 6, 7, 8}});
  adapter->weights.push_back({0, LoraModule::mlp_4h_to_h, 1, 2, 1, {9, 10}, {11}});
  load.lora = adapter;
  IterationPlan load_back = deserialize_plan(serialize_plan(load));
  CHECK(load_back.op == PlanOp::load_lora && load_back.arg0 == 5 && load_back.lora &&
        load_back.lora->weights.size() == 2);
  if (load_back.lora && load_back.lora->weights.size() == 2) {
    const LoraWeight& w = load_back.lora->weights[0];
    CHECK(w.layer == 1 && w.module == LoraModule::attn_v && w.rank == 2 && w.in == 3 && w.out == 4);
    CHECK(w.a == adapter->weights[0].a && w.b == adapter->weights[0].b && std::signbit(w.a[5]));
    CHECK(load_back.lora->weights[1].module == LoraModule::mlp_4h_to_h && load_back.lora->weights[1].b[0] == 11);
  }
  IterationPlan unload;
  unload.op = PlanOp::unload_lora;
  unload.arg0 = 2;
  IterationPlan unload_back = deserialize_plan(serialize_plan(unload));
  CHECK(unload_back.op == PlanOp::unload_lora && unload_back.arg0 == 2 && !unload_back.lora);

  IterationPlan copy;
  copy.op = PlanOp::copy_kv_block;
  copy.arg0 = 4;
  copy.arg1 = 11;
  IterationPlan copy_back = deserialize_plan(serialize_plan(copy));
  CHECK(copy_back.op == PlanOp::copy_kv_block && copy_back.arg0 == 4 && copy_back.arg1 == 11 && copy_back.chunks.empty());

  // The leader's Medusa heads under pp: the rows whose guesses the last stage sends back.
  IterationPlan heads;
  heads.op = PlanOp::head_guesses;
  heads.rows = {0, 7, 3};
  const std::vector<uint8_t> heads_bytes = serialize_plan(heads);
  CHECK(heads_bytes.size() == 4 * (4 + 1 + 3));
  IterationPlan heads_back = deserialize_plan(heads_bytes);
  CHECK(heads_back.op == PlanOp::head_guesses && heads_back.rows == heads.rows && heads_back.chunks.empty());
  CHECK(deserialize_plan(serialize_plan(copy)).rows.empty());
  std::vector<uint8_t> heads_cut(heads_bytes.begin(), heads_bytes.end() - 4);
  CHECK_THROWS(deserialize_plan(heads_cut), "bad length 3");

  std::vector<uint8_t> cut(bytes.begin(), bytes.end() - 3);
  CHECK_THROWS(deserialize_plan(cut), "iteration plan");
  std::vector<uint8_t> bad = bytes;
  bad[0] = 99;
  CHECK_THROWS(deserialize_plan(bad), "unknown op 99");
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  CHECK_THROWS(deserialize_plan(longer), "trailing bytes");
})
