# Engine unit tests: one executable per file, registered with ctest. Fixture paths are passed as arguments.
set(ENGINE_REPO_ROOT ${CMAKE_CURRENT_LIST_DIR}/../..)
function(engine_test name)
  add_executable(${name} ${CMAKE_CURRENT_LIST_DIR}/${name}.cpp ${CMAKE_CURRENT_LIST_DIR}/check.h)
  target_link_libraries(${name} PRIVATE engine)
  add_test(NAME ${name} COMMAND ${name} ${ENGINE_REPO_ROOT})
endfunction()
include(${CMAKE_CURRENT_LIST_DIR}/model-tests.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/executor-tests.cmake)
engine_test(iteration-plan-test)
engine_test(attention-groups-test)

# comm runs alone (size 1, no MPI) and under the MPI launcher with 2 and 3 ranks.
add_executable(comm-test ${CMAKE_CURRENT_LIST_DIR}/comm-test.cpp)
target_link_libraries(comm-test PRIVATE engine)
add_test(NAME comm-single COMMAND comm-test ${ENGINE_REPO_ROOT})
foreach(np 2 3)
  add_test(NAME comm-mpi-${np} COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} --oversubscribe
           $<TARGET_FILE:comm-test> ${ENGINE_REPO_ROOT})
  set_tests_properties(comm-mpi-${np} PROPERTIES TIMEOUT 60
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
endforeach()

# The CUDA backend on a GPU (only when it is built): the model against transformers and the CPU model, the
# executor over it; tp/pp under mpirun when NCCL is there (2 GPUs). cuda-bench is a benchmark, not a test.
if(ENGINE_CUDA_BUILT)
  add_executable(cuda-model ${CMAKE_CURRENT_LIST_DIR}/cuda-model.cpp ${CMAKE_CURRENT_LIST_DIR}/cuda-test-util.h)
  target_link_libraries(cuda-model PRIVATE engine)
  add_test(NAME cuda-model COMMAND cuda-model ${ENGINE_REPO_ROOT})
  add_executable(cuda-attention ${CMAKE_CURRENT_LIST_DIR}/cuda-attention.cpp ${CMAKE_CURRENT_LIST_DIR}/cuda-test-util.h)
  target_link_libraries(cuda-attention PRIVATE engine)
  add_test(NAME cuda-attention COMMAND cuda-attention ${ENGINE_REPO_ROOT})
  add_executable(cuda-sampling ${CMAKE_CURRENT_LIST_DIR}/cuda-sampling.cpp)
  target_link_libraries(cuda-sampling PRIVATE engine)
  add_test(NAME cuda-sampling COMMAND cuda-sampling ${ENGINE_REPO_ROOT})
  add_executable(cuda-bench ${CMAKE_CURRENT_LIST_DIR}/cuda-bench.cpp)
  target_link_libraries(cuda-bench PRIVATE engine)
  add_executable(cuda-parallel ${CMAKE_CURRENT_LIST_DIR}/cuda-parallel.cpp)
  target_link_libraries(cuda-parallel PRIVATE engine)
endif()
