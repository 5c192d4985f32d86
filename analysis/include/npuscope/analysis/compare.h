// Tensor statistics and msprobe-style comparison of two runs' op dumps, on raw buffers.
//
// Torch-free, so the CLI (`npuscope compare`, `npuscope dump`) and the Qt GUI share one
// implementation. Three layers, usable separately:
//   1. element decoding and statistics of a raw little-endian buffer (store/tensor_data.h: DType,
//      computeStats; shared with the dumper and the GUI);
//   2. per-tensor metrics of two buffers and msprobe's verdict (computeMetrics, verdictFor);
//   3. whole-run comparison over trace files (compareRuns): ops aligned by step, op type and
//      call number (the dumper's op name `{type}.{call_no}.{forward|backward}`), one row per
//      tensor, and the first divergent op.
//
// Definitions (references.md, "Op dumps"; a = the run under test ("NPU"), b = the bench run):
//   Cosine          dot(a, b) / (|a| |b|); 1 when both are all zero, NaN when only one is
//   EucDist         sqrt(sum (a - b)^2)
//   MaxAbsErr       max |a - b|
//   MaxRelativeErr  max |a - b| / (|b| + eps), eps = DBL_EPSILON
//   One/Five Thousandths Err Ratio: share of elements whose relative error is < 0.001 / 0.005
// Elements equal on both sides (including the same ±inf, or NaN on both sides) count as exact
// and are left out of the cosine sums; any other non-finite pair gives infinite errors.
// Verdicts: pass when Cosine > 0.99 and MaxAbsErr < 0.001; error when Cosine < 0.9 or
// MaxAbsErr > 1 (or a shape/dtype mismatch, or non-finite errors); warning otherwise.
// Statistics only (msprobe's "summary" mode, either side without data): each of max, min, mean
// and l2norm gives `diff = a - b` and `relative = |diff / b|`; warning when, for any of them,
// |diff| / (|max(a, b)| + 1e-10) > 0.5 (msprobe's magnitude rule), error when run A's statistics
// hold a NaN or an infinity that the bench's do not, pass otherwise.
// fp16 / bf16 / fp32 pairs are not a dtype mismatch (mixed-precision vs full-precision runs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "npuscope/store/status.h"
#include "npuscope/store/tensor_data.h"

namespace npuscope {

class TraceReader;

namespace compare {

enum class Verdict { kPass, kWarning, kError, kNotCompared };
const char* verdictName(Verdict v);  // pass | warning | error | n/a

struct TensorMetrics {
  double cosine = 0, euc_dist = 0, max_abs_err = 0, max_relative_err = 0;
  double one_thousandth_ratio = 0, five_thousandths_ratio = 0;
};
// The metrics of `a` against the bench `b`, both `count` elements. count == 0: cosine 1, errors 0.
TensorMetrics computeMetrics(const double* a, const double* b, size_t count);
Verdict verdictFor(const TensorMetrics& m);
// Whether two dumped dtypes may be compared (equal, or both of float16 / bfloat16 / float32).
bool dtypesComparable(tensor::DType a, tensor::DType b);

// ---- whole runs ----------------------------------------------------------------------------

struct LayerMapping;

struct CompareOptions {
  std::optional<int64_t> step;  // only this step (default: every step present in run A)
  // msprobe's layer mapping (layer_mapping.h): run A's msprobe entries pair with run B's by their
  // rewritten module paths rather than by name; nullptr: by name.
  const LayerMapping* layer_mapping = nullptr;
};

// Statistics-mode differences (A - B) and relative errors |diff / B| (NaN when B is 0 or either
// statistic is missing).
struct SummaryDiffs {
  double max_diff = 0, min_diff = 0, mean_diff = 0, norm_diff = 0;
  double max_rel = 0, min_rel = 0, mean_rel = 0, norm_rel = 0;
};
// msprobe's magnitude threshold of the statistics mode.
constexpr double kSummaryMagnitude = 0.5;

// One compared tensor. NPU side = run A, bench side = run B.
struct CompareRow {
  int64_t step = -1;
  std::string op_name;   // e.g. "addmm.3.forward"
  std::string op_type;   // e.g. "aten::addmm"
  std::string io;        // input | output
  int64_t idx = 0;
  std::string npu_dtype, bench_dtype, npu_shape, bench_shape;
  std::string arg;  // msprobe's argument path when the dump has one ("input.0.1"); else empty
  std::string bench_op_name;  // run B's op when a layer mapping paired it under another name; else empty
  bool has_metrics = false;  // both sides had data of equal shape and comparable dtypes
  TensorMetrics metrics;
  bool has_summary = false;  // compared by statistics (a side without data)
  SummaryDiffs summary;
  std::optional<double> npu_max, npu_min, npu_mean, npu_l2norm, bench_max, bench_min, bench_mean, bench_l2norm;
  Verdict verdict = Verdict::kNotCompared;
  // Run A's values were divided by this before the metrics: the ratio of the two runs' loss
  // scales at the step, for a gradient of a loss-scaled backward (its norm differs by that ratio
  // within 5 %). 1 otherwise.
  double loss_scale_ratio = 1.0;
  std::string message;  // why a row is n/a or an error without metrics ("missing in bench", ...)
  // `{op_name}.{arg}` or `{op_name}.{io}.{idx}`, msprobe's tensor name (e.g.
  // "Functional.conv2d.0.forward.input.0", "addmm.3.forward.output.0").
  std::string tensorName() const;
  std::string benchTensorName() const;  // the same with bench_op_name when set
  bool only_in_bench = false;  // a tensor of run B without a partner in run A (listed after A's rows)
};

struct CompareResult {
  std::vector<CompareRow> rows;  // in run A's dump order, then run B's tensors missing in A
  bool statistics_only = false;  // no row had data on both sides: msprobe's summary mode
  size_t pass = 0, warning = 0, error = 0, not_compared = 0;
  // The first divergent op in run A's order: the first op with an error row if any, else the
  // first with a warning row; empty when every row passes. Its step is first_divergent_step.
  std::string first_divergent_op;
  int64_t first_divergent_step = -1;
  std::string first_error_op, first_warning_op;  // each empty when none
};

// Compares run `run_a` of `a` against run `run_b` of `b` (the same reader twice is fine).
// Tensors are aligned on (step, op name, argument): msprobe's full tensor name. Steps pair by
// number when the two runs dumped the same steps, else in order (an msprobe dump without step
// folders against a run's step 0). Rows of run A without a partner say "missing in bench"; run
// B's tensors without a partner follow, saying "missing in A".
StatusOr<CompareResult> compareRuns(TraceReader& a, int64_t run_a, TraceReader& b, int64_t run_b,
                                    const CompareOptions& options = CompareOptions());

// msprobe's CSV: header `Step,NPU Name,Bench Name,NPU Dtype,Bench Dtype,NPU Tensor Shape,
// Bench Tensor Shape,Cosine,EucDist,MaxAbsErr,MaxRelativeErr,One Thousandth Err Ratio,
// Five Thousandths Err Ratio,NPU max,NPU min,NPU mean,NPU l2norm,Bench max,Bench min,
// Bench mean,Bench l2norm,Result,Err_message`; missing values are `N/A`.
// In statistics-only mode (result.statistics_only), msprobe's summary columns instead:
// `Step,NPU Name,Bench Name,NPU Dtype,Bench Dtype,NPU Tensor Shape,Bench Tensor Shape,Max diff,
// Min diff,Mean diff,L2norm diff,MaxRelativeErr,MinRelativeErr,MeanRelativeErr,NormRelativeErr,
// NPU max,NPU min,NPU mean,NPU l2norm,Bench max,Bench min,Bench mean,Bench l2norm,Result,
// Err_message` (relative errors as msprobe's percent text, "12.5%").
std::string toCsv(const CompareResult& result);

// Statistics-mode differences of two tensors' statistics, and their verdict.
SummaryDiffs summaryDiffs(const CompareRow& row);
Verdict summaryVerdict(const CompareRow& row, std::string* message);

}  // namespace compare
}  // namespace npuscope
