# Engine unit tests: one executable per file, registered with ctest. Fixture paths are passed as arguments. A test
# that cannot run here (no GPU, no fixtures) exits with check.h's skip code, which ctest reports as skipped.
set(ENGINE_REPO_ROOT ${CMAKE_CURRENT_LIST_DIR}/../..)
set(ENGINE_TEST_SKIP_CODE 77)  # check::skip_code
set(ENGINE_MPI_TEST_ENV "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
function(engine_test name)
  add_executable(${name} ${CMAKE_CURRENT_LIST_DIR}/${name}.cpp ${CMAKE_CURRENT_LIST_DIR}/check.h)
  target_link_libraries(${name} PRIVATE engine)
  add_test(NAME ${name} COMMAND ${name} ${ENGINE_REPO_ROOT})
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE ${ENGINE_TEST_SKIP_CODE})
endfunction()
include(${CMAKE_CURRENT_LIST_DIR}/model-tests.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/executor-tests.cmake)
engine_test(iteration-plan-test)
engine_test(all-reduce-plan-test)
engine_test(attention-groups-test)
# The CUDA decoder's metadata block is host code: built into this test wherever the backend is or is not.
engine_test(batch-meta-test)
if(NOT ENGINE_CUDA_BUILT)  # (else the engine has it)
  target_sources(batch-meta-test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../engine/cuda/batch-meta.cpp)
endif()
# The LoRA rows' grouping, host code too.
engine_test(lora-rows-test)
if(NOT ENGINE_CUDA_BUILT)
  target_sources(lora-rows-test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../engine/cuda/lora-rows.cpp)
endif()
engine_test(liveness-verdict-test)
engine_test(grammar-test)
engine_test(grammar-front-ends-test)
engine_test(grammar-sharing-test)
engine_test(grammar-background-test)
engine_test(lora-loading-test)

# comm runs alone (size 1, no MPI) and under the MPI launcher with 2 and 3 ranks.
add_executable(comm-test ${CMAKE_CURRENT_LIST_DIR}/comm-test.cpp)
target_link_libraries(comm-test PRIVATE engine)
add_test(NAME comm-single COMMAND comm-test ${ENGINE_REPO_ROOT})
foreach(np 2 3)
  add_test(NAME comm-mpi-${np} COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} --oversubscribe
           $<TARGET_FILE:comm-test> ${ENGINE_REPO_ROOT})
  set_tests_properties(comm-mpi-${np} PROPERTIES TIMEOUT 60 ENVIRONMENT "${ENGINE_MPI_TEST_ENV}")
endforeach()
# A test of three ranks under the MPI launcher: <name>-test.cpp as ctest's <name> (a plain run of it skips).
function(engine_three_rank_test name)
  add_executable(${name}-test ${CMAKE_CURRENT_LIST_DIR}/${name}-test.cpp)
  target_link_libraries(${name}-test PRIVATE engine)
  add_test(NAME ${name} COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 3 --oversubscribe
           $<TARGET_FILE:${name}-test> ${ENGINE_REPO_ROOT})
  set_tests_properties(${name} PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE ${ENGINE_TEST_SKIP_CODE}
                       ENVIRONMENT "${ENGINE_MPI_TEST_ENV}")
endfunction()
# The liveness watch and the leader channel: one of the ranks stops itself.
engine_three_rank_test(comm-liveness)
# LeaderModel and follower_loop with a model that records its passes. A leader that waited for a follower it must
# not wait for hangs here, so the timeout is the failure.
engine_three_rank_test(leader-model)

# Token-mask time per step of guided decoding against walking the whole vocabulary (a tool; bench/grammar-mask.ts).
add_executable(grammar-bench ${CMAKE_CURRENT_LIST_DIR}/grammar-bench.cpp)
target_link_libraries(grammar-bench PRIVATE engine)

# A quantized model against the same checkpoint unquantized, teacher-forced on held-out text (a tool; scripts/gpu
# runs it on CUDA).
add_executable(quantization-quality ${CMAKE_CURRENT_LIST_DIR}/quantization-quality.cpp)
target_link_libraries(quantization-quality PRIVATE engine)

# The CUDA backend on a GPU (only when it is built): the kernels against float64, the model against transformers
# and the CPU model, the executor over it, GPU sampling against the host sampler; skipped where no GPU is visible.
# cuda-bench is a benchmark, not a test.
if(ENGINE_CUDA_BUILT)
  foreach(name cuda-model cuda-attention cuda-sampling cuda-fp8 cuda-moe cuda-lora cuda-lora-peft cuda-medusa cuda-prompt-table)
    add_executable(${name} ${CMAKE_CURRENT_LIST_DIR}/${name}.cpp ${CMAKE_CURRENT_LIST_DIR}/cuda-test-util.h)
    target_link_libraries(${name} PRIVATE engine)
    add_test(NAME ${name} COMMAND ${name} ${ENGINE_REPO_ROOT})
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE ${ENGINE_TEST_SKIP_CODE} TIMEOUT 300)
  endforeach()
  add_executable(cuda-bench ${CMAKE_CURRENT_LIST_DIR}/cuda-bench.cpp)
  target_link_libraries(cuda-bench PRIVATE engine)
  # tp = 2 and pp = 2 against one GPU, one rank per GPU as scripts/gpu/check.sh runs it (skipped with fewer than
  # 2 GPUs); tp / pp > 1 on GPUs needs NCCL.
  add_executable(cuda-parallel ${CMAKE_CURRENT_LIST_DIR}/cuda-parallel.cpp)
  target_link_libraries(cuda-parallel PRIVATE engine)
  if(ENGINE_CUDA_NCCL)
    foreach(grid "2;1" "1;2")
      list(GET grid 0 tp)
      list(GET grid 1 pp)
      add_test(NAME cuda-parallel-tp${tp}-pp${pp}
               COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 -x NCCL_NVLS_ENABLE=0
                       $<TARGET_FILE:cuda-parallel> ${ENGINE_REPO_ROOT} ${tp} ${pp})
      set_tests_properties(cuda-parallel-tp${tp}-pp${pp} PROPERTIES SKIP_RETURN_CODE ${ENGINE_TEST_SKIP_CODE}
                           TIMEOUT 300 ENVIRONMENT "${ENGINE_MPI_TEST_ENV}")
    endforeach()
  endif()
endif()
