#include "model/model.h"

#include <string>

#include "errors.h"

namespace engine {

// Models without LoRA (the executor checks supports_lora() first, so reaching these is a bug of the caller).
void Model::load_lora(int32_t slot, const LoraAdapter&) {
  throw EngineError(ErrorCode::unsupported, "this model has no LoRA support (load_lora into slot " +
                                                std::to_string(slot) + ")");
}

void Model::unload_lora(int32_t) {}

void Model::head_guesses(const std::vector<int32_t>& rows, std::vector<int32_t>& out) {
  (void)rows;
  (void)out;
  throw EngineError(ErrorCode::internal, "head_guesses on a model without Medusa heads");
}

void Model::set_medusa_heads(std::shared_ptr<const MedusaHeads> heads) {
  throw EngineError(ErrorCode::unsupported, "Medusa heads (" + (heads ? heads->source : std::string("none")) +
                                                "): this backend does not run them; use the CPU backend (--device cpu)");
}

void Model::keep_final_hidden(const std::vector<int32_t>&) {
  throw EngineError(ErrorCode::unsupported, "EAGLE heads run on the CPU backend for now; on CUDA use --medusa-heads or "
                                            "--draft-model");
}

const float* Model::final_hidden(int64_t& rows) const {
  rows = 0;
  throw EngineError(ErrorCode::internal, "final_hidden on a model that keeps no hidden states");
}

void Model::set_input_features(const float*, int64_t) {
  throw EngineError(ErrorCode::internal, "set_input_features on a model that is not an EAGLE draft");
}

}  // namespace engine
