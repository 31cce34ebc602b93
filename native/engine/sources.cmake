# Engine sources, listed explicitly. Model/loading/kernels first, then the executor side.
include(${CMAKE_CURRENT_LIST_DIR}/model-sources.cmake)     # sets ENGINE_MODEL_SOURCES
include(${CMAKE_CURRENT_LIST_DIR}/executor-sources.cmake)  # sets ENGINE_EXECUTOR_SOURCES
# Leader mode: comm (the only unit with mpi.h), the plan the leader broadcasts, and the leader/follower roles.
set(ENGINE_PARALLEL_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/comm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/comm-link.cpp
  ${CMAKE_CURRENT_LIST_DIR}/iteration-plan.cpp
  ${CMAKE_CURRENT_LIST_DIR}/leader-model.cpp
)
set(ENGINE_SOURCES ${ENGINE_MODEL_SOURCES} ${ENGINE_EXECUTOR_SOURCES} ${ENGINE_PARALLEL_SOURCES})
