// Which all-reduce a tp sum takes (comm/all-reduce-plan.h): by size against the defaults for the group's width,
// never a peer kernel for rows it cannot take (not whole float4s, misaligned, past the buffers), what
// TRTLLM_ALL_REDUCE forces, and a clear error for a value it does not know.
#include <string>

#include "check.h"
#include "comm/all-reduce-plan.h"
#include "comm/peer-all-reduce-args.h"
#include "errors.h"

using namespace engine;

namespace {
constexpr size_t KiB = 1024, MiB = 1024 * KiB;
constexpr uintptr_t kAligned = 0x7f0000000000;
const PeerCapacity kCap{1 * MiB, 8 * MiB};

AllReduceAlgo pick(const AllReducePolicy& p, size_t bytes, uintptr_t at = kAligned, PeerCapacity cap = kCap) {
  return choose_all_reduce(p, bytes / sizeof(float), at, cap);
}
}  // namespace

TEST_MAIN({
  const AllReducePolicy two = all_reduce_policy("", 2), four = all_reduce_policy("auto", 4),
                        eight = all_reduce_policy("auto", 8);
  // Two GPUs: one-shot through a batch of 64 rows of 4096 (1 MiB), two-shot to 8 MiB (the buffers' capacity), NCCL
  // past it.
  CHECK(pick(two, 16 * KiB) == AllReduceAlgo::one_shot);
  CHECK(pick(two, 1 * MiB) == AllReduceAlgo::one_shot);
  CHECK(pick(two, 1 * MiB + 16) == AllReduceAlgo::two_shot);
  CHECK(pick(two, 8 * MiB) == AllReduceAlgo::two_shot);
  CHECK(pick(two, 8 * MiB + 16) == AllReduceAlgo::nccl);
  CHECK(pick(two, 64 * MiB) == AllReduceAlgo::nccl);
  // Wider groups hand over to two-shot sooner.
  CHECK(pick(four, 256 * KiB) == AllReduceAlgo::one_shot);
  CHECK(pick(four, 256 * KiB + 16) == AllReduceAlgo::two_shot);
  CHECK(pick(four, 8 * MiB) == AllReduceAlgo::two_shot);
  CHECK(pick(eight, 128 * KiB) == AllReduceAlgo::one_shot);
  CHECK(pick(eight, 128 * KiB + 16) == AllReduceAlgo::two_shot);
  CHECK(pick(two, 16 * KiB + 4) == AllReduceAlgo::nccl);                       // not whole float4s
  CHECK(pick(two, 16 * KiB, kAligned + 4) == AllReduceAlgo::nccl);             // not 16-byte aligned
  CHECK(pick(two, 16 * KiB, kAligned, PeerCapacity{}) == AllReduceAlgo::nccl);  // no peer path on this group
  CHECK(pick(two, 0) == AllReduceAlgo::nccl);
  CHECK(pick(two, 2 * MiB, kAligned, PeerCapacity{1 * MiB, 1 * MiB}) == AllReduceAlgo::nccl);  // past both buffers
  // Forced paths: as asked while the buffers can take it, NCCL past them.
  const AllReducePolicy one = all_reduce_policy("oneshot", 2), twoshot = all_reduce_policy("twoshot", 2),
                        nccl = all_reduce_policy("nccl", 2), skip = all_reduce_policy("skip", 2);
  CHECK(pick(one, 4 * KiB) == AllReduceAlgo::one_shot);
  CHECK(pick(one, 2 * MiB) == AllReduceAlgo::nccl);
  CHECK(pick(twoshot, 4 * KiB) == AllReduceAlgo::two_shot);
  CHECK(pick(twoshot, 8 * MiB) == AllReduceAlgo::two_shot);
  CHECK(pick(twoshot, 8 * MiB + 16) == AllReduceAlgo::nccl);
  CHECK(pick(nccl, 4 * KiB) == AllReduceAlgo::nccl);
  CHECK(pick(skip, 4 * KiB + 4) == AllReduceAlgo::skip);
  CHECK(std::string(all_reduce_name(AllReduceAlgo::two_shot)) == "two-shot");
  // A value it does not know names the variable and the value.
  CHECK_THROWS(all_reduce_policy("fast", 2), "TRTLLM_ALL_REDUCE");
  CHECK_THROWS(all_reduce_policy("fast", 2), "\"fast\"");
  CHECK_THROWS(all_reduce_policy("NCCL ", 2), "expected auto, nccl, oneshot, twoshot or skip");
  // The peer kernels' grid: the default unless TRTLLM_PEER_BLOCKS names another, from 1 to the layout's most.
  CHECK(all_reduce_policy("", 2).peer_blocks == 32);
  CHECK(all_reduce_policy("", 4, "64").peer_blocks == 64);
  CHECK(all_reduce_policy("auto", 8, "1").peer_blocks == 1);
  CHECK(all_reduce_policy("", 2, std::to_string(kPeerMaxBlocks)).peer_blocks == kPeerMaxBlocks);
  for (const char* bad : {"0", "-4", "257", "64 ", "sixty", "6.5", "99999999999999999999"}) {
    CHECK_THROWS(all_reduce_policy("", 2, bad), "TRTLLM_PEER_BLOCKS");
    const std::string quoted = std::string("\"") + bad + "\"";
    CHECK_THROWS(all_reduce_policy("", 2, bad), quoted.c_str());
  }
})
