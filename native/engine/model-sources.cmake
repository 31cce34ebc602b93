# Owned by the model/loading/kernels work. Paths relative to this file.
set(ENGINE_MODEL_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/errors.cpp
  ${CMAKE_CURRENT_LIST_DIR}/json.cpp
  ${CMAKE_CURRENT_LIST_DIR}/safetensors.cpp
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint.cpp
  ${CMAKE_CURRENT_LIST_DIR}/model-config.cpp
  ${CMAKE_CURRENT_LIST_DIR}/weight-reader.cpp
  ${CMAKE_CURRENT_LIST_DIR}/decoder.cpp
  ${CMAKE_CURRENT_LIST_DIR}/llama.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gpt2.cpp
  ${CMAKE_CURRENT_LIST_DIR}/load-model.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/gemm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/norm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/rope.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/activation.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/attention.cpp
)
