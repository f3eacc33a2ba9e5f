#pragma once
// Shared libraries opened while a command runs, by the part that needs them, so that a command
// which never reaches that part never loads them: cuBLAS is opened by the first GPU operator
// (operators/cuda/kernels/cublas_on_demand.cpp), and `switchyard --help` or `check` load no CUDA library.
// Opened libraries stay loaded for the life of the process (nothing is unloaded at exit while a
// static destructor might still call into them).
#include <string>
#include <vector>

namespace switchyard {

struct SharedLibrary {
  void* handle = nullptr;
  std::string file;  // the candidate that loaded, as it was passed to dlopen

  // The address of `symbol`; InputError (exit 2) naming the symbol, this file and dlerror()'s
  // reason when the library has no such symbol (a cuBLAS older than the headers we built with).
  void* symbol(const char* name) const;
};

// Opens the first of `candidates` that loads: a bare soname ("libcublas.so.13") is searched as the
// dynamic linker searches (LD_LIBRARY_PATH, the system's library cache, the default directories), a
// path is opened as it is. When none loads, InputError (exit 2): "cannot load <purpose>: tried
// <file>: <dlerror>; ...; <fix>".
SharedLibrary open_shared_library(const std::vector<std::string>& candidates, const std::string& purpose,
                                  const std::string& fix);

// Whether a shared object whose file name starts with `prefix` ("libcublas") is mapped into this
// process now.
bool shared_library_loaded(const std::string& prefix);

}  // namespace switchyard
