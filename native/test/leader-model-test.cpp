// LeaderModel and follower_loop over real MPI (run under `mpirun -np 3`; a plain run skips), with a model that only
// records what it is asked. Every rank's model runs the leader's passes in the leader's order and hears, before
// each, whether all of its logit rows are device argmaxes (Model::set_argmax_only, from the leader's chunks). A
// device model's pipelined begin (Model::forward_begin) returns with its plan still on its way; when the model
// waits for its device it asks for the plan to reach only the ranks it depends on (set_before_device_wait: here
// world ranks [0, 2), as a leader enqueueing its own stage of tp = 2 would), and rank 2 is not waited for. Rank 2
// cannot take that plan until the leader opens a gate after the begin returned, and the plan is too large for MPI
// to send without its receiver (1.2 MB), so a leader that waited for every follower would never get there: the
// order of events is fixed by the gate, not by time, and a wrong implementation hangs until ctest's timeout.
#include <cstdlib>
#include <memory>
#include <vector>

#include "check.h"
#include "comm/comm.h"
#include "parallel/leader-model.h"

using namespace engine;

namespace {

constexpr int32_t kTagGate = 91, kTagRecord = 92;
constexpr int32_t kBigTokens = 300000;  // the pipelined pass's chunk: a 1.2 MB plan

// Records each pass: its tokens and the argmax flag it was run with. On rank 2 the first pass waits for the gate.
class RecordingModel : public Model {
 public:
  RecordingModel(const Comm& world, bool device) : world_(world), device_(device) {
    config_.architecture_name = "RecordingForCausalLM";
    config_.vocab_size = 32;
    config_.max_position_embeddings = 1 << 20;
  }
  const ModelConfig& config() const override { return config_; }
  size_t kv_bytes_per_token() const override { return 4; }
  size_t weight_bytes() const override { return 4; }
  void allocate_kv(int32_t, int32_t) override {}
  void copy_kv_block(int32_t, int32_t) override {}
  bool on_device() const override { return device_; }
  bool samples_on_device() const override { return true; }
  void set_argmax_only(bool on) override { argmax_only_ = on; }
  int32_t pipeline_depth() const override { return 2; }

  void forward(const std::vector<SequenceChunk>& chunks, ForwardOutput& out) override {
    record(chunks);
    out = ForwardOutput{};
    if (world_.rank() == 2 && record_.size() == 2) {  // (the first pass: its token count, then its flag)
      int32_t open = 0;
      world_.recv(&open, sizeof(open), 0, kTagGate);
    }
  }
  void forward_begin(const std::vector<SequenceChunk>& chunks) override {
    record(chunks);
    before_device_wait(2);  // a leader enqueueing its stage: only its stage's ranks, world ranks 0 and 1
  }
  void forward_end(ForwardOutput& out) override { out = ForwardOutput{}; }

  std::vector<int32_t> record_;  // per pass: tokens, then 1 when run with argmax_only

 private:
  void record(const std::vector<SequenceChunk>& chunks) {
    int32_t tokens = 0;
    for (const SequenceChunk& c : chunks) tokens += static_cast<int32_t>(c.tokens.size());
    record_.push_back(tokens);
    record_.push_back(argmax_only_ ? 1 : 0);
  }
  Comm world_;
  bool device_;
  bool argmax_only_ = false;
  ModelConfig config_;
};

SequenceChunk chunk(int32_t n, SampleOn on) {
  SequenceChunk c;
  c.tokens.assign(static_cast<size_t>(n), 3);
  c.block_ids = {0};
  c.sample_on = on;
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) check::repo_root = argv[1];
  if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr && std::getenv("PMI_SIZE") == nullptr)
    return check::skip("needs mpirun -np 3");
  comm_init(true);
  Comm world = comm_world();
  if (world.size() != 3) return check::skip("needs exactly 3 ranks, got %d", world.size());
  // The passes every rank must see: a greedy one (argmax rows only), then the pipelined one (host rows).
  const std::vector<int32_t> want = {1, 1, kBigTokens, 0};
  if (world.rank() != 0) {
    RecordingModel model(world, false);
    follower_loop(model, world);
    const int32_t n = static_cast<int32_t>(model.record_.size());
    world.send(&n, sizeof(n), 0, kTagRecord);
    world.send(model.record_.data(), sizeof(int32_t) * model.record_.size(), 0, kTagRecord);
  } else {
    auto inner = std::make_unique<RecordingModel>(world, true);
    RecordingModel* seen = inner.get();
    LeaderModel lead(std::move(inner), world);
    ForwardOutput out;
    lead.forward({chunk(1, SampleOn::device_argmax)}, out);
    // Rank 2 is held inside that pass; the begin must return without it.
    lead.forward_begin({chunk(kBigTokens, SampleOn::host)});
    const int32_t open = 1;
    world.send(&open, sizeof(open), 2, kTagGate);
    lead.forward_end(out);
    lead.release_followers();
    CHECK_MSG(seen->record_ == want, "the leader's model ran %zu values of passes", seen->record_.size());
    for (int32_t r = 1; r < 3; ++r) {
      int32_t n = 0;
      world.recv(&n, sizeof(n), r, kTagRecord);
      std::vector<int32_t> got(static_cast<size_t>(n));
      world.recv(got.data(), sizeof(int32_t) * got.size(), r, kTagRecord);
      CHECK_MSG(got == want, "rank %d ran the passes (tokens, argmax) as the leader did", r);
    }
  }
  const int failed = check::failures;
  if (world.rank() == 0) std::printf("%d checks passed, %d failed\n", check::passes, check::failures);
  comm_finalize();
  return failed == 0 ? 0 : 1;
}
