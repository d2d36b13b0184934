// Tensor element types, numbered as GGUF numbers them (ggml_type), with their block geometry.
//
// Shared by gguf/ (reading and writing files) and kernels/ (dequantising and multiplying), which must not
// depend on each other. A type is stored in blocks of `block_size` elements taking `type_size` bytes.
// Thread-safety: constant data.
#ifndef LLAMAY_BASE_TENSOR_TYPE_H_
#define LLAMAY_BASE_TENSOR_TYPE_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace llamay {

enum class TensorType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
};

struct TensorTypeInfo {
  TensorType type;
  std::string_view name;  // as llama.cpp names it: "f32", "q8_0", "q4_K"
  uint32_t block_size;    // elements per block
  uint32_t type_size;     // bytes per block
};

// Geometry of a known type number; nullopt for a number GGUF does not define (or that was retired).
std::optional<TensorTypeInfo> GetTensorTypeInfo(uint32_t type);

// The type llama.cpp names `name` ("q8_0", "q4_K"); nullopt for an unknown name.
std::optional<TensorType> TensorTypeFromName(std::string_view name);

inline std::string_view TensorTypeName(TensorType t) {
  auto info = GetTensorTypeInfo(static_cast<uint32_t>(t));
  return info ? info->name : std::string_view("unknown");
}

}  // namespace llamay

#endif  // LLAMAY_BASE_TENSOR_TYPE_H_
