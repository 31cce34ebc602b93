// Reading Medusa heads from the layout the Medusa project publishes them in (and TensorRT-LLM's converter and
// vLLM read): a directory with config.json (`medusa_num_heads`, `medusa_num_layers`) and medusa_lm_head.safetensors
// whose tensors are `<head>.<block>.linear.weight|bias` for the residual blocks and `<head>.<num_layers>.weight`
// for the vocabulary projection (a `medusa_head.` prefix is taken too). As Medusa's own loader does, heads past
// medusa_num_heads in the file are left out.
#pragma once
#include <string>

#include "medusa/medusa-heads.h"
#include "model/model-config.h"

namespace engine {

// The heads for a model of `model`'s hidden size and vocabulary. Errors name the file, the tensor or key, and the
// value found: EngineError(not_found) for a missing file or tensor, (unsupported) for a pickle-only directory,
// (bad_checkpoint) for shapes or dtypes that do not fit.
MedusaHeads load_medusa_heads(const std::string& dir, const ModelConfig& model);

}  // namespace engine
