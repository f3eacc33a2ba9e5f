#include "operators/measure/kernel_timeline.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>

#include "core/error.h"
#include "core/statistics.h"

namespace switchyard {
namespace {

// The smallest period p of names over their middle half (names[i] == names[i + p] there), or 0.
std::int64_t middle_period(const std::vector<std::string>& names) {
  const auto n = static_cast<std::int64_t>(names.size());
  const std::int64_t from = n / 4, to = n - n / 4;
  for (std::int64_t p = 1; p <= (to - from) / 2; ++p) {
    bool repeats = true;
    for (std::int64_t i = from; repeats && i + p < to; ++i) repeats = names[i] == names[i + p];
    if (repeats) return p;
  }
  return 0;
}

}  // namespace

std::string short_kernel_name(const std::string& name) {
  std::string readable = name;
  int status = 0;
  const std::unique_ptr<char, decltype(&std::free)> demangled(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), &std::free);
  if (status == 0 && demangled != nullptr) readable = demangled.get();
  // The parameter list: the first '(' outside template arguments that does not open "(anonymous".
  int depth = 0;
  std::size_t end = readable.size();
  for (std::size_t i = 0; i < readable.size(); ++i) {
    const char c = readable[i];
    if (c == '<') ++depth;
    if (c == '>') --depth;
    if (c == '(' && depth == 0 && readable.compare(i, 10, "(anonymous") != 0) {
      end = i;
      break;
    }
  }
  readable.resize(end);
  // Namespaces and a return type: everything up to the last "::" or ' ' outside template arguments.
  depth = 0;
  std::size_t begin = 0;
  for (std::size_t i = 0; i < readable.size(); ++i) {
    const char c = readable[i];
    if (c == '<') ++depth;
    if (c == '>') --depth;
    if (depth != 0) continue;
    if (c == ':' && i + 1 < readable.size() && readable[i + 1] == ':') begin = i + 2;
    if (c == ' ' && readable.compare(i, 11, " namespace)") != 0) begin = i + 1;
  }
  return readable.substr(begin);
}

KernelTimeline analyse_kernel_timeline(const std::vector<std::string>& launches,
                                       const std::vector<std::uint64_t>& stamps, std::optional<LaunchSpan> span) {
  const auto per_step = static_cast<std::int64_t>(launches.size());
  if (per_step == 0) throw InputError("kernel timeline: no launches were recorded for the step");
  if (stamps.size() % launches.size() != 0 || stamps.size() < 2 * launches.size())
    throw InputError("kernel timeline: " + std::to_string(stamps.size()) + " stamps do not make whole steps of " +
                     std::to_string(per_step) + " launches (at least two): a kernel returned before its wait, " +
                     "kernels ran on another GPU (only the current one stamps), or work outside the recorded step " +
                     "launched kernels");
  for (std::size_t i = 1; i < stamps.size(); ++i)
    if (stamps[i] < stamps[i - 1])
      throw InputError("kernel timeline: the stamps are out of order at " + std::to_string(i));

  KernelTimeline timeline;
  std::size_t equal = 0;
  for (std::size_t i = 1; i < stamps.size(); ++i) equal += stamps[i] == stamps[i - 1];
  timeline.equal_share = static_cast<double>(equal) / static_cast<double>(stamps.size() - 1);
  timeline.launches_per_step = per_step;
  timeline.steps = static_cast<std::int64_t>(stamps.size()) / per_step;
  std::vector<std::string> names(launches.size());
  std::transform(launches.begin(), launches.end(), names.begin(), short_kernel_name);
  auto at = [&](std::int64_t step, std::int64_t launch) {
    return static_cast<double>(stamps[static_cast<std::size_t>(step * per_step + launch)]);
  };
  // gap(s, i): launch i's stamp to launch i + 1's, inside step s (the last launch has none: its
  // gap holds the host's launch of the next step).
  auto gap = [&](std::int64_t step, std::int64_t launch) { return (at(step, launch + 1) - at(step, launch)) / 1e3; };

  std::vector<double> steps, between;
  for (std::int64_t s = 0; s + 1 < timeline.steps; ++s) {
    steps.push_back((at(s + 1, 0) - at(s, 0)) / 1e3);
    between.push_back((at(s + 1, 0) - at(s, per_step - 1)) / 1e3);
  }
  timeline.step_us = median(steps);
  timeline.between_us = median(between);
  if (span) {
    if (span->from > span->to || span->to >= launches.size())
      throw InputError("kernel timeline: launches [" + std::to_string(span->from) + ", " + std::to_string(span->to) +
                       ") are not a span of a step of " + std::to_string(per_step) + " launches");
    std::vector<double> spans;
    for (std::int64_t s = 0; s < timeline.steps; ++s)
      spans.push_back((at(s, static_cast<std::int64_t>(span->to)) - at(s, static_cast<std::int64_t>(span->from))) / 1e3);
    timeline.span_us = median(spans);
  }

  std::map<std::string, std::vector<double>> gaps, sums;  // by kernel: every gap; each step's sum
  std::map<std::string, std::int64_t> counts;
  for (std::int64_t i = 0; i + 1 < per_step; ++i) ++counts[names[static_cast<std::size_t>(i)]];
  for (std::int64_t s = 0; s < timeline.steps; ++s) {
    std::map<std::string, double> sum;
    for (std::int64_t i = 0; i + 1 < per_step; ++i) {
      const std::string& name = names[static_cast<std::size_t>(i)];
      gaps[name].push_back(gap(s, i));
      sum[name] += gap(s, i);
    }
    for (const auto& [name, total] : sum) sums[name].push_back(total);
  }
  for (const auto& [name, all] : gaps)
    timeline.by_kernel.push_back({name, counts[name], median(all), median(sums[name])});
  std::stable_sort(timeline.by_kernel.begin(), timeline.by_kernel.end(),
                   [](const KernelTimelineRow& a, const KernelTimelineRow& b) { return a.step_us > b.step_us; });

  // One period of the middle's repeating pattern, from the middle launch: each position's gaps
  // over its repeats (inside the stretch where the pattern holds) and every step.
  const std::int64_t period = middle_period(names);
  if (period > 0) {
    const std::int64_t start = per_step / 2;
    auto name = [&](std::int64_t i) -> const std::string& { return names[static_cast<std::size_t>(i)]; };
    std::int64_t first = start, last = start;  // the pattern's stretch around the middle
    while (first - period >= 0 && name(first - period) == name(first)) first -= period;
    while (last + period < per_step && name(last + period) == name(last)) last += period;
    timeline.cycle_start = start;
    for (std::int64_t j = 0; j < period; ++j) {
      std::vector<double> position;
      for (std::int64_t i = first + j; i < last + period && i + 1 < per_step; i += period) {
        if (name(i) != name(start + j)) continue;  // a repeat that differs here (a dense layer)
        for (std::int64_t s = 0; s < timeline.steps; ++s) position.push_back(gap(s, i));
      }
      timeline.cycle.push_back({name(start + j), static_cast<std::int64_t>(position.size()), median(position), 0});
    }
  }
  return timeline;
}

// More equal stamps than this and the timer is too coarse for the per-kernel medians.
constexpr double kCoarseShare = 0.02;

std::string format_kernel_timeline(const KernelTimeline& timeline) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line,
                "timeline: %lld steps of %lld launches; a step %.1f us (first stamp to the next step's), between "
                "steps %.1f us\n",
                static_cast<long long>(timeline.steps), static_cast<long long>(timeline.launches_per_step),
                timeline.step_us, timeline.between_us);
  out += line;
  if (timeline.equal_share > kCoarseShare) {
    std::snprintf(line, sizeof line,
                  "%.0f%% of the stamps equal the one before: the GPU's timer advances in steps as long as the "
                  "kernels here, and the medians below say little (time changes by the host's step timings instead)\n",
                  100 * timeline.equal_share);
    out += line;
  }
  out += "a kernel's gap: its wait's end to the next kernel's (its work after the wait, the hand-over)\n";
  std::snprintf(line, sizeof line, "  %-44s %9s %10s %10s\n", "kernel", "a step", "us a step", "median us");
  out += line;
  for (const KernelTimelineRow& row : timeline.by_kernel) {
    std::snprintf(line, sizeof line, "  %-44.44s %9lld %10.1f %10.2f\n", row.kernel.c_str(),
                  static_cast<long long>(row.launches), row.step_us, row.median_us);
    out += line;
  }
  if (!timeline.cycle.empty()) {
    std::snprintf(line, sizeof line, "the launches' repeating pattern (a layer): %zu launches from launch %lld\n",
                  timeline.cycle.size(), static_cast<long long>(timeline.cycle_start));
    out += line;
    double total = 0;
    for (std::size_t j = 0; j < timeline.cycle.size(); ++j) {
      const KernelTimelineRow& row = timeline.cycle[j];
      std::snprintf(line, sizeof line, "  %3zu  %-44.44s %8.2f us\n", j, row.kernel.c_str(), row.median_us);
      out += line;
      total += row.median_us;
    }
    std::snprintf(line, sizeof line, "       %-44s %8.2f us\n", "the medians' sum", total);
    out += line;
  }
  return out;
}

}  // namespace switchyard
