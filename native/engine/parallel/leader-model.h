// Leader mode without touching the executor: on world rank 0 the executor drives a LeaderModel, which first
// broadcasts each KV-pool action and forward pass as an IterationPlan to the followers and then performs it on
// its own shard. Followers run follower_loop() on the same inner model, so every rank executes exactly the
// leader's decisions in the leader's order; only the leader schedules, samples and answers.
#pragma once
#include <atomic>
#include <memory>

#include "comm/comm.h"
#include "model/model.h"

namespace engine {

class LeaderModel : public Model {
 public:
  LeaderModel(std::unique_ptr<Model> inner, Comm world);
  ~LeaderModel() override;

  const ModelConfig& config() const override { return inner_->config(); }
  size_t kv_bytes_per_token() const override { return inner_->kv_bytes_per_token(); }
  size_t weight_bytes() const override { return inner_->weight_bytes(); }
  void allocate_kv(int32_t num_blocks, int32_t tokens_per_block) override;
  void copy_kv_block(int32_t src, int32_t dst) override;
  void forward(const std::vector<SequenceChunk>& chunks, ForwardOutput& out) override;
  bool on_device() const override { return inner_->on_device(); }
  size_t device_free_bytes() const override { return inner_->device_free_bytes(); }
  size_t activation_bytes() const override { return inner_->activation_bytes(); }
  bool samples_on_device() const override { return inner_->samples_on_device(); }
  // The inner model's communication plus this forward's plan broadcast.
  ForwardCommStats last_comm_stats() const override;
  // Tells the followers to return; idempotent. Called by the executor's owner once the executor has stopped (the
  // addon; native/test/cuda-parallel.cpp): the followers then leave follower_loop().
  void release_followers();

  uint64_t last_plan_bytes() const { return last_plan_bytes_.load(); }

 private:
  void broadcast(const struct IterationPlan& plan);
  std::unique_ptr<Model> inner_;
  Comm world_;
  bool released_ = false;
  std::atomic<uint64_t> last_plan_bytes_{0};
  double last_plan_seconds_ = 0;
};

// A follower's whole life: receive plans from world rank 0 and apply them to `model` until shutdown. Any failure
// aborts the whole job (the leader would otherwise wait forever in the next collective).
void follower_loop(Model& model, const Comm& world);

}  // namespace engine
