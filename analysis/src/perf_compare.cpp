#include "npuscope/analysis/perf_compare.h"

#include <algorithm>
#include <cstdlib>
#include <map>

namespace npuscope {

std::string taskGroupName(const std::string& name) {
  std::string n = name;
  // Drop "_<digits>" groups at the end ("hcom_allReduce__586_0_1" -> "hcom_allReduce_").
  for (;;) {
    size_t end = n.size();
    while (end > 0 && n[end - 1] >= '0' && n[end - 1] <= '9') --end;
    if (end == n.size() || end == 0 || n[end - 1] != '_') break;
    n.resize(end - 1);
  }
  return n.empty() ? name : n;
}

std::string taskCompareKey(const std::string& name, const std::string& type) {
  // Types that name a kind of task or a core, not an operator.
  static const char* const kGeneric[] = {
      "", "kernel", "gpu_memcpy", "gpu_memset", "cuda_sync", "cuda_runtime", "HCCL", "AI_CORE", "AI_VECTOR_CORE",
      "AI_CPU", "MIX_AIC", "MIX_AIV", "SDMA", "WRITE_BACK", "EVENT_WAIT_SQE", "EVENT_RECORD_SQE",
      "NOTIFY_WAIT_SQE", "NOTIFY_RECORD_SQE", "N/A", "UNKNOWN"};
  for (const char* g : kGeneric) {
    if (type == g) return taskGroupName(name);
  }
  return type;
}

namespace {

struct Sides {
  std::map<std::string, PerfRow> rows;
  void add(const std::string& name, bool side_b, int64_t calls, int64_t total, int64_t max) {
    PerfRow& r = rows[name];
    r.name = name;
    PerfSide& s = side_b ? r.b : r.a;
    s.calls += calls;
    s.total_ns += total;
    s.max_ns = std::max(s.max_ns, max);
  }
  std::vector<PerfRow> sorted() const {
    std::vector<PerfRow> out;
    for (auto& [name, r] : rows) out.push_back(r);
    std::stable_sort(out.begin(), out.end(), [](const PerfRow& x, const PerfRow& y) {
      return std::llabs(x.diffNs()) > std::llabs(y.diffNs());
    });
    return out;
  }
};

// One side's rows into `host` / `device`; returns what its device rows are.
StatusOr<std::string> addRun(TraceReader& r, int64_t run, bool side_b, Sides& host, Sides& device, int64_t* host_total,
                             int64_t* device_total) {
  OpAggregateQuery q;
  q.run_id = run;
  q.group_by = OpGroupBy::kName;
  q.sort = OpSortKey::kName;
  ASSIGN_OR_RETURN(OpAggregateTable ops, r.opAggregates(q));
  int64_t modeled = 0;
  for (const OpAggregate& a : ops.rows) {
    host.add(a.name, side_b, a.calls, a.total_ns, a.max_ns);
    modeled += a.device_calls;
  }
  *host_total = ops.self_sum_ns;  // the sum of self times is the host time covered by ops
  ASSIGN_OR_RETURN(std::vector<DeviceTaskAggregate> tasks, r.deviceTaskAggregates(run));
  if (!tasks.empty()) {
    for (const DeviceTaskAggregate& t : tasks) {
      device.add(taskCompareKey(t.name, t.type), side_b, t.calls, t.total_ns, t.max_ns);
      *device_total += t.total_ns;
    }
    return std::string("real");
  }
  if (modeled == 0) return std::string("none");
  for (const OpAggregate& a : ops.rows) {
    if (a.device_calls == 0) continue;
    // The modeled duration of each call is not kept per call here: max is the average's bound.
    device.add(a.name, side_b, a.device_calls, a.device_ns, a.device_ns / std::max<int64_t>(a.device_calls, 1));
    *device_total += a.device_ns;
  }
  return std::string("model");
}

}  // namespace

StatusOr<PerfCompareResult> comparePerf(TraceReader& a, int64_t run_a, TraceReader& b, int64_t run_b) {
  PerfCompareResult res;
  Sides host, device;
  ASSIGN_OR_RETURN(res.device_a, addRun(a, run_a, false, host, device, &res.host_total_a, &res.device_total_a));
  ASSIGN_OR_RETURN(res.device_b, addRun(b, run_b, true, host, device, &res.host_total_b, &res.device_total_b));
  res.host = host.sorted();
  res.device = device.sorted();
  ASSIGN_OR_RETURN(std::vector<StepRow> sa, a.steps(run_a));
  ASSIGN_OR_RETURN(std::vector<StepRow> sb, b.steps(run_b));
  for (size_t i = 0; i < std::max(sa.size(), sb.size()); ++i) {
    PerfStepPair p;
    p.index = static_cast<int64_t>(i);
    if (i < sa.size()) p.step_a = sa[i].step, p.dur_a = sa[i].dur_ns;
    if (i < sb.size()) p.step_b = sb[i].step, p.dur_b = sb[i].dur_ns;
    res.steps.push_back(p);
  }
  return res;
}

}  // namespace npuscope
