// Decode batches as CUDA graphs: one graph per (batch size, context bucket), captured on first use and replayed
// after; the argmax kernel runs over every row inside the graph, and what the executor samples elsewhere (host
// rows, device-sampled rows) is taken from the graph's logits afterwards. Under tp / pp every rank replays its
// graph of the same step (they run the same chunks), with the all-reduces, the vocab gather and the stage transfers
// inside: NCCL's calls and the peer all-reduce's kernels are captured like any launch. A pipelined leader replays a
// graph of its stage alone and sends the activations itself (cuda-decoder-pipeline.cpp).
#include "cuda/cuda-decoder.h"

#include <cstring>

namespace engine::cuda {

void CudaDecoder::run_graph(const BatchMeta& m, const std::vector<SequenceChunk>& chunks, ForwardOutput& out) {
  const int64_t T = batch_.num_tokens, V = config_.vocab_size;
  const Graph& graph = graph_for(m, T, context_bucket(m.max_ctx));
  check_cuda(cudaGraphLaunch(graph.exec, stream_), "cudaGraphLaunch");
  comm_stats_ = graph.comm;
  if (!layout_.leader()) {  // (its part of the step ends with its transfers: nothing to read back)
    wait_stream();
    return;
  }
  // Tokens and log-probs of every row (the argmax ran on all of them), logits of the host-sampled ones. In a
  // decode batch logit row i is token row i of chunk i.
  const int64_t cap = cap_logit_rows_;
  int32_t* gd = greedy_dev_.as<int32_t>();
  int32_t* gh = greedy_host_.as<int32_t>();
  check_cuda(cudaMemcpyAsync(gh, gd, sizeof(int32_t) * T, cudaMemcpyDeviceToHost, stream_), "greedy tokens");
  check_cuda(cudaMemcpyAsync(gh + cap, gd + cap, sizeof(float) * T, cudaMemcpyDeviceToHost, stream_), "greedy log-probs");
  float* logits = tp_.size() == 1 && pp_.size() == 1 ? logits_local_.as<float>() : logits_full_.as<float>();
  run_sampling_prep();  // the executor's host work for the sampling (guide masks), while the graph runs
  enqueue_sampling(logits, 0, T, chunks, out);  // (the graph's argmax of these rows is not used)
  const int32_t* host_row = batch_.host_row.data();
  float* staging = logits_host_.as<float>();
  for (int64_t i = 0; i < T; ++i)
    if (host_row[i] >= 0)
      check_cuda(cudaMemcpyAsync(staging + i * V, logits + i * V, sizeof(float) * V, cudaMemcpyDeviceToHost, stream_),
                 "copy logits");
  wait_stream();
  sampler_.finish(out);
  const float* glp = reinterpret_cast<const float*>(gh + cap);
  for (int64_t i = 0; i < T; ++i) {
    const size_t c = static_cast<size_t>(batch_.out_chunk[i]);
    if (host_row[i] >= 0)
      std::memcpy(out.logits.data() + static_cast<size_t>(host_row[i]) * V, staging + i * V, sizeof(float) * V);
    else if (chunks[c].sample_on == SampleOn::device_argmax)
      out.sampled[c] = DeviceSample{gh[i], glp[i]};
  }
}

int32_t CudaDecoder::context_bucket(int32_t max_ctx) {
  // Contexts are bucketed by powers of two: the bucket sizes the attention's split (its grid), positions past a
  // row's own context are skipped by the kernel.
  int32_t bucket = 64;
  while (bucket < max_ctx) bucket *= 2;
  return bucket;
}

void CudaDecoder::run_stage_graph(const BatchMeta& m) {
  const Graph& graph = graph_for(m, batch_.num_tokens, context_bucket(m.max_ctx), /*hand_on=*/false);
  check_cuda(cudaGraphLaunch(graph.exec, stream_), "cudaGraphLaunch");
  comm_stats_ = graph.comm;
}

const CudaDecoder::Graph& CudaDecoder::graph_for(const BatchMeta& m, int64_t T, int32_t bucket, bool hand_on) {
  // A step with LoRA rows has the grouped LoRA launches in it, one without has none (cuda-decoder-lora.cpp); a
  // pipelined leader's stage alone (!hand_on) neither sends its activations nor takes logits; under pp the last
  // stage sends argmaxes or logits (sends_argmaxes).
  const uint64_t key = (static_cast<uint64_t>(T) << 32) | static_cast<uint32_t>(bucket) |
                       (lora_step_ ? 1ull << 31 : 0) | (hand_on ? 0 : 1ull << 30) | (sends_argmaxes() ? 1ull << 29 : 0);
  auto it = graphs_.find(key);
  if (it != graphs_.end()) return it->second;
  // One plain run first (it rewrites the same K/V, so it is harmless): the GEMMs pick their kernels by timing,
  // which a capture cannot do. It transfers nothing (its sums and stage inputs are wrong, and so are the K/V it
  // writes until the replay rewrites them): each rank then captures on its own, and a pipelined leader, which
  // captures its stage alone, still matches its peers' transfers one for one.
  transfers_ = false;
  try {
    enqueue_layers(m, T, T, bucket, hand_on);
    if (hand_on) enqueue_logits_and_greedy(T);
  } catch (...) {
    transfers_ = true;
    throw;
  }
  transfers_ = true;
  comm_stats_ = {};
  cudaGraph_t g = nullptr;
  check_cuda(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  try {
    enqueue_layers(m, T, T, bucket, hand_on);
    if (hand_on) enqueue_logits_and_greedy(T);
  } catch (...) {
    cudaStreamEndCapture(stream_, &g);
    if (g != nullptr) cudaGraphDestroy(g);
    throw;
  }
  check_cuda(cudaStreamEndCapture(stream_, &g), "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, g, 0);
  cudaGraphDestroy(g);
  check_cuda(e, "cudaGraphInstantiate");
  return graphs_.emplace(key, Graph{exec, comm_stats_}).first->second;
}

void CudaDecoder::drop_graphs() {
  for (auto& [key, graph] : graphs_) cudaGraphExecDestroy(graph.exec);
  graphs_.clear();
}

}  // namespace engine::cuda
