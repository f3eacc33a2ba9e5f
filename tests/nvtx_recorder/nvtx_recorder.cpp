// An NVTX injection library for the tests: NVTX loads it from NVTX_INJECTION64_PATH (as it loads a
// profiler's) and it appends every range push and pop of the process to the file named by
// SWITCHYARD_NVTX_LOG, one line each: "push <thread> <depth> <name>" / "pop <thread> <depth>", with
// NVTX's per-thread nesting (thread: 0 for the first thread that pushes, then 1, ...). No GPU needed.
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace {

std::mutex mutex;
std::FILE* log_file = nullptr;
int threads = 0;
thread_local int depth = 0;
thread_local int thread = -1;

int thread_number() {
  if (thread < 0) thread = threads++;
  return thread;
}

int push_range(const char* message) {
  const std::lock_guard<std::mutex> lock(mutex);
  ++depth;
  if (log_file) std::fprintf(log_file, "push %d %d %s\n", thread_number(), depth, message ? message : "");
  return depth - 1;
}

int pop_range() {
  const std::lock_guard<std::mutex> lock(mutex);
  if (log_file) std::fprintf(log_file, "pop %d %d\n", thread_number(), depth);
  return --depth;
}

struct CloseAtExit {
  ~CloseAtExit() {
    if (log_file) std::fclose(log_file);
  }
} close_at_exit;

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table) {
  const char* path = std::getenv("SWITCHYARD_NVTX_LOG");
  if (!path || !get_table) return 0;
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_table(NVTX_ETID_CALLBACKS));
  if (!callbacks || !callbacks->GetModuleFunctionTable) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) || !table ||
      size <= NVTX_CBID_CORE_RangePop)
    return 0;
  log_file = std::fopen(path, "w");
  if (!log_file) return 0;
  *table[NVTX_CBID_CORE_RangePushA] = reinterpret_cast<NvtxFunctionPointer>(&push_range);
  *table[NVTX_CBID_CORE_RangePop] = reinterpret_cast<NvtxFunctionPointer>(&pop_range);
  return 1;
}
