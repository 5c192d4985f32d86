#include "npuscope/analysis/first_nonfinite.h"

#include <algorithm>
#include <map>

#include "npuscope/store/trace_reader.h"

namespace npuscope::nonfinite {
namespace {

bool isCollective(const std::string& op_type, const std::string& op) {
  if (op_type.rfind("Distributed.", 0) == 0) return true;
  static const char* const kNames[] = {"all_reduce", "allreduce",  "broadcast", "all_gather", "allgather",
                                       "reduce_scatter", "all_to_all", "alltoall", "hcom_", "c10d::"};
  for (const char* n : kNames) {
    if (op_type.find(n) != std::string::npos || op.rfind(n, 0) == 0) return true;
  }
  return false;
}

bool nonFinite(const TensorDumpInfo& d) {
  return (d.nan_count && *d.nan_count > 0) || (d.inf_count && *d.inf_count > 0);
}

}  // namespace

const char* kindName(Kind k) {
  switch (k) {
    case Kind::kProduced: return "produced";
    case Kind::kArrived: return "arrived";
    case Kind::kInputs: return "inputs";
  }
  return "?";
}

StatusOr<std::vector<RankEvent>> firstEvents(TraceReader& reader, int64_t run_id, int64_t rank) {
  ASSIGN_OR_RETURN(std::vector<TensorDumpInfo> dumps, reader.tensorDumps(run_id));
  // The calls in dump order, each with its rows.
  std::vector<RankEvent> out;
  std::map<int64_t, int64_t> collectives;  // step -> collectives seen so far
  size_t i = 0;
  while (i < dumps.size()) {
    size_t j = i;
    bool in_bad = false, out_bad = false;
    std::string bad_tensor;
    for (; j < dumps.size() && dumps[j].op_name == dumps[i].op_name && dumps[j].step == dumps[i].step; ++j) {
      const TensorDumpInfo& d = dumps[j];
      if (!nonFinite(d)) continue;
      if (d.io == "output") {
        if (!out_bad) bad_tensor = d.argName();
        out_bad = true;
      } else {
        in_bad = true;
      }
    }
    const TensorDumpInfo& first = dumps[i];
    const bool coll = isCollective(first.op_type, first.op_name);
    if (out_bad) {
      RankEvent e;
      e.rank = rank;
      e.step = first.step;
      e.op = first.op_name;
      e.tensor = bad_tensor;
      e.kind = in_bad ? Kind::kInputs : coll ? Kind::kArrived : Kind::kProduced;
      e.collectives_before = collectives[first.step];
      out.push_back(e);
      return out;
    }
    if (coll) ++collectives[first.step];
    i = j;
  }
  return out;
}

Finding locate(const std::vector<int64_t>& ranks, const std::vector<RankEvent>& events) {
  Finding f;
  auto earlier = [](const RankEvent& a, const RankEvent& b) {
    if (a.step != b.step) return a.step < b.step;
    if (a.collectives_before != b.collectives_before) return a.collectives_before < b.collectives_before;
    // At the same point, a value made here comes before one that arrived.
    if ((a.kind == Kind::kArrived) != (b.kind == Kind::kArrived)) return b.kind == Kind::kArrived;
    return a.rank < b.rank;
  };
  const RankEvent* origin = nullptr;
  for (const RankEvent& e : events) {
    if (!origin || earlier(e, *origin)) origin = &e;
  }
  if (!origin) {
    f.clean_ranks = ranks;
    return f;
  }
  f.found = true;
  f.origin = *origin;
  for (const RankEvent& e : events) {
    if (&e != origin) f.others.push_back(e);
  }
  std::sort(f.others.begin(), f.others.end(), [](const RankEvent& a, const RankEvent& b) { return a.rank < b.rank; });
  for (int64_t r : ranks) {
    if (std::none_of(events.begin(), events.end(), [&](const RankEvent& e) { return e.rank == r; })) f.clean_ranks.push_back(r);
  }
  return f;
}

std::string describe(const Finding& f) {
  if (!f.found) return "";
  const RankEvent& o = f.origin;
  std::string s = "first non-finite value: step " + std::to_string(o.step) + ", rank " + std::to_string(o.rank) + ", " +
                  o.op + " " + o.tensor;
  switch (o.kind) {
    case Kind::kProduced: s += " (produced there: its inputs were finite)"; break;
    case Kind::kInputs: s += " (its inputs were non-finite already: the data, or a call not dumped)"; break;
    case Kind::kArrived: s += " (arrived through this collective: its inputs were finite; no rank's dump shows where it was made)"; break;
  }
  s += "\n";
  for (const RankEvent& e : f.others) {
    s += "  rank " + std::to_string(e.rank) + ": step " + std::to_string(e.step) + ", " + e.op + " " + e.tensor;
    if (e.kind == Kind::kArrived) {
      s += " — arrived through the collective from rank " + std::to_string(o.rank) + " (its inputs were finite)";
    } else if (e.kind == Kind::kProduced) {
      s += " — produced there too";
    } else {
      s += " — its inputs were non-finite already";
    }
    s += "\n";
  }
  if (!f.clean_ranks.empty()) {
    s += "  no non-finite value in the dumps of rank(s)";
    for (size_t i = 0; i < f.clean_ranks.size(); ++i) s += (i ? ", " : " ") + std::to_string(f.clean_ranks[i]);
    s += "\n";
  }
  return s;
}

}  // namespace npuscope::nonfinite
