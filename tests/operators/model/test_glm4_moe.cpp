// GLM-4.5 (glm4_moe) through the engine, against a plain reference written here from transformers'
// modeling_glm4_moe.py: RoPE over the first head_dim * partial_rotary_factor dimensions of each
// head (rotate_half within them), q/k/v biases, optional per-head q/k RMSNorm before RoPE, a dense
// first layer, then MoE layers routed by sigmoid scores plus e_score_correction_bias (for the
// choice only) in groups scored by their two best experts, weights normalised and scaled, plus a
// shared expert. Checkpoints are make-model's tiny presets in f32 with random weights, biases
// included (core/random_weights.h). The transformers fixtures (tests/operators/model/test_fidelity.cpp) check the
// same against transformers itself.
//
// Tolerance: 1e-4 of the logits' scale, as the fidelity test; both sides compute in f32 (the
// reference accumulates in double), so the bound absorbs summation order. Each feature the
// reference implements is also switched off in turn, and that reference must be more than 10x the
// bound away: the comparison tells the features apart.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "core/checkpoint.h"
#include "core/make_model.h"
#include "core/module_tree.h"
#include "tests/core_test_support.h"
#include "operators/model/causal_lm.h"
#include "placement/check.h"
#include "tests/test_support.h"

#include "switchyard_config.h"
#if SWITCHYARD_HAVE_CUDA
#include "tests/cuda_test_support.h"
#endif

namespace sy = switchyard;

namespace {

constexpr double kTolerance = 1e-4;
const std::vector<std::int32_t> kPrompt = {3, 141, 59, 265, 358, 97, 93, 238, 46, 264, 338, 327};
constexpr int kDecodeSteps = 8;

// What the reference leaves out, to show that the comparison notices each feature.
struct Omit {
  bool biases = false;
  bool partial_rotary = false;  // turn the whole head instead
  bool qk_norm = false;
  bool correction_bias = false;
  bool shared_expert = false;
};

class ReferenceGlm4Moe {
 public:
  ReferenceGlm4Moe(const sy::ModelConfig& c, const sy::Checkpoint& weights, Omit omit = {})
      : c_(c), w_(weights), omit_(omit) {}

  // Logits of every position, [ids, vocab], the whole sequence recomputed (no cache).
  std::vector<float> logits(const std::vector<std::int32_t>& ids) const {
    const std::int64_t n = static_cast<std::int64_t>(ids.size()), h = c_.hidden_size;
    const std::vector<float> embed = get("model.embed_tokens.weight", {c_.vocab_size, h});
    std::vector<float> x(static_cast<std::size_t>(n * h));
    for (std::int64_t t = 0; t < n; ++t)
      std::copy_n(embed.data() + ids[static_cast<std::size_t>(t)] * h, h, x.data() + t * h);
    for (int layer = 0; layer < c_.num_hidden_layers; ++layer) {
      const std::string p = "model.layers." + std::to_string(layer) + ".";
      add(x, attention(rms_norm(x, get(p + "input_layernorm.weight", {h})), p + "self_attn."));
      const std::vector<float> normed = rms_norm(x, get(p + "post_attention_layernorm.weight", {h}));
      add(x, c_.is_moe_layer(layer) ? moe(normed, p + "mlp.") : mlp(normed, p + "mlp.", c_.intermediate_size));
    }
    return linear(rms_norm(x, get("model.norm.weight", {h})), "lm_head", c_.vocab_size, h, false);
  }

 private:
  std::vector<float> get(const std::string& name, const std::vector<std::int64_t>& shape) const {
    const sy::Tensor t = w_.get(name, shape, {sy::DType::f32});
    return std::vector<float>(t.data_as<float>(), t.data_as<float>() + t.numel());
  }
  static void add(std::vector<float>& x, const std::vector<float>& delta) {
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += delta[i];
  }
  // RMSNorm over each row of `width` values: weight * x / sqrt(mean(x^2) + eps).
  std::vector<float> rms_norm(const std::vector<float>& x, const std::vector<float>& weight) const {
    const std::size_t width = weight.size();
    std::vector<float> out(x.size());
    for (std::size_t row = 0; row < x.size() / width; ++row) {
      double squares = 0;
      for (std::size_t i = 0; i < width; ++i) squares += static_cast<double>(x[row * width + i]) * x[row * width + i];
      const double inverse = 1.0 / std::sqrt(squares / static_cast<double>(width) + c_.rms_norm_eps);
      for (std::size_t i = 0; i < width; ++i)
        out[row * width + i] = static_cast<float>(weight[i] * (x[row * width + i] * inverse));
    }
    return out;
  }
  // x [rows, in] -> [rows, out] with weight [out, in] and, when `bias`, NAME.bias [out].
  std::vector<float> linear(const std::vector<float>& x, const std::string& name, std::int64_t out, std::int64_t in,
                            bool bias) const {
    const std::vector<float> w = get(name + ".weight", {out, in});
    const std::vector<float> b = bias ? get(name + ".bias", {out}) : std::vector<float>();
    const std::int64_t rows = static_cast<std::int64_t>(x.size()) / in;
    std::vector<float> y(static_cast<std::size_t>(rows * out));
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t o = 0; o < out; ++o) {
        double sum = bias && !omit_.biases ? b[static_cast<std::size_t>(o)] : 0.0;
        for (std::int64_t i = 0; i < in; ++i) sum += static_cast<double>(x[r * in + i]) * w[o * in + i];
        y[static_cast<std::size_t>(r * out + o)] = static_cast<float>(sum);
      }
    return y;
  }
  std::vector<float> mlp(const std::vector<float>& x, const std::string& prefix, std::int64_t width) const {
    const std::int64_t h = c_.hidden_size;
    std::vector<float> g = linear(x, prefix + "gate_proj", width, h, false);
    const std::vector<float> u = linear(x, prefix + "up_proj", width, h, false);
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    return linear(g, prefix + "down_proj", h, width, false);
  }
  // Turns the first `dims` values of each head of x [tokens, heads, head_dim] at positions 0..:
  // pair (i, i + dims/2) by position * theta^(-2i/dims).
  void rope(std::vector<float>& x, std::int64_t heads) const {
    const int dims = omit_.partial_rotary ? c_.head_dim : static_cast<int>(c_.head_dim * c_.partial_rotary_factor);
    const int half = dims / 2;
    const std::int64_t tokens = static_cast<std::int64_t>(x.size()) / (heads * c_.head_dim);
    for (std::int64_t t = 0; t < tokens; ++t)
      for (std::int64_t head = 0; head < heads; ++head) {
        float* v = x.data() + (t * heads + head) * c_.head_dim;
        for (int i = 0; i < half; ++i) {
          const double angle = static_cast<double>(t) / std::pow(c_.rope_theta, 2.0 * i / dims);
          const double a = v[i], b = v[i + half];
          v[i] = static_cast<float>(a * std::cos(angle) - b * std::sin(angle));
          v[i + half] = static_cast<float>(b * std::cos(angle) + a * std::sin(angle));
        }
      }
  }
  std::vector<float> attention(const std::vector<float>& x, const std::string& prefix) const {
    const std::int64_t h = c_.hidden_size, d = c_.head_dim, heads = c_.num_attention_heads,
                       kv_heads = c_.num_key_value_heads, tokens = static_cast<std::int64_t>(x.size()) / h;
    std::vector<float> q = linear(x, prefix + "q_proj", heads * d, h, c_.attention_bias);
    std::vector<float> k = linear(x, prefix + "k_proj", kv_heads * d, h, c_.attention_bias);
    const std::vector<float> v = linear(x, prefix + "v_proj", kv_heads * d, h, c_.attention_bias);
    if (c_.qk_norm && !omit_.qk_norm) {
      q = rms_norm(q, get(prefix + "q_norm.weight", {d}));
      k = rms_norm(k, get(prefix + "k_norm.weight", {d}));
    }
    rope(q, heads);
    rope(k, kv_heads);
    std::vector<float> out(static_cast<std::size_t>(tokens * heads * d), 0.0f);
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    for (std::int64_t t = 0; t < tokens; ++t)
      for (std::int64_t head = 0; head < heads; ++head) {
        const std::int64_t kv = head / (heads / kv_heads);
        std::vector<double> p(static_cast<std::size_t>(t + 1));
        for (std::int64_t s = 0; s <= t; ++s) {
          double dot = 0;
          for (std::int64_t i = 0; i < d; ++i) dot += static_cast<double>(q[(t * heads + head) * d + i]) * k[(s * kv_heads + kv) * d + i];
          p[static_cast<std::size_t>(s)] = dot * scale;
        }
        const double top = *std::max_element(p.begin(), p.end());
        double sum = 0;
        for (double& e : p) sum += (e = std::exp(e - top));
        for (std::int64_t i = 0; i < d; ++i) {
          double acc = 0;
          for (std::int64_t s = 0; s <= t; ++s) acc += p[static_cast<std::size_t>(s)] / sum * v[(s * kv_heads + kv) * d + i];
          out[static_cast<std::size_t>((t * heads + head) * d + i)] = static_cast<float>(acc);
        }
      }
    return linear(out, prefix + "o_proj", h, heads * d, false);
  }
  // The indices of the k largest of `values`, the lower index first among equals.
  static std::vector<int> top(const std::vector<float>& values, int k) {
    std::vector<int> order(values.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return values[static_cast<std::size_t>(a)] > values[static_cast<std::size_t>(b)]; });
    order.resize(static_cast<std::size_t>(k));
    return order;
  }
  std::vector<float> moe(const std::vector<float>& x, const std::string& prefix) const {
    const std::int64_t h = c_.hidden_size, tokens = static_cast<std::int64_t>(x.size()) / h;
    const int experts = c_.n_routed_experts, per_group = experts / c_.n_group;
    const std::vector<float> router = linear(x, prefix + "gate", experts, h, false);
    const std::vector<float> bias = get(prefix + "gate.e_score_correction_bias", {experts});
    std::vector<float> out = omit_.shared_expert
                                 ? std::vector<float>(x.size(), 0.0f)
                                 : mlp(x, prefix + "shared_experts.", c_.moe_intermediate_size * c_.n_shared_experts);
    for (std::int64_t t = 0; t < tokens; ++t) {
      std::vector<float> scores(static_cast<std::size_t>(experts)), choice(scores.size());
      for (int e = 0; e < experts; ++e) {
        scores[static_cast<std::size_t>(e)] = 1.0f / (1.0f + std::exp(-router[static_cast<std::size_t>(t * experts + e)]));
        choice[static_cast<std::size_t>(e)] = scores[static_cast<std::size_t>(e)] + (omit_.correction_bias ? 0.0f : bias[static_cast<std::size_t>(e)]);
      }
      std::vector<float> group_scores(static_cast<std::size_t>(c_.n_group));
      for (int g = 0; g < c_.n_group; ++g) {
        std::vector<float> members(choice.begin() + g * per_group, choice.begin() + (g + 1) * per_group);
        std::sort(members.rbegin(), members.rend());
        group_scores[static_cast<std::size_t>(g)] = members[0] + members[1];
      }
      const std::vector<int> kept = top(group_scores, c_.topk_group);
      for (int e = 0; e < experts; ++e)  // transformers' masked_fill(..., 0.0)
        if (std::find(kept.begin(), kept.end(), e / per_group) == kept.end()) choice[static_cast<std::size_t>(e)] = 0.0f;
      const std::vector<int> chosen = top(choice, c_.num_experts_per_tok);
      double sum = 0;
      for (int e : chosen) sum += scores[static_cast<std::size_t>(e)];
      const std::vector<float> row(x.begin() + t * h, x.begin() + (t + 1) * h);
      for (int e : chosen) {
        const double weight = (c_.norm_topk_prob ? scores[static_cast<std::size_t>(e)] / (sum + 1e-20) : scores[static_cast<std::size_t>(e)]) *
                              c_.routed_scaling_factor;
        const std::vector<float> y = mlp(row, prefix + "experts." + std::to_string(e) + ".", c_.moe_intermediate_size);
        for (std::int64_t i = 0; i < h; ++i) out[static_cast<std::size_t>(t * h + i)] += static_cast<float>(weight * y[static_cast<std::size_t>(i)]);
      }
    }
    return out;
  }

  const sy::ModelConfig& c_;
  const sy::Checkpoint& w_;
  Omit omit_;
};

// max |a - b| / max |b| over the rows both hold.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return worst / scale;
}

struct Engine {
  sy::CheckResult check;
  std::unique_ptr<sy::Checkpoint> weights;
  std::unique_ptr<sy::CausalLM> model;
};

Engine load(const std::filesystem::path& dir, const std::string& profile, const std::string& profile_text = "",
            sy::CausalLMOptions options = {}) {
  Engine e;
  sy::CheckOptions check;
  check.model.model_path = dir;
  check.profile = profile;
  if (!profile_text.empty()) check.profile_text = profile_text;
  e.check = sy::run_check(check);
  for (const sy::Diagnostic& d : e.check.diagnostics.items()) INFO(sy::format_diagnostic(d));
  REQUIRE_FALSE(e.check.diagnostics.has_errors());
  e.weights = std::make_unique<sy::Checkpoint>(sy::Checkpoint::open(dir));
  const sy::BuildContext context{*e.check.tree, e.check.plan, *e.weights, 64, nullptr};
  e.model = std::make_unique<sy::CausalLM>(context, options);
  return e;
}

// The engine's logits for the prompt (every position), then greedy steps through its cache; each
// compared with the reference's for the same tokens. Returns the worst relative error.
double run_against_reference(sy::CausalLM& model, const ReferenceGlm4Moe& reference) {
  const std::int64_t vocab = model.vocab_size();
  std::vector<std::int32_t> ids = kPrompt;
  std::vector<float> got = model.forward(ids, 0, /*all_logits=*/true);
  double worst = relative_error(got, reference.logits(ids));
  for (int step = 0; step < kDecodeSteps; ++step) {
    const std::int32_t next = static_cast<std::int32_t>(std::max_element(got.end() - vocab, got.end()) - (got.end() - vocab));
    ids.push_back(next);
    got = model.forward(std::span(&ids.back(), 1), static_cast<std::int64_t>(ids.size()) - 1);
    const std::vector<float> all = reference.logits(ids);
    worst = std::max(worst, relative_error(got, std::vector<float>(all.end() - vocab, all.end())));
  }
  return worst;
}

sy::MakeModelSummary make_tiny(const std::string& preset, const std::filesystem::path& dir) {
  sy::MakeModelOptions options;
  options.preset = preset;
  options.out_dir = dir;
  options.seed = 20;
  options.dtype = "f32";
  return sy::make_model(options);
}

}  // namespace

TEST_CASE("glm4_moe: the CPU path matches a plain reference, with and without q/k norms") {
  for (const char* preset : {"tiny-glm4-moe", "tiny-glm4-moe-qk-norm"}) {
    INFO(std::string(preset));
    const sy::core_testing::TempDir dir;
    const sy::MakeModelSummary made = make_tiny(preset, dir.path());
    Engine e = load(dir.path(), sy::testing::source_path("optimize_rules/GLM-4.5-Air-cpu.yaml"));
    const sy::ModelConfig& c = e.check.tree->config();
    REQUIRE(c.rope_dim() * 2 == c.head_dim);
    REQUIRE(c.attention_bias);
    REQUIRE(c.n_group > c.topk_group);
    // The biases are random, so a path that dropped them would be seen.
    const sy::Tensor q_bias = e.weights->get("model.layers.0.self_attn.q_proj.bias", {c.num_attention_heads * c.head_dim}, {sy::DType::f32});
    CHECK(std::any_of(q_bias.data_as<float>(), q_bias.data_as<float>() + q_bias.numel(), [](float b) { return b != 0.0f; }));

    const ReferenceGlm4Moe reference(c, *e.weights);
    const double error = run_against_reference(*e.model, reference);
    MESSAGE(std::string(preset) << ": relative error of the logits against the reference " << error);
    CHECK(error <= kTolerance);

    std::vector<std::pair<const char*, Omit>> omissions = {
        {"biases", {.biases = true}},
        {"partial rotary", {.partial_rotary = true}},
        {"correction bias", {.correction_bias = true}},
        {"shared expert", {.shared_expert = true}},
    };
    if (c.qk_norm) omissions.push_back({"q/k norms", {.qk_norm = true}});
    for (const auto& omission : omissions) {
      const auto& omit = omission.second;
      INFO("the reference without " << std::string(omission.first));
      Engine fresh = load(dir.path(), sy::testing::source_path("optimize_rules/GLM-4.5-Air-cpu.yaml"));
      const double apart = run_against_reference(*fresh.model, ReferenceGlm4Moe(c, *fresh.weights, omit));
      CHECK(apart > 10 * kTolerance);
    }
  }
}

TEST_CASE("glm4_moe: the GPU and hybrid paths match the plain reference, eagerly and as CUDA graphs") {
#if SWITCHYARD_HAVE_CUDA
  if (sy::testing::no_gpu()) return;
  constexpr const char* kAllGpu = R"(- match:
    name: ""
  replace:
    class: default
    kwargs: {generate_device: "cuda:0", prefill_device: "cuda:0"}
)";
  // f32 weights: cuBLAS in f32 and f32 kernels land near 1e-6; the bound absorbs summation order.
  constexpr double kGpuTolerance = 1e-3;
  for (const char* preset : {"tiny-glm4-moe", "tiny-glm4-moe-qk-norm"}) {
    const sy::core_testing::TempDir dir;
    make_tiny(preset, dir.path());
    for (const bool all_gpu : {false, true})
      for (const bool graph : {false, true}) {
        const std::string name = std::string(preset) + (all_gpu ? " all-GPU" : " hybrid GLM-4.5-Air.yaml") +
                                 (graph ? ", CUDA graph" : ", eager");
        INFO(name);
        sy::CausalLMOptions options;
        options.use_cuda_graph = graph;
        Engine e = all_gpu ? load(dir.path(), "<all-GPU profile>", kAllGpu, options)
                           : load(dir.path(), sy::testing::source_path("optimize_rules/GLM-4.5-Air.yaml"), "", options);
        const ReferenceGlm4Moe reference(e.check.tree->config(), *e.weights);
        const double error = run_against_reference(*e.model, reference);
        MESSAGE(name << ": relative error against the reference " << error);
        CHECK(error <= kGpuTolerance);
      }
  }
#else
  MESSAGE("skipped: no CUDA backend in this build");
#endif
}
