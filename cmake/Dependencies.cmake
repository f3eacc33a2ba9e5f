# Every dependency comes from a Debian package; see README.md for the apt-get line.
find_package(PkgConfig REQUIRED)
find_package(yaml-cpp REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
find_package(nlohmann_json 3.10 REQUIRED)
# serve's HTTP server (Debian's libcpp-httplib-dev, a compiled library; its flags name the TLS and
# compression support it was built with, which its headers' types depend on).
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
find_package(CLI11 REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(Threads REQUIRED)
if(SWITCHYARD_TESTS)
  find_package(doctest REQUIRED)
endif()

# yaml-cpp 0.7 exports the target "yaml-cpp"; newer releases "yaml-cpp::yaml-cpp".
if(TARGET yaml-cpp::yaml-cpp)
  set(SWITCHYARD_YAML_TARGET yaml-cpp::yaml-cpp)
else()
  set(SWITCHYARD_YAML_TARGET yaml-cpp)
endif()
