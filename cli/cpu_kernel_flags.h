#pragma once
// The CPU kernels' tunable settings (operators/cpu/kernels/kernel_options.h) as flags of run, chat,
// serve and the benches: --cpu_prefetch_bytes, --cpu_tile_block_rows, --cpu_panels_by_row; and
// the benches' --ab_option, the same settings as NAME=VALUE assignments for an A/B in one process.
#include <string>

#include <CLI/CLI.hpp>

#include "operators/cpu/kernels/kernel_options.h"

namespace switchyard::cli {

struct CpuKernelFlags {
  int prefetch_bytes = cpu::KernelOptions{}.prefetch_bytes;
  std::int64_t tile_block_rows = cpu::KernelOptions{}.tile_block_rows;
  std::string panels_by_row = "auto";  // auto | true | false

  // The flags, under the Performance heading; a value out of range is a usage error (exit 2).
  void add_to(CLI::App& command);
  cpu::KernelOptions options() const;
};

// `base` with the settings `assignments` names changed: NAME=VALUE, comma-separated, each NAME a
// flag above without its dashes ("cpu_prefetch_bytes=0,cpu_panels_by_row=false"); "": `base`. InputError
// (exit 2) for an unknown name, a missing or bad value, or a value out of range.
cpu::KernelOptions with_assignments(const cpu::KernelOptions& base, const std::string& assignments);
// --ab_option NAME=VALUE[,NAME=VALUE...] (the flags above without their dashes), checked when parsed.
CLI::Option* add_ab_option(CLI::App& command, std::string& assignments, const std::string& what);

}  // namespace switchyard::cli
