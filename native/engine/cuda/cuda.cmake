# The CUDA backend, optional (included from native/CMakeLists.txt after the `engine` target exists):
#  - nvcc + cuBLAS found (CUDA_HOME / CUDAToolkit_ROOT): the backend is built into `engine` for sm_90, with NCCL
#    (NCCL_ROOT) for tp/pp > 1 when found;
#  - nvcc alone (this dev machine and CI): the kernels are still compiled for sm_90 and the host files that need no
#    cuBLAS against the toolkit's headers (object libraries that `all` builds), so CI catches breakage in both;
#    the engine gets the "not built" entry points;
#  - no nvcc: the backend is skipped with a message.
option(ENGINE_CUDA "Build the CUDA backend when nvcc and cuBLAS are found" ON)
set(ENGINE_CUDA_DIR ${CMAKE_CURRENT_LIST_DIR})
set(ENGINE_CUDA_KERNELS
  ${ENGINE_CUDA_DIR}/kernels-elementwise.cu
  ${ENGINE_CUDA_DIR}/kernels-attention.cu
  ${ENGINE_CUDA_DIR}/kernels-attention-mma.cu
  ${ENGINE_CUDA_DIR}/kernels-attention-decode.cu
  ${ENGINE_CUDA_DIR}/kernels-attention-prefill.cu
  ${ENGINE_CUDA_DIR}/kernels-gemv.cu
  ${ENGINE_CUDA_DIR}/kernels-fp8.cu
  ${ENGINE_CUDA_DIR}/kernels-fp8-mma.cu
  ${ENGINE_CUDA_DIR}/kernels-sampling.cu
  ${ENGINE_CUDA_DIR}/kernels-moe.cu
  ${ENGINE_CUDA_DIR}/kernels-lora.cu
  ${ENGINE_CUDA_DIR}/kernels-lora-wide.cu
  ${ENGINE_CUDA_DIR}/kernels-lora-stack.cu
  ${ENGINE_CUDA_DIR}/kernels-medusa.cu
)
# Host code that needs the CUDA runtime's headers alone (compile-checked wherever nvcc is, see below) ...
set(ENGINE_CUDA_HOST_RUNTIME
  ${ENGINE_CUDA_DIR}/cuda-decoder.cpp
  ${ENGINE_CUDA_DIR}/cuda-decoder-weights.cpp
  ${ENGINE_CUDA_DIR}/fp8-weights.cpp
  ${ENGINE_CUDA_DIR}/cuda-decoder-forward.cpp
  ${ENGINE_CUDA_DIR}/cuda-decoder-pipeline.cpp
  ${ENGINE_CUDA_DIR}/cuda-decoder-logits.cpp
  ${ENGINE_CUDA_DIR}/cuda-decoder-graphs.cpp
  ${ENGINE_CUDA_DIR}/cuda-decoder-moe.cpp
  ${ENGINE_CUDA_DIR}/cuda-decoder-lora.cpp
  ${ENGINE_CUDA_DIR}/cuda-decoder-medusa.cpp
  ${ENGINE_CUDA_DIR}/lora-slots.cpp
  ${ENGINE_CUDA_DIR}/lora-rows.cpp
  ${ENGINE_CUDA_DIR}/batch-meta.cpp
  ${ENGINE_CUDA_DIR}/device-sampler.cpp
)
# The comm unit's peer-memory all-reduce (built with NCCL, beside comm-nccl.cpp, which picks between the two).
set(ENGINE_CUDA_PEER_KERNELS ${ENGINE_CUDA_DIR}/../comm/peer-all-reduce.cu)
set(ENGINE_CUDA_PEER_HOST ${ENGINE_CUDA_DIR}/../comm/peer-all-reduce.cpp)
# ... and the host code that includes cuBLAS.
set(ENGINE_CUDA_HOST
  ${ENGINE_CUDA_HOST_RUNTIME}
  ${ENGINE_CUDA_DIR}/cuda-backend.cpp
  ${ENGINE_CUDA_DIR}/gemm.cpp
)
set(ENGINE_CUDA_BUILT OFF)
set(ENGINE_CUDA_NCCL OFF)  # ON: the backend is built with NCCL (tp / pp > 1 on GPUs)
set(ENGINE_CUDA_SKIP "")

if(ENGINE_CUDA)
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    if(DEFINED ENV{CUDA_HOME} AND EXISTS "$ENV{CUDA_HOME}/bin/nvcc")
      set(CMAKE_CUDA_COMPILER "$ENV{CUDA_HOME}/bin/nvcc")
    elseif(EXISTS /usr/local/cuda/bin/nvcc)
      set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
    endif()
  endif()
  include(CheckLanguage)
  check_language(CUDA)
endif()

if(NOT ENGINE_CUDA)
  set(ENGINE_CUDA_SKIP "the CUDA backend was turned off (-DENGINE_CUDA=OFF)")
elseif(NOT CMAKE_CUDA_COMPILER)
  set(ENGINE_CUDA_SKIP "no CUDA compiler (nvcc) was found when this build was configured (set CUDA_HOME)")
else()
  # Hopper only (H100 / H200); set before enable_language so CMake's own checks do not try older targets.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit)
  if(TARGET CUDA::cublas AND TARGET CUDA::cublasLt AND TARGET CUDA::cudart)
    set(ENGINE_CUDA_BUILT ON)
  else()
    set(ENGINE_CUDA_SKIP "cuBLAS was not found next to nvcc ${CMAKE_CUDA_COMPILER_VERSION} when this build was configured (set CUDA_HOME to a CUDA toolkit with cuBLAS)")
  endif()
endif()

if(ENGINE_CUDA_BUILT)
  target_sources(engine PRIVATE ${ENGINE_CUDA_KERNELS} ${ENGINE_CUDA_HOST})
  # `engine` existed before CUDA was enabled, so it did not pick up CMAKE_CUDA_ARCHITECTURES itself.
  set_target_properties(engine PROPERTIES CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}")
  target_link_libraries(engine PUBLIC CUDA::cudart CUDA::cublas CUDA::cublasLt)
  target_compile_options(engine PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-O3 -lineinfo>)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} PATH_SUFFIXES lib lib64)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    target_sources(engine PRIVATE ${ENGINE_CUDA_DIR}/../comm/comm-nccl.cpp ${ENGINE_CUDA_PEER_KERNELS}
                                  ${ENGINE_CUDA_PEER_HOST})
    target_include_directories(engine PRIVATE ${NCCL_INCLUDE_DIR})
    target_link_libraries(engine PUBLIC ${NCCL_LIBRARY})
    target_compile_definitions(engine PRIVATE ENGINE_HAVE_NCCL=1)
    set(ENGINE_CUDA_NCCL ON)
    message(STATUS "engine: CUDA backend ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, sm_${CMAKE_CUDA_ARCHITECTURES}, NCCL ${NCCL_LIBRARY})")
  else()
    message(STATUS "engine: CUDA backend ON without NCCL (set NCCL_ROOT for tp/pp > 1 on GPUs)")
  endif()
else()
  target_sources(engine PRIVATE ${ENGINE_CUDA_DIR}/cuda-unavailable.cpp)
  set_source_files_properties(${ENGINE_CUDA_DIR}/cuda-unavailable.cpp PROPERTIES
                              COMPILE_DEFINITIONS "ENGINE_CUDA_SKIP_REASON=\"${ENGINE_CUDA_SKIP}\"")
  if(CMAKE_CUDA_COMPILER)
    # Compile check of the kernels (they need no cuBLAS): part of `all`, never linked.
    add_library(engine_cuda_kernels_check OBJECT ${ENGINE_CUDA_KERNELS} ${ENGINE_CUDA_PEER_KERNELS})
    target_include_directories(engine_cuda_kernels_check PRIVATE ${ENGINE_CUDA_DIR}/..)
    # The same for the host files that need the runtime's headers alone (the decoder); gemm.cpp and
    # cuda-backend.cpp include cuBLAS, so only a build with it compiles them.
    add_library(engine_cuda_host_check OBJECT ${ENGINE_CUDA_HOST_RUNTIME} ${ENGINE_CUDA_PEER_HOST})
    target_include_directories(engine_cuda_host_check PRIVATE ${ENGINE_CUDA_DIR}/..
                               ${CMAKE_CUDA_TOOLKIT_INCLUDE_DIRECTORIES})
    message(STATUS "engine: CUDA backend skipped: ${ENGINE_CUDA_SKIP}; its kernels and cuBLAS-free host files are compile-checked for sm_${CMAKE_CUDA_ARCHITECTURES}")
  else()
    message(STATUS "engine: CUDA backend skipped: ${ENGINE_CUDA_SKIP}")
  endif()
endif()
