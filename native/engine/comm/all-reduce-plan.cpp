#include "comm/all-reduce-plan.h"

#include <exception>

#include "comm/peer-all-reduce-args.h"
#include "errors.h"

namespace engine {

AllReducePolicy all_reduce_policy(const std::string& setting, int32_t ranks, const std::string& blocks) {
  AllReducePolicy p;
  if (setting.empty() || setting == "auto")
    p.mode = AllReducePolicy::Mode::automatic;
  else if (setting == "nccl")
    p.mode = AllReducePolicy::Mode::nccl;
  else if (setting == "oneshot")
    p.mode = AllReducePolicy::Mode::one_shot;
  else if (setting == "twoshot")
    p.mode = AllReducePolicy::Mode::two_shot;
  else if (setting == "skip")
    p.mode = AllReducePolicy::Mode::skip;
  else
    throw EngineError(ErrorCode::invalid_argument,
                      "TRTLLM_ALL_REDUCE: expected auto, nccl, oneshot, twoshot or skip, got \"" + setting + "\"");
  // One-shot writes (ranks - 1) copies where two-shot writes about two in two trips: the wider the group, the
  // sooner two-shot wins (measured on 2 and 4 H200s; eight GPUs' bound is the trend, not a measurement). Two-shot
  // beats NCCL's rings through its whole 8 MiB capacity on both.
  p.one_shot_max_bytes = ranks <= 2 ? (size_t{1} << 20) : ranks <= 4 ? (size_t{256} << 10) : (size_t{128} << 10);
  p.two_shot_max_bytes = size_t{8} << 20;
  p.peer_blocks = 32;
  if (!blocks.empty()) {
    size_t used = 0;
    long v = -1;
    try {
      v = std::stol(blocks, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != blocks.size() || v < 1 || v > kPeerMaxBlocks)
      throw EngineError(ErrorCode::invalid_argument, "TRTLLM_PEER_BLOCKS: expected a whole number from 1 to " +
                                                         std::to_string(kPeerMaxBlocks) + ", got \"" + blocks + "\"");
    p.peer_blocks = static_cast<int32_t>(v);
  }
  return p;
}

AllReduceAlgo choose_all_reduce(const AllReducePolicy& p, size_t count, uintptr_t data, const PeerCapacity& cap) {
  if (p.mode == AllReducePolicy::Mode::skip) return AllReduceAlgo::skip;
  const size_t bytes = count * sizeof(float);
  const bool shaped = count > 0 && count % 4 == 0 && data % 16 == 0;
  const bool one_ok = shaped && bytes <= cap.one_shot_bytes, two_ok = shaped && bytes <= cap.two_shot_bytes;
  switch (p.mode) {
    case AllReducePolicy::Mode::one_shot: return one_ok ? AllReduceAlgo::one_shot : AllReduceAlgo::nccl;
    case AllReducePolicy::Mode::two_shot: return two_ok ? AllReduceAlgo::two_shot : AllReduceAlgo::nccl;
    case AllReducePolicy::Mode::automatic:
      if (one_ok && bytes <= p.one_shot_max_bytes) return AllReduceAlgo::one_shot;
      if (two_ok && bytes <= p.two_shot_max_bytes) return AllReduceAlgo::two_shot;
      return AllReduceAlgo::nccl;
    default: return AllReduceAlgo::nccl;
  }
}

const char* all_reduce_name(AllReduceAlgo a) {
  switch (a) {
    case AllReduceAlgo::nccl: return "nccl";
    case AllReduceAlgo::one_shot: return "one-shot";
    case AllReduceAlgo::two_shot: return "two-shot";
    case AllReduceAlgo::skip: return "skipped";
  }
  return "?";
}

}  // namespace engine
