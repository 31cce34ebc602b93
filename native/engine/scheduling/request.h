// Requests, responses and statistics with TensorRT-LLM Executor semantics (executor/types.h, executor.h there).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "errors.h"
#include "lora/lora-adapter.h"
#include "model/prompt-table.h"

namespace engine {

using RequestId = uint64_t;
using TokenIds = std::vector<int32_t>;

struct SamplingConfig {
  int32_t beam_width = 1;
  // Greedy unless asked to sample, as in TensorRT-LLM: temperature 0, top_k 1, or neither top_k nor top_p given
  // -> argmax. top_k 0 with top_p given samples from the nucleus; top_k > 1 samples from the k best.
  float temperature = 1.0f;
  int32_t top_k = 0;                  // 0: no top-k limit
  std::optional<float> top_p;         // (0, 1]; absent: no nucleus limit
  std::optional<uint64_t> seed;       // same seed -> same output; absent: 0, as TRT-LLM's random_seed default
  // Logits processors (logits-processors.h has the exact definitions and order).
  float repetition_penalty = 1.0f;    // > 0; 1: off. Over prompt + output tokens, multiplicative
  float presence_penalty = 0.0f;      // 0: off. Over output tokens, subtracted once per present token
  float frequency_penalty = 0.0f;     // 0: off. Over output tokens, subtracted once per occurrence
  int32_t min_tokens = 0;             // end_id is banned until this many tokens were generated (min_length)
  // Beam search (beam-search.h).
  float length_penalty = 1.0f;        // hypothesis score = cum_log_prob / generated_length ^ length_penalty
  int32_t early_stopping = 1;         // 1: stop at beam_width hypotheses; 0: heuristic; -1: never (HF "never")
  float beam_search_diversity_rate = 0.0f;  // >= 0: the k-th best continuation of a beam loses k * rate
};

// TensorRT-LLM's rule for when a request samples greedily: temperature 0, top_k 1, or neither top_k nor top_p.
inline bool is_greedy(const SamplingConfig& c) {
  return c.temperature == 0.0f || c.top_k == 1 || (c.top_k == 0 && !c.top_p);
}

// TensorRT-LLM's GuidedDecodingParams: the output is constrained to a guide (native/engine/grammar). json: any JSON
// value (no guide text); json_schema: a JSON Schema; regex: a regular expression the whole output matches;
// ebnf_grammar: a GBNF grammar whose start rule is `root`.
enum class GuideType { json, json_schema, regex, ebnf_grammar };
const char* guide_type_name(GuideType t);  // "json", "json_schema", "regex", "ebnf_grammar"

struct GuidedDecodingParams {
  GuideType guide_type = GuideType::json;
  std::string guide;
};

struct OutputConfig {
  bool return_log_probs = false;
  bool return_context_logits = false;
  bool return_generation_logits = false;
  bool exclude_input_from_output = false;
};

// TensorRT-LLM's LoraConfig: the request runs with the adapter cached under task_id (the seeds' lora_task_id).
// With `adapter` (from lora_weights / lora_config, lora-tensors.h) the adapter is cached under that id first,
// replacing what it held; without, the id must name a cached or preloaded adapter (ExecutorConfig::lora).
struct LoraRequest {
  uint64_t task_id = 0;
  std::shared_ptr<const LoraAdapter> adapter;
};

// The most guessed tokens one step of a request may carry (speculative decoding).
inline constexpr int32_t kMaxDraftTokens = 64;

struct Request {
  TokenIds input_token_ids;
  int32_t max_tokens = 0;             // new tokens to generate; > 0
  bool streaming = false;
  SamplingConfig sampling;
  OutputConfig output;
  int32_t end_id = -1;                // -1: never stop on a token
  int32_t pad_id = -1;
  std::vector<TokenIds> stop_words;   // stop-words.h; the stop sequence stays in the output
  std::vector<TokenIds> bad_words;    // logits-processors.h
  std::vector<float> embedding_bias;  // empty: none; else [vocab], added to every logits row before sampling
  int32_t num_return_sequences = 0;   // beams returned, best first; 0: beam_width. <= beam_width
  // This request's max_attention_window_size (0: the server's): a window over every layer, no wider than the
  // server's (ExecutorConfig::max_attention_window) when that is set.
  int32_t max_attention_window = 0;
  std::optional<uint64_t> client_id;
  // Speculative decoding (ExecutorConfig::ngram_speculation): at most this many guessed tokens a step for this
  // request (the seeds' num_draft_tokens); 0: none; -1: the executor's max_draft_tokens.
  int32_t num_draft_tokens = -1;
  // Constrained decoding: only tokens the guide allows are sampled, and end_id only where the output is complete;
  // a complete output that nothing can extend ends the request (finish reason end_id). Needs the executor's
  // guided-decoding vocabulary; not with beam search.
  std::optional<GuidedDecodingParams> guided_decoding;
  // LoRA: the adapter this request runs with; absent: the base model.
  std::optional<LoraRequest> lora;
  // P-tuning (TensorRT-LLM's PromptTuningConfig): input_token_ids vocab_size + i embed as row i of this table
  // (model/prompt-table.h); null: every id must be below vocab_size. Needs Model::supports_prompt_tables.
  std::shared_ptr<const PromptTable> prompt_table;
};

enum class FinishReason { not_finished = 0, end_id = 1, stop_words = 2, length = 3, timed_out = 4, cancelled = 5 };
const char* finish_reason_name(FinishReason r);  // "not_finished", "end_id", "stop_words", "length", ...

struct Result {
  bool is_final = false;
  // Per beam. Streaming: only the tokens new since the last response. Not streaming: the whole output, with the
  // prompt in front unless exclude_input_from_output.
  std::vector<TokenIds> output_token_ids;
  std::vector<FinishReason> finish_reasons;      // per beam
  std::vector<float> cum_log_probs;              // per beam, when return_log_probs
  std::vector<std::vector<float>> log_probs;     // per beam, per returned generated token, when return_log_probs
  std::vector<float> context_logits;             // [prompt_len, vocab] when return_context_logits (final or first)
  std::vector<float> generation_logits;          // [beam, n_returned_tokens, vocab] when return_generation_logits
  int32_t vocab_size = 0;
  // per-request timings, seconds since the executor's epoch (steady clock)
  double arrival_time = 0, first_scheduled_time = 0, first_token_time = 0, last_token_time = 0;
};

struct Response {
  RequestId request_id = 0;
  std::optional<uint64_t> client_id;
  bool has_error = false;
  ErrorCode error_code = ErrorCode::internal;
  std::string error_message;
  Result result;
};

struct KvCacheStats {
  int32_t max_num_blocks = 0, free_num_blocks = 0, used_num_blocks = 0, tokens_per_block = 0;
  int64_t alloc_total_blocks = 0, alloc_new_blocks = 0, reused_blocks = 0;
};

struct InflightBatchingStats {
  int32_t num_scheduled_requests = 0, num_context_requests = 0, num_gen_requests = 0, num_paused_requests = 0;
  int64_t num_ctx_tokens = 0;
  int32_t micro_batch_id = 0;
  float avg_num_decoded_tokens_per_iter = 0;
};

struct IterationStats {
  double timestamp = 0;               // seconds since the Unix epoch
  int64_t iter = 0;
  double iter_latency_ms = 0;
  int32_t num_active_requests = 0, num_queued_requests = 0, max_num_active_requests = 0;
  int64_t num_completed_requests = 0; // in this iteration
  int64_t cpu_mem_usage = 0;          // bytes: weights + KV pool + activations
  // Leader mode: this iteration's forward pass — seconds and bytes in MPI calls on the leader (plan broadcast,
  // all-reduces, stage transfers) and the size of the plan broadcast to the followers.
  double comm_seconds = 0;
  int64_t comm_bytes = 0;
  int64_t plan_bytes = 0;
  int64_t gpu_mem_usage = 0;
  KvCacheStats kv_cache_stats;
  InflightBatchingStats inflight_batching_stats;
  // Speculative decoding this iteration (TensorRT-LLM's SpecDecodingStats): guessed tokens checked, those the model
  // agreed with (kept), and the requests that carried guesses.
  struct SpecDecodingStats {
    int64_t num_draft_tokens = 0, num_accepted_tokens = 0;
    int32_t num_requests_with_draft_tokens = 0;
  } spec_decoding_stats;
};

}  // namespace engine
