// Which all-reduce a tensor-parallel sum takes (pure; comm-nccl.cpp asks it for every call). Between GPUs of one
// host that can map each other's memory, small sums go one-shot through peer memory (every rank writes its rows
// into every rank's buffer and sums what arrives there: one trip, (ranks - 1) x size written per rank), medium
// ones two-shot (each rank sums the slice the others send it and sends the sums back: two trips, 2 (ranks - 1) /
// ranks x size), and what the peer buffers cannot take (past 8 MiB: prefill chunks) through NCCL's rings.
// bench/RESULTS.md ("A peer-memory all-reduce over NVLink", "The two-shot all-reduce without barriers") has the
// measured crossovers the defaults come from.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace engine {

enum class AllReduceAlgo { nccl, one_shot, two_shot, skip };

// What the group's peer buffers hold per call (0, 0: no peer path).
struct PeerCapacity {
  size_t one_shot_bytes = 0, two_shot_bytes = 0;
};

struct AllReducePolicy {
  // TRTLLM_ALL_REDUCE: "auto" (by size, below), or one algorithm for every size it can take (benchmarks, and a way
  // out should the peer path misbehave on some machine: "nccl").
  // "skip": no sum at all (wrong outputs; only to measure what the all-reduces cost a step).
  enum class Mode { automatic, nccl, one_shot, two_shot, skip } mode = Mode::automatic;
  size_t one_shot_max_bytes = 0;  // automatic mode's bounds (all_reduce_policy sets them by the group's size)
  size_t two_shot_max_bytes = 0;
  // The peer kernels' grid (TRTLLM_PEER_BLOCKS: benchmarks): more blocks keep more stores in flight across NVLink;
  // fewer leave more of the GPU to the product they overlap.
  int32_t peer_blocks = 0;
};

// The defaults for `ranks` GPUs; `setting`: TRTLLM_ALL_REDUCE's value (empty: auto), `blocks`: TRTLLM_PEER_BLOCKS's
// (empty: the default). Throws EngineError naming the variable and the value for anything else.
// Defaults: one-shot up to 1 MiB on 2 GPUs, 256 KiB on 3-4, 128 KiB past that; two-shot up to 8 MiB; 32 blocks.
AllReducePolicy all_reduce_policy(const std::string& setting, int32_t ranks, const std::string& blocks = "");

// The algorithm for a sum of `count` floats at `data`: the peer kernels need 16-byte aligned rows of whole float4s
// that fit the buffers' capacity for that algorithm.
AllReduceAlgo choose_all_reduce(const AllReducePolicy& p, size_t count, uintptr_t data, const PeerCapacity& cap);

const char* all_reduce_name(AllReduceAlgo a);

}  // namespace engine
