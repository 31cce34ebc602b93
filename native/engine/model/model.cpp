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

}  // namespace engine
