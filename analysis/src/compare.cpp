#include "npuscope/analysis/compare.h"
#include "npuscope/analysis/op_table_csv.h"  // csvField

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <sstream>
#include <tuple>

#include "npuscope/store/trace_reader.h"

namespace npuscope::compare {

using namespace npuscope::tensor;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string fmtDouble(const std::optional<double>& v) {
  if (!v) return "N/A";
  std::ostringstream s;
  s.precision(9);
  s << *v;
  return s.str();
}

}  // namespace

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


namespace {

StatusOr<std::vector<double>> loadValues(TraceReader& r, const TensorDumpInfo& d, DType t) {
  ASSIGN_OR_RETURN(TensorDumpData stored, r.tensorDumpData(d.id));
  if (dtypeSize(t) == 0) return invalidArgument("tensor dump " + std::to_string(d.id) + ": unknown dtype " + d.dtype);
  return decodeDumpValues(stored.bytes, stored.zstd_frame, t);
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
