#include "cli/version.h"

#include "operators/cpu/kernels/isa.h"
#include "switchyard_config.h"

// Set by cli/CMakeLists.txt: the project's version and the commit CMake last configured from
// ("unknown" outside a git checkout).
#ifndef SWITCHYARD_VERSION
#define SWITCHYARD_VERSION "unknown"
#endif
#ifndef SWITCHYARD_GIT_COMMIT
#define SWITCHYARD_GIT_COMMIT "unknown"
#endif

namespace switchyard::cli {

std::string version_text() {
  std::string kernels;
  for (cpu::Isa isa : cpu::kAllIsas)
    if (cpu::isa_supported(isa)) kernels += std::string(kernels.empty() ? "" : ", ") + cpu::isa_name(isa);
  // Whether a GPU is visible would need the CUDA runtime, which --version does not load.
  const char* cuda = SWITCHYARD_HAVE_CUDA ? "built (the CUDA runtime and cuBLAS are opened when a model first runs on a GPU)"
                                          : "not built (this build runs on the CPU only)";
  return std::string("switchyard ") + SWITCHYARD_VERSION + "\ncommit: " + SWITCHYARD_GIT_COMMIT + "\nCUDA backend: " + cuda +
         "\nCPU kernels: " + kernels + " (auto picks " + cpu::isa_name(cpu::best_isa()) + ")";
}

}  // namespace switchyard::cli
