// Pipelined pp on the GPU leader (model.h's forward_begin / forward_end): a micro-batch's begin enqueues its
// metadata, this stage's layers and the hand-over of its activations, and returns without waiting; its end takes
// the logits the last stage sends back (argmax, device sampling or a copy to the host, as forward() does). The
// hand-over of micro-batch i + 1 and the logits of micro-batch i travel in one NCCL group: the last stage sends i's
// logits before it receives i + 1's activations, and one stream serialises NCCL calls, so two separate calls would
// wait on each other. Two micro-batches are in flight at most: the logits land in the one logits_full_ buffer, and
// a pass's are taken (end) before the next pass's receive is posted (the begin after it).
#include <utility>

#include "cuda/cuda-decoder.h"
#include "model/model-checks.h"

namespace engine::cuda {

int32_t CudaDecoder::pipeline_depth() const { return layout_.leader() && pp_.size() > 1 ? 2 : 1; }

void CudaDecoder::forward_begin(const std::vector<SequenceChunk>& chunks) {
  if (static_cast<int32_t>(passes_.size()) >= pipeline_depth())
    throw EngineError(ErrorCode::internal, "forward_begin with " + std::to_string(passes_.size()) +
                                               " passes in flight (pipeline depth " + std::to_string(pipeline_depth()) + ")");
  validate_chunks(chunks, config_, !spec_.rope, num_blocks_, tokens_per_block_);
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
    // A pass whose logits come back in several slices (each taken before the next), or one that needs bigger
    // buffers (reserve() replaces them), cannot overlap: the passes before it end first, then it runs whole.
    if (R > cap_logit_rows_ || T > cap_tokens_) {
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
    const BatchMeta meta = upload_meta(chunks, false);
    check_cuda(cudaEventRecord(meta_uploaded_, stream_), "cudaEventRecord");
    enqueue_layers(meta, T, R, meta.max_ctx, /*hand_on=*/false);
    PipelinedPass* prev = passes_.size() > 1 ? &passes_[passes_.size() - 2] : nullptr;
    if (prev != nullptr && (prev->done || prev->logits_posted)) prev = nullptr;
    const size_t act_bytes = static_cast<size_t>(T * H) * 4;
    const size_t prev_bytes = prev ? static_cast<size_t>(prev->rows * V) * 4 : 0;
    pp_dev_->send_and_recv(x_.get(), act_bytes, pp_.rank() + 1, logits_full_.get(), prev_bytes, pp_.size() - 1, stream_);
    comm_stats_.bytes += act_bytes + prev_bytes;
    comm_stats_.calls += prev ? 2 : 1;
    if (prev != nullptr) prev->logits_posted = true;
    p.batch = batch_;
    p.chunks = chunks;
    p.rows = R;
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
  if (!p.done) take_pass(p);
  out = std::move(p.out);
  comm_stats_ = p.comm;
  passes_.pop_front();
}

void CudaDecoder::take_pass(PipelinedPass& p) {
  const int64_t V = config_.vocab_size;
  if (!p.logits_posted) {
    pp_dev_->recv(logits_full_.get(), static_cast<size_t>(p.rows * V) * 4, pp_.size() - 1, stream_);
    p.comm.bytes += static_cast<uint64_t>(p.rows * V) * 4;
    ++p.comm.calls;
    p.logits_posted = true;
  }
  std::swap(batch_, p.batch);  // take_rows reads the rows' chunks and host rows from batch_
  sampler_.clear();
  try {
    take_rows(logits_full_.as<float>(), 0, p.rows, p.chunks, p.out);
  } catch (...) {
    std::swap(batch_, p.batch);
    throw;
  }
  std::swap(batch_, p.batch);
  p.done = true;
}

}  // namespace engine::cuda
