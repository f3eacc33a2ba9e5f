# `cmake --install BUILD --prefix PREFIX` (docs/library.md):
#   PREFIX/bin/switchyard
#   PREFIX/include/switchyard/{core,placement,text,operators}/...  the headers, at their source paths
#   PREFIX/lib/libswitchyard_*.a                                    the libraries a program links
#   PREFIX/lib/cmake/Switchyard/                                    find_package(Switchyard)
# The package's targets are Switchyard::core, ::placement, ::text, ::ops, ::operators, ::engine and, with
# the CUDA backend, ::cuda; cmake/SwitchyardConfig.cmake.in says what each one is.
include(CMakePackageConfigHelpers)

set(SWITCHYARD_PACKAGE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Switchyard)

# serve and cli stay out: they are the command's, and bring an HTTP server and CLI11 with them.
set(SWITCHYARD_EXPORTED_LIBRARIES switchyard_core switchyard_ops switchyard_operators switchyard_placement switchyard_text switchyard_engine)
if(SWITCHYARD_CUDA_BACKEND)
  list(APPEND SWITCHYARD_EXPORTED_LIBRARIES switchyard_cuda)
endif()
foreach(library IN LISTS SWITCHYARD_EXPORTED_LIBRARIES)
  string(REPLACE "switchyard_" "" name ${library})
  set_target_properties(${library} PROPERTIES EXPORT_NAME ${name})
endforeach()

# A sanitizer build's libraries call into the sanitizer's runtime, which the program must link.
if(NOT SWITCHYARD_SANITIZE_CHECKS STREQUAL "")
  target_link_options(switchyard_core INTERFACE $<INSTALL_INTERFACE:-fsanitize=${SWITCHYARD_SANITIZE_CHECKS}>)
endif()

install(TARGETS switchyard RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ${SWITCHYARD_EXPORTED_LIBRARIES} EXPORT SwitchyardTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT SwitchyardTargets NAMESPACE Switchyard:: DESTINATION ${SWITCHYARD_PACKAGE_DIR})

# The headers of the exported libraries, every one of them: a public header includes others from
# all four folders. The CUDA backend's (.cuh files are its kernels' own and never included by a
# header) need the CUDA runtime's headers, so a build without the backend leaves them out.
set(SWITCHYARD_HEADERS "")
foreach(folder core placement text operators)
  file(GLOB_RECURSE headers RELATIVE ${PROJECT_SOURCE_DIR} CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${folder}/*.h)
  list(APPEND SWITCHYARD_HEADERS ${headers})
endforeach()
if(NOT SWITCHYARD_CUDA_BACKEND)
  list(FILTER SWITCHYARD_HEADERS EXCLUDE REGEX "^operators/cuda/")
endif()
foreach(header IN LISTS SWITCHYARD_HEADERS)
  get_filename_component(folder ${header} DIRECTORY)
  install(FILES ${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/switchyard/${folder})
endforeach()
install(FILES ${PROJECT_BINARY_DIR}/generated/switchyard_config.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/switchyard)

# The package: SwitchyardConfig.cmake finds the libraries' own dependencies again, then imports the
# targets. Before 1.0 a minor release may change the API, so only the same minor version matches.
if(SWITCHYARD_CUDA_BACKEND)
  get_filename_component(SWITCHYARD_CUDA_TOOLKIT_ROOT ${CUDAToolkit_BIN_DIR} DIRECTORY)
endif()
configure_package_config_file(cmake/SwitchyardConfig.cmake.in ${PROJECT_BINARY_DIR}/SwitchyardConfig.cmake
                              INSTALL_DESTINATION ${SWITCHYARD_PACKAGE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/SwitchyardConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/SwitchyardConfig.cmake ${PROJECT_BINARY_DIR}/SwitchyardConfigVersion.cmake
        DESTINATION ${SWITCHYARD_PACKAGE_DIR})
