// The executor: a request queue, a capacity scheduler and a loop thread that runs one batched forward pass per
// iteration, samples, and emits responses. Semantics follow TensorRT-LLM's tensorrt_llm::executor::Executor:
// enqueue -> id, await responses (or a callback), cancel, iteration stats, shutdown.
#pragma once
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kv-cache/kv-cache-events.h"
#include "model/model.h"
#include "scheduling/request.h"

namespace engine {

enum class CapacitySchedulerPolicy { max_utilization, guaranteed_no_evict };

struct ExecutorConfig {
  int32_t max_beam_width = 1;
  int32_t max_batch_size = 64;           // requests in one iteration
  int32_t max_num_tokens = 8192;         // tokens in one iteration (prefill + decode)
  int32_t max_queue_size = 0;            // 0: unbounded; else enqueue throws queue_full past it
  int32_t max_seq_len = 0;               // prompt + output; 0: model's max_position_embeddings
  CapacitySchedulerPolicy policy = CapacitySchedulerPolicy::guaranteed_no_evict;
  int32_t tokens_per_block = 64;
  int64_t max_tokens_in_paged_kv_cache = 0;  // 0: derive from kv_cache_memory_bytes
  int64_t kv_cache_memory_bytes = 0;         // 0 with max_tokens 0: room for max_batch_size * max_seq_len tokens
  // Device models: the KV pool takes this fraction of the device memory free after the weights and activation
  // buffers (TensorRT-LLM's KvCacheConfig.free_gpu_memory_fraction); with max_tokens_in_paged_kv_cache also set,
  // the smaller of the two. Host models ignore it.
  float kv_cache_free_gpu_mem_fraction = 0.9f;
  // Prompts longer than what an iteration has left run in block-aligned chunks over several iterations, next to
  // other requests' decodes; off, a prompt over max_num_tokens is rejected at enqueue.
  bool enable_chunked_context = false;
  // Prefix reuse: full KV blocks are cached by content (prefix-cache.h) and a prompt starting with a cached
  // prefix attaches those blocks instead of recomputing them.
  bool enable_kv_cache_reuse = false;
  // KV cache events (kv-cache-events.h; TensorRT-LLM's KvCacheConfig.event_buffer_max_size): at most this many
  // undrained events are kept, the oldest dropped past it; 0: none recorded. Only with enable_kv_cache_reuse.
  int32_t kv_cache_event_buffer_max_size = 0;
  // TensorRT-LLM's max_attention_window_size: every layer attends over at most the last this many positions (the
  // smaller of it and a layer's own sliding window); 0: the model's own windows. When every layer of a sequence is
  // windowed, the KV blocks that leave the window go back to the pool, so a sequence holds about window / tokens
  // per block blocks however long it runs.
  int32_t max_attention_window = 0;
  int32_t iter_stats_max_iterations = 1000;
  // Cap on the logits values one request may ask for: prompt_len x vocab (return_context_logits) and beam_width x
  // max_tokens x vocab (return_generation_logits). They are held in memory until the response; 0: no cap.
  int64_t max_logits_elements = int64_t{1} << 28;  // 1 GiB of floats
  // Pipeline parallelism: micro-batches kept in flight, so stage k computes one while stage k - 1 computes the
  // next (each micro-batch up to max_batch_size sequences). 0: one per pipeline stage (Model::pipeline_depth);
  // 1: the stages run one after the other every iteration. Capped at the model's depth; 1 without pp.
  int32_t pp_micro_batches = 0;
  // Speculative decoding by prompt lookup (sampling/ngram-draft.h): a request's next tokens are guessed from the
  // latest earlier occurrence of its last tokens (up to max_ngram of them), and up to max_draft_tokens guesses are
  // checked in the same pass as its next token, which keeps the guesses the model's draws agree with — the output
  // is the one without speculation (greedy or seeded sampling), in fewer passes. 0: off. Not with beams, guides,
  // returned generation logits or pipelined pp.
  struct NgramSpeculation {
    int32_t max_draft_tokens = 0;
    int32_t max_ngram = 3;
  };
  NgramSpeculation ngram_speculation;
  // Speculative decoding with a draft model (the constructor's `draft`, in place of prompt lookup): a smaller model
  // over the same vocabulary guesses up to this many tokens a step, each its argmax after the ones before, from its
  // own KV pool on this rank; they are checked as prompt lookup's are, so the output is still the plain one.
  int32_t draft_model_tokens = 4;
  // Speculative decoding with Medusa heads (Model::set_medusa_heads, in place of the two above): the candidates a
  // step checks, as paths of ranks (medusa/medusa-tree.h; TensorRT-LLM's medusa_choices); the first
  // draft_model_tokens of them (a request's num_draft_tokens overrides it) are checked as one tree where the model
  // takes token trees, else only each head's first choice is, as a chain. Empty: default_medusa_choices.
  std::vector<std::vector<int32_t>> medusa_choices;
  // Speculative decoding with EAGLE heads (the constructor's `draft` taking features): the tree of guesses a step
  // checks, as the same paths of ranks (TensorRT-LLM's eagle_choices), a rank being one among the draft's best
  // guesses after the path's parent; the first draft_model_tokens of them are checked as one tree. Empty: a chain
  // of draft_model_tokens guesses, each the draft's argmax after the ones before.
  std::vector<std::vector<int32_t>> eagle_choices;
  // Speculation stays off in an iteration with more than this many requests decoding (0: no limit): checking K
  // guesses costs about a decode step at small batches but grows with the batch (bench/RESULTS.md: on an H200, 4
  // guesses cost 1.2x a decode step at batch 16, 1.3x at 32, 1.9x at 64), while the batch itself already keeps
  // the GPU busy.
  int32_t speculation_max_batch = 32;
  // TensorRT-LLM's GuidedDecodingConfig: the bytes each token id stands for (empty: a special token, never allowed
  // inside a guide). Absent: requests with guided_decoding are refused.
  // A guided request waits in the queue until its guide's every position has its mask (computed on a background
  // thread after the guide is compiled; grammar/background-masks.h), so none of its steps walks the vocabulary while
  // the batch waits; the other requests run meanwhile. TRTLLM_GRAMMAR_WAIT_FOR_MASKS=0: guided requests start at
  // once and compute the positions the thread has not reached (as does TRTLLM_GRAMMAR_BACKGROUND_MASKS=0).
  struct GuidedDecodingConfig {
    std::vector<std::string> encoded_vocab;
    // A guide of more byte positions x vocabulary tokens than this is not waited for (0: the default,
    // BackgroundMasks::kMaxWaitedWork, ~33,500 positions at 128k tokens).
    int64_t max_waited_work = 0;
  };
  std::optional<GuidedDecodingConfig> guided_decoding;
  // LoRA (lora/; TensorRT-LLM's PeftCacheManagerConfig and the backend's lora_cache_* parameters). Off unless
  // enabled: requests naming an adapter are then refused.
  struct LoraConfig {
    bool enabled = false;
    // Adapters read at startup (--lora-modules): task id and Hugging Face PEFT directory. Evicted from the host
    // cache like any other, they are read again from their directory when a request names them.
    std::vector<std::pair<uint64_t, std::string>> preloaded;
    // Adapters one batch may use (the model's slots; vLLM's max_loras). 0: as many as lora_cache_gpu_memory_fraction
    // of the device's free memory holds at optimal_adapter_size (device models), max_batch_size (host models).
    int32_t max_loras = 0;
    int32_t max_adapter_size = 64;      // lora_cache_max_adapter_size: the largest rank accepted
    int32_t optimal_adapter_size = 8;   // lora_cache_optimal_adapter_size: the rank device slots are sized for
    float gpu_memory_fraction = 0.05f;  // lora_cache_gpu_memory_fraction: of the device memory free after weights
    int64_t host_memory_bytes = int64_t{1} << 30;  // lora_cache_host_memory_bytes: adapters kept on the host, LRU
  };
  LoraConfig lora;
};

class Executor {
 public:
  // Takes ownership of the model (and of the draft model, when given: speculation by draft model, on this rank
  // alone); allocates the KV pools; starts the loop thread.
  Executor(std::unique_ptr<Model> model, const ExecutorConfig& config, std::unique_ptr<Model> draft = nullptr);
  ~Executor();  // shuts down if still running
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Validates and queues. Throws EngineError(invalid_argument) naming the field and value, queue_full, shutdown.
  RequestId enqueue(const Request& request);
  // Cancels a queued or running request: its KV blocks are freed within one iteration and a final response with
  // finish reason `cancelled` is emitted. Unknown / finished ids are ignored.
  void cancel(RequestId id);

  // Either poll ...
  std::vector<Response> await_responses(std::chrono::milliseconds timeout);
  // ... or receive every batch of responses on the loop thread, as soon as an iteration produces them.
  // Set before the first enqueue; while set, await_responses returns nothing.
  void set_response_callback(std::function<void(std::vector<Response>&&)> callback);

  // Stats of the iterations since the last call (at most iter_stats_max_iterations kept).
  std::deque<IterationStats> get_latest_iteration_stats();
  KvCacheStats kv_cache_stats() const;   // a snapshot, safe from any thread
  KvCacheStats draft_kv_cache_stats() const;  // the draft model's pool (all zero without one); a snapshot
  // KV cache events recorded since the last call, oldest first (TensorRT-LLM's getLatestKvCacheEvents, without
  // its wait); empty when events are off. Safe from any thread.
  std::deque<KvCacheEvent> get_latest_kv_cache_events();
  int64_t kv_cache_events_dropped() const;  // events lost to a full buffer since construction
  int32_t num_active_requests() const;   // running + queued, safe from any thread

  const ModelConfig& model_config() const;
  // How the model stores its KV cache (Model::kv_cache_dtype).
  std::string kv_cache_dtype() const;
  // How the tp group's sums run on the GPUs (Model::tp_all_reduce; "" without GPU collectives).
  std::string tp_all_reduce() const;
  // Micro-batches kept in flight: config().pp_micro_batches resolved against the model's pipeline depth (1: the
  // stages one after the other, or no pp).
  int32_t pp_micro_batches() const;
  const ExecutorConfig& config() const;

  // Stops accepting requests, cancels what is queued or running (final responses with `cancelled`), joins the
  // loop thread. Idempotent.
  void shutdown();
  // After shutdown() has joined the loop: frees the model and the draft model (weights, KV pools, device buffers),
  // so the process can load another; model_config(), the stats and the KV snapshots stay readable. Does nothing
  // while the loop still runs (shutdown() called from the response callback).
  void free_models();

  // Test hook, so a test can fix the order of events instead of sleeping and hoping. After hold_iterations(n) the
  // loop runs at most n more iterations (as get_latest_iteration_stats counts them) and then holds: no iteration
  // starts, enqueued requests wait in the queue, a cancel still ends its request at once (final `cancelled`
  // response, blocks freed), shutdown still works. n < 0: no limit (the default). In leader mode this holds the
  // leader's loop; followers wait for its next plan. With pipelined pp each micro-batch is an iteration: no more
  // begin than the allowance has left, and those in flight end before the loop holds.
  void hold_iterations(int64_t n);
  // True once the loop has run its allowed iterations and holds; false on timeout or once the loop has stopped.
  // Every response of the iterations run before is delivered by then.
  bool wait_until_held(std::chrono::milliseconds timeout);
  // True once the loop sleeps with nothing it can run (and not held): nothing running, and nothing queued but guided
  // requests waiting for their guide's masks. False on timeout or once it stopped.
  bool wait_until_idle(std::chrono::milliseconds timeout);
  // Test hook: holds (true) or releases the background thread that computes new guides' masks, so a guided request
  // stays queued waiting for them as long as a test needs. Nothing without a guided-decoding vocabulary or the thread.
  void hold_guide_masks(bool held);
  int64_t iterations_run() const;  // iterations recorded in the stats since construction

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace engine
