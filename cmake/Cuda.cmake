# SWITCHYARD_CUDA=AUTO builds the CUDA backend when a CUDA compiler is found (no GPU is needed to
# compile), ON requires it, OFF skips it. SWITCHYARD_CUDA_BACKEND is the outcome.
set(SWITCHYARD_CUDA_BACKEND OFF)
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
    # CMake before 3.26 knows no nvcc flag for C++20 (and a CUDA target takes CXX_STANDARD 20):
    # tell it the flag; newer CMake defines it and skips this.
    if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(SWITCHYARD_CUDA_BACKEND ON)
  elseif(SWITCHYARD_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SWITCHYARD_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
message(STATUS "Switchyard CUDA backend: ${SWITCHYARD_CUDA_BACKEND}")

# The build's config header, switchyard_config.h, in the build tree's generated/ (on the engine's
# include path) and installed beside the headers.
if(SWITCHYARD_CUDA_BACKEND)
  set(SWITCHYARD_CUDA_BACKEND_01 1)
else()
  set(SWITCHYARD_CUDA_BACKEND_01 0)
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/switchyard_config.h.in ${PROJECT_BINARY_DIR}/generated/switchyard_config.h @ONLY)
