# Sanitizer and fuzzing builds (docs/fuzzing.md, .ci/run). Both instrument every target of the
# build directory, libraries included, so a report can come from any of our sources; the system
# libraries (yaml-cpp, PCRE2, libgomp/libomp) stay uninstrumented.
#
#   -DSWITCHYARD_SANITIZE=address,undefined  the doctest suite and switchyard under ASan and UBSan;
#                                            every UBSan finding is fatal (-fno-sanitize-recover)
#   -DSWITCHYARD_FUZZ=ON                     (clang only) the libFuzzer targets in tests/fuzz/: adds
#                                            the fuzzer's coverage hooks everywhere, address,undefined
#                                            unless SWITCHYARD_SANITIZE names other checks
set(SWITCHYARD_SANITIZE "" CACHE STRING "Build with these -fsanitize= checks, comma-separated (e.g. address,undefined)")
option(SWITCHYARD_FUZZ "Build the libFuzzer targets (clang only)" OFF)

set(SWITCHYARD_SANITIZE_CHECKS "${SWITCHYARD_SANITIZE}")
if(SWITCHYARD_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "SWITCHYARD_FUZZ needs clang (libFuzzer); configure with CC=clang CXX=clang++")
  endif()
  if(NOT SWITCHYARD_TESTS)
    message(FATAL_ERROR "SWITCHYARD_FUZZ needs SWITCHYARD_TESTS=ON: the fuzz targets are built in tests/")
  endif()
  if(SWITCHYARD_SANITIZE_CHECKS STREQUAL "")
    set(SWITCHYARD_SANITIZE_CHECKS "address,undefined")
  endif()
  # Coverage hooks without libFuzzer's main (only the fuzz targets link -fsanitize=fuzzer), in our
  # sources only: the system headers' inline code is left out (tests/fuzz/coverage-ignorelist.txt).
  add_compile_options(-fsanitize=fuzzer-no-link
                      -fsanitize-coverage-ignorelist=${PROJECT_SOURCE_DIR}/tests/fuzz/coverage-ignorelist.txt)
endif()

if(NOT SWITCHYARD_SANITIZE_CHECKS STREQUAL "")
  if(SWITCHYARD_CUDA_BACKEND)
    message(FATAL_ERROR "SWITCHYARD_SANITIZE and SWITCHYARD_FUZZ are for CPU builds; configure with -DSWITCHYARD_CUDA=OFF")
  endif()
  message(STATUS "Switchyard sanitizers: ${SWITCHYARD_SANITIZE_CHECKS}")
  # Frame pointers and line tables so that every report has a readable stack.
  add_compile_options(-fsanitize=${SWITCHYARD_SANITIZE_CHECKS} -fno-sanitize-recover=all -fno-omit-frame-pointer -g)
  add_link_options(-fsanitize=${SWITCHYARD_SANITIZE_CHECKS})
endif()
