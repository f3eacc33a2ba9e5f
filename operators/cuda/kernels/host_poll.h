#pragma once
// A host thread waiting for something a stream will write into mapped host memory (a hand-off
// flag, a decode step's token): it looks, pauses, and now and then asks the stream whether it has
// failed or drained without the write, so that a faulted or missing write ends in an error
// instead of a hang. Two pauses, for two kinds of waiter:
//
//   spin:  the CPU experts' worker waiting for its input, on the critical path of every layer;
//          it asks the stream once every 4096 looks.
//   sleep: a host whose next work is already queued (chained decode steps), beside the CPU
//          experts' OpenMP team, which a spinning or often-waking thread would slow down (it
//          takes a core from the experts' team); it
//          asks the stream after every 20 us sleep.
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "operators/cuda/kernels/cuda_check.h"

namespace switchyard::cuda {

enum class PollPause { spin, sleep };

// Returns once ready() is true. A stream that drained without making it true throws
// runtime_error(missing()), unless *launching was true before the stream was asked (work that
// will write it is about to be queued: an idle stream is then no proof of a missing write, and
// the stream is not asked); a stream that failed throws its error.
template <class Ready, class Missing>
void poll_until(Ready&& ready, cudaStream_t stream, PollPause pause, Missing&& missing,
                const std::atomic<bool>* launching = nullptr) {
  for (std::uint64_t look = 1;; ++look) {
    if (ready()) return;
    if (pause == PollPause::spin) {
#if defined(__x86_64__)
      _mm_pause();
#endif
      if (look % 4096 != 0) continue;
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    // While the host is still queuing work (*launching), the stream is not asked at all: an idle
    // stream then proves no missing write, and the query itself can wait inside the driver behind
    // that host thread's launch, which waits for queue space the GPU frees only once this waiter
    // has seen its flag (a deadlock). A fault shows at the first query after the launches.
    // `launching` is read before the query: read after it, a launch that returned in between would
    // leave an idle stream (queried before the launch) beside launching == false, and the waiter
    // would give up on a write that is on its way.
    if (launching != nullptr && launching->load(std::memory_order_acquire)) continue;
    const cudaError_t status = cudaStreamQuery(stream);
    if (status == cudaErrorNotReady) continue;
    if (ready()) return;
    if (status == cudaSuccess) throw std::runtime_error(missing());
    check_cuda(status, "cudaStreamQuery while the host waited for the GPU", __FILE__, __LINE__);
  }
}

}  // namespace switchyard::cuda
