// switchyard bench gemv: the decode matrix-vector kernels (operators/cuda/kernels/gemv.h) on the shapes of
// one DeepSeek-V2-Lite decode layer, each timed as a CUDA graph of back-to-back launches (as a
// decode step runs them), the bytes a call reads over its time beside the device-to-device copy
// bandwidth measured in the same run. The launches cycle through copies of the weights that
// together exceed the L2 cache several times over, so that every call reads its weights from HBM.
// --dtype picks the projections' weights: bf16, f32 or a ggml block type (the decode GEMV on
// blocks kept in HBM, as KLinearMarlin keeps them); MLA's kv_b_proj rows stay bf16 and the router
// f32, as the model holds them.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "switchyard_config.h"

#if SWITCHYARD_HAVE_CUDA
#include "core/quant_formats.h"
#include "operators/cpu/kernels/half.h"
#include "operators/cuda/measure/bandwidth.h"
#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/kernels/device_context.h"
#include "operators/cuda/kernels/gemv.h"
#endif

namespace switchyard::cli {
namespace {

// The most tokens a decode GEMV takes (cuda::kGemvMaxTokens; a CPU-only build checks the flag too).
constexpr std::int64_t kMaxTokens = 8;
#if SWITCHYARD_HAVE_CUDA
static_assert(kMaxTokens == cuda::kGemvMaxTokens);
#endif

struct GemvBenchOptions {
  int launches = 200;  // in the graph (more when the weight copies need more to be read once each)
  int repeat = 20;     // graph replays timed; the median is reported
  std::int64_t tokens = 1;
  int device = 0;
  std::string weights_in = "hbm";  // hbm: weights cycle through copies past L2; l2: one copy, L2-resident
  std::string dtype = "bf16";      // the projections' weights
};

#if SWITCHYARD_HAVE_CUDA

// One product of the layer: a gemv shape (or SwiGLU's gate and up) and the weight buffer a call
// reads its rows from (grouped shapes read part of it).
struct BenchShape {
  const char* name;
  cuda::GemvShape shape;
  DType dtype = DType::bf16;
  bool swiglu = false;
  std::int64_t weight_elements = 0;  // the buffer one call's weight pointer points into
  std::int64_t x_floats = 0, y_floats = 0;

  std::int64_t read_weight_bytes() const {
    return (swiglu ? 2 : 1) * static_cast<std::int64_t>(storage_bytes(dtype, static_cast<std::uint64_t>(shape.rows * shape.in)));
  }
  // What a call moves: the weights it reads, x, and y.
  std::int64_t bytes() const { return read_weight_bytes() + 4 * (x_floats + y_floats); }
};

BenchShape plain(const char* name, std::int64_t tokens, std::int64_t in, std::int64_t rows, DType dtype = DType::bf16) {
  BenchShape b{name, {}, dtype};
  b.shape.tokens = tokens;
  b.shape.in = in;
  b.shape.rows = rows;
  b.weight_elements = rows * in;
  b.x_floats = tokens * in;
  b.y_floats = tokens * rows;
  return b;
}

// DeepSeek-V2-Lite: hidden 2048, 16 heads of 128 + 64 (rope) query dims, KV latent 512, value
// head 128, shared experts 2 x 1408, 64 routed experts (the router's weights stay f32).
std::vector<BenchShape> decode_layer_shapes(std::int64_t tokens, DType projections) {
  constexpr std::int64_t kHidden = 2048, kHeads = 16, kNope = 128, kRope = 64, kLatent = 512, kValue = 128;
  constexpr std::int64_t kShared = 2 * 1408, kExperts = 64;
  std::vector<BenchShape> shapes;
  shapes.push_back(plain("q_proj + kv_a_proj", tokens, kHidden, kHeads * (kNope + kRope) + kLatent + kRope, projections));
  shapes.push_back(plain("o_proj", tokens, kHeads * kValue, kHidden, projections));
  BenchShape swiglu = plain("shared gate + up (SwiGLU)", tokens, kHidden, kShared, projections);
  swiglu.swiglu = true;
  swiglu.weight_elements *= 2;  // gate, then up
  shapes.push_back(swiglu);
  shapes.push_back(plain("shared down", tokens, kShared, kHidden, projections));

  BenchShape absorb{"query absorption (16 x 512 rows)*", {}, DType::bf16};
  absorb.shape.tokens = tokens;
  absorb.shape.in = kNope;
  absorb.shape.rows = kHeads * kLatent;
  absorb.shape.rows_per_group = kLatent;
  absorb.shape.weight_group_stride = kLatent * kNope;
  absorb.shape.x_group_stride = kNope + kRope;
  absorb.shape.x_token_stride = kHeads * (kNope + kRope);
  absorb.weight_elements = kHeads * kLatent * kNope;
  absorb.x_floats = tokens * kHeads * (kNope + kRope);
  absorb.y_floats = tokens * kHeads * kLatent;
  shapes.push_back(absorb);

  BenchShape expand{"value expansion (16 x 128 rows)", {}, DType::bf16};
  expand.shape.tokens = tokens;
  expand.shape.in = kLatent;
  expand.shape.rows = kHeads * kValue;
  expand.shape.rows_per_group = kValue;
  expand.shape.weight_group_stride = (kNope + kValue) * kLatent;  // kv_b_proj: key rows, then value rows
  expand.shape.weight_row_offset = kNope * kLatent;
  expand.shape.x_group_stride = kLatent;
  expand.shape.x_token_stride = kHeads * kLatent;
  expand.weight_elements = kHeads * (kNope + kValue) * kLatent;
  expand.x_floats = tokens * kHeads * kLatent;
  expand.y_floats = tokens * kHeads * kValue;
  shapes.push_back(expand);

  shapes.push_back(plain("router (f32)*", tokens, kHidden, kExperts, DType::f32));
  shapes.push_back(plain("lm_head (vocab 102400)", tokens, kHidden, 102400, projections));
  return shapes;
}

std::int64_t round_up(std::int64_t v, std::int64_t m) { return (v + m - 1) / m * m; }

struct Timing {
  double median_us = 0, best_us = 0;  // a call
  int copies = 0, launches = 0;
};

// The shape's calls in one CUDA graph, `launches` of them (at least one a weight copy), replayed.
Timing time_shape(cuda::DeviceContext& context, const BenchShape& b, const GemvBenchOptions& options,
                  std::size_t rotation_bytes, std::mt19937& random) {
  const auto weight_bytes = static_cast<std::int64_t>(storage_bytes(b.dtype, static_cast<std::uint64_t>(b.weight_elements)));
  const std::int64_t copy_bytes = round_up(weight_bytes, 256);
  Timing timing;
  timing.copies = static_cast<int>(std::max<std::int64_t>(1, round_up(static_cast<std::int64_t>(rotation_bytes), copy_bytes) / copy_bytes));
  timing.launches = std::max(options.launches, timing.copies);

  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<std::uint8_t> host(static_cast<std::size_t>(copy_bytes));
  if (is_block_quantized(b.dtype)) {
    // Random bytes with finite half-float scales of about 2^-6: weights of order 0.1.
    for (auto& byte : host) byte = static_cast<std::uint8_t>(random());
    const DTypeInfo& info = dtype_info(b.dtype);
    for (std::int64_t block = 0; block < b.weight_elements / info.block_elements; ++block)
      quant::set_block_scales(b.dtype, host.data() + block * info.block_bytes, value(random) / 64.0f,
                              value(random) / 64.0f);
  } else {
    for (std::int64_t i = 0; i < b.weight_elements; ++i) {
      const float v = value(random) * 0.05f;
      if (b.dtype == DType::bf16) reinterpret_cast<std::uint16_t*>(host.data())[i] = cpu::f32_to_bf16(v);
      else reinterpret_cast<float*>(host.data())[i] = v;
    }
  }
  cuda::DeviceBuffer weights = context.allocate(static_cast<std::size_t>(copy_bytes) * timing.copies, "the weight copies");
  auto* base = static_cast<char*>(weights.data());
  context.copy_to_device(base, host.data(), host.size());
  for (int c = 1; c < timing.copies; ++c) context.copy_on_device(base + c * copy_bytes, base, static_cast<std::size_t>(copy_bytes));
  std::vector<float> x_host(static_cast<std::size_t>(b.x_floats));
  for (float& v : x_host) v = value(random);
  cuda::DeviceBuffer x = context.upload(x_host.data(), x_host.size() * 4, "x");
  cuda::DeviceBuffer y = context.allocate(static_cast<std::size_t>(b.y_floats) * 4, "y");
  context.synchronize();

  cudaStream_t stream = context.stream();
  auto call = [&](int i) {
    const char* w = base + (i % timing.copies) * copy_bytes;
    if (b.swiglu)
      cuda::gemv_swiglu(b.shape.tokens, b.shape.in, b.shape.rows, w, w + weight_bytes / 2, b.dtype,
                        x.as<float>(), y.as<float>(), stream);
    else
      cuda::gemv(b.shape, w, b.dtype, x.as<float>(), y.as<float>(), stream);
  };
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  SWITCHYARD_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    for (int i = 0; i < timing.launches; ++i) call(i);
  } catch (...) {
    cudaStreamEndCapture(stream, &graph);
    if (graph != nullptr) cudaGraphDestroy(graph);
    throw;
  }
  SWITCHYARD_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  SWITCHYARD_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t start = nullptr, stop = nullptr;
  SWITCHYARD_CUDA_CHECK(cudaEventCreate(&start));
  SWITCHYARD_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> per_call_us;
  for (int r = 0; r < std::max(1, options.repeat) + 1; ++r) {  // the first replay warms up
    SWITCHYARD_CUDA_CHECK(cudaEventRecord(start, stream));
    SWITCHYARD_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    SWITCHYARD_CUDA_CHECK(cudaEventRecord(stop, stream));
    SWITCHYARD_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    SWITCHYARD_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (r > 0) per_call_us.push_back(1e3 * ms / timing.launches);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  std::sort(per_call_us.begin(), per_call_us.end());
  timing.median_us = per_call_us[per_call_us.size() / 2];
  timing.best_us = per_call_us.front();
  return timing;
}

int run_bench_gemv(const GemvBenchOptions& options) {
  DType projections = DType::bf16;
  for (const DTypeInfo& info : all_dtypes())
    if (options.dtype == info.name) projections = info.dtype;  // one of the flag's choices
  if (cuda::device_count() == 0) {
    std::fprintf(stderr, "bench gemv: no CUDA device is visible; this benchmark times GPU kernels and needs one\n");
    return 1;
  }
  cuda::DeviceContext context(options.device);  // a device that is not there: a clear error first
  const cuda::CopyBandwidth copy = cuda::measure_copy_bandwidth(options.device);
  cudaDeviceProp properties{};
  SWITCHYARD_CUDA_CHECK(cudaGetDeviceProperties(&properties, options.device));
  // The launches' weights together: four L2 caches, at least 256 MiB (or one copy, --weights_in l2).
  const std::size_t rotation_bytes =
      options.weights_in == "l2" ? 0
                                 : std::max<std::size_t>(std::size_t{4} * static_cast<std::size_t>(properties.l2CacheSize),
                                                         std::size_t{256} << 20);
  const cuda::DeviceGuard guard(options.device);
  std::mt19937 random(1);

  std::printf("bench gemv: %s (%d SMs, %d MiB L2), %lld token%s a call, f32 x, CUDA graphs of >= %d launches, "
              "median of %d replays\n",
              properties.name, properties.multiProcessorCount, properties.l2CacheSize >> 20,
              static_cast<long long>(options.tokens), options.tokens == 1 ? "" : "s", options.launches,
              std::max(1, options.repeat));
  std::printf("ceiling: device-to-device copy %.0f GB/s (read + write, %zu MiB, best of 10); ",
              copy.bytes_per_second / 1e9, copy.bytes >> 20);
  if (rotation_bytes > 0) std::printf("weights cycle through %zu MiB of copies\n\n", rotation_bytes >> 20);
  else std::printf("one weight copy a shape (L2-resident where it fits)\n\n");
  std::printf("%-34s %7s %6s %6s | %7s %8s %8s %8s %7s\n", "shape", "dtype", "rows", "in", "MB", "us/call",
              "best us", "GB/s", "% copy");
  for (const BenchShape& b : decode_layer_shapes(options.tokens, projections)) {
    const Timing t = time_shape(context, b, options, rotation_bytes, random);
    const double bytes = static_cast<double>(b.bytes());
    const double gbps = bytes / (t.median_us * 1e-6) / 1e9;
    std::printf("%-34s %7s %6lld %6lld | %7.2f %8.2f %8.2f %8.0f %6.0f%%\n", b.name, dtype_name(b.dtype),
                static_cast<long long>(b.shape.rows), static_cast<long long>(b.shape.in), bytes / 1e6, t.median_us,
                t.best_us, gbps, 100.0 * gbps * 1e9 / copy.bytes_per_second);
  }
  std::printf("\nMB: weights read + x + y a call. *: decode runs these in fused launches of their own (the\n"
              "absorption in the MLA cache write, the router in cuda::router_gate); timed here as plain GEMVs.\n");
  return 0;
}

#else

int run_bench_gemv(const GemvBenchOptions&) {
  std::fprintf(stderr, "bench gemv: this build has no CUDA backend (configure with -DSWITCHYARD_CUDA=ON)\n");
  return 1;
}

#endif

}  // namespace

Runner add_bench_gemv_command(CLI::App& bench) {
  auto options = std::make_shared<GemvBenchOptions>();
  CLI::App* sub = bench.add_subcommand(
      "gemv", "decode GEMV kernels on one DeepSeek-V2-Lite layer's shapes: us/call and GB/s vs device copy bandwidth");
  sub->add_option("--launches", options->launches, "launches in each CUDA graph")
      ->capture_default_str()
      ->transform(integer_range(1, 100000));
  sub->add_option("--repeat", options->repeat, "graph replays timed (median reported)")
      ->capture_default_str()
      ->transform(integer_range(1, 10000));
  sub->add_option("--tokens", options->tokens, "tokens a call")
      ->capture_default_str()
      ->transform(integer_range<std::int64_t>(1, kMaxTokens));
  sub->add_option("--device", options->device, "CUDA device")->capture_default_str()->transform(integer_range(0, 1023));
  sub->add_option("--weights_in", options->weights_in,
                  "hbm: every call reads its weights from HBM; l2: one copy, read from L2 where it fits")
      ->capture_default_str()
      ->check(CLI::IsMember({"hbm", "l2"}));
  sub->add_option("--dtype", options->dtype,
                  "the projections' weights: bf16, f32 or a ggml block type (q8_0, q4_0, q4_1, q5_0, q5_1, q2_k ... q6_k, "
                  "iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq4_nl, iq4_xs, mxfp4)")
      ->capture_default_str()
      ->transform(CLI::IsMember({"bf16", "f32", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k",
                                 "q6_k", "iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq4_nl",
                                 "iq4_xs", "mxfp4"},
                                CLI::ignore_case));
  return [options]() { return run_bench_gemv(*options); };
}

}  // namespace switchyard::cli
