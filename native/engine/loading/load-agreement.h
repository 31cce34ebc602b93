// After every rank of a tp x pp grid ran load_model, they must agree whether all of them succeeded: a rank that
// failed alone (a shard file missing on its node, a tensor only its stage reads) would otherwise leave the others
// waiting forever in their first forward(). load_model itself makes no MPI call, so it can run on any thread;
// this is the one collective of loading, and it belongs on the thread that called comm_init.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "errors.h"
#include "model/model.h"

namespace engine {

// Collective over options.tp_comm, then options.pp_comm (together they cover the grid); a no-op with size-1
// groups. `local_failure`: the code of this rank's load error, or nullopt when it loaded. Returns when every rank
// loaded; a rank that failed should rethrow its own error after this returns; a rank that loaded while others
// failed gets EngineError(lowest failing code): "loading the model failed on N other rank(s) of the 2 x 2 (tp x pp)
// grid; their logs name the cause".
void agree_on_load(const LoadOptions& options, std::optional<ErrorCode> local_failure);

// load_model followed by agree_on_load: every rank of the grid either returns a model or throws. Call it on the
// comm thread.
std::unique_ptr<Model> load_model_collective(const std::string& checkpoint_dir, const LoadOptions& options);

}  // namespace engine
