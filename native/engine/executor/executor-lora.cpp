// The executor's LoRA: the adapter cache and the model's slots set up at construction, a request's adapter
// resolved at enqueue, and each iteration's chunks given their adapters' slots (lora/lora-cache.h).
#include <algorithm>
#include <string>

#include "executor/executor-impl.h"
#include "lora/peft-adapter.h"

namespace engine {
namespace {

void require_lora(bool ok, const std::string& message) {
  if (!ok) throw EngineError(ErrorCode::invalid_argument, message);
}

// Device bytes of one adapter of `rank` on every module of every layer, in a 16-bit dtype: what a slot is sized for.
size_t adapter_device_bytes(const ModelConfig& mc, int32_t rank) {
  int64_t per_layer = 0;
  for (int32_t id = 1; id < kLoraModuleCount; ++id) {  // attn_qkv (0) is q + k + v again
    try {
      const LoraModuleDims d = lora_module_dims(mc, static_cast<LoraModule>(id));
      per_layer += d.in + d.out;
    } catch (const EngineError&) {
      // a module this model has not (no gated MLP): nothing to size
    }
  }
  return static_cast<size_t>(per_layer) * static_cast<size_t>(rank) * static_cast<size_t>(mc.num_layers) * 2;
}

}  // namespace

size_t Executor::Impl::setup_lora() {
  const ExecutorConfig::LoraConfig& lc = config.lora;
  if (!lc.enabled) {
    require_lora(lc.preloaded.empty(), "LoRA adapters were given to preload but LoRA is not enabled");
    return 0;
  }
  if (!model->supports_lora()) {
    throw EngineError(ErrorCode::unsupported,
                      "LoRA adapters were asked for, but this model's backend has no LoRA support; serve without "
                      "--lora-modules / --enable-lora");
  }
  require_lora(lc.max_adapter_size >= 1, "lora_cache_max_adapter_size must be >= 1, got " +
                                             std::to_string(lc.max_adapter_size));
  require_lora(lc.optimal_adapter_size >= 1 && lc.optimal_adapter_size <= lc.max_adapter_size,
               "lora_cache_optimal_adapter_size must be in [1, lora_cache_max_adapter_size " +
                   std::to_string(lc.max_adapter_size) + "], got " + std::to_string(lc.optimal_adapter_size));
  require_lora(lc.gpu_memory_fraction > 0 && lc.gpu_memory_fraction <= 1,
               "lora_cache_gpu_memory_fraction must be in (0, 1], got " + std::to_string(lc.gpu_memory_fraction));
  require_lora(lc.host_memory_bytes > 0,
               "lora_cache_host_memory_bytes must be > 0, got " + std::to_string(lc.host_memory_bytes));
  require_lora(lc.max_loras >= 0, "max_loras must be >= 0 (0: derived), got " + std::to_string(lc.max_loras));

  const ModelConfig& mc = model_config;
  const int32_t max_rank = lc.max_adapter_size;
  lora_cache = std::make_unique<LoraCache>(lc.host_memory_bytes, lc.preloaded, [mc, max_rank](const std::string& dir) {
    return load_peft_adapter(dir, mc, max_rank);
  });

  int32_t slots = lc.max_loras;
  size_t reserved = 0;
  if (model->on_device()) {
    // TensorRT-LLM's device cache: a fraction of the memory free after the weights, in adapters of the optimal
    // rank; the KV pool is sized from what is left.
    const double budget = static_cast<double>(model->device_free_bytes()) * lc.gpu_memory_fraction;
    const size_t per_adapter = std::max<size_t>(1, adapter_device_bytes(mc, lc.optimal_adapter_size));
    if (slots == 0) slots = static_cast<int32_t>(std::clamp<double>(budget / per_adapter, 1.0, config.max_batch_size));
    reserved = static_cast<size_t>(budget);
  } else if (slots == 0) {
    slots = config.max_batch_size;  // host models: an adapter's slice is held in host memory like the cache's
  }
  lora_slots = std::make_unique<LoraSlots>(slots);
  scheduler_config.max_loras = slots;
  return reserved;
}

CachedLora Executor::Impl::resolve_lora(const Request& r) {
  if (!r.lora) return {};
  const std::string id = std::to_string(r.lora->task_id);
  if (!lora_cache) {
    throw EngineError(ErrorCode::invalid_argument,
                      "lora_task_id " + id + ": LoRA is not enabled on this server; start it with --lora-modules "
                      "name=DIR or --enable-lora");
  }
  if (r.lora->adapter) {
    check_lora_adapter(*r.lora->adapter, model_config, config.lora.max_adapter_size, "lora_weights");
    return lora_cache->put(r.lora->task_id, r.lora->adapter);
  }
  std::optional<CachedLora> cached = lora_cache->get(r.lora->task_id);
  if (!cached) {
    throw EngineError(ErrorCode::invalid_argument,
                      "lora_task_id " + id + " is not in the LoRA cache (never sent, or evicted since): send the "
                      "adapter's lora_weights and lora_config with it");
  }
  return *cached;
}

void Executor::Impl::assign_lora_slots(IterationBatch& b, std::vector<Response>& out) {
  if (!lora_slots) return;
  // A slot keeps its adapter while any running sequence uses it: this pass's chunks, micro-batches still in flight
  // (pipelined pp), and those that got no chunk this time (no reload churn). The scheduler admits no more distinct
  // adapters than slots (SchedulerConfig::max_loras), so a slot is always left for a running sequence's adapter.
  auto in_use = [this](uint64_t key) {
    for (const Sequence* r : running)
      if (r->lora.key == key) return true;
    return false;
  };
  for (size_t i = 0; i < b.chunks.size(); ++i) {
    Sequence* s = b.seqs[i];
    if (s->lora.key == 0 || s->is_finished()) continue;
    bool load = false;
    const int32_t slot = lora_slots->assign(s->lora.key, in_use, &load);
    if (slot >= 0 && load) {
      try {
        model->load_lora(slot, *s->lora.adapter);
      } catch (const std::exception& e) {
        lora_slots->clear(slot);
        fail_sequence(*s, ErrorCode::internal, std::string("loading its LoRA adapter failed: ") + e.what(), out);
        continue;
      }
    }
    if (slot < 0) {  // the scheduler admits no more adapters than slots, so this is a bug
      fail_sequence(*s, ErrorCode::internal, "no LoRA slot free for a scheduled request (scheduler bug)", out);
      continue;
    }
    b.chunks[i].lora_slot = slot;
  }
  // Chunks of sequences failed above leave the batch, as build_chunks' own failures never enter it.
  for (size_t i = b.chunks.size(); i-- > 0;) {
    if (!b.seqs[i]->is_finished()) continue;
    b.seqs.erase(b.seqs.begin() + static_cast<std::ptrdiff_t>(i));
    b.chunks.erase(b.chunks.begin() + static_cast<std::ptrdiff_t>(i));
    b.ctx_rows_from.erase(b.ctx_rows_from.begin() + static_cast<std::ptrdiff_t>(i));
    b.ctx_rows_to.erase(b.ctx_rows_to.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

}  // namespace engine
