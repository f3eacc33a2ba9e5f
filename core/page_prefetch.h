#pragma once
// Reading mapped weights into memory ahead of use. A checkpoint is mapped in place, so without this
// the first prompt pays the disk reads of every page it touches; a prefetch at load pays them there,
// with a progress line, at the disk's sequential rate.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

namespace switchyard {

// Called with (bytes done, bytes in all) as the prefetch goes, and once at the end (done == all).
using PrefetchProgress = std::function<void(std::uint64_t done, std::uint64_t total)>;

// Makes every page of `regions` (views of read-only file mappings, or any readable memory)
// resident and mapped into this process, in order: MADV_POPULATE_READ chunk by chunk, with
// MADV_WILLNEED on the chunks ahead so the disk streams; where the kernel has no
// MADV_POPULATE_READ (before Linux 5.14), one read per page instead. Returns the bytes covered.
// A mapped file truncated meanwhile faults as any read of it would (report_mapped_file_faults).
std::uint64_t prefetch_pages(std::span<const std::span<const std::byte>> regions, const PrefetchProgress& progress);

// The bytes of `region` resident in memory now (mincore), for reports and tests.
std::uint64_t resident_bytes(std::span<const std::byte> region);

}  // namespace switchyard
