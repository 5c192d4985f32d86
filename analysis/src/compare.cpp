#include "npuscope/analysis/compare.h"
#include "npuscope/analysis/layer_mapping.h"
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

std::string CompareRow::benchTensorName() const {
  if (bench_op_name.empty()) return tensorName();
  return bench_op_name + "." + (arg.empty() ? io + "." + std::to_string(idx) : arg);
}

std::string CompareRow::tensorName() const {
  return op_name + "." + (arg.empty() ? io + "." + std::to_string(idx) : arg);
}

SummaryDiffs summaryDiffs(const CompareRow& r) {
  SummaryDiffs d;
  auto one = [](const std::optional<double>& a, const std::optional<double>& b, double* diff, double* rel) {
    if (!a || !b) {
      *diff = *rel = kNaN;
      return;
    }
    *diff = *a - *b;
    *rel = *b == 0 ? kNaN : std::fabs(*diff / *b);
  };
  one(r.npu_max, r.bench_max, &d.max_diff, &d.max_rel);
  one(r.npu_min, r.bench_min, &d.min_diff, &d.min_rel);
  one(r.npu_mean, r.bench_mean, &d.mean_diff, &d.mean_rel);
  one(r.npu_l2norm, r.bench_l2norm, &d.norm_diff, &d.norm_rel);
  return d;
}

Verdict summaryVerdict(const CompareRow& r, std::string* message) {
  const std::optional<double>* pairs[4][2] = {{&r.npu_max, &r.bench_max},
                                              {&r.npu_min, &r.bench_min},
                                              {&r.npu_mean, &r.bench_mean},
                                              {&r.npu_l2norm, &r.bench_l2norm}};
  static const char* const kNames[4] = {"max", "min", "mean", "l2norm"};
  bool warn = false;
  std::string worst;
  for (int i = 0; i < 4; ++i) {
    const std::optional<double>&a = *pairs[i][0], &b = *pairs[i][1];
    if (!a || !b) continue;
    if (!std::isfinite(*a) && std::isfinite(*b)) {
      *message = std::string("NPU ") + kNames[i] + " is " + (std::isnan(*a) ? "nan" : "inf") + ", bench's is finite";
      return Verdict::kError;
    }
    if (!std::isfinite(*a) || !std::isfinite(*b)) continue;
    const double magnitude = std::fabs(*a - *b) / (std::fabs(std::max(*a, *b)) + 1e-10);
    if (magnitude > kSummaryMagnitude && !warn) {
      warn = true;
      worst = kNames[i];
    }
  }
  if (warn) {
    *message = "Need double check api accuracy (" + worst + " differs by more than half)";
    return Verdict::kWarning;
  }
  return Verdict::kPass;
}


namespace {

// A row naming tensor `d` (its step, op and argument), no side's values yet.
CompareRow rowOf(const TensorDumpInfo& d) {
  CompareRow row;
  row.step = d.step;
  row.op_name = d.op_name;
  row.op_type = d.op_type;
  row.io = d.io;
  row.idx = d.idx;
  row.arg = d.arg;
  return row;
}

// The bench side of a row: tensor `e`'s dtype, shape and statistics.
void setBench(CompareRow* row, const TensorDumpInfo& e) {
  row->bench_dtype = e.dtype;
  row->bench_shape = e.shape;
  row->bench_max = e.max;
  row->bench_min = e.min;
  row->bench_mean = e.mean;
  row->bench_l2norm = e.l2norm;
}

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
  // Steps pair by number when both runs dumped the same steps, else in order.
  std::map<int64_t, int64_t> step_a, step_b;
  for (const auto& d : da) step_a.emplace(d.step, 0);
  for (const auto& d : db) step_b.emplace(d.step, 0);
  const bool same_steps = [&] {
    if (step_a.size() != step_b.size()) return false;
    for (auto ia = step_a.begin(), ib = step_b.begin(); ia != step_a.end(); ++ia, ++ib)
      if (ia->first != ib->first) return false;
    return true;
  }();
  for (auto* m : {&step_a, &step_b}) {
    int64_t n = 0;
    for (auto& [step, key] : *m) key = same_steps ? step : n++;
  }
  using Key = std::tuple<int64_t, std::string, std::string>;
  std::map<Key, const TensorDumpInfo*> bench;
  std::map<const TensorDumpInfo*, bool> bench_used;
  for (const auto& d : db) bench.emplace(Key{step_b[d.step], d.op_name, d.argName()}, &d);
  // A layer mapping: each of A's entries -> its partner in B, step by paired step.
  std::map<std::pair<int64_t, std::string>, std::string> partner;
  if (options.layer_mapping != nullptr) {
    ASSIGN_OR_RETURN(std::vector<DumpEntryRow> ea, a.dumpEntries(run_a));
    ASSIGN_OR_RETURN(std::vector<DumpEntryRow> eb, b.dumpEntries(run_b));
    std::map<int64_t, std::pair<std::vector<DumpEntryRow>, std::vector<DumpEntryRow>>> by_step;
    for (DumpEntryRow& e : ea) {
      if (const auto s = step_a.find(e.step); s != step_a.end()) by_step[s->second].first.push_back(std::move(e));
    }
    for (DumpEntryRow& e : eb) {
      if (const auto s = step_b.find(e.step); s != step_b.end()) by_step[s->second].second.push_back(std::move(e));
    }
    for (const auto& [step, sides] : by_step) {
      for (auto& [name, to] : mapEntries(sides.first, sides.second, *options.layer_mapping)) {
        partner.emplace(std::make_pair(step, name), std::move(to));
      }
    }
  }

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
    CompareRow row = rowOf(d);
    row.npu_dtype = d.dtype;
    row.npu_shape = d.shape;
    row.npu_max = d.max;
    row.npu_min = d.min;
    row.npu_mean = d.mean;
    row.npu_l2norm = d.l2norm;
    std::string bench_op = d.op_name;
    if (const auto m = partner.find({step_a[d.step], d.op_name}); m != partner.end()) {
      bench_op = m->second;  // "": no partner under the mapping
      if (bench_op != d.op_name) row.bench_op_name = bench_op;
    }
    auto it = bench.find(Key{step_a[d.step], bench_op, d.argName()});
    if (it == bench.end()) {
      row.message = options.layer_mapping != nullptr && bench_op.empty() ? "no partner under the layer mapping"
                                                                           : "missing in bench";
    } else {
      const TensorDumpInfo& e = *it->second;
      bench_used[&e] = true;
      setBench(&row, e);
      const DType ta = parseDType(d.dtype), tb = parseDType(e.dtype);
      if (d.shape != e.shape) {
        row.verdict = Verdict::kError;
        row.message = "shape mismatch";
      } else if (!dtypesComparable(ta, tb)) {
        row.verdict = Verdict::kError;
        row.message = "dtype mismatch";
      } else if (d.data_bytes == 0 || e.data_bytes == 0) {
        // Statistics only: msprobe's summary mode.
        row.has_summary = true;
        row.summary = summaryDiffs(row);
        row.verdict = summaryVerdict(row, &row.message);
        // A NaN statistic is stored as none: the counts say it (msprobe's dumps: 1 = at least one).
        auto more = [](const std::optional<int64_t>& x, const std::optional<int64_t>& y) {
          return x && *x > 0 && y && *y == 0;
        };
        if (more(d.nan_count, e.nan_count) || more(d.inf_count, e.inf_count)) {
          row.verdict = Verdict::kError;
          row.message = more(d.nan_count, e.nan_count) ? "NPU has nan, bench has none" : "NPU has inf, bench has none";
        } else if (row.verdict == Verdict::kPass && d.nan_count && e.nan_count && d.inf_count && e.inf_count &&
                   (*d.nan_count != *e.nan_count || *d.inf_count != *e.inf_count)) {
          row.verdict = Verdict::kError;
          row.message = "non-finite counts differ";
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
  // The bench's tensors without a partner: listed, never dropped.
  for (const auto& e : db) {
    if (bench_used.count(&e) || (options.step && e.step != *options.step)) continue;
    CompareRow row = rowOf(e);
    setBench(&row, e);
    row.only_in_bench = true;
    row.message = "missing in A";
    ++res.not_compared;
    res.rows.push_back(std::move(row));
  }
  res.statistics_only = !res.rows.empty();
  for (const auto& r : res.rows) {
    if (r.has_metrics) res.statistics_only = false;
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
      result.statistics_only
          ? "Step,NPU Name,Bench Name,NPU Dtype,Bench Dtype,NPU Tensor Shape,Bench Tensor Shape,Max diff,Min diff,"
            "Mean diff,L2norm diff,MaxRelativeErr,MinRelativeErr,MeanRelativeErr,NormRelativeErr,NPU max,NPU min,"
            "NPU mean,NPU l2norm,Bench max,Bench min,Bench mean,Bench l2norm,Result,Err_message\n"
          : "Step,NPU Name,Bench Name,NPU Dtype,Bench Dtype,NPU Tensor Shape,Bench Tensor Shape,Cosine,EucDist,"
            "MaxAbsErr,MaxRelativeErr,One Thousandth Err Ratio,Five Thousandths Err Ratio,NPU max,NPU min,NPU mean,"
            "NPU l2norm,Bench max,Bench min,Bench mean,Bench l2norm,Result,Err_message\n";
  for (const auto& r : result.rows) {
    auto metric = [&](double v) { return r.has_metrics ? fmtDouble(std::isnan(v) ? std::nullopt : std::optional(v)) : "N/A"; };
    auto diff = [&](double v) { return r.has_summary && !std::isnan(v) ? fmtDouble(v) : std::string("N/A"); };
    auto percent = [&](double v) { return r.has_summary && !std::isnan(v) ? fmtDouble(100 * v) + "%" : std::string("N/A"); };
    const bool has_npu = !r.only_in_bench;
    const bool has_bench = !r.bench_dtype.empty();
    const std::string na = "N/A";
    std::vector<std::string> f = {std::to_string(r.step), has_npu ? r.tensorName() : na, has_bench ? r.benchTensorName() : na,
                                  has_npu ? r.npu_dtype : na, has_bench ? r.bench_dtype : na, has_npu ? r.npu_shape : na,
                                  has_bench ? r.bench_shape : na};
    if (result.statistics_only) {
      for (const std::string& v : {diff(r.summary.max_diff), diff(r.summary.min_diff), diff(r.summary.mean_diff),
                                   diff(r.summary.norm_diff), percent(r.summary.max_rel), percent(r.summary.min_rel),
                                   percent(r.summary.mean_rel), percent(r.summary.norm_rel)})
        f.push_back(v);
    } else {
      for (const std::string& v : {metric(r.metrics.cosine), metric(r.metrics.euc_dist), metric(r.metrics.max_abs_err),
                                   metric(r.metrics.max_relative_err), metric(r.metrics.one_thousandth_ratio),
                                   metric(r.metrics.five_thousandths_ratio)})
        f.push_back(v);
    }
    for (const std::string& v : {fmtDouble(r.npu_max), fmtDouble(r.npu_min), fmtDouble(r.npu_mean), fmtDouble(r.npu_l2norm),
                                 fmtDouble(r.bench_max), fmtDouble(r.bench_min), fmtDouble(r.bench_mean),
                                 fmtDouble(r.bench_l2norm), std::string(verdictName(r.verdict)), r.message})
      f.push_back(v);
    for (size_t i = 0; i < f.size(); ++i) {
      if (i) out += ',';
      out += csvField(f[i]);
    }
    out += '\n';
  }
  return out;
}

}  // namespace npuscope::compare
