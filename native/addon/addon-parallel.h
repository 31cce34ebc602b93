// Leader mode in the addon: MPI start-up (commInit), the tp x pp grid a rank belongs to, and the follower role
// (runFollower). The leader's executor is built by addon-executor.cpp on a LeaderModel.
#pragma once
#include <napi.h>

#include "comm/comm.h"
#include "model/model.h"

namespace addon {

// The rank's place in a tp x pp grid over MPI_COMM_WORLD (world rank = pp_rank * tp + tp_rank), with its two
// sub-communicators. World size 1 (no MPI): plain single-rank options. Throws EngineError naming both numbers when
// tp x pp differs from the number of ranks started.
engine::LoadOptions parallel_load_options(int32_t num_threads, int32_t tp, int32_t pp, int32_t ep);

// commInit(useMpi, threadMultiple?) -> { mpi, worldRank, worldSize, localRank, localSize, host, library, jobRank,
// jobSize, spawned }
Napi::Value comm_init(const Napi::CallbackInfo& info);
// commFinalize(): ends MPI for a process that never ran an executor (the orchestrator); no-op without MPI.
Napi::Value comm_finalize(const Napi::CallbackInfo& info);
Napi::Object comm_info_object(Napi::Env env, const engine::CommInfo& info);
// checkParallelLayout(modelDir, tp, pp, ep?, ppLayers?): throws (the engine's own invalid_argument message) when a
// tp x pp grid (with its stages' layers) cannot split the model in modelDir — the check every rank makes when it
// loads, for the launcher to make before any rank starts.
Napi::Value check_parallel_layout(const Napi::CallbackInfo& info);
// runFollower(modelDir, loadOptions, onProgress?) -> Promise<void>, resolved when the leader shuts down.
Napi::Value run_follower(const Napi::CallbackInfo& info);

}  // namespace addon
