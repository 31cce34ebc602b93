#include "addon-convert.h"

#include <cstring>
#include <memory>
#include <system_error>
#include <thread>
#include <utility>

#include "addon-args.h"
#include "lora/lora-tensors.h"

namespace addon {
namespace {

Napi::Array int_array(Napi::Env env, const std::vector<int32_t>& values) {
  Napi::Array a = Napi::Array::New(env, values.size());
  for (size_t i = 0; i < values.size(); ++i) a.Set(static_cast<uint32_t>(i), Napi::Number::New(env, values[i]));
  return a;
}

Napi::Array float_array(Napi::Env env, const std::vector<float>& values) {
  Napi::Array a = Napi::Array::New(env, values.size());
  for (size_t i = 0; i < values.size(); ++i) a.Set(static_cast<uint32_t>(i), Napi::Number::New(env, values[i]));
  return a;
}

// The finalizer runs on the JS thread, inside a garbage collection: giving 268 MB back to the system there (unmapping
// its pages) held the event loop ~13 ms. Vectors of a few MiB and more are freed on a thread of their own.
constexpr size_t kFreeOffThreadBytes = size_t{4} << 20;

void release_floats(napi_env, void*, void* hint) {
  std::unique_ptr<std::vector<float>> owned(static_cast<std::vector<float>*>(hint));
  if (owned->size() * sizeof(float) < kFreeOffThreadBytes) return;
  try {
    std::thread([v = std::move(owned)]() mutable { v.reset(); }).detach();
  } catch (const std::system_error&) {
    // No thread to be had: free it here, as before.
  }
}

// Logits can be large ([prompt, vocab]: 268 MB for 2,097 tokens of a 32k vocabulary): the engine's vector is moved
// under an external ArrayBuffer, which frees it when JS lets the array go, instead of being copied on the main
// thread (130-160 ms for 268 MB, during which no other request is served). Where the runtime refuses external
// buffers (a V8 sandbox), one copy.
Napi::Float32Array float32(Napi::Env env, std::vector<float>&& values) {
  auto* owned = new std::vector<float>(std::move(values));
  const size_t n = owned->size();
  napi_value buffer = nullptr;
  const napi_status status = napi_create_external_arraybuffer(
      env, owned->data(), n * sizeof(float), release_floats, owned, &buffer);
  if (status != napi_ok) {
    Napi::Float32Array out = Napi::Float32Array::New(env, n);
    std::memcpy(out.Data(), owned->data(), n * sizeof(float));
    delete owned;
    return out;
  }
  return Napi::Float32Array::New(env, n, Napi::ArrayBuffer(env, buffer), 0);
}

// [rows, cols] of a LoRA tensor: two integers >= 1 whose product is the array's length (the facade checked it;
// this guards a caller that bypassed it, as the Fields readers do).
std::pair<int64_t, int64_t> matrix_shape(Napi::Env env, const Fields& f, const char* key, size_t length) {
  const std::vector<int32_t> shape = f.int_array(key);
  if (shape.size() != 2 || shape[0] < 1 || shape[1] < 1 ||
      static_cast<size_t>(shape[0]) * static_cast<size_t>(shape[1]) != length) {
    throw make_error(env, "invalid_argument",
                     std::string("field 'lora.") + key + "' must be [rows, cols] holding the array's " + std::to_string(length) + " values");
  }
  return {shape[0], shape[1]};
}

// A request's LoRA: its task id and, when it brings its adapter, the adapter read from TensorRT-LLM's tensors here,
// on the JS thread, against the executor's model (the engine names lora_weights / lora_config and the row at fault).
engine::LoraRequest to_lora_request(Napi::Env env, const Fields& l, const engine::Executor& executor) {
  engine::LoraRequest lora;
  const int64_t task_id = l.integer("taskId", -1);
  if (task_id < 0) throw make_error(env, "invalid_argument", "field 'lora.taskId' must be an integer >= 0");
  lora.task_id = static_cast<uint64_t>(task_id);
  if (!l.has("weights") && !l.has("config")) return lora;
  auto weights = l.typed_array<Napi::Float32Array>("weights", napi_float32_array, "a Float32Array");
  auto config = l.typed_array<Napi::Int32Array>("config", napi_int32_array, "an Int32Array");
  const auto [rows, cols] = matrix_shape(env, l, "weightsShape", weights.ElementLength());
  const auto [config_rows, config_cols] = matrix_shape(env, l, "configShape", config.ElementLength());
  try {
    lora.adapter = std::make_shared<const engine::LoraAdapter>(engine::lora_from_tensors(
        executor.model_config(), executor.config().lora.max_adapter_size, weights.Data(), rows, cols, config.Data(),
        config_rows, config_cols));
  } catch (const engine::EngineError& e) {
    throw from_engine_error(env, e);
  }
  return lora;
}

// A request's p-tuning table ([rows, hidden] floats; the facade checked the shape against the array). What the
// rows must be for the model (its hidden_size, finite values, the ids they serve) is validate_request's check.
std::shared_ptr<const engine::PromptTable> to_prompt_table(Napi::Env env, const Fields& p) {
  auto table = p.typed_array<Napi::Float32Array>("embeddingTable", napi_float32_array, "a Float32Array");
  const std::vector<int32_t> shape = p.int_array("shape");
  if (shape.size() != 2 || shape[0] < 1 || shape[1] < 1 ||
      static_cast<size_t>(shape[0]) * static_cast<size_t>(shape[1]) != table.ElementLength()) {
    throw make_error(env, "invalid_argument", "field 'promptTuning.shape' must be [rows, hidden] holding the table's " +
                                                  std::to_string(table.ElementLength()) + " values");
  }
  return engine::make_prompt_table(shape[0], shape[1], std::vector<float>(table.Data(), table.Data() + table.ElementLength()));
}

}  // namespace

engine::Request to_request(Napi::Env env, Napi::Object object, const engine::Executor& executor) {
  Fields f(env, object, "");
  engine::Request r;
  r.input_token_ids = f.int_array("inputTokenIds");
  r.max_tokens = static_cast<int32_t>(f.integer("maxTokens", 0));
  r.streaming = f.boolean("streaming", false);
  r.end_id = static_cast<int32_t>(f.integer("endId", -1));
  r.pad_id = static_cast<int32_t>(f.integer("padId", -1));
  r.stop_words = f.int_array_list("stopWords");
  r.bad_words = f.int_array_list("badWords");
  if (f.has("clientId")) r.client_id = static_cast<uint64_t>(f.integer("clientId", 0));
  r.embedding_bias = f.float_array("embeddingBias");
  r.num_return_sequences = static_cast<int32_t>(f.integer("numReturnSequences", r.num_return_sequences));
  r.max_attention_window = f.int32("maxAttentionWindow", r.max_attention_window);
  r.num_draft_tokens = f.int32("numDraftTokens", r.num_draft_tokens);

  Fields s = f.child("sampling");
  engine::SamplingConfig& c = r.sampling;
  c.beam_width = static_cast<int32_t>(s.integer("beamWidth", c.beam_width));
  c.temperature = static_cast<float>(s.number("temperature", c.temperature));
  c.top_k = static_cast<int32_t>(s.integer("topK", c.top_k));
  if (s.has("topP")) c.top_p = static_cast<float>(s.number("topP", 1.0));
  if (s.has("seed")) c.seed = static_cast<uint64_t>(s.integer("seed", 0));
  c.repetition_penalty = static_cast<float>(s.number("repetitionPenalty", c.repetition_penalty));
  c.presence_penalty = static_cast<float>(s.number("presencePenalty", c.presence_penalty));
  c.frequency_penalty = static_cast<float>(s.number("frequencyPenalty", c.frequency_penalty));
  c.min_tokens = static_cast<int32_t>(s.integer("minTokens", c.min_tokens));
  c.length_penalty = static_cast<float>(s.number("lengthPenalty", c.length_penalty));
  c.early_stopping = static_cast<int32_t>(s.integer("earlyStopping", c.early_stopping));
  c.beam_search_diversity_rate = static_cast<float>(s.number("beamSearchDiversityRate", c.beam_search_diversity_rate));

  if (f.has("guidedDecoding")) {
    Fields g = f.child("guidedDecoding");
    const std::string type = g.string("guideType", "");
    engine::GuidedDecodingParams p;
    if (type == "json") p.guide_type = engine::GuideType::json;
    else if (type == "json_schema") p.guide_type = engine::GuideType::json_schema;
    else if (type == "regex") p.guide_type = engine::GuideType::regex;
    else if (type == "ebnf_grammar") p.guide_type = engine::GuideType::ebnf_grammar;
    else throw make_error(env, "invalid_argument", "field 'guidedDecoding.guideType' must be 'json', 'json_schema', 'regex' or 'ebnf_grammar', got '" + type + "'");
    p.guide = g.string("guide", "");
    r.guided_decoding = std::move(p);
  }

  Fields o = f.child("output");
  r.output.return_log_probs = o.boolean("returnLogProbs", false);
  r.output.return_context_logits = o.boolean("returnContextLogits", false);
  r.output.return_generation_logits = o.boolean("returnGenerationLogits", false);
  r.output.exclude_input_from_output = o.boolean("excludeInputFromOutput", false);

  if (f.has("lora")) r.lora = to_lora_request(env, f.child("lora"), executor);
  if (f.has("promptTuning")) r.prompt_table = to_prompt_table(env, f.child("promptTuning"));
  return r;
}

namespace {

// addon-types.ts's NativeLoraConfig: the preloaded adapters (task id, PEFT directory) and the cache sizes, each
// absent field the engine's default.
engine::ExecutorConfig::LoraConfig to_lora_config(Napi::Env env, const Fields& l) {
  engine::ExecutorConfig::LoraConfig c;
  c.enabled = l.boolean("enabled", c.enabled);
  const Napi::Array preloaded = l.array("preloaded");
  for (uint32_t i = 0; i < preloaded.Length(); ++i) {
    const std::string where = "lora.preloaded[" + std::to_string(i) + "]";
    Napi::Value v = preloaded.Get(i);
    if (!v.IsObject()) throw make_error(env, "invalid_argument", "field '" + where + "' must be an object {taskId, dir}");
    Fields p(env, v.As<Napi::Object>(), where + ".");
    const int64_t task_id = p.integer("taskId", -1);
    if (task_id < 0) throw make_error(env, "invalid_argument", "field '" + where + ".taskId' must be an integer >= 0");
    const std::string dir = p.string("dir", "");
    if (dir.empty()) throw make_error(env, "invalid_argument", "field '" + where + ".dir' must be a non-empty string");
    c.preloaded.emplace_back(static_cast<uint64_t>(task_id), dir);
  }
  c.max_loras = l.int32("maxLoras", c.max_loras);
  c.max_adapter_size = l.int32("maxAdapterSize", c.max_adapter_size);
  c.optimal_adapter_size = l.int32("optimalAdapterSize", c.optimal_adapter_size);
  c.gpu_memory_fraction = static_cast<float>(l.number("gpuMemoryFraction", c.gpu_memory_fraction));
  c.host_memory_bytes = l.integer("hostMemoryBytes", c.host_memory_bytes);
  return c;
}

}  // namespace

engine::ExecutorConfig to_executor_config(Napi::Env env, Napi::Object object) {
  Fields f(env, object, "");
  engine::ExecutorConfig c;
  c.max_beam_width = static_cast<int32_t>(f.integer("maxBeamWidth", c.max_beam_width));
  c.ngram_speculation.max_draft_tokens = f.int32("ngramDraftTokens", c.ngram_speculation.max_draft_tokens);
  c.draft_model_tokens = f.int32("draftModelTokens", c.draft_model_tokens);
  c.medusa_choices = f.int_array_list("medusaChoices");
  c.eagle_choices = f.int_array_list("eagleChoices");
  c.speculation_max_batch = f.int32("speculationMaxBatch", c.speculation_max_batch);
  c.max_batch_size = static_cast<int32_t>(f.integer("maxBatchSize", c.max_batch_size));
  c.max_num_tokens = static_cast<int32_t>(f.integer("maxNumTokens", c.max_num_tokens));
  c.max_queue_size = static_cast<int32_t>(f.integer("maxQueueSize", c.max_queue_size));
  c.max_seq_len = static_cast<int32_t>(f.integer("maxSeqLen", c.max_seq_len));
  std::string policy = f.string("schedulerPolicy", "guaranteed_no_evict");
  if (policy == "max_utilization") {
    c.policy = engine::CapacitySchedulerPolicy::max_utilization;
  } else if (policy == "guaranteed_no_evict") {
    c.policy = engine::CapacitySchedulerPolicy::guaranteed_no_evict;
  } else {
    throw make_error(env, "invalid_argument",
                     "field 'schedulerPolicy' must be 'max_utilization' or 'guaranteed_no_evict', got '" + policy + "'");
  }
  c.tokens_per_block = static_cast<int32_t>(f.integer("tokensPerBlock", c.tokens_per_block));
  c.max_tokens_in_paged_kv_cache = f.integer("maxTokensInPagedKvCache", c.max_tokens_in_paged_kv_cache);
  c.kv_cache_memory_bytes = f.integer("kvCacheMemoryBytes", c.kv_cache_memory_bytes);
  c.enable_chunked_context = f.boolean("enableChunkedContext", c.enable_chunked_context);
  c.enable_kv_cache_reuse = f.boolean("enableKvCacheReuse", c.enable_kv_cache_reuse);
  c.kv_cache_event_buffer_max_size = f.int32("kvCacheEventBufferMaxSize", c.kv_cache_event_buffer_max_size);
  c.max_attention_window = f.int32("maxAttentionWindow", c.max_attention_window);
  c.iter_stats_max_iterations = static_cast<int32_t>(f.integer("iterStatsMaxIterations", c.iter_stats_max_iterations));
  c.max_logits_elements = f.integer("maxLogitsElements", c.max_logits_elements);
  c.pp_micro_batches = f.int32("ppMicroBatches", c.pp_micro_batches);
  c.kv_cache_free_gpu_mem_fraction =
      static_cast<float>(f.number("kvCacheFreeGpuMemFraction", c.kv_cache_free_gpu_mem_fraction));
  if (f.has("lora")) c.lora = to_lora_config(env, f.child("lora"));
  if (f.has("guidedDecoding")) {
    Fields g = f.child("guidedDecoding");
    auto bytes = g.typed_array<Napi::Uint8Array>("tokenBytes", napi_uint8_array, "a Uint8Array");
    auto offsets = g.typed_array<Napi::Int32Array>("tokenOffsets", napi_int32_array, "an Int32Array");
    const size_t n = offsets.ElementLength();
    if (n == 0 || offsets[0] != 0 || static_cast<size_t>(offsets[n - 1]) != bytes.ElementLength()) {
      throw make_error(env, "invalid_argument",
                       "field 'guidedDecoding.tokenOffsets' must start at 0 and end at tokenBytes.length (" +
                           std::to_string(bytes.ElementLength()) + ")");
    }
    engine::ExecutorConfig::GuidedDecodingConfig gd;
    gd.encoded_vocab.reserve(n - 1);
    for (size_t i = 0; i + 1 < n; ++i) {
      if (offsets[i + 1] < offsets[i]) {
        throw make_error(env, "invalid_argument", "field 'guidedDecoding.tokenOffsets' decreases at index " + std::to_string(i + 1));
      }
      gd.encoded_vocab.emplace_back(reinterpret_cast<const char*>(bytes.Data()) + offsets[i],
                                    static_cast<size_t>(offsets[i + 1] - offsets[i]));
    }
    c.guided_decoding = std::move(gd);
  }
  return c;
}

DeviceFields to_device_fields(Napi::Env env, Napi::Object load_options, const engine::ExecutorConfig* config) {
  Fields f(env, load_options, "");
  DeviceFields d;
  const std::string device = f.string("device", "cpu");
  if (device == "cpu") d.device = engine::Device::cpu;
  else if (device == "cuda") d.device = engine::Device::cuda;
  else if (device == "auto") d.device = engine::Device::auto_select;
  else throw make_error(env, "invalid_argument", "field 'device' must be 'auto', 'cpu' or 'cuda', got '" + device + "'");
  d.load_format = f.string("loadFormat", d.load_format);
  if (d.load_format != "auto" && d.load_format != "dummy")
    throw make_error(env, "invalid_argument", "field 'loadFormat' must be 'auto' or 'dummy', got '" + d.load_format + "'");
  const std::string q = f.string("quantization", "none");
  if (q != "none" && q != "fp8")
    throw make_error(env, "invalid_argument", "field 'quantization' must be 'none' or 'fp8', got '" + q + "'");
  d.quantization = q == "none" ? "" : q;
  d.kv_cache_dtype = f.string("kvCacheDtype", d.kv_cache_dtype);
  if (d.kv_cache_dtype != "auto" && d.kv_cache_dtype != "fp8")
    throw make_error(env, "invalid_argument", "field 'kvCacheDtype' must be 'auto' or 'fp8', got '" + d.kv_cache_dtype + "'");
  d.dtype = f.string("dtype", d.dtype);
  d.pp_layers = f.string("ppLayers", d.pp_layers);
  d.gpu_device = static_cast<int32_t>(f.integer("gpuDeviceId", d.gpu_device));
  if (config != nullptr) {
    d.max_num_tokens = config->max_num_tokens;
    d.max_batch_size = config->max_batch_size;
  } else {
    d.max_num_tokens = static_cast<int32_t>(f.integer("maxNumTokens", d.max_num_tokens));
    d.max_batch_size = static_cast<int32_t>(f.integer("maxBatchSize", d.max_batch_size));
  }
  return d;
}

int32_t to_num_threads(Napi::Env env, Napi::Object object) {
  return static_cast<int32_t>(Fields(env, object, "").integer("numThreads", 0));
}

Napi::Object from_response(Napi::Env env, engine::Response& response) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("requestId", Napi::Number::New(env, static_cast<double>(response.request_id)));
  if (response.client_id) o.Set("clientId", Napi::Number::New(env, static_cast<double>(*response.client_id)));
  if (response.has_error) {
    Napi::Object e = Napi::Object::New(env);
    e.Set("code", engine::error_code_name(response.error_code));
    e.Set("message", response.error_message);
    o.Set("error", e);
    o.Set("isFinal", true);
    return o;
  }
  engine::Result& r = response.result;
  o.Set("isFinal", r.is_final);
  Napi::Array beams = Napi::Array::New(env, r.output_token_ids.size());
  for (size_t b = 0; b < r.output_token_ids.size(); ++b) beams.Set(static_cast<uint32_t>(b), int_array(env, r.output_token_ids[b]));
  o.Set("outputTokenIds", beams);
  Napi::Array reasons = Napi::Array::New(env, r.finish_reasons.size());
  for (size_t b = 0; b < r.finish_reasons.size(); ++b) reasons.Set(static_cast<uint32_t>(b), engine::finish_reason_name(r.finish_reasons[b]));
  o.Set("finishReasons", reasons);
  if (!r.cum_log_probs.empty()) o.Set("cumLogProbs", float_array(env, r.cum_log_probs));
  if (!r.log_probs.empty()) {
    Napi::Array lp = Napi::Array::New(env, r.log_probs.size());
    for (size_t b = 0; b < r.log_probs.size(); ++b) lp.Set(static_cast<uint32_t>(b), float_array(env, r.log_probs[b]));
    o.Set("logProbs", lp);
  }
  if (!r.context_logits.empty()) o.Set("contextLogits", float32(env, std::move(r.context_logits)));
  if (!r.generation_logits.empty()) o.Set("generationLogits", float32(env, std::move(r.generation_logits)));
  o.Set("vocabSize", r.vocab_size);
  Napi::Object t = Napi::Object::New(env);
  t.Set("arrival", r.arrival_time);
  t.Set("firstScheduled", r.first_scheduled_time);
  t.Set("firstToken", r.first_token_time);
  t.Set("lastToken", r.last_token_time);
  o.Set("timings", t);
  return o;
}

Napi::Object from_kv_cache_stats(Napi::Env env, const engine::KvCacheStats& s) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("maxNumBlocks", s.max_num_blocks);
  o.Set("freeNumBlocks", s.free_num_blocks);
  o.Set("usedNumBlocks", s.used_num_blocks);
  o.Set("tokensPerBlock", s.tokens_per_block);
  o.Set("allocTotalBlocks", static_cast<double>(s.alloc_total_blocks));
  o.Set("allocNewBlocks", static_cast<double>(s.alloc_new_blocks));
  o.Set("reusedBlocks", static_cast<double>(s.reused_blocks));
  return o;
}

namespace {

// 64-bit block hashes as decimal strings: exact in JS (a Number keeps only 53 bits), so a client's index keyed by
// block hash matches later parent hashes exactly.
Napi::String hash_string(Napi::Env env, uint64_t hash) { return Napi::String::New(env, std::to_string(hash)); }

const char* kv_event_type_name(engine::KvCacheEventType t) {
  switch (t) {
    case engine::KvCacheEventType::created: return "created";
    case engine::KvCacheEventType::stored: return "stored";
    case engine::KvCacheEventType::removed: return "removed";
  }
  return "unknown";
}

}  // namespace

Napi::Object from_kv_cache_event(Napi::Env env, const engine::KvCacheEvent& e) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("eventId", static_cast<double>(e.event_id));
  o.Set("windowSize", e.window_size);
  o.Set("type", kv_event_type_name(e.type));
  switch (e.type) {
    case engine::KvCacheEventType::created:
      o.Set("numBlocks", e.num_blocks);
      break;
    case engine::KvCacheEventType::stored: {
      o.Set("parentHash", e.has_parent ? Napi::Value(hash_string(env, e.parent_hash)) : env.Null());
      Napi::Array blocks = Napi::Array::New(env, e.blocks.size());
      for (size_t i = 0; i < e.blocks.size(); ++i) {
        Napi::Object b = Napi::Object::New(env);
        b.Set("blockHash", hash_string(env, e.blocks[i].block_hash));
        Napi::Array tokens = Napi::Array::New(env, e.blocks[i].tokens.size());
        for (size_t j = 0; j < e.blocks[i].tokens.size(); ++j) tokens.Set(static_cast<uint32_t>(j), e.blocks[i].tokens[j]);
        b.Set("tokens", tokens);
        blocks.Set(static_cast<uint32_t>(i), b);
      }
      o.Set("blocks", blocks);
      break;
    }
    case engine::KvCacheEventType::removed: {
      Napi::Array hashes = Napi::Array::New(env, e.removed_hashes.size());
      for (size_t i = 0; i < e.removed_hashes.size(); ++i) hashes.Set(static_cast<uint32_t>(i), hash_string(env, e.removed_hashes[i]));
      o.Set("blockHashes", hashes);
      break;
    }
  }
  return o;
}

Napi::Object from_iteration_stats(Napi::Env env, const engine::IterationStats& s) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("timestamp", s.timestamp);
  o.Set("iter", static_cast<double>(s.iter));
  o.Set("iterLatencyMs", s.iter_latency_ms);
  o.Set("numActiveRequests", s.num_active_requests);
  o.Set("numQueuedRequests", s.num_queued_requests);
  o.Set("maxNumActiveRequests", s.max_num_active_requests);
  o.Set("numCompletedRequests", static_cast<double>(s.num_completed_requests));
  o.Set("cpuMemUsage", static_cast<double>(s.cpu_mem_usage));
  o.Set("gpuMemUsage", static_cast<double>(s.gpu_mem_usage));
  o.Set("commSeconds", s.comm_seconds);
  o.Set("commBytes", static_cast<double>(s.comm_bytes));
  o.Set("planBytes", static_cast<double>(s.plan_bytes));
  o.Set("kvCacheStats", from_kv_cache_stats(env, s.kv_cache_stats));
  const engine::InflightBatchingStats& b = s.inflight_batching_stats;
  Napi::Object ib = Napi::Object::New(env);
  ib.Set("numScheduledRequests", b.num_scheduled_requests);
  ib.Set("numContextRequests", b.num_context_requests);
  ib.Set("numGenRequests", b.num_gen_requests);
  ib.Set("numPausedRequests", b.num_paused_requests);
  ib.Set("numCtxTokens", static_cast<double>(b.num_ctx_tokens));
  ib.Set("microBatchId", b.micro_batch_id);
  ib.Set("avgNumDecodedTokensPerIter", b.avg_num_decoded_tokens_per_iter);
  o.Set("inflightBatchingStats", ib);
  Napi::Object sd = Napi::Object::New(env);
  sd.Set("numDraftTokens", static_cast<double>(s.spec_decoding_stats.num_draft_tokens));
  sd.Set("numAcceptedTokens", static_cast<double>(s.spec_decoding_stats.num_accepted_tokens));
  sd.Set("numRequestsWithDraftTokens", s.spec_decoding_stats.num_requests_with_draft_tokens);
  o.Set("specDecodingStats", sd);
  return o;
}

Napi::Object from_model_config(Napi::Env env, const engine::ModelConfig& c, const std::string& kv_cache_dtype,
                               const std::string& tp_all_reduce, int32_t pp_micro_batches) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("architecture", c.architecture == engine::Architecture::llama ? "llama" : "gpt2");
  o.Set("architectureName", c.architecture_name);
  o.Set("vocabSize", c.vocab_size);
  o.Set("hiddenSize", c.hidden_size);
  o.Set("numLayers", c.num_layers);
  o.Set("numHeads", c.num_heads);
  o.Set("numKvHeads", c.num_kv_heads);
  o.Set("headDim", c.head_dim);
  o.Set("intermediateSize", c.intermediate_size);
  o.Set("numExperts", c.moe.num_experts);
  o.Set("expertsPerToken", c.moe.top_k);
  o.Set("maxPositionEmbeddings", c.max_position_embeddings);
  o.Set("tieWordEmbeddings", c.tie_word_embeddings);
  o.Set("bosTokenId", c.bos_token_id);
  o.Set("eosTokenIds", int_array(env, c.eos_token_ids));
  o.Set("padTokenId", c.pad_token_id);
  // "" for 16-bit checkpoints; "fp8 (compressed-tensors, per-channel weight scales, ...)" for FP8 ones.
  o.Set("quantization", c.quant.describe());
  // How the loaded model's KV pool stores K/V ("float32", "bfloat16", "fp8 (e4m3, ...)"); "" before a model loads.
  o.Set("kvCacheDtype", kv_cache_dtype);
  o.Set("tpAllReduce", tp_all_reduce);
  // The loaded executor's pipelined pp: micro-batches kept in flight (1: not pipelined).
  o.Set("ppMicroBatches", pp_micro_batches);
  return o;
}

}  // namespace addon
