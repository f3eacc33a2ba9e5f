#pragma once
// What `switchyard --version` prints: the release, the commit it was built from, whether the CUDA
// backend is built in, and the CPU kernels this CPU runs. Loads no CUDA library.
#include <string>

namespace switchyard::cli {

std::string version_text();

}  // namespace switchyard::cli
