# Model/loading tests: engine_test(<file-name-without-.cpp>) per file.
engine_test(model-json)
engine_test(model-safetensors)
engine_test(model-config)
engine_test(model-forward)
engine_test(model-reference)
engine_test(cpu-gemm)
engine_test(model-parallel-layout)
engine_test(moe-routing-test)
engine_test(model-dummy)
engine_test(fp8-loading)
engine_test(kv-fp8)

# Tensor/pipeline parallel forward under the real MPI launcher (one rank per tp x pp cell, world rank =
# pp_rank * tp + tp_rank), and grids that cannot split the model (every rank must say so; none may hang).
add_executable(model-parallel ${CMAKE_CURRENT_LIST_DIR}/model-parallel.cpp ${CMAKE_CURRENT_LIST_DIR}/check.h)
target_link_libraries(model-parallel PRIVATE engine)
function(model_parallel_test name np)  # ARGN: tp pp [expected error]
  add_test(NAME ${name} COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} --oversubscribe
           $<TARGET_FILE:model-parallel> ${ENGINE_REPO_ROOT} ${ARGN})
  set_tests_properties(${name} PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE ${ENGINE_TEST_SKIP_CODE} ENVIRONMENT
                       "${ENGINE_MPI_TEST_ENV};OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1")
endfunction()
model_parallel_test(model-parallel-tp2 2 2 1)
model_parallel_test(model-parallel-pp2 2 1 2)
model_parallel_test(model-parallel-tp2-pp2 4 2 2)
model_parallel_test(model-parallel-tp4 4 4 1)  # 2 kv heads < tp 4: kv heads replicated
# Expert parallel (the MoE fixtures): experts split over ep groups, each expert's columns over moe_tp = tp / ep.
model_parallel_test(model-parallel-tp2-ep2 2 2 1 ep=2)
model_parallel_test(model-parallel-tp4-ep2 4 4 1 ep=2)
model_parallel_test(model-parallel-tp2-pp2-ep2 4 2 2 ep=2)
model_parallel_test(model-parallel-bad-ep-dense 2 2 1 ep=2 "ep 2 splits the experts of a mixture-of-experts model; LlamaForCausalLM has none")
model_parallel_test(model-parallel-bad-tp3 3 3 1 "num_attention_heads 4 is not divisible by tp 3")
model_parallel_test(model-parallel-bad-pp3 3 1 3 "pp 3 > num_hidden_layers 2")
