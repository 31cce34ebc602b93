#include "parallel/leader-model.h"

#include <chrono>
#include <exception>
#include <string>
#include <utility>

#include "model/batch-layout.h"
#include "parallel/iteration-plan.h"

namespace engine {

namespace {

// The step a plan starts, as the liveness watch reports it.
const char* step_name(PlanOp op) {
  switch (op) {
    case PlanOp::allocate_kv: return "allocate_kv";
    case PlanOp::copy_kv_block: return "copy_kv_block";
    case PlanOp::forward: return "forward";
    case PlanOp::shutdown: return "shutdown";
    case PlanOp::load_lora: return "load_lora";
    case PlanOp::unload_lora: return "unload_lora";
    case PlanOp::head_guesses: return "head_guesses";
  }
  return "?";
}

// The guesses' message from the last stage to the leader, on the world communicator (plans use the leader channel's).
constexpr int32_t kTagHeadGuesses = 41;

}  // namespace

LeaderModel::LeaderModel(std::unique_ptr<Model> inner, Comm world, const LivenessSettings& liveness)
    : inner_(std::move(inner)), world_(std::move(world)) {
  if (world_.size() > 1) {
    channel_ = std::make_unique<LeaderChannel>(world_, liveness);
    inner_->set_before_device_wait([this](int32_t ranks) { channel_->finish_sends(ranks); });
  }
}

LeaderModel::~LeaderModel() = default;

void LeaderModel::broadcast(const IterationPlan& plan, bool deliver) {
  if (!channel_) return;
  if (plan.op == PlanOp::forward) ++iteration_;
  liveness_begin_step(iteration_, step_name(plan.op));
  std::vector<uint8_t> bytes = serialize_plan(plan);
  last_plan_bytes_.store(bytes.size());
  const auto t0 = std::chrono::steady_clock::now();
  channel_->send_plan(std::move(bytes));
  // A device model waits for its GPU (and NCCL for its peers) outside MPI, so the plan must be delivered first; a
  // host model's own waits are MPI calls, which deliver it, so it goes on computing its stage meanwhile.
  if (deliver && inner_->on_device()) channel_->finish_sends();
  last_plan_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// After a plan went out the ranks must stay in lock step: a local failure here cannot be reported as one failed
// request, since followers are already inside the same collective. Abort the job with the reason instead.
template <typename Fn>
static void in_lock_step(const Comm& world, const char* what, Fn fn) {
  if (world.size() == 1) {
    fn();
    return;
  }
  try {
    fn();
  } catch (const std::exception& e) {
    comm_abort(4, std::string(what) + " failed on the leader: " + e.what());
  }
}

void LeaderModel::allocate_kv(int32_t num_blocks, int32_t tokens_per_block) {
  IterationPlan plan;
  plan.op = PlanOp::allocate_kv;
  plan.arg0 = num_blocks;
  plan.arg1 = tokens_per_block;
  broadcast(plan);
  in_lock_step(world_, "allocate_kv", [&] { inner_->allocate_kv(num_blocks, tokens_per_block); });
}

void LeaderModel::copy_kv_block(int32_t src, int32_t dst) {
  IterationPlan plan;
  plan.op = PlanOp::copy_kv_block;
  plan.arg0 = src;
  plan.arg1 = dst;
  broadcast(plan);
  in_lock_step(world_, "copy_kv_block", [&] { inner_->copy_kv_block(src, dst); });
}

void LeaderModel::load_lora(int32_t slot, const LoraAdapter& adapter) {
  if (world_.size() == 1) {
    inner_->load_lora(slot, adapter);
    return;
  }
  IterationPlan plan;
  plan.op = PlanOp::load_lora;
  plan.arg0 = slot;
  // The plan only reads the adapter while it is serialised, within this call: a non-owning pointer will do.
  plan.lora = std::shared_ptr<const LoraAdapter>(&adapter, [](const LoraAdapter*) {});
  broadcast(plan);
  in_lock_step(world_, "load_lora", [&] { inner_->load_lora(slot, adapter); });
}

void LeaderModel::unload_lora(int32_t slot) {
  IterationPlan plan;
  plan.op = PlanOp::unload_lora;
  plan.arg0 = slot;
  broadcast(plan);
  in_lock_step(world_, "unload_lora", [&] { inner_->unload_lora(slot); });
}

// A forward pass's plan; arg0 says whether every logit row is a device argmax (Model::set_argmax_only).
static IterationPlan forward_plan(const std::vector<SequenceChunk>& chunks, int32_t vocab_size) {
  IterationPlan plan;
  plan.op = PlanOp::forward;
  plan.chunks = chunks;
  plan.vocab_size = vocab_size;
  plan.arg0 = all_rows_argmax(chunks) ? 1 : 0;
  return plan;
}

void LeaderModel::forward(const std::vector<SequenceChunk>& chunks, ForwardOutput& out) {
  if (world_.size() == 1) {
    inner_->forward(chunks, out);
    return;
  }
  const IterationPlan plan = forward_plan(chunks, inner_->config().vocab_size);
  broadcast(plan);
  inner_->set_argmax_only(plan.arg0 != 0);
  in_lock_step(world_, "forward", [&] { inner_->forward(chunks, out); });
}

void LeaderModel::forward_begin(const std::vector<SequenceChunk>& chunks) {
  const IterationPlan plan = forward_plan(chunks, inner_->config().vocab_size);
  // A device model enqueues its stage and returns while the plan is still on its way: the earlier plans are
  // delivered first (their passes may be ahead of this one on the device, waiting for followers that need them),
  // this one before the model next waits for its device (set_before_device_wait) or at the pass's end.
  if (channel_ && inner_->on_device()) channel_->finish_sends();
  broadcast(plan, /*deliver=*/false);
  inner_->set_argmax_only(plan.arg0 != 0);
  in_lock_step(world_, "forward", [&] { inner_->forward_begin(chunks); });
}

void LeaderModel::forward_end(ForwardOutput& out) {
  if (channel_ && inner_->on_device()) channel_->finish_sends();
  in_lock_step(world_, "forward", [&] { inner_->forward_end(out); });
}

void LeaderModel::set_medusa_heads(std::shared_ptr<const MedusaHeads> heads) {
  if (inner_->head_guess_source() < 0) {
    inner_->set_medusa_heads(std::move(heads));
    return;
  }
  remote_heads_ = heads ? heads->num_heads() : 0;  // (the weights themselves are the last stage's to keep)
}

void LeaderModel::head_guesses(const std::vector<int32_t>& rows, std::vector<int32_t>& out) {
  if (remote_heads_ == 0) {
    inner_->head_guesses(rows, out);
    return;
  }
  IterationPlan plan;
  plan.op = PlanOp::head_guesses;
  plan.rows = rows;
  broadcast(plan);
  out.resize(rows.size() * static_cast<size_t>(remote_heads_) * kMedusaTopK);
  in_lock_step(world_, "head_guesses", [&] {
    world_.recv(out.data(), out.size() * sizeof(int32_t), inner_->head_guess_source(), kTagHeadGuesses);
  });
}

ForwardCommStats LeaderModel::last_comm_stats() const {
  ForwardCommStats stats = inner_->last_comm_stats();
  if (world_.size() > 1) {
    stats.plan_bytes = last_plan_bytes_.load();
    stats.seconds += last_plan_seconds_;
    stats.bytes += stats.plan_bytes;
    stats.calls += 1;
  }
  return stats;
}

void LeaderModel::release_followers() {
  if (released_) return;
  released_ = true;
  IterationPlan plan;
  plan.op = PlanOp::shutdown;
  broadcast(plan);
  if (channel_) channel_->close();
}

int32_t LeaderModel::followers_linked() const { return channel_ ? channel_->followers_linked() : 0; }

void follower_loop(Model& model, const Comm& world, const LivenessSettings& liveness) {
  if (world.size() == 1) return;
  LeaderChannel channel(world, liveness);
  ForwardOutput out;
  std::vector<int32_t> guesses;
  int64_t iteration = 0;
  for (;;) {
    liveness_begin_step(iteration, "idle");
    std::vector<uint8_t> bytes = channel.receive_plan();
    try {
      IterationPlan plan = deserialize_plan(bytes);
      if (plan.op == PlanOp::forward) ++iteration;
      liveness_begin_step(iteration, step_name(plan.op));
      switch (plan.op) {
        case PlanOp::allocate_kv: model.allocate_kv(plan.arg0, plan.arg1); break;
        case PlanOp::copy_kv_block: model.copy_kv_block(plan.arg0, plan.arg1); break;
        case PlanOp::forward:
          model.set_argmax_only(plan.arg0 != 0);
          model.forward(plan.chunks, out);
          break;
        case PlanOp::load_lora: model.load_lora(plan.arg0, *plan.lora); break;
        case PlanOp::unload_lora: model.unload_lora(plan.arg0); break;
        case PlanOp::head_guesses:
          if (model.serves_head_guesses()) {
            model.head_guesses(plan.rows, guesses);
            world.send(guesses.data(), guesses.size() * sizeof(int32_t), 0, kTagHeadGuesses);
          }
          break;
        case PlanOp::shutdown: channel.close(); return;
      }
    } catch (const std::exception& e) {
      comm_abort(4, std::string("follower failed: ") + e.what());
    }
  }
}

}  // namespace engine
