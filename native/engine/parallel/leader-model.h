// Leader mode without touching the executor: on world rank 0 the executor drives a LeaderModel, which first
// sends each KV-pool action and forward pass as an IterationPlan to the followers (over the leader channel,
// comm/leader-channel.h) and then performs it on its own shard. Followers run follower_loop() on the same inner
// model, so every rank executes exactly the leader's decisions in the leader's order; only the leader schedules,
// samples and answers. Both sides tell the liveness watch (comm/liveness.h) which iteration and step they are in.
#pragma once
#include <atomic>
#include <memory>

#include "comm/comm.h"
#include "comm/leader-channel.h"
#include "comm/liveness.h"
#include "model/model.h"

namespace engine {

class LeaderModel : public Model {
 public:
  // Collective over `world` when it has followers (the leader channel); `liveness` bounds every wait of this rank.
  LeaderModel(std::unique_ptr<Model> inner, Comm world, const LivenessSettings& liveness = {});
  ~LeaderModel() override;

  const ModelConfig& config() const override { return inner_->config(); }
  size_t kv_bytes_per_token() const override { return inner_->kv_bytes_per_token(); }
  size_t weight_bytes() const override { return inner_->weight_bytes(); }
  void allocate_kv(int32_t num_blocks, int32_t tokens_per_block) override;
  void copy_kv_block(int32_t src, int32_t dst) override;
  void forward(const std::vector<SequenceChunk>& chunks, ForwardOutput& out) override;
  // The plan goes out as for forward(); the inner model keeps the micro-batches in flight.
  int32_t pipeline_depth() const override { return inner_->pipeline_depth(); }
  void forward_begin(const std::vector<SequenceChunk>& chunks) override;
  void forward_end(ForwardOutput& out) override;
  bool on_device() const override { return inner_->on_device(); }
  size_t device_free_bytes() const override { return inner_->device_free_bytes(); }
  size_t activation_bytes() const override { return inner_->activation_bytes(); }
  bool samples_on_device() const override { return inner_->samples_on_device(); }
  int32_t host_threads() const override { return inner_->host_threads(); }
  bool sampled_row(int32_t chunk, std::vector<float>& row) override { return inner_->sampled_row(chunk, row); }
  void set_sampling_prep(SamplingPrep prep) override { inner_->set_sampling_prep(std::move(prep)); }
  std::string kv_cache_dtype() const override { return inner_->kv_cache_dtype(); }
  std::string tp_all_reduce() const override { return inner_->tp_all_reduce(); }
  bool supports_lora() const override { return inner_->supports_lora(); }
  bool supports_token_trees() const override { return inner_->supports_token_trees(); }
  // The plan carries the rows of a chunk's table its virtual tokens use (iteration-plan.h).
  bool supports_prompt_tables() const override { return inner_->supports_prompt_tables(); }
  // The adapter goes to the followers whole; every rank keeps its own slice.
  void load_lora(int32_t slot, const LoraAdapter& adapter) override;
  void unload_lora(int32_t slot) override;
  // The heads run where the final hidden states are: on this rank (no pp: followers hear nothing of them), or under
  // pp on the last stage's first tp rank, which loaded them too (serves_head_guesses); this rank then keeps only
  // their count, and each head_guesses call is a plan to the followers and the guesses back from that rank.
  void set_medusa_heads(std::shared_ptr<const MedusaHeads> heads) override;
  int32_t medusa_heads() const override { return remote_heads_ > 0 ? remote_heads_ : inner_->medusa_heads(); }
  void head_guesses(const std::vector<int32_t>& rows, std::vector<int32_t>& out) override;
  // EAGLE heads read this rank's own final hidden states (whole on every tp rank): followers hear nothing of them.
  void keep_final_hidden(const std::vector<int32_t>& aux_layers) override { inner_->keep_final_hidden(aux_layers); }
  const float* final_hidden(int64_t& rows) const override { return inner_->final_hidden(rows); }
  // The inner model's communication plus this forward's plan broadcast.
  ForwardCommStats last_comm_stats() const override;
  // Tells the followers to return and closes the leader channel; idempotent. Called by the executor's owner once the
  // executor has stopped (the addon; native/test/cuda-parallel.cpp): the followers then leave follower_loop().
  void release_followers();
  int32_t followers_linked() const;  // followers that sleep on the wake link while this leader is idle

  uint64_t last_plan_bytes() const { return last_plan_bytes_.load(); }

 private:
  // deliver: a device model's plan is delivered before this returns (forward_begin's is not).
  void broadcast(const struct IterationPlan& plan, bool deliver = true);
  std::unique_ptr<Model> inner_;
  Comm world_;
  std::unique_ptr<LeaderChannel> channel_;  // null with no followers
  int64_t iteration_ = 0;                   // forward passes begun (followers count the same plans)
  bool released_ = false;
  int32_t remote_heads_ = 0;  // under pp: the heads the last stage runs for this rank
  std::atomic<uint64_t> last_plan_bytes_{0};
  double last_plan_seconds_ = 0;
};

// A follower's whole life: receive plans from world rank 0 and apply them to `model` until shutdown, waiting for
// each without spinning while the leader is idle. Any failure aborts the whole job (the leader would otherwise wait
// in the next collective until the liveness watch ended it). Collective over `world` at its start (the channel).
void follower_loop(Model& model, const Comm& world, const LivenessSettings& liveness = {});

}  // namespace engine
