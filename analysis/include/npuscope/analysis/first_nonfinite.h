// Where a job's first NaN or infinity came from: the step, rank and op where a non-finite value
// first appeared in the ranks' dumps (npuscope's own, msprobe's read, or npuscope's msprobe
// format), and for every other rank whether it arrived there through a collective — the
// collective's inputs finite, its output not — as msprobe's nan_analyze decides.
//
// Per rank, the dumped calls in order: the first call with a non-finite output is its event —
// "produced" when the call is a computation with finite inputs, "arrived" when it is a collective
// (Distributed.*, all_reduce, broadcast, all_gather, reduce_scatter, ...) with finite inputs,
// "inputs" when its inputs were non-finite already (the data, or a call that was not dumped).
// A dumped tensor is non-finite by its nan / inf counts (msprobe's statistics: a NaN or infinite
// Max or Min). The origin is the rank whose produced (or inputs) event comes first by step, then
// by the number of collectives before it in that step (the ranks meet at each collective, so an
// event before the k-th collective precedes one at it); ranks that received it say where.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "npuscope/store/status.h"

namespace npuscope {
class TraceReader;

namespace nonfinite {

enum class Kind { kProduced, kArrived, kInputs };
const char* kindName(Kind k);  // produced | arrived | inputs

// One rank's first non-finite call.
struct RankEvent {
  int64_t rank = -1;
  int64_t step = -1;
  std::string op;            // the call, e.g. "Functional.linear.3.forward" or "addmm.2.forward"
  std::string tensor;        // its first non-finite output, e.g. "output.0"
  Kind kind = Kind::kProduced;
  int64_t collectives_before = 0;  // collectives this rank ran before it in the step
};

struct Finding {
  bool found = false;
  RankEvent origin;               // where it appeared first
  std::vector<RankEvent> others;  // every other rank's first event, by rank
  std::vector<int64_t> clean_ranks;  // ranks whose dumps hold no non-finite value
};

// The first non-finite call of run `run_id`'s dumps (none: found false in a Finding of one rank).
StatusOr<std::vector<RankEvent>> firstEvents(TraceReader& reader, int64_t run_id, int64_t rank);
// The job's finding from each rank's first event (ranks without one are clean).
Finding locate(const std::vector<int64_t>& ranks, const std::vector<RankEvent>& events);
// "first non-finite value: step 0, rank 1, Functional.linear.3.forward output.0 (produced there: its inputs were
// finite)" and one line per other rank; "" when nothing was found.
std::string describe(const Finding& f);

}  // namespace nonfinite
}  // namespace npuscope
