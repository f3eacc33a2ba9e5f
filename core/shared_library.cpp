#include "core/shared_library.h"

#include <dlfcn.h>
#include <link.h>

#include <filesystem>

#include "core/error.h"

namespace switchyard {

void* SharedLibrary::symbol(const char* name) const {
  dlerror();  // clears an earlier error, so that the one read below is this lookup's
  void* address = dlsym(handle, name);
  if (address == nullptr) {
    const char* reason = dlerror();
    throw InputError(file + " has no symbol " + name + ": " + (reason != nullptr ? reason : "it is null") +
                     "; install the library version this build was compiled against");
  }
  return address;
}

SharedLibrary open_shared_library(const std::vector<std::string>& candidates, const std::string& purpose,
                                  const std::string& fix) {
  std::string tried;
  for (const std::string& file : candidates) {
    // RTLD_LOCAL: its symbols serve only the lookups made through this handle, so they cannot
    // interpose on the process's own definitions of the same names.
    if (void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL)) return SharedLibrary{handle, file};
    const char* reason = dlerror();
    tried += (tried.empty() ? "" : "; ") + file + ": " + (reason != nullptr ? reason : "unknown reason");
  }
  throw InputError("cannot load " + purpose + ": tried " + (tried.empty() ? "no file" : tried) + "; " + fix);
}

bool shared_library_loaded(const std::string& prefix) {
  struct Search {
    const std::string* prefix;
    bool found = false;
  } search{&prefix};
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        if (info->dlpi_name != nullptr &&
            std::filesystem::path(info->dlpi_name).filename().string().starts_with(*s->prefix))
          s->found = true;
        return 0;
      },
      &search);
  return search.found;
}

}  // namespace switchyard
