// Cluster analysis of a multi-rank job: per rank and step, how the step splits into computing,
// communication not overlapped with computing, overlapped, and free time — the columns of
// torch_npu's step_trace_time.csv and msprof-analyze's cluster_step_trace_time — the slow rank,
// and communication per collective. Torch-free: it reads trace files (docs/distributed.md,
// "Cluster report").
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "npuscope/analysis/first_nonfinite.h"
#include "npuscope/store/status.h"
#include "npuscope/store/trace_reader.h"

namespace npuscope::cluster {

struct Interval {
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
};

// One step of one rank on the rank's own clock: when its device computed and when its
// collectives ran (enqueue to completion on a recorded run; the HCCL tasks of an imported one).
struct StepActivity {
  int64_t step = 0;
  int64_t start_ns = 0;
  int64_t dur_ns = 0;
  std::vector<Interval> computing, communication;
};

// A step's breakdown (nanoseconds). With C = the union of computing intervals and M = that of
// communication: computing = |C|, communication = |M|, overlapped = |C ∩ M|, not_overlapped =
// |M| - overlapped, stage = last end - first start of C ∪ M, free = stage - computing -
// not_overlapped, preparing = first computing start - step start (torch_npu's "Preparing").
struct StepBreakdown {
  int64_t step = 0;
  int64_t step_ns = 0;
  int64_t computing = 0, communication = 0, overlapped = 0, not_overlapped = 0, free = 0, stage = 0, preparing = 0;
  // The time the rank did not spend waiting in communication: step - not_overlapped.
  int64_t own() const { return step_ns - not_overlapped; }
};

StepBreakdown breakdown(const StepActivity& a);

// The union of intervals: sorted, disjoint, empty ones dropped.
std::vector<Interval> unite(std::vector<Interval> v);

// Which device tasks of an imported run are collectives (an HCCL op, hcom_*, an NCCL kernel),
// which are computing, and which are neither (scheduler tasks *_SQE, and the HCCL plane's
// Notify/SDMA/RDMA/Write Value tasks that make up a collective).
enum class TaskKind { kComputing, kCommunication, kNeither };
TaskKind classifyTask(const std::string& name, const std::string& type);

// The steps of `run` in `reader` as activities (recorded: ops that ran on an npu and the
// collectives table; imported: device tasks).
StatusOr<std::vector<StepActivity>> stepActivities(TraceReader& reader, const RunRow& run);

// Communication of one rank summed per collective kind.
struct CollectiveStat {
  std::string kind;
  int64_t count = 0;
  int64_t bytes = 0;
  int64_t time_ns = 0;      // sum of (completion - enqueue); tasks' durations when imported
  // Of that time, the part before the last rank of the collective's group enqueued it (matched
  // across the job's files by (group, seq)): waiting for a peer, not moving data.
  int64_t wait_ns = 0;
  int64_t max_ns = 0;
  int64_t incomplete = 0;   // collectives that never completed
  int64_t transitNs() const { return time_ns - wait_ns; }
  // Achieved bandwidth: bytes over the transit time (time - wait).
  double gbps() const { return transitNs() > 0 ? static_cast<double>(bytes) / static_cast<double>(transitNs()) : 0; }
};

// One rank of the job as read from its file.
struct Rank {
  int64_t rank = -1;
  std::string path;
  RunRow run;
  std::vector<StepBreakdown> steps;
  std::vector<CollectiveStat> collectives;
  // What a cluster timeline draws, on the rank's own clock (wall = t + wall_offset_ns): each
  // step's computing and communication, united; every collective as the rank saw it. An
  // imported run has no collectives table: its communication tasks stand in, group -1, seq = the
  // task's place among the run's tasks of the same collective kind (matched across ranks by order).
  std::vector<StepActivity> activity;
  std::vector<CollectiveRow> collective_rows;
  int64_t wall_offset_ns = 0;  // run.wall_start_ns - run.started_ns
  // Per step: op name -> self time (ns) of the ops recorded in it (to name where a rank loses time).
  std::vector<std::pair<int64_t, std::vector<std::pair<std::string, int64_t>>>> step_self_ns;
};

struct SlowRank {
  bool found = false;     // spread above the threshold
  int64_t rank = -1, fastest = -1;
  double spread = 0;      // (max - min) / mean of the ranks' own time over the common steps
  int64_t steps = 0;      // the steps compared: the common ones, the first left out when 3 or more
  int64_t own_ns = 0, fastest_own_ns = 0;
  int64_t step = -1;      // the step where it lost the most against the fastest rank
  int64_t step_lost_ns = 0;
  int64_t computing_more_ns = 0, free_more_ns = 0;  // in that step, against the fastest rank
  std::string op;         // the op whose self time grew most in that step ("": none recorded)
  int64_t op_more_ns = 0;
};

// When the last rank of a collective's group enqueued it: the wall time (Unix ns) and that rank's
// index in Report::ranks.
struct LastArrival {
  int64_t wall_ns = 0;
  int rank_index = -1;
};

struct Report {
  std::string job;                 // "" when the runs name none
  std::vector<Rank> ranks;         // by rank
  // Every collective of the job by (group, seq).
  std::map<std::pair<int64_t, int64_t>, LastArrival> last_arrival;
  std::vector<int64_t> common_steps;
  SlowRank slow;
  // Where the first NaN / infinity of the ranks' dumps appeared, and how it reached the others
  // (first_nonfinite.h); found false without dumps or without a non-finite value.
  nonfinite::Finding first_nonfinite;
  std::vector<std::string> notes;  // runs left out and why
};

// Reads every file (a trace file, or a folder of them) and builds the report of one job: the
// runs that know their rank; of several jobs the newest unless `job` names one. Fails with one
// line when nothing usable is found.
StatusOr<Report> analyze(const std::vector<std::string>& paths, const std::string& job = "",
                         double threshold = 0.05);

// The trace file of rank `rank` of a job whose ranks were given one path `db`: "run.db" ->
// "run.rank1.db" (before the extension; appended when there is none). `train --nproc`,
// `run --nproc` and npuscope.profile name a rank's file so; analyze() reads such siblings of a
// file it is given.
std::string rankFilePath(const std::string& db, int rank);

std::string formatText(const Report& r, double threshold);
std::string formatJson(const Report& r, double threshold);

}  // namespace npuscope::cluster
