// CRC-32C (Castagnoli): the checksum of chunk payloads (docs/format.md).
#ifndef COLIKV_SRC_CORE_CRC32C_H
#define COLIKV_SRC_CORE_CRC32C_H

#include <cstddef>
#include <cstdint>

namespace colikv {
namespace detail {

// Extends crc over data[0, n); crc32c(0, p, n) is the plain checksum.
// Uses the SSE4.2 instruction when the CPU has it.
uint32_t crc32c(uint32_t crc, const void* data, size_t n);

// The CRC of a || b from crc32c(0, a, ...) and crc32c(0, b, len_b).
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

// The two paths crc32c chooses between, for the tests: slicing-by-8 tables,
// and SSE4.2 (which falls back to the tables where the CPU lacks it).
uint32_t crc32c_portable(uint32_t crc, const void* data, size_t n);
uint32_t crc32c_hardware(uint32_t crc, const void* data, size_t n);
bool crc32c_hardware_available();

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_CORE_CRC32C_H
