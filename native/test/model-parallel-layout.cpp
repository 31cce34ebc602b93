// The tp x pp layout (parallel-layout.h) as pure arithmetic: head / kv-head / MLP / vocab / layer slices per rank,
// kv-head replication when tp > num_key_value_heads, vocab padding, uneven pipeline stages, and the messages that
// name the numbers when a grid cannot split a model.
#include "check.h"
#include "errors.h"
#include "parallel/parallel-layout.h"
#include "parallel/pp-partition.h"

using namespace engine;

namespace {

ModelConfig config(int32_t heads, int32_t kv_heads, int32_t layers, int32_t vocab, int32_t inter) {
  ModelConfig c;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.num_layers = layers;
  c.vocab_size = vocab;
  c.intermediate_size = inter;
  c.head_dim = 16;
  c.hidden_size = heads * 16;
  return c;
}

ShardInfo at(int32_t tp_rank, int32_t tp, int32_t pp_rank = 0, int32_t pp = 1) {
  ShardInfo s;
  s.tp_rank = tp_rank;
  s.tp_size = tp;
  s.pp_rank = pp_rank;
  s.pp_size = pp;
  return s;
}

void tensor_parallel() {
  const ModelConfig tiny = config(4, 2, 2, 512, 160);  // the tiny-llama fixture's shape
  ParallelLayout l = make_parallel_layout(tiny, at(1, 2));
  CHECK(l.head_begin == 2 && l.head_end == 4);
  CHECK(l.kv_head_begin == 1 && l.kv_head_end == 2 && !l.kv_replicated);
  CHECK(l.inter_begin == 80 && l.inter_end == 160);
  CHECK(l.vocab_padded == 512 && l.vocab_begin == 256 && l.vocab_end == 512 && l.local_real_vocab(512) == 256);
  CHECK(l.layer_begin == 0 && l.layer_end == 2 && l.first_stage() && l.last_stage() && !l.leader());

  // tp 4 > 2 kv heads: each rank keeps the kv head of its query head's group (heads 0,1 -> kv 0; 2,3 -> kv 1).
  const int32_t want_kv[4] = {0, 0, 1, 1};
  for (int32_t r = 0; r < 4; ++r) {
    l = make_parallel_layout(tiny, at(r, 4));
    CHECK(l.head_begin == r && l.head_end == r + 1);
    CHECK(l.kv_replicated && l.kv_head_begin == want_kv[r] && l.local_kv_heads() == 1);
    CHECK(l.local_inter() == 40 && l.local_vocab() == 128);
  }
  // MQA: one kv head, replicated on every rank.
  l = make_parallel_layout(config(8, 1, 2, 100, 64), at(3, 4));
  CHECK(l.kv_replicated && l.kv_head_begin == 0 && l.kv_head_end == 1 && l.head_begin == 6);

  // Vocab 509 over tp 4: padded to 512, 128 rows each; the last rank has 125 real rows and 3 padding rows.
  const ModelConfig odd = config(4, 2, 3, 509, 48);
  l = make_parallel_layout(odd, at(3, 4));
  CHECK(l.vocab_padded == 512 && l.vocab_begin == 384 && l.vocab_end == 512 && l.local_real_vocab(509) == 125);
  l = make_parallel_layout(odd, at(1, 2));
  CHECK(l.vocab_padded == 510 && l.vocab_begin == 255 && l.local_real_vocab(509) == 254);
  // tp 1 is the whole model.
  l = make_parallel_layout(odd, ShardInfo{});
  CHECK(l.local_heads() == 4 && l.local_kv_heads() == 2 && l.local_inter() == 48 && l.local_vocab() == 509 &&
        l.local_layers() == 3 && l.leader());
}

void pipeline_parallel() {
  // Contiguous stages, as even as possible, earlier stages take the extra layer.
  const ModelConfig five = config(4, 4, 5, 64, 64);
  const int32_t want[3][2] = {{0, 2}, {2, 4}, {4, 5}};
  for (int32_t s = 0; s < 3; ++s) {
    ParallelLayout l = make_parallel_layout(five, at(0, 1, s, 3));
    CHECK(l.layer_begin == want[s][0] && l.layer_end == want[s][1]);
    CHECK(l.first_stage() == (s == 0) && l.last_stage() == (s == 2));
  }
  ParallelLayout l = make_parallel_layout(config(4, 2, 3, 509, 48), at(1, 2, 1, 2));
  CHECK(l.layer_begin == 2 && l.layer_end == 3 && l.last_stage() && !l.leader());
  // KV bytes on the heaviest rank: stage 0's 2 layers x K,V x 1 kv head x 16 dims x 4 bytes.
  CHECK(max_kv_bytes_per_token(config(4, 2, 3, 509, 48), 2, 2) == 2u * 2 * 1 * 16 * 4);
  CHECK(max_kv_bytes_per_token(config(4, 2, 3, 509, 48), 4, 1) == 3u * 2 * 1 * 16 * 4);  // replicated kv head
  CHECK(max_kv_bytes_per_token(config(4, 2, 3, 509, 48), 1, 1) == 3u * 2 * 2 * 16 * 4);
}

// Experts (TensorRT-LLM's mapping): tp rank r is ep rank r % ep and moe-tp rank r / ep; a shared expert and the
// dense layers split over all of tp.
// --pp-layers: explicit counts, the balanced split (the LM head weighs on the last stage), and the errors.
void stage_layers() {
  // 12 layers of 64 * 16 * 12 (attention) + 3 * 64 * 128 (MLP) = 36,864 multiply-adds; a head of 64 * 2304 =
  // 147,456 = 4 layers, counted for half the tokens = 2: an even 6 + 6 puts 6 + 2 on the last stage, the balanced
  // split 7 + (5 + 2).
  ModelConfig c = config(4, 2, 12, 2304, 128);
  CHECK(layer_work(c, 0) == 64 * 16 * 12 + 3 * 64 * 128);
  CHECK(head_work(c) == 4 * layer_work(c, 0));
  CHECK((pp_stage_layers(c, 2, "") == std::vector<int32_t>{6, 6}));
  CHECK((pp_stage_layers(c, 2, "balanced") == std::vector<int32_t>{7, 5}));
  CHECK((pp_stage_layers(c, 3, "balanced") == std::vector<int32_t>{5, 5, 2}));  // 5 | 5 | 2 + 2: heaviest 5
  CHECK((pp_stage_layers(c, 1, "balanced") == std::vector<int32_t>{12}));
  CHECK((pp_stage_layers(c, 2, "9,3") == std::vector<int32_t>{9, 3}));
  ShardInfo s = at(0, 1, 1, 2);
  s.pp_layers = "balanced";
  ParallelLayout l = make_parallel_layout(c, s);
  CHECK(l.layer_begin == 7 && l.layer_end == 12 && l.last_stage());
  s.pp_rank = 0;
  l = make_parallel_layout(c, s);
  CHECK(l.layer_begin == 0 && l.layer_end == 7);
  // A tiny head: the balanced split is the even one, earlier stages taking the extra layer.
  ModelConfig five = config(4, 4, 5, 2, 64);
  CHECK((pp_stage_layers(five, 2, "balanced") == std::vector<int32_t>{3, 2}));
  CHECK_THROWS(pp_stage_layers(c, 2, "6,5"), "--pp-layers '6,5': adds up to 11 layers, but the model has 12");
  CHECK_THROWS(pp_stage_layers(c, 2, "12"), "--pp-layers '12': has 1 stage(s), but pp is 2");
  CHECK_THROWS(pp_stage_layers(c, 2, "12,0"), "--pp-layers '12,0': every stage needs at least one layer");
  CHECK_THROWS(pp_stage_layers(c, 2, "even"), "--pp-layers 'even': expected 'balanced' or a comma-separated list");
  CHECK_THROWS(pp_stage_layers(c, 2, "6,,6"), "expected 'balanced' or a comma-separated list");
  s.pp_layers = "7,4";
  CHECK_THROWS(make_parallel_layout(c, s), "adds up to 11 layers");
}

void experts() {
  ModelConfig c = config(4, 2, 2, 64, 64);
  c.moe.num_experts = 8;
  c.moe.top_k = 2;
  c.moe.expert_inter = 48;
  c.moe.shared_inter = 96;
  c.moe.sparse = {true, false};
  ShardInfo s = at(3, 4);
  s.ep_size = 2;
  ParallelLayout l = make_parallel_layout(c, s);
  CHECK(l.expert_begin == 4 && l.expert_end == 8);                    // ep rank 1 of 2: experts 4..7
  CHECK(l.expert_inter_begin == 24 && l.expert_inter_end == 48);      // moe-tp rank 1 of 2: columns 24..47
  CHECK(l.shared_inter_begin == 72 && l.shared_inter_end == 96);      // tp rank 3 of 4
  CHECK(l.inter_begin == 48 && l.inter_end == 64);                    // the dense layer, tp rank 3 of 4
  l = make_parallel_layout(c, at(2, 4));                               // ep 1: every rank has every expert
  CHECK(l.expert_begin == 0 && l.expert_end == 8 && l.expert_inter_begin == 24 && l.expert_inter_end == 36);
  s = at(1, 4);
  s.ep_size = 4;                                                       // moe_tp 1: whole experts
  l = make_parallel_layout(c, s);
  CHECK(l.expert_begin == 2 && l.expert_end == 4 && l.expert_inter_begin == 0 && l.expert_inter_end == 48);
  // Mixtral-like: every layer sparse, so intermediate_size need not split over tp (only the experts' columns do).
  c.moe.sparse = {true, true};
  c.intermediate_size = 90;
  c.moe.shared_inter = 0;
  s = at(0, 2);
  s.ep_size = 2;
  CHECK(make_parallel_layout(c, s).expert_end == 4);
  s = at(0, 4);
  s.ep_size = 3;
  CHECK_THROWS(make_parallel_layout(c, s), "ep 3 does not divide tp 4 (tp = moe_tp x ep)");
  c.moe.num_experts = 6;
  s.ep_size = 4;
  CHECK_THROWS(make_parallel_layout(c, s), "num_experts 6 is not divisible by ep 4");
  c.moe.num_experts = 8;
  s.ep_size = 1;
  c.moe.expert_inter = 50;
  CHECK_THROWS(make_parallel_layout(c, s), "the experts' intermediate size 50 is not divisible by moe_tp 4 (tp 4 / ep 1)");
  c.moe.expert_inter = 48;
  c.moe.shared_inter = 10;
  CHECK_THROWS(make_parallel_layout(c, s), "shared_expert_intermediate_size 10 is not divisible by tp 4");
  ModelConfig dense = config(4, 2, 2, 64, 64);
  dense.architecture_name = "LlamaForCausalLM";
  s.ep_size = 2;
  CHECK_THROWS(make_parallel_layout(dense, s), "ep 2 splits the experts of a mixture-of-experts model; LlamaForCausalLM has none");
}

void errors() {
  CHECK_THROWS(make_parallel_layout(config(6, 6, 2, 64, 64), at(0, 4)), "num_attention_heads 6 is not divisible by tp 4");
  CHECK_THROWS(make_parallel_layout(config(12, 3, 2, 64, 64), at(0, 4)),
               "tp 4 needs num_key_value_heads (3) to divide or be divisible by tp");
  CHECK_THROWS(make_parallel_layout(config(6, 3, 2, 64, 64), at(0, 2)),
               "tp 2 needs num_key_value_heads (3) to divide or be divisible by tp");
  CHECK_THROWS(make_parallel_layout(config(6, 3, 2, 64, 100), at(0, 3)), "intermediate_size 100 is not divisible by tp 3");
  CHECK_THROWS(make_parallel_layout(config(4, 2, 2, 64, 64), at(0, 1, 0, 5)), "pp 5 > num_hidden_layers 2");
  CHECK_THROWS(make_parallel_layout(config(4, 2, 2, 64, 64), at(2, 2)), "tp_rank 2 is outside [0, 2)");
  CHECK_THROWS(make_parallel_layout(config(4, 2, 2, 64, 64), at(0, 1, -1, 2)), "pp_rank -1 is outside [0, 2)");
  CHECK_THROWS(make_parallel_layout(config(4, 2, 2, 64, 64), at(0, 0)), "tp_size must be >= 1, got 0");
  try {
    make_parallel_layout(config(6, 6, 2, 64, 64), at(0, 4));
  } catch (const EngineError& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
  }
}

}  // namespace

TEST_MAIN({
  stage_layers();
  tensor_parallel();
  pipeline_parallel();
  experts();
  errors();
})
