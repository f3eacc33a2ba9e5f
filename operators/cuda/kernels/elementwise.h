#pragma once
// Small element-wise kernels the GPU operators glue their GEMMs and attention together with.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace switchyard::cuda {

// Device pointers, queued on `stream`.
// y[i] += x[i], i < count.
void add_in_place(float* y, const float* x, std::int64_t count, cudaStream_t stream);
// y[r, c] += bias[c] for a [rows, cols] matrix.
void add_bias(float* y, const float* bias, std::int64_t rows, std::int64_t cols, cudaStream_t stream);
// Copies a [rows, width] block: row r from source + r * source_stride to destination + r * destination_stride.
void copy_rows(const float* source, std::int64_t source_stride, std::int64_t rows, std::int64_t width,
               float* destination, std::int64_t destination_stride, cudaStream_t stream);
// bf16 copies of f32 values, rounded to nearest even (as torch's .to(bfloat16)).
void round_to_bf16(const float* x, std::int64_t count, std::uint16_t* out, cudaStream_t stream);

// The CPU-experts hand-off without copy engines: the kernels read and write page-locked host
// memory directly through its device mapping (host_* are device pointers of mapped memory).
// x: [count_x] f32, ids: [count_k] int32, weights: [count_k] f32 written to the host.
void write_to_host(const float* x, std::int64_t count_x, const std::int32_t* ids, const float* weights,
                   std::int64_t count_k, float* host_x, std::int32_t* host_ids, float* host_weights,
                   cudaStream_t stream);
// out[i] = host[i] (+ add[i] when add is not null), host read uncached (the CPU wrote it since).
// clear_flag (a device view of a host-mapped flag, or null): set to 0 by the same launch.
// wait_first: the launch itself first waits until the flag is 1 (the host's release), so no stream
// wait need precede it; one block does the work then, for a decode step's few thousand values.
// Like a stream wait, it waits for as long as the host takes.
void add_from_host(const float* host, const float* add, std::int64_t count, float* out, cudaStream_t stream,
                   std::uint32_t* clear_flag = nullptr, bool wait_first = false);

// DeepSeek MLA with decompressed keys and values (prefill): from kv = kv_b_proj(latent)
// [context, heads, nope + v_dim] and the shared rope key [context, rope], the per-head keys
// [context, heads, nope + rope] (k_nope then the rope key) and values [context, heads, v_dim].
void assemble_mla_keys_values(const float* kv, const float* rope_keys, std::int64_t context, std::int64_t heads,
                              std::int64_t nope, std::int64_t rope, std::int64_t v_dim, float* keys, float* values,
                              cudaStream_t stream);

}  // namespace switchyard::cuda
