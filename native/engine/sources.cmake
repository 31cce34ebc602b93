# Engine sources, listed explicitly, one list per folder (a folder is one concept of the engine; README.md's
# Layout says which). Paths relative to this file. The CUDA backend's sources are in cuda/cuda.cmake.
set(ENGINE_DIR ${CMAKE_CURRENT_LIST_DIR})
set(ENGINE_COMMON_SOURCES
  ${ENGINE_DIR}/errors.cpp
)
# Model families: the decoder both families reduce to, their checkpoint mappings, dummy weights.
set(ENGINE_MODEL_SOURCES
  ${ENGINE_DIR}/model/model.cpp
  ${ENGINE_DIR}/model/model-config.cpp
  ${ENGINE_DIR}/model/model-checks.cpp
  ${ENGINE_DIR}/model/prompt-table.cpp
  ${ENGINE_DIR}/model/batch-layout.cpp
  ${ENGINE_DIR}/model/decoder.cpp
  ${ENGINE_DIR}/model/decoder-moe.cpp
  ${ENGINE_DIR}/model/moe-routing.cpp
  ${ENGINE_DIR}/model/moe-weights.cpp
  ${ENGINE_DIR}/model/llama.cpp
  ${ENGINE_DIR}/model/gpt2.cpp
  ${ENGINE_DIR}/model/dummy-weights.cpp
)
# Checkpoint loading: config.json + safetensors into a Model, and the ranks' agreement that all of them loaded.
set(ENGINE_LOADING_SOURCES
  ${ENGINE_DIR}/loading/json.cpp
  ${ENGINE_DIR}/loading/safetensors.cpp
  ${ENGINE_DIR}/loading/checkpoint.cpp
  ${ENGINE_DIR}/loading/weight-reader.cpp
  ${ENGINE_DIR}/loading/load-model.cpp
  ${ENGINE_DIR}/loading/kv-scales.cpp
  ${ENGINE_DIR}/loading/load-agreement.cpp
)
# Quantized weights: the FP8 matrix format, its encoding and the checkpoint formats that carry it.
set(ENGINE_QUANT_SOURCES
  ${ENGINE_DIR}/quant/fp8-matrix.cpp
  ${ENGINE_DIR}/quant/quant-config.cpp
  ${ENGINE_DIR}/quant/fp8-checkpoint.cpp
)
# CPU kernels (always built; BLAS from OpenBLAS when found).
set(ENGINE_CPU_SOURCES
  ${ENGINE_DIR}/cpu/gemm.cpp
  ${ENGINE_DIR}/cpu/gemm-small-m.cpp
  ${ENGINE_DIR}/cpu/norm.cpp
  ${ENGINE_DIR}/cpu/rope.cpp
  ${ENGINE_DIR}/cpu/activation.cpp
  ${ENGINE_DIR}/cpu/attention.cpp
)
# The paged KV block manager and prefix reuse (bookkeeping only: the model owns the storage).
set(ENGINE_KV_CACHE_SOURCES
  ${ENGINE_DIR}/kv-cache/kv-cache.cpp
  ${ENGINE_DIR}/kv-cache/kv-cache-reuse.cpp
  ${ENGINE_DIR}/kv-cache/kv-cache-fork.cpp
  ${ENGINE_DIR}/kv-cache/kv-cache-events.cpp
  ${ENGINE_DIR}/kv-cache/kv-block-hash.cpp
  ${ENGINE_DIR}/kv-cache/prefix-cache.cpp
)
# Requests and their validation, sequences, the capacity scheduler.
set(ENGINE_SCHEDULING_SOURCES
  ${ENGINE_DIR}/scheduling/request.cpp
  ${ENGINE_DIR}/scheduling/validate.cpp
  ${ENGINE_DIR}/scheduling/scheduler.cpp
)
# Turning logits into tokens: processors, the sampler, stop words, beam search, where each token is drawn.
set(ENGINE_SAMPLING_SOURCES
  ${ENGINE_DIR}/sampling/logits-processors.cpp
  ${ENGINE_DIR}/sampling/sampler.cpp
  ${ENGINE_DIR}/sampling/stop-words.cpp
  ${ENGINE_DIR}/sampling/beam-search.cpp
  ${ENGINE_DIR}/sampling/device-sampling-choice.cpp
  ${ENGINE_DIR}/sampling/guided-masks.cpp
  ${ENGINE_DIR}/sampling/likeliest-allowed.cpp
  ${ENGINE_DIR}/sampling/ngram-draft.cpp
)
# Structured output: guides (JSON Schema, regex, GBNF) compiled to byte-level grammars, and per-request token masks.
set(ENGINE_GRAMMAR_SOURCES
  ${ENGINE_DIR}/grammar/grammar.cpp
  ${ENGINE_DIR}/grammar/graph-components.cpp
  ${ENGINE_DIR}/grammar/rule-cloning.cpp
  ${ENGINE_DIR}/grammar/rule-fixpoints.cpp
  ${ENGINE_DIR}/grammar/utf8-ranges.cpp
  ${ENGINE_DIR}/grammar/gbnf-parser.cpp
  ${ENGINE_DIR}/grammar/grammar-stacks.cpp
  ${ENGINE_DIR}/grammar/token-vocab.cpp
  ${ENGINE_DIR}/grammar/token-walk.cpp
  ${ENGINE_DIR}/grammar/position-signature.cpp
  ${ENGINE_DIR}/grammar/position-walk.cpp
  ${ENGINE_DIR}/grammar/mask-store.cpp
  ${ENGINE_DIR}/grammar/compiled-grammar.cpp
  ${ENGINE_DIR}/grammar/background-masks.cpp
  ${ENGINE_DIR}/grammar/grammar-matcher.cpp
  ${ENGINE_DIR}/grammar/grammar-cache.cpp
  ${ENGINE_DIR}/grammar/gbnf-writer.cpp
  ${ENGINE_DIR}/grammar/regex-to-gbnf.cpp
  ${ENGINE_DIR}/grammar/numeric-range-gbnf.cpp
  ${ENGINE_DIR}/grammar/json-layout.cpp
  ${ENGINE_DIR}/grammar/json-schema-merge.cpp
  ${ENGINE_DIR}/grammar/json-schema-to-gbnf.cpp
)
# The executor: public API, the loop thread and its iteration steps, responses.
set(ENGINE_EXECUTOR_SOURCES
  ${ENGINE_DIR}/executor/executor.cpp
  ${ENGINE_DIR}/executor/executor-loop.cpp
  ${ENGINE_DIR}/executor/executor-guide-wait.cpp
  ${ENGINE_DIR}/executor/executor-pipeline.cpp
  ${ENGINE_DIR}/executor/executor-iteration.cpp
  ${ENGINE_DIR}/executor/iteration-phases.cpp
  ${ENGINE_DIR}/executor/executor-sample.cpp
  ${ENGINE_DIR}/executor/executor-beams.cpp
  ${ENGINE_DIR}/executor/executor-speculation.cpp
  ${ENGINE_DIR}/executor/executor-draft-model.cpp
  ${ENGINE_DIR}/executor/executor-eagle-tree.cpp
  ${ENGINE_DIR}/executor/executor-lora.cpp
  ${ENGINE_DIR}/executor/response-builder.cpp
)
# comm: the only unit that includes mpi.h (and nccl.h: comm-nccl.cpp, added by cuda/cuda.cmake with NCCL); with the
# waits that never hang unnoticed (comm-wait, the liveness watch and its verdict) and the leader's channel to its
# followers (plans, liveness questions, the idle followers' pause and wake link).
set(ENGINE_COMM_SOURCES
  ${ENGINE_DIR}/comm/comm.cpp
  ${ENGINE_DIR}/comm/all-reduce-plan.cpp
  ${ENGINE_DIR}/comm/comm-link.cpp
  ${ENGINE_DIR}/comm/comm-wait.cpp
  ${ENGINE_DIR}/comm/liveness.cpp
  ${ENGINE_DIR}/comm/liveness-questions.cpp
  ${ENGINE_DIR}/comm/liveness-verdict.cpp
  ${ENGINE_DIR}/comm/leader-channel.cpp
  ${ENGINE_DIR}/comm/idle-pause.cpp
  ${ENGINE_DIR}/comm/wake-link.cpp
)
# Leader mode over tp x pp: who holds what, the grid's groups, the plan the leader broadcasts, leader/follower.
set(ENGINE_PARALLEL_SOURCES
  ${ENGINE_DIR}/parallel/parallel-layout.cpp
  ${ENGINE_DIR}/parallel/pp-partition.cpp
  ${ENGINE_DIR}/parallel/parallel-grid.cpp
  ${ENGINE_DIR}/parallel/iteration-plan.cpp
  ${ENGINE_DIR}/parallel/leader-model.cpp
)
# LoRA adapters: the whole-adapter form, its two sources (PEFT directories, TensorRT-LLM's request tensors), a
# rank's slice of it, and the executor's cache of them.
set(ENGINE_LORA_SOURCES
  ${ENGINE_DIR}/lora/lora-adapter.cpp
  ${ENGINE_DIR}/lora/peft-adapter.cpp
  ${ENGINE_DIR}/lora/lora-tensors.cpp
  ${ENGINE_DIR}/lora/lora-local.cpp
  ${ENGINE_DIR}/lora/lora-cache.cpp
  ${ENGINE_DIR}/lora/lora-apply-cpu.cpp
  ${ENGINE_DIR}/medusa/medusa-heads.cpp
  ${ENGINE_DIR}/medusa/medusa-checkpoint.cpp
  ${ENGINE_DIR}/medusa/medusa-tree.cpp
  ${ENGINE_DIR}/eagle/eagle-checkpoint.cpp
)
set(ENGINE_SOURCES ${ENGINE_COMMON_SOURCES} ${ENGINE_MODEL_SOURCES} ${ENGINE_LOADING_SOURCES} ${ENGINE_QUANT_SOURCES} ${ENGINE_CPU_SOURCES}
    ${ENGINE_LORA_SOURCES}
    ${ENGINE_KV_CACHE_SOURCES} ${ENGINE_SCHEDULING_SOURCES} ${ENGINE_SAMPLING_SOURCES} ${ENGINE_GRAMMAR_SOURCES} ${ENGINE_EXECUTOR_SOURCES}
    ${ENGINE_COMM_SOURCES} ${ENGINE_PARALLEL_SOURCES})
