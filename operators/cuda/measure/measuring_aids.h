#pragma once
// The measuring aids' hooks in cuda::launch_kernel (launch.cuh), defined in launch.cu: leaving
// kernels out (leave_out.h) and the timeline of a decode step (timeline.h).
#include <cuda_runtime_api.h>

namespace switchyard::cuda {

// Whether either aid runs: one relaxed load.
bool measuring_aids_on();
// While a timeline records: appends `kernel` to its launches. Returns whether launch_kernel is to
// leave it out.
bool measure_launch(const void* kernel);

// Each translation unit's timeline target (launch.cuh): points its kernels' stamps at `stamps`
// (`room` times after the count), or at nothing. Registered before main runs; makes no CUDA call.
using TimelineTarget = cudaError_t (*)(unsigned long long* stamps, unsigned long long room);
bool register_timeline_target(TimelineTarget target);
// Every registered target at once, on the current device (Timeline's constructor and destructor).
void point_timelines(unsigned long long* stamps, unsigned long long room);

}  // namespace switchyard::cuda
