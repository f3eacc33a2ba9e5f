// libFuzzer target for the safetensors header parser: the input is a whole file (8-byte
// little-endian header length, JSON header, data). Rejecting it with InputError is the expected
// outcome for most inputs; any other exception, a crash or a sanitizer report is a bug. The f32,
// bf16 and f16 tensors of an accepted file are widened to f32 as the CPU reads weights
// (cpu::widen_to_f32): in place where their elements are aligned, from an aligned copy where the
// file leaves them misaligned, as Checkpoint::get hands them out. An accepted file must be readable.
// Build and run: docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/safetensors.h"
#include "operators/cpu/kernels/half.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view file(reinterpret_cast<const char*>(data), size);
  try {
    const switchyard::SafetensorsHeader header = switchyard::parse_safetensors_bytes(file, "fuzz.safetensors");
    // What the parser promises about an accepted file: tensors in data order, each beginning where
    // the one before it ends, the last ending at the end of the data section.
    std::uint64_t previous_end = 0;
    for (const switchyard::SafetensorsTensor& t : header.tensors) {
      if (t.begin != previous_end || t.end < t.begin) __builtin_trap();
      previous_end = t.end;
      if (t.dtype != switchyard::DType::f32 && t.dtype != switchyard::DType::bf16 && t.dtype != switchyard::DType::f16)
        continue;
      if (t.end == t.begin) continue;  // no elements (a 0 in the shape): nothing to widen or copy
      const std::uint64_t element_bytes = switchyard::storage_bytes(t.dtype, 1);
      const std::uint64_t count = (t.end - t.begin) / element_bytes;
      const std::uint8_t* elements = data + header.data_offset + t.begin;
      std::vector<float> aligned;  // f32-aligned, so aligned for every element size here
      if (reinterpret_cast<std::uintptr_t>(elements) % element_bytes != 0) {
        aligned.resize((t.end - t.begin + 3) / 4);
        std::memcpy(aligned.data(), elements, t.end - t.begin);
        elements = reinterpret_cast<const std::uint8_t*>(aligned.data());
      }
      std::vector<float> wide(count);
      switchyard::cpu::widen_to_f32(t.dtype, elements, count, wide.data());
    }
    if (header.data_offset > header.file_bytes || previous_end != header.file_bytes - header.data_offset)
      __builtin_trap();
  } catch (const switchyard::InputError&) {
  }
  return 0;
}
