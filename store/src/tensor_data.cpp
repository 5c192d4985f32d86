#include "npuscope/store/tensor_data.h"

#include <zstd.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace npuscope::tensor {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct DTypeInfo {
  DType type;
  const char* name;
  size_t size;
  int acl;
};
constexpr DTypeInfo kTypes[] = {
    {DType::kFloat32, "float32", 4, 1}, {DType::kFloat16, "float16", 2, 2}, {DType::kBFloat16, "bfloat16", 2, 27},
    {DType::kFloat64, "float64", 8, 12}, {DType::kInt8, "int8", 1, 3},     {DType::kUInt8, "uint8", 1, 4},
    {DType::kInt16, "int16", 2, 5},      {DType::kInt32, "int32", 4, 7},   {DType::kInt64, "int64", 8, 8},
    {DType::kBool, "bool", 1, 11},
};

const DTypeInfo* infoOf(DType t) {
  for (const auto& i : kTypes)
    if (i.type == t) return &i;
  return nullptr;
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

DType parseDType(std::string_view name) {
  for (const auto& i : kTypes)
    if (name == i.name) return i.type;
  return DType::kUnknown;
}
const char* dtypeName(DType t) {
  const auto* i = infoOf(t);
  return i ? i->name : "unknown";
}
size_t dtypeSize(DType t) {
  const auto* i = infoOf(t);
  return i ? i->size : 0;
}
bool isFloating(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat64;
}
int aclDataType(DType t) {
  const auto* i = infoOf(t);
  return i ? i->acl : 0;
}
DType fromAclDataType(int acl) {
  for (const auto& i : kTypes)
    if (i.acl == acl) return i.type;
  return DType::kUnknown;
}

float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / NaN
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400) == 0);
    bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float bfloat16ToFloat(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

double elementAt(const uint8_t* data, DType t, size_t i) {
  switch (t) {
    case DType::kFloat32: return load<float>(data + 4 * i);
    case DType::kFloat16: return halfToFloat(load<uint16_t>(data + 2 * i));
    case DType::kBFloat16: return bfloat16ToFloat(load<uint16_t>(data + 2 * i));
    case DType::kFloat64: return load<double>(data + 8 * i);
    case DType::kInt8: return static_cast<int8_t>(data[i]);
    case DType::kUInt8: return data[i];
    case DType::kInt16: return load<int16_t>(data + 2 * i);
    case DType::kInt32: return load<int32_t>(data + 4 * i);
    case DType::kInt64: return static_cast<double>(load<int64_t>(data + 8 * i));
    case DType::kBool: return data[i] != 0 ? 1 : 0;
    case DType::kUnknown: break;
  }
  return kNaN;
}

std::vector<double> toDoubles(const uint8_t* data, DType t, size_t count) {
  std::vector<double> out(count);
  if (t == DType::kFloat32) {
    for (size_t i = 0; i < count; ++i) out[i] = load<float>(data + 4 * i);
  } else if (t == DType::kFloat16) {  // mixed precision's dumps: one loop, no per-element switch
    for (size_t i = 0; i < count; ++i) out[i] = halfToFloat(load<uint16_t>(data + 2 * i));
  } else if (t == DType::kBFloat16) {
    for (size_t i = 0; i < count; ++i) out[i] = bfloat16ToFloat(load<uint16_t>(data + 2 * i));
  } else {
    for (size_t i = 0; i < count; ++i) out[i] = elementAt(data, t, i);
  }
  return out;
}

StatusOr<std::vector<int64_t>> parseShape(std::string_view text) {
  std::vector<int64_t> dims;
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') {
    return invalidArgument("not a shape: '" + std::string(text) + "' (expected e.g. [2, 3])");
  }
  std::string_view body = text.substr(1, text.size() - 2);
  size_t pos = 0;
  while (pos < body.size()) {
    while (pos < body.size() && (body[pos] == ' ' || body[pos] == ',')) ++pos;
    if (pos >= body.size()) break;
    size_t end = pos;
    while (end < body.size() && body[end] >= '0' && body[end] <= '9') ++end;
    if (end == pos) return invalidArgument("not a shape: '" + std::string(text) + "'");
    dims.push_back(std::stoll(std::string(body.substr(pos, end - pos))));
    pos = end;
  }
  return dims;
}

std::string formatShape(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

namespace {

constexpr size_t kBlock = 1024, kLanes = 16;

// One block of kBlock floats: per-lane sums, sums of squares, minima and maxima, in GCC / Clang
// vector types (the auto-vectorizer leaves the plain loop scalar). Built for AVX2 too and picked
// at run time (target_clones): statistics of every dumped tensor run here.
typedef float Lanes8 __attribute__((vector_size(32)));
static_assert(kLanes == 16, "two Lanes8 per step");

// ThreadSanitizer's runtime is not up when an ifunc resolver runs (at load time): a TSan build
// keeps the baseline version only.
#if defined(__SANITIZE_THREAD__)
#define NPUSCOPE_AVX2_CLONES
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define NPUSCOPE_AVX2_CLONES
#endif
#endif
#ifndef NPUSCOPE_AVX2_CLONES
#define NPUSCOPE_AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#endif

NPUSCOPE_AVX2_CLONES void floatBlock(const uint8_t* data, float* out_s, float* out_q,
                                                                   float* out_mn, float* out_mx) {
  Lanes8 s0 = {}, s1 = {}, q0 = {}, q1 = {}, mn0, mn1, mx0, mx1;
  std::memcpy(&mn0, data, sizeof mn0);
  std::memcpy(&mn1, data + sizeof mn0, sizeof mn1);
  mx0 = mn0;
  mx1 = mn1;
  for (size_t j = 0; j < kBlock; j += kLanes) {
    Lanes8 a, b;
    std::memcpy(&a, data + 4 * j, sizeof a);
    std::memcpy(&b, data + 4 * j + sizeof a, sizeof b);
    s0 += a;
    s1 += b;
    q0 += a * a;
    q1 += b * b;
    mn0 = a < mn0 ? a : mn0;
    mn1 = b < mn1 ? b : mn1;
    mx0 = a > mx0 ? a : mx0;
    mx1 = b > mx1 ? b : mx1;
  }
  std::memcpy(out_s, &s0, sizeof s0);
  std::memcpy(out_s + 8, &s1, sizeof s1);
  std::memcpy(out_q, &q0, sizeof q0);
  std::memcpy(out_q + 8, &q1, sizeof q1);
  std::memcpy(out_mn, &mn0, sizeof mn0);
  std::memcpy(out_mn + 8, &mn1, sizeof mn1);
  std::memcpy(out_mx, &mx0, sizeof mx0);
  std::memcpy(out_mx + 8, &mx1, sizeof mx1);
}

}  // namespace

TensorStats computeStats(const uint8_t* data, DType t, size_t count) {
  TensorStats s;
  s.count = static_cast<int64_t>(count);
  double mn = std::numeric_limits<double>::infinity(), mx = -mn, sum = 0, sq = 0;
  size_t n = 0;
  auto visit = [&](double v) {
    if (std::isnan(v)) {
      ++s.nan_count;
      return;
    }
    if (std::isinf(v)) ++s.inf_count;
    mn = v < mn ? v : mn;
    mx = v > mx ? v : mx;
    sum += v;
    sq += v * v;
    ++n;
  };
  if (t == DType::kFloat32) {
    // The common case: blocks summed in float lanes without branches (the dumper's stats mode
    // runs this on every op's tensors); a block holding inf/NaN (its sums turn non-finite) or
    // values too big to square in float is redone element by element in double.
    size_t i = 0;
    for (; i + kBlock <= count; i += kBlock) {
      float bs[kLanes], bq[kLanes], bmn[kLanes], bmx[kLanes];
      floatBlock(data + 4 * i, bs, bq, bmn, bmx);
      double ds = 0, dq = 0;
      for (size_t l = 0; l < kLanes; ++l) {
        ds += bs[l];
        dq += bq[l];
      }
      if (!std::isfinite(ds) || !std::isfinite(dq) || dq > 1e30) {
        for (size_t j = 0; j < kBlock; ++j) visit(load<float>(data + 4 * (i + j)));
        continue;
      }
      for (size_t l = 0; l < kLanes; ++l) {
        mn = bmn[l] < mn ? bmn[l] : mn;
        mx = bmx[l] > mx ? bmx[l] : mx;
      }
      sum += ds;
      sq += dq;
      n += kBlock;
    }
    for (; i < count; ++i) visit(load<float>(data + 4 * i));
  } else if (t == DType::kFloat16) {
    for (size_t i = 0; i < count; ++i) visit(halfToFloat(load<uint16_t>(data + 2 * i)));
  } else {
    for (size_t i = 0; i < count; ++i) visit(elementAt(data, t, i));
  }
  if (n == 0) {
    s.min = s.max = s.mean = s.l2norm = kNaN;
  } else {
    s.min = mn;
    s.max = mx;
    s.mean = sum / static_cast<double>(n);
    s.l2norm = std::sqrt(sq);
  }
  return s;
}


StatusOr<std::vector<uint8_t>> decodeDumpPayload(const std::vector<uint8_t>& stored, bool zstd_frame) {
  if (!zstd_frame) return stored;
  const unsigned long long size = ZSTD_getFrameContentSize(stored.data(), stored.size());
  // A frame claiming more than 2 GiB is damage (the dumper stores tensors far smaller).
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size > (1ull << 31)) {
    return invalidArgument("tensor dump payload: not a complete zstd frame");
  }
  std::vector<uint8_t> out(size);
  const size_t rc = ZSTD_decompress(out.data(), out.size(), stored.data(), stored.size());
  if (ZSTD_isError(rc) || rc != size) {
    return invalidArgument(std::string("tensor dump payload: ") + ZSTD_getErrorName(rc));
  }
  return out;
}


StatusOr<std::vector<double>> decodeDumpValues(const std::vector<uint8_t>& stored, bool zstd_frame, DType dtype) {
  const size_t es = dtypeSize(dtype);
  if (es == 0) return invalidArgument(std::string("tensor dump payload: no decoder for dtype ") + dtypeName(dtype));
  ASSIGN_OR_RETURN(std::vector<uint8_t> raw, decodeDumpPayload(stored, zstd_frame));
  return toDoubles(raw.data(), dtype, raw.size() / es);
}

}  // namespace npuscope::tensor
