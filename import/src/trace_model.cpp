#include "trace_model.h"
#include "json_text.h"

#include <algorithm>
#include <map>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <nlohmann/json.hpp>

#include "npuscope/store/string_table.h"
#include "text.h"
#include "npuscope/store/trace_writer.h"

namespace npuscope::import {
namespace {

// The job an imported rank belongs to: the folder that holds the job's rank folders or files
// (the parent of a torch_npu `*_ascend_pt` folder, wherever inside it the path points; else the
// parent of the trace file), so ranks imported from one job's output share it.
std::string jobOfPath(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec).lexically_normal();
  if (ec) p = std::filesystem::path(path).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();  // a trailing slash
  for (std::filesystem::path q = p; q.has_relative_path(); q = q.parent_path()) {
    const std::string name = q.filename().string();
    if (name.size() > 10 && name.compare(name.size() - 10, 10, "_ascend_pt") == 0) return "import:" + q.parent_path().string();
  }
  return "import:" + p.parent_path().string();
}

}  // namespace

namespace {

bool oneOf(std::string_view s, std::initializer_list<std::string_view> set) {
  for (std::string_view x : set) {
    if (s == x) return true;
  }
  return false;
}

// Host-side categories: operators, annotations, runtime / driver calls, torch_npu's task queue.
bool hostCategory(std::string_view cat) {
  return oneOf(cat, {"cpu_op", "user_annotation", "Operator", "cuda_runtime", "cuda_driver", "Runtime",
                     "privateuse1_runtime", "privateuse1_driver", "enqueue", "dequeue",
                     "cpu_instant_event", "mtia_runtime", "xpu_runtime", "xpu_driver"});
}

// Device-side categories of Kineto (and their 2021 names) -> the task type we store.
std::string_view deviceTaskType(std::string_view cat) {
  if (cat == "kernel" || cat == "Kernel") return "kernel";
  if (cat == "gpu_memcpy" || cat == "Memcpy") return "gpu_memcpy";
  if (cat == "gpu_memset" || cat == "Memset") return "gpu_memset";
  if (cat == "cuda_sync") return "cuda_sync";  // a stream waiting on an event: on the stream's lane
  return {};
}

bool backwardName(std::string_view n) {
  if (n.rfind("autograd::engine::evaluate_function", 0) == 0) return true;
  size_t end = n.size();
  while (end > 0 && n[end - 1] >= '0' && n[end - 1] <= '9') --end;
  return end >= 8 && n.substr(end - 8, 8) == "Backward";
}

// "[[2, 3], []]" from Kineto's JSON text, whatever its spacing.
std::string normalizeDims(std::string_view json) {
  std::string out;
  out.reserve(json.size() + 8);
  for (char c : json) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    out += c;
    if (c == ',') out += ' ';
  }
  return out;
}

// torch_npu's ";\r\n"-separated lists ("32,3,224,224;\r\n;\r\n1") -> entries.
std::vector<std::string_view> npuList(std::string_view s) {
  std::vector<std::string_view> out;
  size_t at = 0;
  while (at <= s.size()) {
    size_t semi = s.find(';', at);
    if (semi == std::string_view::npos) semi = s.size();
    std::string_view item = s.substr(at, semi - at);
    while (!item.empty() && (item.front() == '\r' || item.front() == '\n' || item.front() == ' ')) item.remove_prefix(1);
    out.push_back(item);
    at = semi + 1;
  }
  if (out.size() == 1 && out[0].empty()) out.clear();
  return out;
}

std::string npuDims(std::string_view s) {
  std::string out = "[";
  bool first = true;
  for (std::string_view item : npuList(s)) {
    if (!first) out += ", ";
    first = false;
    out += '[';
    for (size_t i = 0; i < item.size(); ++i) {
      out += item[i];
      if (item[i] == ',') out += ' ';
    }
    out += ']';
  }
  return out + "]";
}

// Kineto's ["float", "Scalar", ""] or torch_npu's "float;\r\nNone" -> "float, Scalar, ".
std::string joinTypes(std::string_view s, bool json) {
  std::string out;
  if (!json) {
    bool first = true;
    for (std::string_view item : npuList(s)) {
      if (!first) out += ", ";
      first = false;
      if (item != "None") out += item;
    }
    return out;
  }
  bool in_string = false, first = true;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\' && i + 1 < s.size()) {
        out += s[++i];
      } else if (c == '"') {
        in_string = false;
      } else {
        out += c;
      }
    } else if (c == '"') {
      if (!first) out += ", ";
      first = false;
      in_string = true;
    }
  }
  return out;
}

// A value torch_npu writes for "none": empty or N/A.
bool known(std::string_view s) { return !s.empty() && s != "N/A"; }

int64_t dtypeBytes(std::string_view t) {
  if (oneOf(t, {"FP32", "INT32", "UINT32", "float32", "int32"})) return 4;
  if (oneOf(t, {"FP16", "BFP16", "BF16", "INT16", "UINT16", "float16", "bfloat16"})) return 2;
  if (oneOf(t, {"INT8", "UINT8", "int8", "uint8"})) return 1;
  if (oneOf(t, {"FP64", "INT64", "UINT64", "float64", "int64"})) return 8;
  return -1;
}

}  // namespace

int64_t TraceModel::numericId(std::string_view text) {
  // Kineto names some lanes with strings ("Spans", "stream 7"): each text gets a negative number.
  auto [it, fresh] = text_ids_.try_emplace(std::string(text), -static_cast<int64_t>(text_ids_.size()) - 1);
  return it->second;
}

void TraceModel::skip(const std::string& what) { ++skipped_[what]; }

uint32_t TraceModel::taskTypeId(std::string_view op_type, std::string_view core_type, uint32_t task_type) {
  if (known(op_type)) return cachedId(1, op_type, [&] { return std::string(op_type); });
  if (known(core_type)) return cachedId(1, core_type, [&] { return std::string(core_type); });
  return task_type;
}

void TraceModel::addTaskDetail(const TaskDetail& d, const std::string& what) {
  details_source_ = what;
  Detail x;
  x.start_ns = d.start_ns;
  x.name_id = cachedId(0, d.name, [&] { return d.name; });
  x.type_id_op = known(d.op_type) ? cachedId(1, d.op_type, [&] { return d.op_type; }) : 0;
  x.type_id_core = known(d.core_type) ? cachedId(1, d.core_type, [&] { return d.core_type; }) : 0;
  x.shapes_id = known(d.shapes) ? cachedId(3, d.shapes, [&] { return npuDims(d.shapes); }) : 0;
  details_.push_back(x);
}

// Each detail goes to the unmatched task of its name whose start is nearest, within 1 us (the
// CSV and the trace round the same start differently: ...241.563 against ...241.564).
void TraceModel::matchTaskDetails() {
  constexpr int64_t kTolerance = 1000;
  std::unordered_map<uint32_t, std::vector<std::pair<int64_t, uint32_t>>> by_name;  // name -> (start, event)
  for (size_t i = 0; i < events_.size(); ++i) {
    if (kind_[i] == kTask || kind_[i] == kCommTask) {
      by_name[events_[i].name_id].emplace_back(events_[i].ts_ns, static_cast<uint32_t>(i));
    }
  }
  for (auto& [name, v] : by_name) std::sort(v.begin(), v.end());
  std::vector<uint8_t> taken(events_.size(), 0);
  int64_t unmatched = 0;
  for (const Detail& d : details_) {
    auto it = by_name.find(d.name_id);
    int64_t best = -1, best_dt = kTolerance + 1;
    if (it != by_name.end()) {
      const auto& v = it->second;
      auto at = std::lower_bound(v.begin(), v.end(), std::make_pair(d.start_ns - kTolerance, uint32_t{0}));
      for (; at != v.end() && at->first <= d.start_ns + kTolerance; ++at) {
        const int64_t dt = std::abs(at->first - d.start_ns);
        if (!taken[at->second] && dt < best_dt) best = at->second, best_dt = dt;
      }
    }
    if (best < 0) {
      ++unmatched;
      continue;
    }
    taken[static_cast<size_t>(best)] = 1;
    Raw& r = events_[static_cast<size_t>(best)];
    if (kind_[static_cast<size_t>(best)] != kTask) continue;  // collectives keep their type (HCCL)
    if (d.type_id_op) {
      r.type_id = d.type_id_op;
    } else if (d.type_id_core) {
      r.type_id = d.type_id_core;
    }
    if (d.shapes_id) r.shapes_id = d.shapes_id;
  }
  if (unmatched > 0) {
    extra_notes_.push_back(details_source_ + ": " + std::to_string(unmatched) + " of " +
                           std::to_string(details_.size()) +
                           " rows match no device task (same name, start within 1 us); their details are not used");
  }
  details_ = {};
}

uint32_t TraceModel::laneOf(int64_t pid, int64_t tid) {
  const std::pair<int64_t, int64_t> key{pid, tid};
  if (last_lane_ != UINT32_MAX && key == last_lane_key_) return last_lane_;
  auto [it, fresh] = lane_ids_.try_emplace(key, static_cast<uint32_t>(lanes_.size()));
  if (fresh) lanes_.push_back(key);
  last_lane_key_ = key;
  last_lane_ = it->second;
  return it->second;
}

uint16_t TraceModel::catOf(std::string_view cat) {
  if (cat.empty()) return 0;
  if (cats_[last_cat_] == cat) return last_cat_;  // runs of one category: no lookup, no allocation
  auto it = cat_ids_.find(std::string(cat));
  if (it != cat_ids_.end()) return last_cat_ = it->second;
  if (cats_.size() >= 65535) return 0;
  cats_.emplace_back(cat);
  const auto id = static_cast<uint16_t>(cats_.size() - 1);
  cat_ids_.emplace(std::string(cat), id);
  return last_cat_ = id;
}

template <class Make>
uint32_t TraceModel::cachedId(int kind, std::string_view raw, Make make) {
  const uint64_t h = std::hash<std::string_view>()(raw) * 31 + static_cast<uint64_t>(kind);
  auto range = cache_.equal_range(h);
  for (auto it = range.first; it != range.second; ++it) {
    if (cache_texts_[it->second.text] == raw) return it->second.id;
  }
  const uint32_t id = strings_.intern(make());
  cache_texts_.emplace_back(raw);
  cache_.emplace(h, Cached{id, static_cast<uint32_t>(cache_texts_.size() - 1)});
  return id;
}

void TraceModel::addEvent(const EventFields& e) {
  const int64_t pid = e.pid_is_number ? e.pid : numericId(e.pid_text);
  const int64_t tid = e.tid_is_number ? e.tid : numericId(e.tid_text);
  // Categories decided without the process names: not kept at all.
  if (is(e.cat, "python_function")) {
    skip("Python stack frames (python_function)");
    return;
  }
  if (is(e.ph, "M")) {
    if (is(e.name, "process_name")) process_names_[pid] = std::string(e.arg_name);
    if (is(e.name, "thread_name")) thread_names_[{pid, tid}] = std::string(e.arg_name);
    return;
  }
  if (is(e.ph, "s") || is(e.ph, "f") || is(e.ph, "t")) {
    // Launch flows link a host call to its device task; torch_npu's and Kineto's other flows
    // (fwdbwd, async_npu, async_task_queue) are relations npuscope derives itself.
    if (is(e.ph, "s") && (is(e.cat, "ac2g") || is(e.cat, "HostToDevice")) && e.ts_ns) {
      flow_starts_.push_back(FlowStart{linkKey(e.id), *e.ts_ns, laneOf(pid, tid)});
    }
    return;
  }
  if (is(e.ph, "i") || is(e.ph, "I")) {
    if (is(e.name, "[memory]")) {
      if (!e.ts_ns || !e.total_allocated) {
        skip("[memory] events without a time or Total Allocated");
      } else if (e.device_type.value_or(0) == 0) {
        ++memory_events_cpu_;  // host memory: npuscope's memory track is the device's
      } else {
        MemoryRecord m;
        m.ts_ns = *e.ts_ns;
        m.device = static_cast<int32_t>(e.device_id.value_or(0));
        m.allocated = static_cast<uint64_t>(std::max<int64_t>(0, *e.total_allocated));
        m.reserved = static_cast<uint64_t>(std::max<int64_t>(0, e.total_reserved.value_or(*e.total_allocated)));
        memory_.push_back(m);
      }
    } else {
      skip("instant events");
    }
    return;
  }
  if (is(e.ph, "C")) {
    // npuscope's export writes a device's memory as "Memory npu:N" counters.
    if (e.name.rfind("Memory npu:", 0) == 0 && e.allocated && e.ts_ns) {
      MemoryRecord m;
      m.ts_ns = *e.ts_ns;
      m.device = std::atoi(std::string(e.name.substr(11)).c_str());
      m.allocated = static_cast<uint64_t>(std::max<int64_t>(0, *e.allocated));
      m.reserved = static_cast<uint64_t>(std::max<int64_t>(0, e.reserved.value_or(*e.allocated)));
      memory_.push_back(m);
      return;
    }
    skip("counter events");
    return;
  }
  if (!is(e.ph, "X")) {
    skip("events of phase '" + std::string(e.ph) + "'");
    return;
  }
  if (!e.ts_ns) {
    skip("complete events without a time stamp");
    return;
  }
  Raw r;
  r.ts_ns = *e.ts_ns;
  r.dur_ns = std::max<int64_t>(0, e.dur_ns.value_or(0));
  r.lane = laneOf(pid, tid);
  r.seq = e.seq && *e.seq >= 0 && *e.seq <= INT32_MAX ? static_cast<int32_t>(*e.seq) : -1;
  r.link = e.correlation ? *e.correlation : e.connection.value_or(-1);
  r.external = e.external.value_or(-1);
  r.device = static_cast<int16_t>(std::clamp<int64_t>(e.device.value_or(-1), -1, INT16_MAX));
  r.stream = static_cast<int32_t>(std::clamp<int64_t>(e.physic_stream ? *e.physic_stream : e.stream.value_or(-1), -1,
                                                      INT32_MAX));
  const auto index = static_cast<uint32_t>(events_.size());
  if (e.queue_correlation) queue_of_[index] = *e.queue_correlation;
  if (e.bytes) {
    bytes_of_[index] = *e.bytes;
  } else if (e.count && *e.count >= 0 && !e.data_type.empty() && dtypeBytes(e.data_type) > 0 &&
             *e.count <= INT64_MAX / dtypeBytes(e.data_type)) {  // a count no tensor has: bytes unknown
    bytes_of_[index] = *e.count * dtypeBytes(e.data_type);
  }
  StringTable& strings = strings_;
  if (!e.group.empty()) group_of_[index] = strings.intern(e.group);
  r.name_id = cachedId(0, e.name, [&] { return std::string(e.name); });
  r.cat = catOf(e.cat);
  r.type_id = taskTypeId(e.op_type, e.core_type,
                         e.task_type.empty() ? 0 : cachedId(1, e.task_type, [&] { return std::string(e.task_type); }));
  if (e.launch_ids) {
    for (int64_t id : *e.launch_ids) op_links_.emplace_back(id, index);
  }
  if (!e.input_dims.empty()) {
    r.shapes_id = cachedId(e.dims_are_json ? 2 : 3, e.input_dims,
                           [&] { return e.dims_are_json ? normalizeDims(e.input_dims) : npuDims(e.input_dims); });
    r.dtypes_id = cachedId(e.types_are_json ? 4 : 5, e.input_types,
                           [&] { return joinTypes(e.input_types, e.types_are_json); });
  }
  events_.push_back(r);
}

Status TraceModel::classify() {
  if (classified_) return Status::ok();
  classified_ = true;
  auto processName = [&](int64_t pid) -> std::string_view {
    auto it = process_names_.find(pid);
    return it == process_names_.end() ? std::string_view() : std::string_view(it->second);
  };
  kind_.assign(events_.size(), kSkip);
  bool any = !memory_.empty();
  for (size_t i = 0; i < events_.size(); ++i) {
    const Raw& r = events_[i];
    const std::string_view cat = cats_[r.cat];
    const auto& [pid, tid] = lanes_[r.lane];
    const std::string_view process = processName(pid);
    if (process == "Overlap Analysis") {
      skip("events of torch_npu's Overlap Analysis lanes (derived; npuscope recomputes them)");
    } else if (process == "Ascend Hardware") {
      kind_[i] = kTask;
    } else if (process == "HCCL") {
      auto t = thread_names_.find({pid, tid});
      if (t != thread_names_.end() && t->second.rfind("Group", 0) == 0) {
        kind_[i] = kCommTask;
      } else {
        skip("HCCL plane tasks (their tasks are on the Ascend Hardware streams)");
      }
    } else if (!deviceTaskType(cat).empty()) {
      kind_[i] = kTask;
    } else if (cat == "gpu_user_annotation") {
      skip("GPU-side annotations (gpu_user_annotation)");
    } else if (cat == "Trace") {
      skip("Kineto trace spans (Trace)");
    } else if (hostCategory(cat) || (cat.empty() && process == "CANN")) {
      kind_[i] = kHost;
    } else if (cat.empty()) {
      skip("events without a category");
    } else {
      skip("events of unknown category '" + std::string(cat) + "'");
    }
    any |= kind_[i] != kSkip;
  }
  if (!details_.empty()) matchTaskDetails();
  if (!any) return invalidArgument(path_ + ": no host ops, device tasks or memory samples in the trace");
  return Status::ok();
}

// The host ops nested per thread (phase 2 of write()): raw index -> op id, parent, depth and
// whether it runs in backward; threads ordered by their first op.
struct TraceModel::Nesting {
  std::map<int64_t, std::vector<uint32_t>> by_thread;  // tid -> raw indices in start order
  std::vector<std::pair<int64_t, int64_t>> thread_order;  // (first start, tid)
  std::vector<int32_t> op_id;      // raw index -> op id
  std::vector<int32_t> parent_of;  // raw index -> raw index of the parent
  std::vector<int16_t> depth_of;
  std::vector<uint8_t> backward;
};

// Which host call launched a device task (phase 4 of write()).
struct TraceModel::Launches {
  // link -> raw index of the host call, as a sorted vector (a hash map costs 3x the memory).
  std::vector<std::pair<int64_t, uint32_t>> launcher;
  // External id -> the outermost host op holding it; built on first need.
  std::unordered_map<int64_t, uint32_t> by_external;
  bool by_external_built = false;
  // torch_npu's task queue: queue id -> raw index of the enqueue op.
  std::unordered_map<int64_t, uint32_t> enqueue_of;

  int64_t findLauncher(int64_t link) const {
    auto it = std::lower_bound(launcher.begin(), launcher.end(), std::make_pair(link, uint32_t{0}),
                               [](const auto& x, const auto& y) { return x.first < y.first; });
    return it != launcher.end() && it->first == link ? static_cast<int64_t>(it->second) : int64_t{-1};
  }
};

Status TraceModel::write(TraceWriter& writer, RunSummary* summary) {
  RETURN_IF_ERROR(classify());
  tracePhase("classified");
  ASSIGN_OR_RETURN(const int64_t last, beginImportedRun(writer, summary));
  // The memory samples need no op: the writer writes them while this thread nests and links.
  writeMemorySamples(writer, summary);
  const Nesting nest = nestHostOps();
  tracePhase("nested");
  const std::vector<Step> steps = findSteps();
  // The host ops' rows need no launch: they go to the writer while another thread links the
  // launches (it reads the events and the nesting, and writes only what writeHostOps never reads).
  std::future<Launches> linking = std::async(std::launch::async, [&] { return linkLaunches(nest); });
  writeHostOps(writer, nest, steps, summary);
  tracePhase("ops handed to the writer");
  Launches launches = linking.get();
  tracePhase("linked");
  writeDeviceTasks(writer, nest, launches, steps, summary);
  tracePhase("tasks handed to the writer");
  return endImportedRun(writer, summary, last);
}

// 2. Host ops: per thread, in start order (longer first at equal starts), nested by time.
TraceModel::Nesting TraceModel::nestHostOps() {
  Nesting n;
  auto& by_thread = n.by_thread;
  for (size_t i = 0; i < events_.size(); ++i) {
    if (kind_[i] == kHost) by_thread[tidOf(events_[i])].push_back(static_cast<uint32_t>(i));
  }
  n.op_id.assign(events_.size(), -1);
  n.parent_of.assign(events_.size(), -1);
  n.depth_of.assign(events_.size(), 0);
  n.backward.assign(events_.size(), 0);
  // Threads by their first op, so ids follow time roughly across threads.
  for (auto& [tid, idx] : by_thread) {
    auto earlier = [&](uint32_t a, uint32_t b) {
      const Raw &x = events_[a], &y = events_[b];
      if (x.ts_ns != y.ts_ns) return x.ts_ns < y.ts_ns;
      if (x.dur_ns != y.dur_ns) return x.dur_ns > y.dur_ns;
      return a < b;
    };
    // Profilers mostly write a thread's ops in this order already: a check is a tenth of a sort.
    if (!std::is_sorted(idx.begin(), idx.end(), earlier)) std::sort(idx.begin(), idx.end(), earlier);
    n.thread_order.emplace_back(events_[idx.front()].ts_ns, tid);
  }
  std::sort(n.thread_order.begin(), n.thread_order.end());
  int64_t next_id = 1;
  std::unordered_map<uint32_t, bool> backward_names;
  for (auto& [first, tid] : n.thread_order) {
    std::vector<uint32_t> stack;
    for (uint32_t i : by_thread[tid]) {
      const Raw& r = events_[i];
      // An op ended at or before this start holds nothing more (zero-length ops hold nothing).
      while (!stack.empty() && events_[stack.back()].ts_ns + events_[stack.back()].dur_ns <= r.ts_ns) stack.pop_back();
      n.op_id[i] = static_cast<int32_t>(next_id++);
      if (!stack.empty()) {
        n.parent_of[i] = static_cast<int32_t>(stack.back());
        n.depth_of[i] = static_cast<int16_t>(std::min<size_t>(stack.size(), 32767));
        n.backward[i] = n.backward[stack.back()];
      }
      if (!n.backward[i]) {
        auto [it, fresh] = backward_names.try_emplace(r.name_id, false);
        if (fresh) it->second = backwardName(strings_.value(r.name_id));
        n.backward[i] = it->second;
      }
      stack.push_back(i);
    }
  }
  return n;
}

// 3. Steps from ProfilerStep#N, else as the source gives them; in start order.
std::vector<TraceModel::Step> TraceModel::findSteps() const {
  std::vector<Step> steps;
  std::unordered_map<uint32_t, int64_t> step_names;  // name id -> N, -1: not a step
  for (size_t i = 0; i < events_.size(); ++i) {
    if (kind_[i] != kHost) continue;
    auto [it, fresh] = step_names.try_emplace(events_[i].name_id, -1);
    if (fresh) {
      const std::string name = strings_.value(events_[i].name_id);
      if (name.rfind("ProfilerStep#", 0) == 0) {
        char* end = nullptr;
        const long long n = std::strtoll(name.c_str() + 13, &end, 10);
        if (end && *end == '\0' && end != name.c_str() + 13 && n >= 0) it->second = n;
      }
    }
    if (it->second >= 0) steps.push_back({it->second, events_[i].ts_ns, events_[i].ts_ns + events_[i].dur_ns});
  }
  if (steps.empty()) steps = given_steps_;
  std::sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) { return a.start < b.start; });
  return steps;
}

// The step whose span holds `t`, -1 for none.
int64_t TraceModel::stepAt(const std::vector<Step>& steps, int64_t t) {
  auto it = std::upper_bound(steps.begin(), steps.end(), t, [](int64_t v, const Step& s) { return v < s.start; });
  if (it == steps.begin()) return -1;
  --it;
  return t < it->end ? it->n : -1;
}

// 4. Launch links: host calls by correlation / connection id, and launch flows' start points.
TraceModel::Launches TraceModel::linkLaunches(const Nesting& nest) {
  Launches l;
  auto& launcher = l.launcher;
  size_t linked = 0;  // sized once: no grown-out copies left in this thread's malloc arena
  for (size_t i = 0; i < events_.size(); ++i) linked += kind_[i] == kHost && events_[i].link >= 0;
  launcher.reserve(linked);
  for (size_t i = 0; i < events_.size(); ++i) {
    if (kind_[i] == kHost && events_[i].link >= 0) launcher.emplace_back(events_[i].link, static_cast<uint32_t>(i));
  }
  // Equal links: the deepest call first (the innermost is the launch).
  std::sort(launcher.begin(), launcher.end(), [&](const auto& x, const auto& y) {
    return x.first != y.first ? x.first < y.first : nest.depth_of[x.second] > nest.depth_of[y.second];
  });
  launcher.erase(std::unique(launcher.begin(), launcher.end(),
                             [](const auto& x, const auto& y) { return x.first == y.first; }),
                 launcher.end());
  // Launch flows whose id no host call carries: the innermost host op around the flow's start.
  std::vector<std::pair<int64_t, uint32_t>> from_flows;
  for (const FlowStart& flow : flow_starts_) {
    if (l.findLauncher(flow.link) >= 0) continue;
    const int64_t at = innermostAt(nest, lanes_[flow.lane].second, flow.ts_ns);
    if (at >= 0) from_flows.emplace_back(flow.link, static_cast<uint32_t>(at));
  }
  // torch_npu's db: launch ids an op holds (CONNECTION_IDS), where no host call carries the id.
  for (const auto& [link, i] : op_links_) {
    if (kind_[i] == kHost && l.findLauncher(link) < 0) from_flows.emplace_back(link, i);
  }
  op_links_ = {};
  if (!from_flows.empty()) {
    launcher.insert(launcher.end(), from_flows.begin(), from_flows.end());
    std::stable_sort(launcher.begin(), launcher.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    launcher.erase(std::unique(launcher.begin(), launcher.end(),
                               [](const auto& x, const auto& y) { return x.first == y.first; }),
                   launcher.end());
  }
  flow_starts_ = {};
  // torch_npu's task queue: a launch made on the dequeue thread belongs to the op that enqueued it.
  for (auto& [i, queue] : queue_of_) {
    if (kind_[i] == kHost && catOfEvent(i) == "enqueue") l.enqueue_of.emplace(queue, i);
  }
  return l;
}

// The innermost host op of thread `tid` that covers `ts`, -1 for none.
int64_t TraceModel::innermostAt(const Nesting& nest, int64_t tid, int64_t ts) const {
  auto t = nest.by_thread.find(tid);
  if (t == nest.by_thread.end()) return -1;
  const auto& idx = t->second;
  auto it = std::upper_bound(idx.begin(), idx.end(), ts, [&](int64_t v, uint32_t i) { return v < events_[i].ts_ns; });
  // Walk back to the latest op starting at or before ts that still covers it; its deepest
  // covering descendant is that op itself when ops are visited latest-first.
  while (it != idx.begin()) {
    --it;
    const Raw& r = events_[*it];
    if (r.ts_ns + r.dur_ns >= ts) return *it;
    if (nest.parent_of[*it] < 0 && r.ts_ns + r.dur_ns < ts) {
      // A top-level op that ended before ts: nothing earlier can cover ts.
      return -1;
    }
  }
  return -1;
}

// The host op that launched task `r`, -1 for none: its launch call (on torch_npu's dequeue
// thread: the op that enqueued it), else (Kineto) the operator of its External id.
int64_t TraceModel::launchOf(Launches& l, const Nesting& nest, const Raw& r) const {
  int64_t launch = -1;
  if (r.link >= 0) {
    const int64_t at = l.findLauncher(r.link);
    if (at >= 0) launch = launchingOp(l, nest, at);
  }
  if (launch < 0 && r.external >= 0) {
    // Kineto (and npuscope's export) also give a task the External id of the operator it belongs
    // to: the fallback when no launch call carries the task's correlation.
    if (!l.by_external_built) {
      l.by_external_built = true;
      for (size_t i = 0; i < events_.size(); ++i) {
        if (kind_[i] != kHost || events_[i].external < 0) continue;
        auto [it, fresh] = l.by_external.try_emplace(events_[i].external, static_cast<uint32_t>(i));
        if (!fresh && nest.depth_of[i] < nest.depth_of[it->second]) it->second = static_cast<uint32_t>(i);
      }
    }
    auto it = l.by_external.find(r.external);
    launch = it == l.by_external.end() ? int64_t{-1} : static_cast<int64_t>(it->second);
  }
  return launch;
}

int64_t TraceModel::launchingOp(const Launches& l, const Nesting& nest, int64_t i) const {
  for (int64_t a = i; a >= 0; a = nest.parent_of[a]) {
    const int64_t queue = sideInt(queue_of_, static_cast<size_t>(a));
    if (queue >= 0 && catOfEvent(static_cast<size_t>(a)) == "dequeue") {
      auto e = l.enqueue_of.find(queue);
      if (e != l.enqueue_of.end()) return nest.parent_of[e->second] >= 0 ? nest.parent_of[e->second] : e->second;
      break;
    }
  }
  return i;
}

// 5. The run: begun with what the source says of it; returns its last time.
StatusOr<int64_t> TraceModel::beginImportedRun(TraceWriter& writer, RunSummary* summary) {
  int64_t first = INT64_MAX, last = INT64_MIN;
  for (size_t i = 0; i < events_.size(); ++i) {
    if (kind_[i] == kSkip) continue;
    first = std::min(first, events_[i].ts_ns);
    last = std::max(last, events_[i].ts_ns + events_[i].dur_ns);
  }
  for (const MemoryRecord& m : memory_) first = std::min(first, m.ts_ns), last = std::max(last, m.ts_ns);

  RunInfo info;
  info.started_ns = first;
  // Kineto writes times relative to baseTimeNanoseconds; torch_npu writes Unix µs.
  info.wall_start_ns = time_base_ns_ != 0 ? time_base_ns_ + first : first;
  info.command = "import";
  const size_t slash = path_.find_last_of('/');
  info.model = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  info.device = source_ == "torch_npu" ? "npu:" + std::to_string(default_device_) : std::string();
  info.config_json = metadata_json_;
  info.source = source_;
  info.source_path = path_;
  info.rank = rank_;
  info.world_size = world_size_;
  if (rank_ >= 0) info.job = jobOfPath(path_);
  ASSIGN_OR_RETURN(summary->run_id, writer.beginRun(info));
  summary->source = source_;
  summary->path = path_;
  summary->rank = rank_;
  return last;
}

// Memory samples in time order, and the components' reserved memory.
void TraceModel::writeMemorySamples(TraceWriter& writer, RunSummary* summary) {
  std::sort(memory_.begin(), memory_.end(), [](const MemoryRecord& a, const MemoryRecord& b) { return a.ts_ns < b.ts_ns; });
  summary->memory_samples = static_cast<int64_t>(memory_.size());
  if (!memory_.empty()) writer.addMemory(std::vector<MemoryRecord>(memory_));
  if (!components_.empty()) {
    summary->memory_components = static_cast<int64_t>(components_.size());
    writer.addMemoryComponents(std::move(components_));
    components_.clear();
  }
}

// Ops, thread by thread, in id order; then the steps.
void TraceModel::writeHostOps(TraceWriter& writer, const Nesting& nest, const std::vector<Step>& steps,
                              RunSummary* summary) {
  std::unique_ptr<OpBuffer> buf = writer.takeBuffer();
  auto submit = [&]() {
    if (buf->size == 0) return;
    writer.submit(buf);
    buf = writer.takeBuffer();
    writer.waitForBacklog(TraceWriter::kImportBacklog);  // an import never drops records
  };
  for (auto& [first_ts, tid] : nest.thread_order) {
    for (uint32_t i : nest.by_thread.at(tid)) {
      const Raw& r = events_[i];
      OpRecord& o = buf->records[buf->size++];
      o = OpRecord();
      o.id = nest.op_id[i];
      o.parent_id = nest.parent_of[i] >= 0 ? nest.op_id[nest.parent_of[i]] : -1;
      o.start_ns = r.ts_ns;
      o.dur_ns = r.dur_ns;
      o.seq_nr = r.seq >= 0 ? r.seq : -1;
      o.thread_id = static_cast<uint64_t>(tidOf(r));
      o.step = static_cast<int32_t>(stepAt(steps, r.ts_ns));
      o.name_id = r.name_id;
      o.shapes_id = r.shapes_id;
      o.dtypes_id = r.dtypes_id;
      o.depth = nest.depth_of[i];
      o.is_backward = nest.backward[i];
      ++summary->host_ops;
      if (buf->full()) submit();
    }
  }
  submit();
  for (const Step& s : steps) {
    StepRecord rec;
    rec.step = s.n;
    rec.start_ns = s.start;
    rec.dur_ns = s.end - s.start;
    rec.loss = std::nan("");
    rec.loss_scale = std::nan("");
    rec.lr = std::nan("");
    writer.addStep(rec);
    ++summary->steps;
  }
}

// Device tasks (with the op and step of their launch), then the memory samples.
void TraceModel::writeDeviceTasks(TraceWriter& writer, const Nesting& nest, Launches& launches,
                                  const std::vector<Step>& steps, RunSummary* summary) {
  StringTable& strings = strings_;
  const bool ascend = source_ == "torch_npu";
  std::vector<DeviceTaskRecord> tasks;
  tasks.reserve(4096);
  for (size_t i = 0; i < events_.size(); ++i) {
    if (kind_[i] != kTask && kind_[i] != kCommTask) continue;
    const Raw& r = events_[i];
    DeviceTaskRecord t;
    t.start_ns = r.ts_ns;
    t.dur_ns = r.dur_ns;
    t.name_id = r.name_id;
    t.correlation = r.link;
    t.bytes = sideInt(bytes_of_, i);
    const auto& [pid, tid] = lanes_[r.lane];
    t.shapes_id = r.shapes_id;
    if (kind_[i] == kCommTask) {
      t.device = r.device >= 0 ? r.device : default_device_;
      t.stream = 1000 + static_cast<int32_t>(tid);  // communication groups: streams from 1000
      t.type_id = strings.intern("HCCL");
      t.comm_group = thread_names_[{pid, tid}];
    } else if (ascend) {
      t.device = r.device >= 0 ? r.device : default_device_;
      t.stream = r.stream >= 0 ? r.stream : static_cast<int32_t>(tid);
      t.type_id = r.type_id ? r.type_id : strings.intern("task");
    } else {
      t.device = r.device >= 0 ? r.device : static_cast<int32_t>(pid);
      t.stream = r.stream >= 0 ? r.stream : static_cast<int32_t>(tid);
      t.type_id = r.type_id ? r.type_id : strings.intern(deviceTaskType(cats_[r.cat]));
    }
    const int64_t launch = launchOf(launches, nest, r);
    if (auto g = group_of_.find(static_cast<uint32_t>(i)); g != group_of_.end()) t.comm_group = strings.value(g->second);
    if (launch >= 0) {
      t.op_id = nest.op_id[launch];
      t.step = stepAt(steps, events_[launch].ts_ns);
      ++summary->linked_tasks;
    } else {
      t.step = stepAt(steps, r.ts_ns);
    }
    tasks.push_back(std::move(t));
    ++summary->device_tasks;
    if (tasks.size() == 4096) {
      writer.addDeviceTasks(std::move(tasks));
      tasks.clear();
      tasks.reserve(4096);
    }
  }
  writer.addDeviceTasks(std::move(tasks));
  if (!blocks_.empty()) {
    // Event numbers in time order (allocations before frees at one time stamp), per device.
    struct Event {
      int64_t ts;
      int32_t device;
      bool free;
      size_t block;
    };
    std::vector<Event> events;
    for (size_t i = 0; i < blocks_.size(); ++i) {
      events.push_back({blocks_[i].alloc_ns, blocks_[i].device, false, i});
      if (blocks_[i].free_ns >= 0) events.push_back({blocks_[i].free_ns, blocks_[i].device, true, i});
    }
    std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
      return a.ts != b.ts ? a.ts < b.ts : (!a.free && b.free);
    });
    std::map<int32_t, int64_t> seq;
    for (const Event& e : events) {
      const int64_t n = ++seq[e.device];
      (e.free ? blocks_[e.block].free_seq : blocks_[e.block].alloc_seq) = n;
    }
    for (MemoryBlockRecord& b : blocks_) b.step = stepAt(steps, b.alloc_ns);  // the step it was allocated in
    summary->memory_blocks = static_cast<int64_t>(blocks_.size());
    writer.addMemoryBlocks(std::move(blocks_));
    blocks_.clear();
  }
}

// Notes on what was skipped (once per kind), the run's results, the end.
Status TraceModel::endImportedRun(TraceWriter& writer, RunSummary* summary, int64_t last) {
  // Notes: what was skipped, once per kind.
  for (auto& [what, n] : skipped_) summary->notes.push_back(std::to_string(n) + " " + what + " skipped");
  if (memory_events_cpu_ > 0) {
    summary->notes.push_back(std::to_string(memory_events_cpu_) + " host (CPU) [memory] events skipped");
  }
  for (const std::string& n : extra_notes_) summary->notes.push_back(n);

  nlohmann::json results;
  results["imported"] = {{"host_ops", summary->host_ops},
                         {"device_tasks", summary->device_tasks},
                         {"linked_device_tasks", summary->linked_tasks},
                         {"steps", summary->steps},
                         {"memory_samples", summary->memory_samples},
                         {"memory_blocks", summary->memory_blocks},
                         {"memory_components", summary->memory_components}};
  results["skipped"] = nlohmann::json::object();
  for (auto& [what, n] : skipped_) results["skipped"][what] = n;
  RETURN_IF_ERROR(writer.flush());
  tracePhase("written");
  return writer.endRun("completed", jsonText(results), last);
}

}  // namespace npuscope::import
