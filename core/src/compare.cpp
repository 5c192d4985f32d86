#include "npuscope/core/compare.h"

#include <zstd.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <sstream>
#include <tuple>

#include "npuscope/core/trace_reader.h"

namespace npuscope::compare {
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

std::string fmtDouble(const std::optional<double>& v) {
  if (!v) return "N/A";
  std::ostringstream s;
  s.precision(9);
  s << *v;
  return s.str();
}

std::string csvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
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
    constexpr size_t kBlock = 1024, kLanes = 8;
    size_t i = 0;
    for (; i + kBlock <= count; i += kBlock) {
      float bs[kLanes] = {}, bq[kLanes] = {}, bmn[kLanes], bmx[kLanes];
      for (size_t l = 0; l < kLanes; ++l) bmn[l] = bmx[l] = load<float>(data + 4 * i);
      for (size_t j = 0; j < kBlock; j += kLanes) {
        for (size_t l = 0; l < kLanes; ++l) {
          const float v = load<float>(data + 4 * (i + j + l));
          bs[l] += v;
          bq[l] += v * v;
          bmn[l] = v < bmn[l] ? v : bmn[l];
          bmx[l] = v > bmx[l] ? v : bmx[l];
        }
      }
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

const char* verdictName(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "pass";
    case Verdict::kWarning: return "warning";
    case Verdict::kError: return "error";
    case Verdict::kNotCompared: break;
  }
  return "n/a";
}

TensorMetrics computeMetrics(const double* a, const double* b, size_t count) {
  TensorMetrics m;
  double dot = 0, na = 0, nb = 0, sq = 0;
  size_t below1 = 0, below5 = 0;
  for (size_t i = 0; i < count; ++i) {
    const double x = a[i], y = b[i];
    const bool same = x == y || (std::isnan(x) && std::isnan(y));
    if (!std::isfinite(x) || !std::isfinite(y)) {
      if (same) {
        ++below1;
        ++below5;
      } else {
        m.max_abs_err = m.max_relative_err = sq = std::numeric_limits<double>::infinity();
      }
      continue;
    }
    const double d = std::fabs(x - y);
    const double rel = d / (std::fabs(y) + DBL_EPSILON);
    dot += x * y;
    na += x * x;
    nb += y * y;
    sq += d * d;
    if (d > m.max_abs_err) m.max_abs_err = d;
    if (rel > m.max_relative_err) m.max_relative_err = rel;
    below1 += rel < 0.001;
    below5 += rel < 0.005;
  }
  if ((na == 0 && nb == 0) || (sq == 0 && m.max_abs_err == 0)) {
    m.cosine = 1;  // identical data: exactly 1, not 1 - 1ulp from rounding of the norms
  } else if (na == 0 || nb == 0) {
    m.cosine = kNaN;
  } else {
    m.cosine = dot / (std::sqrt(na) * std::sqrt(nb));
    if (m.cosine > 1) m.cosine = 1;  // rounding of identical vectors
  }
  m.euc_dist = std::sqrt(sq);
  m.one_thousandth_ratio = count ? static_cast<double>(below1) / static_cast<double>(count) : 1;
  m.five_thousandths_ratio = count ? static_cast<double>(below5) / static_cast<double>(count) : 1;
  return m;
}

Verdict verdictFor(const TensorMetrics& m) {
  if (!std::isfinite(m.max_abs_err)) return Verdict::kError;
  if (m.cosine < 0.9 || m.max_abs_err > 1) return Verdict::kError;
  if (m.cosine > 0.99 && m.max_abs_err < 0.001) return Verdict::kPass;
  return Verdict::kWarning;  // includes a NaN cosine (one side all zero) with small errors
}

bool dtypesComparable(DType a, DType b) {
  auto mixed = [](DType t) { return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16; };
  return a == b || (mixed(a) && mixed(b));
}

std::string CompareRow::tensorName() const { return op_name + "." + io + "." + std::to_string(idx); }

StatusOr<std::vector<uint8_t>> decodeDumpPayload(const std::vector<uint8_t>& stored, bool zstd_frame) {
  if (!zstd_frame) return stored;
  const unsigned long long size = ZSTD_getFrameContentSize(stored.data(), stored.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN) {
    return invalidArgument("tensor dump payload: not a complete zstd frame");
  }
  std::vector<uint8_t> out(size);
  const size_t rc = ZSTD_decompress(out.data(), out.size(), stored.data(), stored.size());
  if (ZSTD_isError(rc) || rc != size) {
    return invalidArgument(std::string("tensor dump payload: ") + ZSTD_getErrorName(rc));
  }
  return out;
}

namespace {

StatusOr<std::vector<double>> loadValues(TraceReader& r, const TensorDumpInfo& d, DType t) {
  ASSIGN_OR_RETURN(TensorDumpData stored, r.tensorDumpData(d.id));
  ASSIGN_OR_RETURN(std::vector<uint8_t> raw, decodeDumpPayload(stored.bytes, stored.zstd_frame));
  const size_t es = dtypeSize(t);
  if (es == 0) return invalidArgument("tensor dump " + std::to_string(d.id) + ": unknown dtype " + d.dtype);
  return toDoubles(raw.data(), t, raw.size() / es);
}

// The factor a tensor of run A carries over its partner in run B because of loss scaling: the
// ratio of the two runs' loss scales at that step, when the tensors' norms differ by that very
// ratio (within 5 %) — gradients of a scaled backward do, activations and weights do not.
// Otherwise 1.
double lossScaleRatio(const std::vector<double>& va, const std::vector<double>& vb,
                      const std::map<int64_t, double>& scales_a, const std::map<int64_t, double>& scales_b,
                      int64_t step) {
  const auto ia = scales_a.find(step), ib = scales_b.find(step);
  const double sa = ia == scales_a.end() ? 1.0 : ia->second, sb = ib == scales_b.end() ? 1.0 : ib->second;
  const double k = sa / sb;
  if (!(k > 2.0 || k < 0.5) || !std::isfinite(k)) return 1.0;
  double na = 0, nb = 0;
  for (double v : va) na += v * v;
  for (double v : vb) nb += v * v;
  if (!(nb > 0) || !std::isfinite(na) || !std::isfinite(nb)) return 1.0;
  const double r = std::sqrt(na / nb);
  return std::abs(r / k - 1.0) < 0.05 ? k : 1.0;
}

}  // namespace

StatusOr<CompareResult> compareRuns(TraceReader& a, int64_t run_a, TraceReader& b, int64_t run_b,
                                    const CompareOptions& options) {
  ASSIGN_OR_RETURN(std::vector<TensorDumpInfo> da, a.tensorDumps(run_a));
  ASSIGN_OR_RETURN(std::vector<TensorDumpInfo> db, b.tensorDumps(run_b));
  using Key = std::tuple<int64_t, std::string, std::string, int64_t>;
  std::map<Key, const TensorDumpInfo*> bench;
  for (const auto& d : db) bench.emplace(Key{d.step, d.op_name, d.io, d.idx}, &d);

  // Loss scales per step: a loss-scaled backward (O1/O2) holds gradients multiplied by its
  // scale; comparing them to an unscaled run needs the scales taken out first.
  auto scalesOf = [](TraceReader& r, int64_t run) -> StatusOr<std::map<int64_t, double>> {
    ASSIGN_OR_RETURN(std::vector<StepRow> steps, r.steps(run));
    std::map<int64_t, double> out;
    for (const StepRow& s : steps) {
      if (s.loss_scale && *s.loss_scale > 0) out[s.step] = *s.loss_scale;
    }
    return out;
  };
  ASSIGN_OR_RETURN(auto scales_a, scalesOf(a, run_a));
  ASSIGN_OR_RETURN(auto scales_b, scalesOf(b, run_b));

  CompareResult res;
  for (const auto& d : da) {
    if (options.step && d.step != *options.step) continue;
    CompareRow row;
    row.step = d.step;
    row.op_name = d.op_name;
    row.op_type = d.op_type;
    row.io = d.io;
    row.idx = d.idx;
    row.npu_dtype = d.dtype;
    row.npu_shape = d.shape;
    row.npu_max = d.max;
    row.npu_min = d.min;
    row.npu_mean = d.mean;
    row.npu_l2norm = d.l2norm;
    auto it = bench.find(Key{d.step, d.op_name, d.io, d.idx});
    if (it == bench.end()) {
      row.message = "missing in bench";
    } else {
      const TensorDumpInfo& e = *it->second;
      row.bench_dtype = e.dtype;
      row.bench_shape = e.shape;
      row.bench_max = e.max;
      row.bench_min = e.min;
      row.bench_mean = e.mean;
      row.bench_l2norm = e.l2norm;
      const DType ta = parseDType(d.dtype), tb = parseDType(e.dtype);
      if (d.shape != e.shape) {
        row.verdict = Verdict::kError;
        row.message = "shape mismatch";
      } else if (!dtypesComparable(ta, tb)) {
        row.verdict = Verdict::kError;
        row.message = "dtype mismatch";
      } else if (d.data_bytes == 0 || e.data_bytes == 0) {
        // Statistics-only dumps: only a difference in non-finite counts is decisive.
        if (d.nan_count && e.nan_count && (*d.nan_count != *e.nan_count || *d.inf_count != *e.inf_count)) {
          row.verdict = Verdict::kError;
          row.message = "non-finite counts differ (statistics only)";
        } else {
          row.message = "no data (statistics only)";
        }
      } else {
        ASSIGN_OR_RETURN(std::vector<double> va, loadValues(a, d, ta));
        ASSIGN_OR_RETURN(std::vector<double> vb, loadValues(b, e, tb));
        if (va.size() != vb.size()) {
          row.verdict = Verdict::kError;
          row.message = "element counts differ";
        } else {
          row.loss_scale_ratio = lossScaleRatio(va, vb, scales_a, scales_b, d.step);
          if (row.loss_scale_ratio != 1.0) {
            for (double& v : va) v /= row.loss_scale_ratio;
            char buf[96];
            std::snprintf(buf, sizeof buf, "compared after dividing by the loss-scale ratio %g", row.loss_scale_ratio);
            row.message = buf;
          }
          row.metrics = computeMetrics(va.data(), vb.data(), va.size());
          row.has_metrics = true;
          row.verdict = verdictFor(row.metrics);
        }
      }
    }
    switch (row.verdict) {
      case Verdict::kPass: ++res.pass; break;
      case Verdict::kWarning:
        ++res.warning;
        if (res.first_warning_op.empty()) res.first_warning_op = row.op_name;
        break;
      case Verdict::kError:
        ++res.error;
        if (res.first_error_op.empty()) {
          res.first_error_op = row.op_name;
          res.first_divergent_step = row.step;
        }
        break;
      case Verdict::kNotCompared: ++res.not_compared; break;
    }
    res.rows.push_back(std::move(row));
  }
  if (!res.first_error_op.empty()) {
    res.first_divergent_op = res.first_error_op;
  } else if (!res.first_warning_op.empty()) {
    res.first_divergent_op = res.first_warning_op;
    for (const auto& r : res.rows) {
      if (r.verdict == Verdict::kWarning) {
        res.first_divergent_step = r.step;
        break;
      }
    }
  }
  return res;
}

std::string toCsv(const CompareResult& result) {
  std::string out =
      "Step,NPU Name,Bench Name,NPU Dtype,Bench Dtype,NPU Tensor Shape,Bench Tensor Shape,Cosine,EucDist,"
      "MaxAbsErr,MaxRelativeErr,One Thousandth Err Ratio,Five Thousandths Err Ratio,NPU max,NPU min,NPU mean,"
      "NPU l2norm,Bench max,Bench min,Bench mean,Bench l2norm,Result,Err_message\n";
  for (const auto& r : result.rows) {
    auto metric = [&](double v) { return r.has_metrics ? fmtDouble(std::isnan(v) ? std::nullopt : std::optional(v)) : "N/A"; };
    const bool has_bench = !r.bench_dtype.empty();
    std::vector<std::string> f = {
        std::to_string(r.step), r.tensorName(), has_bench ? r.tensorName() : "N/A", r.npu_dtype,
        has_bench ? r.bench_dtype : "N/A", r.npu_shape, has_bench ? r.bench_shape : "N/A",
        metric(r.metrics.cosine), metric(r.metrics.euc_dist), metric(r.metrics.max_abs_err),
        metric(r.metrics.max_relative_err), metric(r.metrics.one_thousandth_ratio),
        metric(r.metrics.five_thousandths_ratio), fmtDouble(r.npu_max), fmtDouble(r.npu_min), fmtDouble(r.npu_mean),
        fmtDouble(r.npu_l2norm), fmtDouble(r.bench_max), fmtDouble(r.bench_min), fmtDouble(r.bench_mean),
        fmtDouble(r.bench_l2norm), verdictName(r.verdict), r.message};
    for (size_t i = 0; i < f.size(); ++i) {
      if (i) out += ',';
      out += csvField(f[i]);
    }
    out += '\n';
  }
  return out;
}

}  // namespace npuscope::compare
