#include "quant/fp8-matrix.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace engine {
namespace {

constexpr float kE4m3Max = 448.0f;

// Every e4m3fn value, decoded once: 1 sign bit, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 is subnormal
// (m/8 * 2^-6); S.1111.111 is NaN; there are no infinities.
struct E4m3Table {
  float v[256];
  E4m3Table() {
    for (int i = 0; i < 256; ++i) {
      const int sign = i >> 7, exp = (i >> 3) & 15, man = i & 7;
      float x;
      if (exp == 15 && man == 7) x = std::nanf("");
      else if (exp == 0) x = std::ldexp(static_cast<float>(man) / 8.0f, -6);
      else x = std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
      v[i] = sign ? -x : x;
    }
  }
};
const E4m3Table kTable;

}  // namespace

float decode_e4m3(uint8_t v) { return kTable.v[v]; }

uint8_t encode_e4m3(float v) {
  if (std::isnan(v)) return 0x7f;
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  float a = std::fabs(v);
  if (a >= kE4m3Max) return sign | 0x7e;  // 448, the largest finite value
  // Nearest of the 127 finite magnitudes, ties to the even code (an even mantissa), by search over the sorted table.
  int lo = 0, hi = 126;  // codes 0..126 are increasing magnitudes 0 .. 448
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (kTable.v[mid] <= a) lo = mid; else hi = mid;
  }
  const float dl = a - kTable.v[lo], dh = kTable.v[hi] - a;
  int code = dl < dh ? lo : dh < dl ? hi : ((lo & 1) == 0 ? lo : hi);
  return sign | static_cast<uint8_t>(code);
}

std::vector<float> dequantize(const Fp8Matrix& m) {
  std::vector<float> out(static_cast<size_t>(m.rows * m.cols));
  // (block is read only for block scales: tensor / channel matrices may leave it 0)
  const int64_t bcols = m.scale_kind == Fp8ScaleKind::block ? (m.cols + m.block - 1) / m.block : 0;
  for (int64_t r = 0; r < m.rows; ++r) {
    const uint8_t* src = m.data.data() + r * m.cols;
    float* dst = out.data() + r * m.cols;
    for (int64_t c = 0; c < m.cols; ++c) {
      float s;
      switch (m.scale_kind) {
        case Fp8ScaleKind::tensor: s = m.scales[0]; break;
        case Fp8ScaleKind::channel: s = m.scales[static_cast<size_t>(r)]; break;
        default: s = m.scales[static_cast<size_t>((r / m.block) * bcols + c / m.block)]; break;
      }
      dst[c] = kTable.v[src[c]] * s;
    }
  }
  return out;
}

Fp8Matrix quantize_per_channel(const float* w, int64_t rows, int64_t cols) {
  Fp8Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.scale_kind = Fp8ScaleKind::channel;
  m.activation = Fp8Activation::dynamic_token;
  m.data.resize(static_cast<size_t>(rows * cols));
  m.scales.resize(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = w + r * cols;
    float amax = 0;
    for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(row[c]));
    const float scale = amax > 0 ? amax / kE4m3Max : 1.0f;
    m.scales[static_cast<size_t>(r)] = scale;
    uint8_t* dst = m.data.data() + r * cols;
    for (int64_t c = 0; c < cols; ++c) dst[c] = encode_e4m3(row[c] / scale);
  }
  return m;
}

}  // namespace engine
