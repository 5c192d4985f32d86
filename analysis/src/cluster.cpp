#include "npuscope/analysis/cluster.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "npuscope/store/format.h"
#include "npuscope/store/saturating.h"

namespace npuscope::cluster {

std::vector<Interval> unite(std::vector<Interval> v) {
  std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.begin_ns < b.begin_ns; });
  std::vector<Interval> out;
  for (const Interval& i : v) {
    if (i.end_ns <= i.begin_ns) continue;
    if (!out.empty() && i.begin_ns <= out.back().end_ns) {
      out.back().end_ns = std::max(out.back().end_ns, i.end_ns);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

namespace {

int64_t length(const std::vector<Interval>& u) {
  int64_t n = 0;
  for (const Interval& i : u) n += i.end_ns - i.begin_ns;
  return n;
}

// |a ∩ b| of two sorted disjoint interval lists.
int64_t intersection(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  int64_t n = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t lo = std::max(a[i].begin_ns, b[j].begin_ns), hi = std::min(a[i].end_ns, b[j].end_ns);
    if (hi > lo) n += hi - lo;
    if (a[i].end_ns < b[j].end_ns) ++i; else ++j;
  }
  return n;
}


// "hcom_allReduce_" -> "allreduce"; an imported task "hcom_allReduce__586_0_1" -> "allreduce".
std::string kindOfName(const std::string& name) {
  std::string n = name;
  if (startsWith(n, "hcom_")) n = n.substr(5);
  const size_t cut = n.find('_');
  if (cut != std::string::npos) n = n.substr(0, cut);
  std::string lower;
  for (char c : n) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "receive") lower = "recv";
  if (lower == "reducescatter") lower = "reduce_scatter";
  return lower.empty() ? name : lower;
}

bool isFile(const std::string& p) {
  struct stat s;
  return ::stat(p.c_str(), &s) == 0 && S_ISREG(s.st_mode);
}
bool isDir(const std::string& p) {
  struct stat s;
  return ::stat(p.c_str(), &s) == 0 && S_ISDIR(s.st_mode);
}

std::string ms(int64_t ns) { return formatFixed(static_cast<double>(ns) / 1e6, 3); }

}  // namespace

StepBreakdown breakdown(const StepActivity& a) {
  StepBreakdown b;
  b.step = a.step;
  b.step_ns = a.dur_ns;
  const std::vector<Interval> c = unite(a.computing), m = unite(a.communication);
  b.computing = length(c);
  b.communication = length(m);
  b.overlapped = intersection(c, m);
  b.not_overlapped = b.communication - b.overlapped;
  if (!c.empty() || !m.empty()) {
    int64_t first = INT64_MAX, last = INT64_MIN;
    for (const auto* u : {&c, &m}) {
      if (u->empty()) continue;
      first = std::min(first, u->front().begin_ns);
      last = std::max(last, u->back().end_ns);
    }
    b.stage = last - first;
    b.free = std::max<int64_t>(0, b.stage - b.computing - b.not_overlapped);
  }
  if (!c.empty()) b.preparing = std::max<int64_t>(0, c.front().begin_ns - a.start_ns);
  return b;
}

TaskKind classifyTask(const std::string& name, const std::string& type) {
  if (type == "HCCL" || startsWith(name, "hcom_") || startsWith(name, "nccl")) return TaskKind::kCommunication;
  if (type.size() > 4 && type.compare(type.size() - 4, 4, "_SQE") == 0) return TaskKind::kNeither;
  static const std::set<std::string> plane = {"Notify Wait", "Notify_Wait", "Notify Record", "Notify_Record",
                                              "Write Value", "SDMA", "RDMA", "Reduce_Inline", "Reduce Inline",
                                              "Memcpy", "Local Copy", "Reduce TBE"};
  if (plane.count(type) || plane.count(name)) return TaskKind::kNeither;
  return TaskKind::kComputing;
}

namespace {

using StepSelfTimes = std::vector<std::pair<int64_t, std::vector<std::pair<std::string, int64_t>>>>;

// Self time (duration minus its children's) per op name of one step's ops, by name.
std::vector<std::pair<std::string, int64_t>> selfTimes(const std::vector<OpSlice>& ops) {
  std::unordered_map<int64_t, int64_t> child_ns;
  for (const OpSlice& o : ops) {
    if (o.parent_id >= 0) child_ns[o.parent_id] = saturatingAdd(child_ns[o.parent_id], o.dur_ns);
  }
  // Saturating: a damaged or hostile file's durations must not overflow (fuzz_trace_file).
  std::map<std::string, int64_t> self;
  for (const OpSlice& o : ops) {
    auto it = child_ns.find(o.id);
    int64_t& s = self[std::string(o.name)];
    s = saturatingAdd(s, std::max<int64_t>(0, saturatingSub(o.dur_ns, it == child_ns.end() ? 0 : it->second)));
  }
  return {self.begin(), self.end()};
}

// The steps as activities, each step's ops read once; with `self_ns`, also their self times.
StatusOr<std::vector<StepActivity>> readSteps(TraceReader& reader, const RunRow& run, StepSelfTimes* self_ns) {
  ASSIGN_OR_RETURN(std::vector<StepRow> steps, reader.steps(run.id));
  std::vector<StepActivity> out;
  std::unordered_map<int64_t, size_t> at;
  for (const StepRow& s : steps) {
    at[s.step] = out.size();
    StepActivity a;
    a.step = s.step;
    a.start_ns = s.start_ns;
    a.dur_ns = s.dur_ns;
    out.push_back(std::move(a));
  }
  for (StepActivity& a : out) {
    if (run.imported() && self_ns == nullptr) break;  // an imported run's activity is its device tasks
    ASSIGN_OR_RETURN(std::vector<OpSlice> ops, reader.stepOps(run.id, StepRange{a.step, a.step}));
    if (self_ns != nullptr) self_ns->emplace_back(a.step, selfTimes(ops));
    if (run.imported()) continue;
    for (const OpSlice& o : ops) {
      if (o.device < 0 || o.device_dur_ns < 0 || startsWith(std::string(o.name), "hcom_")) continue;
      a.computing.push_back({o.start_ns, o.start_ns + o.dur_ns});
    }
  }
  if (run.imported()) {
    ASSIGN_OR_RETURN(std::vector<DeviceTaskRow> tasks, reader.deviceTasks(run.id));
    for (const DeviceTaskRow& t : tasks) {
      auto it = at.find(t.step);
      if (it == at.end()) continue;
      const TaskKind k = classifyTask(t.name, t.type);
      if (k == TaskKind::kNeither) continue;
      auto& list = k == TaskKind::kComputing ? out[it->second].computing : out[it->second].communication;
      list.push_back({t.start_ns, t.start_ns + t.dur_ns});
    }
    return out;
  }
  ASSIGN_OR_RETURN(std::vector<CollectiveRow> colls, reader.collectives(run.id));
  for (const CollectiveRow& c : colls) {
    auto it = at.find(c.step);
    if (it == at.end() || c.end_ns < 0) continue;
    out[it->second].communication.push_back({c.start_ns, c.end_ns});
  }
  return out;
}

}  // namespace

StatusOr<std::vector<StepActivity>> stepActivities(TraceReader& reader, const RunRow& run) {
  return readSteps(reader, run, nullptr);
}

namespace {

// Every collective as the rank saw it; an imported run's communication tasks in their place.
std::vector<CollectiveRow> collectiveRows(TraceReader& reader, const RunRow& run) {
  if (!run.imported()) {
    auto colls = reader.collectives(run.id);
    return colls.isOk() ? std::move(*colls) : std::vector<CollectiveRow>{};
  }
  auto tasks = reader.deviceTasks(run.id);
  if (!tasks.isOk()) return {};
  std::vector<CollectiveRow> out;
  std::map<std::string, int64_t> nth;
  for (const DeviceTaskRow& t : *tasks) {
    if (classifyTask(t.name, t.type) != TaskKind::kCommunication) continue;
    CollectiveRow c;
    c.id = t.id;
    c.op_id = t.op_id;
    c.step = t.step;
    c.kind = kindOfName(t.name);
    c.group = -1;
    c.seq = ++nth[c.kind];
    c.bytes = std::max<int64_t>(0, t.bytes);
    c.start_ns = t.start_ns;
    c.end_ns = t.start_ns + t.dur_ns;
    out.push_back(std::move(c));
  }
  return out;
}

// Communication of rank `k` summed per collective kind, waits from the job's last arrivals.
std::vector<CollectiveStat> collectiveStats(const Report& rep, size_t k) {
  const Rank& rank = rep.ranks[k];
  std::map<std::string, CollectiveStat> by;
  for (const CollectiveRow& c : rank.collective_rows) {
    CollectiveStat& s = by[c.kind];
    s.kind = c.kind;
    ++s.count;
    s.bytes += c.bytes;
    if (c.end_ns < 0) {
      ++s.incomplete;
      continue;
    }
    s.time_ns += c.end_ns - c.start_ns;
    s.max_ns = std::max(s.max_ns, c.end_ns - c.start_ns);
    auto last = rep.last_arrival.find({c.group, c.seq});
    if (last != rep.last_arrival.end()) {
      s.wait_ns += std::clamp<int64_t>(last->second.wall_ns - (c.start_ns + rank.wall_offset_ns), 0, c.end_ns - c.start_ns);
    }
  }
  std::vector<CollectiveStat> out;
  for (auto& [k, s] : by) out.push_back(s);
  std::sort(out.begin(), out.end(), [](const CollectiveStat& a, const CollectiveStat& b) { return a.time_ns > b.time_ns; });
  return out;
}

const StepBreakdown* stepOf(const Rank& r, int64_t step) {
  for (const StepBreakdown& b : r.steps) {
    if (b.step == step) return &b;
  }
  return nullptr;
}

void findSlowRank(Report& rep, double threshold) {
  if (rep.ranks.size() < 2 || rep.common_steps.empty()) return;
  // The first step holds each rank's start-up (first calls, allocations, joining the job): left
  // out when there are three steps or more.
  const std::vector<int64_t> steps(rep.common_steps.begin() + (rep.common_steps.size() > 2 ? 1 : 0),
                                   rep.common_steps.end());
  rep.slow.steps = static_cast<int64_t>(steps.size());
  std::vector<int64_t> own(rep.ranks.size(), 0);
  for (size_t i = 0; i < rep.ranks.size(); ++i) {
    for (int64_t s : steps) own[i] += stepOf(rep.ranks[i], s)->own();
  }
  const size_t slow = static_cast<size_t>(std::max_element(own.begin(), own.end()) - own.begin());
  const size_t fast = static_cast<size_t>(std::min_element(own.begin(), own.end()) - own.begin());
  double mean = 0;
  for (int64_t o : own) mean += static_cast<double>(o);
  mean /= static_cast<double>(own.size());
  SlowRank& sr = rep.slow;
  sr.rank = rep.ranks[slow].rank;
  sr.fastest = rep.ranks[fast].rank;
  sr.own_ns = own[slow];
  sr.fastest_own_ns = own[fast];
  sr.spread = mean > 0 ? static_cast<double>(own[slow] - own[fast]) / mean : 0;
  sr.found = sr.spread > threshold;
  for (int64_t s : steps) {
    const StepBreakdown* a = stepOf(rep.ranks[slow], s);
    const StepBreakdown* b = stepOf(rep.ranks[fast], s);
    const int64_t lost = a->own() - b->own();
    if (sr.step < 0 || lost > sr.step_lost_ns) {
      sr.step = s;
      sr.step_lost_ns = lost;
      sr.computing_more_ns = a->computing - b->computing;
      sr.free_more_ns = a->free - b->free;
    }
  }
  // The op whose self time grew most in that step.
  auto selfOf = [&](const Rank& r) -> const std::vector<std::pair<std::string, int64_t>>* {
    for (const auto& [step, v] : r.step_self_ns) {
      if (step == sr.step) return &v;
    }
    return nullptr;
  };
  const auto* sv = selfOf(rep.ranks[slow]);
  const auto* fv = selfOf(rep.ranks[fast]);
  if (sv == nullptr) return;
  std::unordered_map<std::string, int64_t> fast_self;
  if (fv != nullptr) {
    for (const auto& [n, t] : *fv) fast_self[n] = t;
  }
  for (const auto& [n, t] : *sv) {
    // Collectives and the backend's own spans of them are waiting for the peers, not lost time.
    if (startsWith(n, "hcom_") || startsWith(n, "gloo:") || startsWith(n, "nccl:") || startsWith(n, "c10d::")) continue;
    const int64_t more = t - fast_self[n];
    if (more > sr.op_more_ns) {
      sr.op = n;
      sr.op_more_ns = more;
    }
  }
}

}  // namespace

namespace {

// The trace files: those given, and the *.db files of the folders given (`from_folder`: those,
// which are left out with a note when they cannot be read).
// Where a path's extension starts (its size when it has none).
size_t extensionAt(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const size_t dot = path.find_last_of('.');
  return dot == std::string::npos || (slash != std::string::npos && dot < slash) ? path.size() : dot;
}

// The files rankFilePath(path, N) names for N >= 1 that exist, sorted by N.
std::vector<std::string> rankSiblings(const std::string& path) {
  const size_t ext_at = extensionAt(path);
  const std::string ext = path.substr(ext_at);
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  const std::string prefix = path.substr(slash == std::string::npos ? 0 : slash + 1,
                                         ext_at - (slash == std::string::npos ? 0 : slash + 1)) + ".rank";
  std::vector<std::pair<long, std::string>> found;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return {};
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n.size() <= prefix.size() + ext.size() || n.compare(0, prefix.size(), prefix) != 0 ||
        n.compare(n.size() - ext.size(), ext.size(), ext) != 0)
      continue;
    const std::string digits = n.substr(prefix.size(), n.size() - ext.size() - prefix.size());
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const long rank = std::stol(digits);
    const std::string full = slash == std::string::npos ? n : dir + "/" + n;
    if (rank >= 1 && full == rankFilePath(path, static_cast<int>(rank)) && isFile(full)) found.emplace_back(rank, full);
  }
  ::closedir(d);
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

Status listTraceFiles(const std::vector<std::string>& paths, std::vector<std::string>* files,
                      std::set<std::string>* from_folder) {
  for (const std::string& p : paths) {
    if (isDir(p)) {
      DIR* d = ::opendir(p.c_str());
      if (d == nullptr) return ioError(p + ": cannot read the folder");
      std::vector<std::string> in;
      while (dirent* e = ::readdir(d)) {
        const std::string n = e->d_name;
        if (n.size() > 3 && n.compare(n.size() - 3, 3, ".db") == 0 && isFile(p + "/" + n)) in.push_back(p + "/" + n);
      }
      ::closedir(d);
      std::sort(in.begin(), in.end());
      if (in.empty()) return invalidArgument(p + ": no trace files (*.db) in the folder");
      from_folder->insert(in.begin(), in.end());
      files->insert(files->end(), in.begin(), in.end());
    } else if (isFile(p)) {
      files->push_back(p);
      // The other ranks of a job whose ranks were given one path: <stem>.rank<N>.db beside it.
      std::vector<std::string> siblings = rankSiblings(p);
      from_folder->insert(siblings.begin(), siblings.end());
      files->insert(files->end(), siblings.begin(), siblings.end());
    } else {
      return invalidArgument(p + ": no such trace file or folder");
    }
  }
  // A sibling also named on the command line (or twice) is read once.
  std::set<std::string> seen;
  files->erase(std::remove_if(files->begin(), files->end(), [&](const std::string& f) { return !seen.insert(f).second; }),
               files->end());
  return Status::ok();
}

struct Candidate {
  std::string path;
  RunRow run;
};

// Every run that knows its rank, in every file.
StatusOr<std::vector<Candidate>> rankedRuns(const std::vector<std::string>& files,
                                            const std::set<std::string>& from_folder, Report* rep) {
  std::vector<Candidate> cands;
  for (const std::string& f : files) {
    auto opened = TraceReader::open(f);
    StatusOr<std::vector<RunRow>> listed = opened.isOk() ? (*opened)->runs() : StatusOr<std::vector<RunRow>>(opened.status());
    if (!listed.isOk()) {
      if (!from_folder.count(f)) return listed.status();
      std::string m = listed.status().message();
      if (m.rfind(f, 0) != 0) m = f + ": " + m;
      rep->notes.push_back(m + "; left out");
      continue;
    }
    bool any = false;
    for (const RunRow& r : *listed) {
      if (r.rank < 0) continue;
      cands.push_back({f, r});
      any = true;
    }
    if (!any) rep->notes.push_back(f + ": no run knows its rank (not a rank of a job); left out");
  }
  if (cands.empty()) return invalidArgument("no run of a multi-rank job in " + std::to_string(files.size()) + " file(s): a job's runs record their rank (npuscope.profile inside torch.distributed, or an imported rank)");
  return cands;
}

// The job (the one asked for, else the newest run's) and the newest run of each of its ranks.
StatusOr<std::map<int64_t, Candidate>> pickJob(const std::vector<Candidate>& cands, const std::string& job,
                                               Report* rep) {
  std::string chosen = job;
  if (chosen.empty()) {
    const Candidate* newest = &cands.front();
    for (const Candidate& c : cands) {
      if (c.run.wall_start_ns > newest->run.wall_start_ns) newest = &c;
    }
    chosen = newest->run.job;
  }
  std::set<std::string> others;
  std::map<int64_t, Candidate> by_rank;
  for (const Candidate& c : cands) {
    if (c.run.job != chosen) {
      others.insert(c.run.job.empty() ? "(none)" : c.run.job);
      continue;
    }
    auto it = by_rank.find(c.run.rank);
    if (it == by_rank.end() || c.run.wall_start_ns > it->second.run.wall_start_ns) by_rank[c.run.rank] = c;
  }
  if (by_rank.empty()) return invalidArgument("job " + job + ": no run of it in the files given");
  for (const std::string& o : others) rep->notes.push_back("runs of job " + o + " left out (use --job to pick it)");
  rep->job = chosen;
  return by_rank;
}

// torch_npu's own step breakdown (step_trace_time.csv, kept in an imported run's config as
// source.step_trace_time, in µs) in place of the steps' recomputed one; false when there is none.
bool exportedBreakdown(const std::string& config_json, std::vector<StepBreakdown>* steps) {
  const nlohmann::json j = nlohmann::json::parse(config_json, nullptr, false);
  if (!j.is_object() || !j.contains("source") || !j["source"].is_object()) return false;
  const nlohmann::json& rows = j["source"].value("step_trace_time", nlohmann::json());
  if (!rows.is_array() || rows.empty()) return false;
  auto ns = [](const nlohmann::json& r, const char* key) {
    const auto it = r.find(key);
    return it != r.end() && it->is_number() ? static_cast<int64_t>(std::clamp(it->get<double>(), 0.0, 9e12) * 1e3) : 0;
  };
  std::vector<StepBreakdown> out;
  for (const auto& r : rows) {
    if (!r.is_object() || !r.contains("Step") || !r["Step"].is_number_integer()) continue;
    StepBreakdown b;
    b.step = r["Step"].get<int64_t>();
    b.computing = ns(r, "Computing");
    b.not_overlapped = ns(r, "Communication(Not Overlapped)");
    b.overlapped = ns(r, "Overlapped");
    b.communication = ns(r, "Communication");
    b.free = ns(r, "Free");
    b.stage = ns(r, "Stage");
    b.preparing = ns(r, "Preparing");
    b.step_ns = b.stage;
    out.push_back(b);
  }
  if (out.empty()) return false;
  *steps = std::move(out);
  return true;
}

// One rank's steps, activity, self times and collectives; its run's state and damage as notes.
StatusOr<Rank> readRank(int64_t rank, const Candidate& c, Report* rep) {
  ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> reader, TraceReader::open(c.path));
  Rank r;
  r.rank = rank;
  r.path = c.path;
  r.run = c.run;
  ASSIGN_OR_RETURN(std::vector<StepActivity> acts, readSteps(*reader, c.run, &r.step_self_ns));
  bool computed = false;
  for (StepActivity& a : acts) {
    r.steps.push_back(breakdown(a));
    computed |= !a.computing.empty();
    a.computing = unite(std::move(a.computing));
    a.communication = unite(std::move(a.communication));
  }
  if (!computed && c.run.imported() && exportedBreakdown(c.run.config_json, &r.steps)) {
    rep->notes.push_back("rank " + std::to_string(rank) +
                         ": no kernels in its folder; its step breakdown is the export's own step_trace_time.csv");
  }
  r.activity = std::move(acts);
  r.collective_rows = collectiveRows(*reader, c.run);
  r.wall_offset_ns = c.run.wall_start_ns - c.run.started_ns;
  if (c.run.status != "completed") rep->notes.push_back(c.path + ": rank " + std::to_string(rank) + "'s run is " + c.run.status);
  for (const std::string& d : reader->damage()) {
    const std::string note = c.path + " (rank " + std::to_string(rank) + "'s) is damaged: " + d;
    if (std::find(rep->notes.begin(), rep->notes.end(), note) == rep->notes.end()) rep->notes.push_back(note);
  }
  return r;
}

// A note naming the ranks of the world that no file holds (at most 16 of them).
void noteMissingRanks(const std::map<int64_t, Candidate>& by_rank, Report* rep) {
  const int64_t world = rep->ranks.front().run.world_size;
  if (world <= 0 || static_cast<int64_t>(rep->ranks.size()) >= world) return;
  std::string missing;
  int64_t listed = 0;
  for (int64_t k = 0; k < world && listed < 16; ++k) {  // a corrupt world size is not walked
    if (by_rank.count(k)) continue;
    missing += (missing.empty() ? "" : ", ") + std::to_string(k);
    ++listed;
  }
  if (world - static_cast<int64_t>(rep->ranks.size()) > listed) missing += ", ...";
  rep->notes.push_back("ranks missing of a world of " + std::to_string(world) + ": " + missing);
}

// The steps every rank has; the last arrival of every collective, then each rank's
// communication with its waits.
void compareRanks(Report* rep) {
  std::map<int64_t, size_t> seen;
  for (const Rank& r : rep->ranks) {
    for (const StepBreakdown& b : r.steps) ++seen[b.step];
  }
  for (const auto& [s, n] : seen) {
    if (n == rep->ranks.size()) rep->common_steps.push_back(s);
  }
  for (size_t k = 0; k < rep->ranks.size(); ++k) {
    for (const CollectiveRow& c : rep->ranks[k].collective_rows) {
      const int64_t wall = c.start_ns + rep->ranks[k].wall_offset_ns;
      auto [it, fresh] = rep->last_arrival.try_emplace({c.group, c.seq}, LastArrival{wall, static_cast<int>(k)});
      if (!fresh && wall > it->second.wall_ns) it->second = {wall, static_cast<int>(k)};
    }
  }
  for (size_t k = 0; k < rep->ranks.size(); ++k) rep->ranks[k].collectives = collectiveStats(*rep, k);
}

}  // namespace

std::string rankFilePath(const std::string& db, int rank) {
  const size_t at = extensionAt(db);
  return db.substr(0, at) + ".rank" + std::to_string(rank) + db.substr(at);
}

StatusOr<Report> analyze(const std::vector<std::string>& paths, const std::string& job, double threshold) {
  std::vector<std::string> files;
  std::set<std::string> from_folder;
  RETURN_IF_ERROR(listTraceFiles(paths, &files, &from_folder));
  Report rep;
  ASSIGN_OR_RETURN(std::vector<Candidate> cands, rankedRuns(files, from_folder, &rep));
  ASSIGN_OR_RETURN(auto by_rank, pickJob(cands, job, &rep));
  std::vector<nonfinite::RankEvent> events;
  std::vector<int64_t> rank_ids;
  for (const auto& [rank, c] : by_rank) {
    ASSIGN_OR_RETURN(Rank r, readRank(rank, c, &rep));
    rep.ranks.push_back(std::move(r));
    rank_ids.push_back(rank);
    ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> reader, TraceReader::open(c.path));
    ASSIGN_OR_RETURN(std::vector<nonfinite::RankEvent> first, nonfinite::firstEvents(*reader, c.run.id, rank));
    events.insert(events.end(), first.begin(), first.end());
  }
  rep.first_nonfinite = nonfinite::locate(rank_ids, events);
  noteMissingRanks(by_rank, &rep);
  compareRanks(&rep);
  findSlowRank(rep, threshold);
  return rep;
}

std::string formatText(const Report& r, double threshold) {
  std::string out;
  out += "cluster: job " + (r.job.empty() ? std::string("(unnamed)") : r.job) + ", " + std::to_string(r.ranks.size()) +
         " rank(s)\n";
  for (const Rank& k : r.ranks) {
    out += "  rank " + std::to_string(k.rank) + "  " + k.path + "  run " + std::to_string(k.run.id) + "  " + k.run.status +
           (k.run.imported() ? "  imported from " + k.run.source : "") + "\n";
  }
  for (const std::string& n : r.notes) out += "  note: " + n + "\n";
  out += "\nStep trace time per rank (ms; msprof-analyze's cluster_step_trace_time)\n\n";
  char line[256];
  std::snprintf(line, sizeof line, "%6s %5s %11s %14s %11s %14s %10s %10s %10s %10s\n", "Step", "Rank", "Computing",
                "Comm(not ovl)", "Overlapped", "Communication", "Free", "Stage", "Preparing", "Step");
  out += line;
  out += std::string(std::strlen(line) - 1, '-') + "\n";
  std::set<int64_t> steps;
  for (const Rank& k : r.ranks) {
    for (const StepBreakdown& b : k.steps) steps.insert(b.step);
  }
  for (int64_t s : steps) {
    for (const Rank& k : r.ranks) {
      for (const StepBreakdown& b : k.steps) {
        if (b.step != s) continue;
        std::snprintf(line, sizeof line, "%6lld %5lld %11s %14s %11s %14s %10s %10s %10s %10s\n",
                      static_cast<long long>(s), static_cast<long long>(k.rank), ms(b.computing).c_str(),
                      ms(b.not_overlapped).c_str(), ms(b.overlapped).c_str(), ms(b.communication).c_str(),
                      ms(b.free).c_str(), ms(b.stage).c_str(), ms(b.preparing).c_str(), ms(b.step_ns).c_str());
        out += line;
      }
    }
  }
  out += "\n";
  const SlowRank& sr = r.slow;
  if (r.ranks.size() < 2) {
    out += "Slow rank: one rank only, nothing to compare\n";
  } else if (r.common_steps.empty()) {
    out += "Slow rank: the ranks share no step\n";
  } else if (!sr.found) {
    out += "Slow rank: none; the ranks' own time (step minus communication not overlapped) over " +
           std::to_string(sr.steps) + " steps is within " + formatFixed(100 * sr.spread, 1) + " % (threshold " +
           formatFixed(100 * threshold, 1) + " %)\n";
  } else {
    out += "Slow rank: rank " + std::to_string(sr.rank) + " — its own time (step minus communication not overlapped) is " +
           ms(sr.own_ns) + " ms over " + std::to_string(sr.steps) +
           (sr.steps < static_cast<int64_t>(r.common_steps.size()) ? " steps (the first left out: start-up)" : " steps") +
           " against " + ms(sr.fastest_own_ns) +
           " ms on rank " + std::to_string(sr.fastest) + " (max - min = " + formatFixed(100 * sr.spread, 1) +
           " % of the mean, threshold " + formatFixed(100 * threshold, 1) + " %); the others wait for it in their collectives\n";
    out += "  step " + std::to_string(sr.step) + " loses the most: " + ms(sr.step_lost_ns) + " ms (computing " +
           (sr.computing_more_ns >= 0 ? "+" : "") + ms(sr.computing_more_ns) + " ms, free " + (sr.free_more_ns >= 0 ? "+" : "") +
           ms(sr.free_more_ns) + " ms against rank " + std::to_string(sr.fastest) + ")\n";
    if (!sr.op.empty()) {
      out += "  where: " + sr.op + " (self time +" + ms(sr.op_more_ns) + " ms in that step)\n";
    } else {
      out += "  where: outside any recorded op\n";
    }
  }
  if (r.first_nonfinite.found) out += "\nNon-finite values (msprobe's nan_analyze)\n" + nonfinite::describe(r.first_nonfinite);
  out += "\nCommunication per collective\n\n";
  std::snprintf(line, sizeof line, "%-16s %5s %7s %14s %12s %12s %12s %12s %12s\n", "Collective", "Rank", "Count", "Bytes",
                "Time (ms)", "Wait (ms)", "Transit (ms)", "Max (ms)", "GB/s");
  out += line;
  out += std::string(std::strlen(line) - 1, '-') + "\n";
  bool any = false;
  for (const Rank& k : r.ranks) {
    for (const CollectiveStat& c : k.collectives) {
      any = true;
      std::snprintf(line, sizeof line, "%-16s %5lld %7lld %14lld %12s %12s %12s %12s %12s%s\n", c.kind.c_str(),
                    static_cast<long long>(k.rank), static_cast<long long>(c.count), static_cast<long long>(c.bytes),
                    ms(c.time_ns).c_str(), ms(c.wait_ns).c_str(), ms(c.transitNs()).c_str(), ms(c.max_ns).c_str(),
                    formatFixed(c.gbps(), 3).c_str(),
                    c.incomplete > 0 ? ("  (" + std::to_string(c.incomplete) + " never completed)").c_str() : "");
      out += line;
    }
  }
  if (!any) out += "(no collectives recorded)\n";
  out += "Time: enqueue to completion (the HCCL task when imported); Wait: the part of it before the last rank of the\n"
         "group enqueued the same collective (matched by group and sequence number); GB/s: bytes of this rank's input\n"
         "over the transit time (time - wait)\n";
  return out;
}

std::string formatJson(const Report& r, double threshold) {
  nlohmann::json j;
  j["job"] = r.job;
  j["threshold"] = threshold;
  j["notes"] = r.notes;
  j["ranks"] = nlohmann::json::array();
  for (const Rank& k : r.ranks) {
    nlohmann::json rk{{"rank", k.rank}, {"path", k.path}, {"run", k.run.id}, {"status", k.run.status},
                      {"world_size", k.run.world_size}};
    rk["steps"] = nlohmann::json::array();
    for (const StepBreakdown& b : k.steps) {
      rk["steps"].push_back({{"step", b.step}, {"computing_ns", b.computing}, {"communication_not_overlapped_ns", b.not_overlapped},
                             {"overlapped_ns", b.overlapped}, {"communication_ns", b.communication}, {"free_ns", b.free},
                             {"stage_ns", b.stage}, {"preparing_ns", b.preparing}, {"step_ns", b.step_ns}});
    }
    rk["collectives"] = nlohmann::json::array();
    for (const CollectiveStat& c : k.collectives) {
      rk["collectives"].push_back({{"kind", c.kind}, {"count", c.count}, {"bytes", c.bytes}, {"time_ns", c.time_ns},
                                   {"wait_ns", c.wait_ns}, {"transit_ns", c.transitNs()}, {"max_ns", c.max_ns}, {"incomplete", c.incomplete}, {"gb_per_s", c.gbps()}});
    }
    j["ranks"].push_back(rk);
  }
  const SlowRank& sr = r.slow;
  if (sr.rank >= 0) {
    j["slow_rank"] = {{"found", sr.found}, {"rank", sr.rank}, {"fastest", sr.fastest}, {"spread", sr.spread},
                      {"own_ns", sr.own_ns}, {"fastest_own_ns", sr.fastest_own_ns}, {"steps", sr.steps}, {"step", sr.step},
                      {"step_lost_ns", sr.step_lost_ns}, {"computing_more_ns", sr.computing_more_ns},
                      {"free_more_ns", sr.free_more_ns}, {"op", sr.op}, {"op_more_ns", sr.op_more_ns}};
  }
  const nonfinite::Finding& nf = r.first_nonfinite;
  if (nf.found) {
    auto event = [](const nonfinite::RankEvent& e) {
      return nlohmann::json{{"rank", e.rank}, {"step", e.step}, {"op", e.op}, {"tensor", e.tensor},
                            {"kind", nonfinite::kindName(e.kind)}, {"collectives_before", e.collectives_before}};
    };
    j["first_nonfinite"] = {{"origin", event(nf.origin)}, {"others", nlohmann::json::array()}, {"clean_ranks", nf.clean_ranks}};
    for (const auto& e : nf.others) j["first_nonfinite"]["others"].push_back(event(e));
  }
  return j.dump(2);
}

}  // namespace npuscope::cluster
