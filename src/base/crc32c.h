// CRC32C (Castagnoli polynomial 0x1EDC6F41, reflected 0x82F63B78): the checksum of snapshot files.
//
// Uses the SSE4.2 crc32 instruction when the CPU has it (chosen once at run time) and a slicing-by-8 table
// otherwise; both give the same value. Check value: Crc32c("123456789") == 0xE3069283.
// Thread-safety: pure functions.
#ifndef LLAMAY_BASE_CRC32C_H_
#define LLAMAY_BASE_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace llamay {

// Extends `crc` (the value returned for the bytes before `data`; 0 to start) over `n` more bytes.
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);
inline uint32_t Crc32c(const void* data, size_t n) { return Crc32cExtend(0, data, n); }

// The portable table implementation, exposed so tests can compare it with the dispatched one.
uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t n);

}  // namespace llamay

#endif  // LLAMAY_BASE_CRC32C_H_
