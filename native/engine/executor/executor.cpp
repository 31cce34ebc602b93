// Executor public API: construction (KV pool sizing), enqueue/cancel, response delivery, stats, shutdown, and the
// test hook that holds the loop. The loop itself lives in executor-loop.cpp and executor-iteration.cpp.
#include <algorithm>
#include <string>

#include "executor/executor-impl.h"

namespace engine {
namespace {

void require_config(bool ok, const std::string& message) {
  if (!ok) throw EngineError(ErrorCode::invalid_argument, message);
}

// The request's grammar, compiled (or found in the cache) on the caller's thread, so a bad guide is an error of
// enqueue and the loop only ever computes masks.
std::unique_ptr<grammar::GrammarMatcher> guide_matcher(const Request& r, grammar::GrammarCache* grammars) {
  if (!r.guided_decoding) return nullptr;
  if (grammars == nullptr) {
    throw EngineError(ErrorCode::invalid_argument,
                      "guidedDecoding needs the executor's guided-decoding vocabulary (the tokenizer's token bytes), "
                      "which this executor was started without");
  }
  if (r.sampling.beam_width > 1) {
    throw EngineError(ErrorCode::invalid_argument, "guidedDecoding cannot be combined with beam search (beamWidth " +
                                                       std::to_string(r.sampling.beam_width) + "); use beamWidth 1");
  }
  if (r.guided_decoding->guide_type != GuideType::json && r.guided_decoding->guide.empty()) {
    throw EngineError(ErrorCode::invalid_argument, std::string("guidedDecoding.guide is empty; guideType ") +
                                                       guide_type_name(r.guided_decoding->guide_type) + " needs one");
  }
  std::vector<int32_t> stops;
  if (r.end_id >= 0) stops.push_back(r.end_id);
  return std::make_unique<grammar::GrammarMatcher>(grammars->get(*r.guided_decoding), std::move(stops));
}

}  // namespace

Executor::Executor(std::unique_ptr<Model> model, const ExecutorConfig& config, std::unique_ptr<Model> draft)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  require_config(model != nullptr, "Executor needs a model, got null");
  m.model = std::move(model);
  m.draft_model = std::move(draft);
  m.model_config = m.model->config();
  m.config = config;
  ExecutorConfig& c = m.config;
  const ModelConfig& mc = m.model->config();
  m.vocab_size = mc.vocab_size;

  require_config(c.max_batch_size > 0, "max_batch_size must be > 0, got " + std::to_string(c.max_batch_size));
  require_config(c.max_num_tokens > 0, "max_num_tokens must be > 0, got " + std::to_string(c.max_num_tokens));
  require_config(c.max_beam_width >= 1, "max_beam_width must be >= 1, got " + std::to_string(c.max_beam_width));
  require_config(c.max_logits_elements >= 0,
                 "max_logits_elements must be >= 0 (0: no cap), got " + std::to_string(c.max_logits_elements));
  require_config(c.max_queue_size >= 0, "max_queue_size must be >= 0, got " + std::to_string(c.max_queue_size));
  require_config(c.tokens_per_block > 0, "tokens_per_block must be > 0, got " + std::to_string(c.tokens_per_block));
  require_config(c.max_seq_len >= 0, "max_seq_len must be >= 0, got " + std::to_string(c.max_seq_len));
  require_config(c.kv_cache_event_buffer_max_size >= 0, "kv_cache_event_buffer_max_size must be >= 0 (0: no events), got " +
                                                            std::to_string(c.kv_cache_event_buffer_max_size));
  require_config(c.pp_micro_batches >= 0, "pp_micro_batches must be >= 0 (0: one per pipeline stage), got " +
                                              std::to_string(c.pp_micro_batches));
  require_config(c.ngram_speculation.max_draft_tokens >= 0 && c.ngram_speculation.max_draft_tokens <= kMaxDraftTokens,
                 "ngram_speculation.max_draft_tokens must be in [0, " + std::to_string(kMaxDraftTokens) + "], got " +
                     std::to_string(c.ngram_speculation.max_draft_tokens));
  require_config(c.ngram_speculation.max_ngram >= 1,
                 "ngram_speculation.max_ngram must be >= 1, got " + std::to_string(c.ngram_speculation.max_ngram));
  require_config(c.draft_model_tokens >= 1 && c.draft_model_tokens <= kMaxDraftTokens,
                 "draft_model_tokens must be in [1, " + std::to_string(kMaxDraftTokens) + "], got " +
                     std::to_string(c.draft_model_tokens));
  require_config(c.speculation_max_batch >= 0,
                 "speculation_max_batch must be >= 0 (0: no limit), got " + std::to_string(c.speculation_max_batch));
  if (m.draft_model) {
    // Guesses are token ids of the target's vocabulary: a draft over another vocabulary guesses other words.
    const ModelConfig& dc = m.draft_model->config();
    require_config(dc.vocab_size > 0 && dc.vocab_size <= mc.vocab_size + 1024 && mc.vocab_size <= dc.vocab_size + 1024,
                   "the draft model's vocab_size " + std::to_string(dc.vocab_size) + " is far from the model's " +
                       std::to_string(mc.vocab_size) + "; a draft model must share the model's tokenizer");
    require_config(!m.draft_model->on_device() || m.model->on_device(),
                   "the draft model is on the GPU but the model is not; load both on one device");
    m.eagle = m.draft_model->takes_features();
    if (m.eagle) {  // EAGLE heads read the model's final hidden states (EAGLE-3: some layers' residual streams): the
                    // model must keep them (or say why not)
      require_config(dc.hidden_size == mc.hidden_size && dc.vocab_size == mc.vocab_size,
                     "the EAGLE heads' hidden_size " + std::to_string(dc.hidden_size) + " and vocab_size " +
                         std::to_string(dc.vocab_size) + " are not the model's " + std::to_string(mc.hidden_size) +
                         " and " + std::to_string(mc.vocab_size));
      const std::vector<int32_t> layers = m.draft_model->feature_layers();
      m.model->keep_final_hidden(layers);
      m.eagle_feature_width = mc.hidden_size * std::max<int64_t>(1, static_cast<int64_t>(layers.size()));
    }
  }
  require_config(c.eagle_choices.empty() || m.eagle, "eagle_choices is set but there are no EAGLE heads");
  if (m.eagle && !c.eagle_choices.empty()) {
    const std::string problem = check_eagle_choices(c.eagle_choices);
    require_config(problem.empty(), "eagle_choices: " + problem);
    m.eagle_choices = c.eagle_choices;
    // (a model without token trees checks the chain, as without choices)
    m.eagle_trees = m.model->supports_token_trees();
  }
  m.medusa_heads = m.model->medusa_heads();
  require_config(m.medusa_heads == 0 || (!m.draft_model && c.ngram_speculation.max_draft_tokens == 0),
                 "the model has Medusa heads, and a draft model or prompt lookup (ngram_speculation) is set too; "
                 "one drafter guesses at a time");
  if (m.medusa_heads > 0) {
    m.medusa_choices = c.medusa_choices.empty() ? default_medusa_choices(m.medusa_heads) : c.medusa_choices;
    const std::string problem = check_medusa_choices(m.medusa_choices, m.medusa_heads);
    require_config(problem.empty(), "medusa_choices: " + problem);
    for (int32_t d = 1; d <= m.medusa_heads; ++d) m.chain_choices.emplace_back(static_cast<size_t>(d), 0);
    m.medusa_trees = m.model->supports_token_trees();
  }
  require_config(c.max_attention_window >= 0, "max_attention_window must be >= 0 (0: the model's own windows), got " +
                                                  std::to_string(c.max_attention_window));
  // Chunks end on block boundaries (scheduler.h): a budget under one block could never fit a chunk.
  require_config(!c.enable_chunked_context || c.max_num_tokens >= c.tokens_per_block,
                 "max_num_tokens " + std::to_string(c.max_num_tokens) + " is smaller than tokens_per_block " +
                     std::to_string(c.tokens_per_block) + "; chunked context needs at least one block per iteration");
  require_config(m.vocab_size > 0, "the model's vocab_size must be > 0, got " + std::to_string(m.vocab_size));
  if (c.max_seq_len == 0) c.max_seq_len = mc.max_position_embeddings;
  require_config(c.max_seq_len > 0,
                 "max_seq_len is 0 and the model does not declare max_position_embeddings; set max_seq_len");
  // Learned position tables (GPT-2) have no row past max_position_embeddings; refuse rather than read past it.
  require_config(mc.max_position_embeddings <= 0 || c.max_seq_len <= mc.max_position_embeddings,
                 "max_seq_len " + std::to_string(c.max_seq_len) + " exceeds the model's max_position_embeddings " +
                     std::to_string(mc.max_position_embeddings));

  // LoRA first: on a device its adapters' share of the free memory is not the KV pool's. The scheduler's limit on
  // adapters per batch is set with the rest of its config below.
  const size_t lora_reserved = m.setup_lora();
  const int32_t max_loras = m.scheduler_config.max_loras;

  // KV pool: an explicit token count wins, then a memory budget, then room for a full batch of full sequences.
  int64_t tokens = 0;
  // A draft model's pool holds as many tokens as the model's (sized from the same budget), plus a block of guesses
  // per batch slot; its bytes come out of the same budget.
  const size_t draft_bytes_per_token = m.draft_model ? m.draft_model->kv_bytes_per_token() : 0;
  const size_t bytes_per_token = m.model->kv_bytes_per_token() + draft_bytes_per_token;
  require_config(c.kv_cache_free_gpu_mem_fraction > 0 && c.kv_cache_free_gpu_mem_fraction <= 1,
                 "kv_cache_free_gpu_mem_fraction must be in (0, 1], got " +
                     std::to_string(c.kv_cache_free_gpu_mem_fraction));
  if (m.model->on_device() && c.kv_cache_memory_bytes == 0) {
    require_config(bytes_per_token > 0, "the device model reports 0 KV bytes per token");
    const size_t free_bytes = m.model->device_free_bytes();
    const double budget =
        static_cast<double>(free_bytes - std::min(free_bytes, lora_reserved)) * c.kv_cache_free_gpu_mem_fraction;
    tokens = static_cast<int64_t>(budget / static_cast<double>(bytes_per_token));
    if (c.max_tokens_in_paged_kv_cache > 0) tokens = std::min(tokens, c.max_tokens_in_paged_kv_cache);
    require_config(tokens >= c.tokens_per_block,
                   "the device has room for only " + std::to_string(tokens) + " KV tokens (" +
                       std::to_string(m.model->device_free_bytes() >> 20) + " MiB free x kv_cache_free_gpu_mem_fraction " +
                       std::to_string(c.kv_cache_free_gpu_mem_fraction) + "); free device memory or use a smaller model");
  } else if (c.max_tokens_in_paged_kv_cache > 0) {
    tokens = c.max_tokens_in_paged_kv_cache;
  } else if (c.kv_cache_memory_bytes > 0) {
    require_config(bytes_per_token > 0, "kv_cache_memory_bytes is set but the model reports 0 KV bytes per token");
    tokens = c.kv_cache_memory_bytes / static_cast<int64_t>(bytes_per_token);
    require_config(tokens > 0, "kv_cache_memory_bytes " + std::to_string(c.kv_cache_memory_bytes) +
                                   " is smaller than one token's KV (" + std::to_string(bytes_per_token) + " bytes)");
  } else {
    tokens = static_cast<int64_t>(c.max_batch_size) * c.max_seq_len;
  }
  const int64_t blocks = (tokens + c.tokens_per_block - 1) / c.tokens_per_block;
  require_config(blocks <= INT32_MAX, "KV cache of " + std::to_string(blocks) + " blocks is too large");
  if (c.enable_kv_cache_reuse && c.kv_cache_event_buffer_max_size > 0) {
    // window_size as TensorRT-LLM reports it: the attention window the pool's blocks serve.
    const int32_t window = kv_release_window(mc, c.max_attention_window);
    m.kv_events = std::make_unique<KvCacheEventBuffer>(c.kv_cache_event_buffer_max_size,
                                                       window > 0 ? std::min(window, c.max_seq_len) : c.max_seq_len);
  }
  if (m.draft_model) {
    const int64_t guess_blocks = (kMaxDraftTokens + c.tokens_per_block - 1) / c.tokens_per_block;
    const int64_t draft_blocks =
        std::min<int64_t>(INT32_MAX, blocks + static_cast<int64_t>(c.max_batch_size) * guess_blocks);
    m.draft_kv = KvCacheManager(static_cast<int32_t>(draft_blocks), c.tokens_per_block, false, nullptr);
    m.draft_model->allocate_kv(static_cast<int32_t>(draft_blocks), c.tokens_per_block);
    m.draft_bytes = static_cast<int64_t>(m.draft_model->weight_bytes() + m.draft_model->activation_bytes()) +
                    draft_blocks * c.tokens_per_block * static_cast<int64_t>(draft_bytes_per_token);
    m.draft_kv_snapshot = m.draft_kv.stats();
  }
  m.kv = KvCacheManager(static_cast<int32_t>(blocks), c.tokens_per_block, c.enable_kv_cache_reuse, m.kv_events.get());
  m.model->allocate_kv(static_cast<int32_t>(blocks), c.tokens_per_block);
  m.kv_pool_bytes = blocks * c.tokens_per_block * static_cast<int64_t>(m.model->kv_bytes_per_token());
  m.kv_snapshot = m.kv.stats();
  m.kv_dtype = m.model->kv_cache_dtype();
  m.tp_all_reduce = m.model->tp_all_reduce();

  m.limits.vocab_size = m.vocab_size;
  m.limits.max_seq_len = c.max_seq_len;
  m.limits.max_num_tokens = c.max_num_tokens;
  m.limits.max_beam_width = c.max_beam_width;
  m.limits.enable_chunked_context = c.enable_chunked_context;
  m.limits.kv_num_blocks = static_cast<int32_t>(blocks);
  m.limits.kv_tokens_per_block = c.tokens_per_block;
  m.limits.max_logits_elements = c.max_logits_elements;
  m.limits.layer_window = mc.layer_window;
  m.limits.num_layers = mc.num_layers;
  m.limits.max_attention_window = c.max_attention_window;
  m.limits.hidden_size = mc.hidden_size;
  m.limits.prompt_tables = m.model->supports_prompt_tables();
  m.limits.prompt_table_refusal = "this model does not embed virtual tokens (p-tuning)";

  if (c.guided_decoding) m.setup_guided_decoding();

  const int32_t depth = std::max(1, m.model->pipeline_depth());
  m.micro_batches = c.pp_micro_batches == 0 ? depth : std::min(c.pp_micro_batches, depth);

  m.scheduler_config.policy = c.policy;
  m.scheduler_config.max_batch_size = c.max_batch_size;
  m.scheduler_config.max_num_tokens = c.max_num_tokens;
  m.scheduler_config.tokens_per_block = c.tokens_per_block;
  m.scheduler_config.enable_chunked_context = c.enable_chunked_context;
  m.scheduler_config.max_loras = max_loras;

  m.epoch = std::chrono::steady_clock::now();
  m.thread = std::thread([&m] { m.run_loop(); });
}

Executor::~Executor() {
  try {
    shutdown();
  } catch (...) {
    // A destructor must not throw; shutdown only fails on a broken join, and there is nothing left to do then.
  }
}

RequestId Executor::enqueue(const Request& request) {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    if (m.stopping) throw EngineError(ErrorCode::shutdown, "the executor is shut down; enqueue refused");
  }
  validate_request(request, m.limits);  // no lock needed: limits are immutable
  auto seq = std::make_unique<Sequence>();
  seq->request = request;
  seq->tokens = request.input_token_ids;
  seq->prompt_len = static_cast<int32_t>(request.input_token_ids.size());
  seq->window_cap = sequence_window_cap(m.config.max_attention_window, request.max_attention_window);
  seq->release_window = seq->is_beam_search() ? 0 : kv_release_window(m.model_config, seq->window_cap);
  seq->arrival_time = m.now();
  seq->matcher = guide_matcher(request, m.grammars.get());
  seq->lora = m.resolve_lora(request);
  if (seq->request.lora) seq->request.lora->adapter.reset();  // the sequence holds it (seq->lora)

  RequestId id;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    if (m.stopping) throw EngineError(ErrorCode::shutdown, "the executor is shut down; enqueue refused");
    if (m.config.max_queue_size > 0 && m.num_queued >= m.config.max_queue_size) {
      throw EngineError(ErrorCode::queue_full,
                        "Maximum queue size of " + std::to_string(m.config.max_queue_size) + " has been reached");
    }
    id = m.next_id++;
    seq->id = id;
    ++m.num_queued;
    ++m.num_active;
    m.incoming.push_back(std::move(seq));
    if (m.loop_state == LoopState::idle) m.loop_state = LoopState::running;  // about to wake: not idle any more
  }
  m.wake.notify_one();
  return id;
}

void Executor::cancel(RequestId id) {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    if (m.stopping) return;  // shutdown cancels everything anyway
    m.cancels.push_back(id);
    // About to wake and apply it (also when held): until it has, the loop is neither idle nor held.
    if (m.loop_state != LoopState::running) m.loop_state = LoopState::running;
  }
  m.wake.notify_one();
}

std::vector<Response> Executor::await_responses(std::chrono::milliseconds timeout) {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lock(m.mu);
  m.responses_cv.wait_for(lock, timeout, [&] { return (!m.callback && !m.responses.empty()) || m.loop_done; });
  std::vector<Response> out;
  if (m.callback) return out;
  out.reserve(m.responses.size());
  for (Response& r : m.responses) out.push_back(std::move(r));
  m.responses.clear();
  return out;
}

void Executor::set_response_callback(std::function<void(std::vector<Response>&&)> callback) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  m.callback = std::move(callback);
  m.responses_cv.notify_all();
}

std::deque<IterationStats> Executor::get_latest_iteration_stats() {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  std::deque<IterationStats> out;
  out.swap(m.iteration_stats);
  return out;
}

KvCacheStats Executor::kv_cache_stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->kv_snapshot;
}

KvCacheStats Executor::draft_kv_cache_stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->draft_kv_snapshot;
}

std::deque<KvCacheEvent> Executor::get_latest_kv_cache_events() {
  return impl_->kv_events ? impl_->kv_events->drain() : std::deque<KvCacheEvent>{};
}

int64_t Executor::kv_cache_events_dropped() const {
  return impl_->kv_events ? impl_->kv_events->num_dropped() : 0;
}

int32_t Executor::num_active_requests() const { return impl_->num_active.load(); }

const ModelConfig& Executor::model_config() const { return impl_->model_config; }
std::string Executor::kv_cache_dtype() const { return impl_->kv_dtype; }
std::string Executor::tp_all_reduce() const { return impl_->tp_all_reduce; }

int32_t Executor::pp_micro_batches() const { return impl_->micro_batches; }

void Executor::free_models() {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> join_lock(m.join_mu);
  if (m.thread.joinable()) return;
  m.model.reset();
  m.draft_model.reset();
}

const ExecutorConfig& Executor::config() const { return impl_->config; }

void Executor::shutdown() {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.stopping = true;
  }
  m.wake.notify_one();
  // Called from the response callback (the loop thread itself): the loop exits after this iteration; the join
  // happens in the destructor or a later shutdown() from another thread.
  if (std::this_thread::get_id() == m.thread.get_id()) return;
  // Only one caller joins; a concurrent second shutdown() waits for the first here.
  std::lock_guard<std::mutex> join_lock(m.join_mu);
  if (m.thread.joinable()) m.thread.join();
}

void Executor::hold_iterations(int64_t n) {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.hold_allowance = n < 0 ? -1 : n;
    // A held loop is about to re-check its allowance: until it has, it is neither held nor idle.
    if (n != 0 && m.loop_state == LoopState::held) m.loop_state = LoopState::running;
  }
  m.wake.notify_one();
}

bool Executor::wait_until_held(std::chrono::milliseconds timeout) {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lock(m.mu);
  m.parked_cv.wait_for(lock, timeout, [&] { return m.loop_done || m.loop_state == LoopState::held; });
  return !m.loop_done && m.loop_state == LoopState::held;
}

bool Executor::wait_until_idle(std::chrono::milliseconds timeout) {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lock(m.mu);
  m.parked_cv.wait_for(lock, timeout, [&] { return m.loop_done || m.loop_state == LoopState::idle; });
  return !m.loop_done && m.loop_state == LoopState::idle;
}

void Executor::hold_guide_masks(bool held) {
  if (impl_->grammars) impl_->grammars->hold_background(held);
}

int64_t Executor::iterations_run() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->iterations_done;
}

}  // namespace engine
