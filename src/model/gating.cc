#include "model/gating.h"

#include <cmath>

#include "kernels/reference/reference.h"

namespace llamay::model::internal {

void Sigmoid(const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + kernels::RefExp(-x[i]));
}

float Softplus(float x) { return kernels::RefSoftplus(x); }

void L2NormHeads(float* x, int64_t n_heads, int64_t dim, float eps) {
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * dim;
    double sum = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum += static_cast<double>(v[i] * v[i]);
    const float scale = 1.0f / std::fmax(std::sqrt(static_cast<float>(sum)), eps);
    for (int64_t i = 0; i < dim; ++i) v[i] = v[i] * scale;
  }
}

}  // namespace llamay::model::internal
