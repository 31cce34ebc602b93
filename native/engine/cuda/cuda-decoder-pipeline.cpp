// Pipelined pp on the GPU leader (model.h's forward_begin / forward_end): a micro-batch's begin enqueues its
// metadata, this stage's layers (a decode batch as a graph of the stage alone) and the hand-over of its activations,
// and returns without waiting; its end takes the logits the last stage sends back (argmax, device sampling or a copy
// to the host, as forward() does). The hand-over of micro-batch i + 1 and the logits of micro-batch i travel in one
// NCCL group: the last stage sends i's logits before it receives i + 1's activations, and one stream serialises NCCL
// calls, so two separate calls would wait on each other. Two micro-batches are in flight at most: the logits land in
// the one logits_full_ buffer (or, when the last stage sends argmaxes, greedy_dev_), and a pass's are taken (end)
// before the next pass's receive is posted (the begin after it). Followers run plain forward() passes in the
// leader's order; only the leader overlaps.
#include <string>
#include <utility>

#include "cuda/cuda-decoder.h"
#include "model/model-checks.h"

namespace engine::cuda {

int32_t CudaDecoder::pipeline_depth() const { return layout_.leader() && pp_.size() > 1 ? 2 : 1; }

bool CudaDecoder::pass_overlaps(const std::vector<SequenceChunk>& chunks) const {
  // Not: a pass whose logits come back in slices (each taken before the next); one that needs bigger buffers (their
  // growth frees the old ones, which waits for the device); one with LoRA rows or virtual tokens (their staging is
  // the step's own).
  const int64_t T = batch_.num_tokens, R = batch_.num_out_rows();
  if (T > cap_tokens_ || R > cap_logit_rows_) return false;
  const int64_t entries = use_graph(chunks) ? kGraphTableEntries : batch_.num_table_entries;
  if (meta_layout(T, R, entries).total > meta_dev_.bytes()) return false;
  for (const SequenceChunk& ch : chunks)
    if (ch.prompt_table || lora_.loaded(ch.lora_slot)) return false;
  return true;
}

void CudaDecoder::forward_begin(const std::vector<SequenceChunk>& chunks) {
  if (static_cast<int32_t>(passes_.size()) >= pipeline_depth())
    throw EngineError(ErrorCode::internal, "forward_begin with " + std::to_string(passes_.size()) +
                                               " passes in flight (pipeline depth " +
                                               std::to_string(pipeline_depth()) + ")");
  validate_chunks(chunks, config_, !spec_.rope, num_blocks_, tokens_per_block_, /*prompt_tables=*/true);
  use_device();
  const int64_t V = config_.vocab_size, H = config_.hidden_size;
  PipelinedPass& p = passes_.emplace_back();
  try {
    comm_stats_ = {};
    layout_batch(chunks, samples_on_device(), static_cast<int32_t>(V), batch_, p.out);
    p.out.logits.resize(static_cast<size_t>(batch_.num_host_rows) * static_cast<size_t>(V));
    const int64_t T = batch_.num_tokens, R = batch_.num_out_rows();
    if (T == 0) {
      p.done = true;
      return;
    }
    if (!pass_overlaps(chunks)) {
      for (size_t i = 0; i + 1 < passes_.size(); ++i)
        if (!passes_[i].done) take_pass(passes_[i]);
      sampler_.clear();
      run_whole(chunks, p.out);
      p.done = true;
      p.comm = comm_stats_;
      return;
    }
    if (meta_uploaded_ == nullptr)
      check_cuda(cudaEventCreateWithFlags(&meta_uploaded_, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventSynchronize(meta_uploaded_), "metadata upload");
    plan_lora(chunks);           // (none here: clears the last step's)
    stage_virtual_rows(chunks);  // (none here: clears the last step's)
    const bool graph = use_graph(chunks);
    const BatchMeta meta = upload_meta(chunks, graph);
    check_cuda(cudaEventRecord(meta_uploaded_, stream_), "cudaEventRecord");
    // The stage's kernels may wait (a GEMM's first timing) for this stage's other tp ranks, which need the plan;
    // the later stages are waited for by nobody here (world rank = pp rank * tp + tp rank: this stage's are [0, tp)).
    // At tp > 1 the plan reaches them before anything is enqueued: a NCCL collective may block inside the call until
    // its peers make the same call (its first of a kind connects then, as does one captured into a graph), and the
    // leader is outside MPI there, where Open MPI does not move a large plan (an offline tp = 2 x pp = 2 run hung so).
    wait_ranks_ = tp_.size();
    if (tp_.size() > 1) before_device_wait(wait_ranks_);
    try {
      if (graph)
        run_stage_graph(meta);
      else
        enqueue_layers(meta, T, R, meta.max_ctx, /*hand_on=*/false);
    } catch (...) {
      wait_ranks_ = INT32_MAX;
      throw;
    }
    wait_ranks_ = INT32_MAX;
    PipelinedPass* prev = passes_.size() > 1 ? &passes_[passes_.size() - 2] : nullptr;
    if (prev != nullptr && (prev->done || prev->logits_posted)) prev = nullptr;
    const size_t act_bytes = static_cast<size_t>(T * H) * 4;
    const size_t prev_bytes = prev ? logits_bytes(*prev) : 0;
    pp_dev_->send_and_recv(x_.get(), act_bytes, pp_.rank() + 1, prev ? logits_into(*prev) : nullptr, prev_bytes,
                           pp_.size() - 1, stream_);
    comm_stats_.bytes += act_bytes + prev_bytes;
    comm_stats_.calls += prev ? 2 : 1;
    if (prev != nullptr) prev->logits_posted = true;
    p.batch = batch_;
    p.chunks = chunks;
    p.rows = R;
    p.argmax_only = sends_argmaxes();
    p.comm = comm_stats_;
  } catch (...) {
    passes_.pop_back();
    throw;
  }
}

void CudaDecoder::forward_end(ForwardOutput& out) {
  if (passes_.empty()) throw EngineError(ErrorCode::internal, "forward_end with no pass in flight");
  use_device();
  PipelinedPass& p = passes_.front();
  try {
    if (!p.done) take_pass(p);
  } catch (...) {
    passes_.pop_front();
    throw;
  }
  out = std::move(p.out);
  comm_stats_ = p.comm;
  passes_.pop_front();
}

size_t CudaDecoder::logits_bytes(const PipelinedPass& p) const {
  return p.argmax_only ? argmax_bytes() : static_cast<size_t>(p.rows * config_.vocab_size) * 4;
}

void* CudaDecoder::logits_into(const PipelinedPass& p) {
  return p.argmax_only ? greedy_dev_.get() : logits_full_.get();
}

void CudaDecoder::take_pass(PipelinedPass& p) {
  if (!p.logits_posted) {
    pp_dev_->recv(logits_into(p), logits_bytes(p), pp_.size() - 1, stream_);
    p.comm.bytes += logits_bytes(p);
    ++p.comm.calls;
    p.logits_posted = true;
  }
  std::swap(batch_, p.batch);  // take_rows reads the rows' chunks and host rows from batch_
  sampler_.clear();
  try {
    take_rows(p.argmax_only ? nullptr : logits_full_.as<float>(), 0, p.rows, p.chunks, p.out);
  } catch (...) {
    std::swap(batch_, p.batch);
    throw;
  }
  std::swap(batch_, p.batch);
  p.done = true;
}

}  // namespace engine::cuda
