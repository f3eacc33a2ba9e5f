# SWITCHYARD_CUDA=AUTO builds the CUDA backend when a CUDA compiler is found (no GPU is needed to
# compile), ON requires it, OFF skips it. SWITCHYARD_HAVE_CUDA is the outcome.
set(SWITCHYARD_HAVE_CUDA OFF)
if(NOT SWITCHYARD_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # Portable default: Hopper code plus PTX that later GPUs JIT; the GPU machine passes 90.
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    # CMake 3.25 does not know nvcc 13's C++20 dialect flag, so pass it directly.
    string(APPEND CMAKE_CUDA_FLAGS " -std=c++20")
    find_package(CUDAToolkit REQUIRED)
    set(SWITCHYARD_HAVE_CUDA ON)
  elseif(SWITCHYARD_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SWITCHYARD_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
message(STATUS "Switchyard CUDA backend: ${SWITCHYARD_HAVE_CUDA}")
