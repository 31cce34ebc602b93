# Engine sources, listed explicitly. Model/loading/kernels first, then the executor side.
include(${CMAKE_CURRENT_LIST_DIR}/model-sources.cmake)     # sets ENGINE_MODEL_SOURCES
include(${CMAKE_CURRENT_LIST_DIR}/executor-sources.cmake)  # sets ENGINE_EXECUTOR_SOURCES
set(ENGINE_SOURCES ${ENGINE_MODEL_SOURCES} ${ENGINE_EXECUTOR_SOURCES})
