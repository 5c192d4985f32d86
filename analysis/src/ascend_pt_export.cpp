#include "npuscope/analysis/ascend_pt_export.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <vector>

#include "npuscope/analysis/ascend_kernels.h"
#include "npuscope/analysis/chrome_trace.h"
#include "npuscope/analysis/op_table_csv.h"
#include "npuscope/analysis/predicted_timeline.h"
#include "npuscope/store/version.h"

namespace npuscope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr double kMiB = 1024.0 * 1024.0;

std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.10g", v);
  return buf;
}

// torch_npu's shape cells: the list in triple quotes ("""32,3,224,224;64"""), N/A when empty.
std::string shapeCell(const std::string& s) { return s.empty() ? "N/A" : "\"\"\"" + s + "\"\"\""; }
std::string naIfEmpty(const std::string& s) { return s.empty() ? "N/A" : csvField(s); }

struct Kernel {
  int64_t step = -1;
  int64_t op_id = 0;
  int32_t device = 0;
  bool comm = false;
  int64_t start_ns = 0;  // on the recording's clock
  int64_t dur_ns = 0;
  int64_t wait_ns = 0;
  int64_t bytes = -1;
  AscendKernel kernel;
  std::string op_name;
  AscendTensorList inputs;
};

struct StepTime {
  int64_t step = 0;
  int64_t start_ns = 0;  // predicted start on the recording's clock
  PredictedStep p;
  int64_t first_kernel_ns = -1;  // from the step's start
};

class Writer {
 public:
  Writer(TraceReader& reader, const AscendPtOptions& options) : reader_(reader), options_(options) {}

  StatusOr<AscendPtSummary> run(const std::string& dir);

 private:
  Status pickFolder(const std::string& dir);
  Status writeAll();  // every file of the folder
  Status predicted(const PredictedStepView& v);
  std::string wall(int64_t t_ns) const { return microsText(run_.wall_start_ns + (t_ns - run_.started_ns)); }
  Status writeFile(const std::string& name, const std::string& text) const;
  Status writeInfo();
  Status writeMetadata();
  Status writeKernels();
  Status writeOpStatistic();
  Status writeApiStatistic();
  Status writeStepTrace();
  Status writeOperators();
  Status writeMemory();
  Status writeCommunication();

  TraceReader& reader_;
  AscendPtOptions options_;
  AscendPtSummary summary_;
  RunRow run_;
  std::vector<StepRow> steps_;
  TimeWindow window_;
  std::string output_;  // ASCEND_PROFILER_OUTPUT
  bool created_ = false;  // the folder is this export's (removed again when it fails)
  std::vector<Kernel> kernels_;
  std::unordered_map<int64_t, int64_t> device_ns_of_op_;  // op id -> its kernel's predicted duration
  std::vector<StepTime> step_times_;
  std::vector<MemorySample> memory_;
};

Status Writer::pickFolder(const std::string& dir) {
  fs::path folder(dir);
  const std::string base = folder.filename().string();
  if (base.size() < 10 || base.compare(base.size() - 10, 10, "_ascend_pt") != 0) {
    std::string worker = options_.worker_name;
    if (worker.empty()) {
      char host[256] = {0};
      if (gethostname(host, sizeof(host) - 1) != 0 || !host[0]) std::strcpy(host, "localhost");
      worker = std::string(host) + "_" + std::to_string(run_.id);
    }
    const auto now = std::chrono::system_clock::now();
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm tm{};
    localtime_r(&t, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof(stamp), "%Y%m%d%H%M%S", &tm);
    char name[48];
    std::snprintf(name, sizeof(name), "%s%03d", stamp, static_cast<int>(ms));
    folder /= worker + "_" + name + "_ascend_pt";
  }
  std::error_code ec;
  created_ = !fs::exists(folder, ec);
  fs::create_directories(folder / "ASCEND_PROFILER_OUTPUT", ec);
  if (ec) return ioError(folder.string() + ": cannot make the folder (" + ec.message() + ")");
  summary_.folder = folder.string();
  output_ = (folder / "ASCEND_PROFILER_OUTPUT").string();
  return Status::ok();
}

Status Writer::writeFile(const std::string& path, const std::string& content) const {
  // torch_npu's line ends, file by file (as in the real export): CRLF where it writes with
  // Python's csv module, LF in the other CSVs and the JSON files.
  std::string crlf;
  const std::string base = fs::path(path).filename().string();
  const bool csv = base == "kernel_details.csv" || base == "memory_record.csv" || base == "operator_memory.csv" ||
                   base == "step_trace_time.csv";
  if (csv) {
    crlf.reserve(content.size() + content.size() / 16);
    for (char c : content) {
      if (c == '\n') crlf += '\r';
      crlf += c;
    }
  }
  const std::string& text = csv ? crlf : content;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return ioError(path + ": cannot write (" + std::strerror(errno) + ")");
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const int closed = std::fclose(f);
  if (!ok || closed != 0) return ioError(path + ": write failed (" + std::strerror(errno) + ")");
  return Status::ok();
}

// The trace_view pass hands over each predicted step: its kernels become kernel_details rows.
Status Writer::predicted(const PredictedStepView& v) {
  std::unordered_map<int64_t, const OpSlice*> recorded;
  for (const OpSlice& op : *v.recorded) recorded.emplace(op.id, &op);
  StepTime st;
  st.step = v.step->step;
  st.start_ns = v.placed_at_ns;
  st.p = *v.prediction;
  for (const PredictedOp& o : *v.ops) {
    if (o.device_start_ns < 0) continue;
    const OpSlice& op = *recorded[o.id];
    Kernel k;
    k.step = v.step->step;
    k.op_id = o.id;
    k.device = o.device;
    k.comm = o.role == PredictedRole::kCollective;
    k.start_ns = v.placed_at_ns + o.device_start_ns;
    k.dur_ns = o.device_dur_ns;
    k.kernel = ascendKernelFor(op.name);
    k.op_name = std::string(op.name);
    k.inputs = ascendInputs(op.input_shapes, op.input_dtypes);
    if (k.comm) k.bytes = inputBytes(op.input_shapes, op.input_dtypes);
    if (st.first_kernel_ns < 0 || o.device_start_ns < st.first_kernel_ns) st.first_kernel_ns = o.device_start_ns;
    device_ns_of_op_[o.id] += o.device_dur_ns;
    kernels_.push_back(std::move(k));
  }
  step_times_.push_back(st);
  return Status::ok();
}

Status Writer::writeInfo() {
  json config;
  if (!options_.config_json.empty()) {
    config = json::parse(options_.config_json, nullptr, false);
    if (config.is_discarded() || !config.is_object()) return invalidArgument("ascend_pt: the profiler config is not a JSON object");
  } else {
    config = {{"common_config",
               {{"activities", {"ProfilerActivity.CPU", "ProfilerActivity.NPU"}},
                {"schedule", nullptr},
                {"record_shapes", true},
                {"profile_memory", true},
                {"with_stack", false},
                {"with_flops", false},
                {"with_modules", true}}},
              {"experimental_config",
               {{"_profiler_level", "Level0"},
                {"_aic_metrics", "ACL_AICORE_NONE"},
                {"_l2_cache", false},
                {"_msprof_tx", false},
                {"_data_simplification", true},
                {"record_op_args", false},
                {"_export_type", "text"},
                {"_op_attr", false},
                {"_gc_detect_threshold", nullptr}}}};
  }
  const int64_t end = run_.ended_ns.value_or(run_.started_ns);
  json info = {{"config", config},
               {"start_info",
                {{"syscnt_enable", false}, {"freq", 100}, {"start_cnt", 0}, {"start_monotonic", run_.started_ns}}},
               {"end_info",
                {{"collectionTimeEnd", run_.wall_start_ns + (end - run_.started_ns)}, {"MonotonicTimeEnd", end}}},
               {"rank_id", run_.rank}};
  const std::string name = run_.rank >= 0 ? "profiler_info_" + std::to_string(run_.rank) + ".json" : "profiler_info.json";
  return writeFile((fs::path(summary_.folder) / name).string(), info.dump(4) + "\n");
}

Status Writer::writeMetadata() {
  json meta = {{"ENV_VARIABLES",
                {{"ASCEND_GLOBAL_LOG_LEVEL", ""}, {"HCCL_RDMA_TC", ""}, {"HCCL_RDMA_SL", ""}, {"ACLNN_CACHE_LIMIT", ""},
                 {"HOST_CACHE_CAPACITY", ""}, {"ASCEND_ENHANCE_ENABLE", ""}, {"PYTORCH_NPU_ALLOC_CONF", ""},
                 {"ASCEND_LAUNCH_BLOCKING", ""}}}};
  if (!options_.metadata_json.empty()) {
    json user = json::parse(options_.metadata_json, nullptr, false);
    if (user.is_discarded() || !user.is_object()) return invalidArgument("ascend_pt: the metadata is not a JSON object");
    for (auto& [k, v] : user.items()) meta[k] = v;
  }
  meta["npuscope"] = {
      {"generator", std::string("npuscope ") + npuscopeVersion()},
      {"trace_file", reader_.path()},
      {"run_id", run_.id},
      {"device_rows",
       "predicted: the kernels a real Ascend NPU would run for the recorded ops, timed by npuscope's cost model "
       "(no card was used); host rows are the recorded ops"},
  };
  if (options_.steps) meta["npuscope"]["steps"] = {options_.steps->first, options_.steps->last};
  return writeFile((fs::path(summary_.folder) / "profiler_metadata.json").string(), meta.dump(4) + "\n");
}

Status Writer::writeKernels() {
  std::sort(kernels_.begin(), kernels_.end(), [](const Kernel& a, const Kernel& b) {
    if (a.device != b.device) return a.device < b.device;
    if (a.comm != b.comm) return b.comm;
    return a.start_ns < b.start_ns;
  });
  // Wait Time(us): the stream idle before the kernel (since the previous one ended).
  for (size_t i = 1; i < kernels_.size(); ++i) {
    const Kernel& prev = kernels_[i - 1];
    Kernel& k = kernels_[i];
    if (prev.device == k.device && prev.comm == k.comm) k.wait_ns = std::max<int64_t>(0, k.start_ns - (prev.start_ns + prev.dur_ns));
  }
  std::sort(kernels_.begin(), kernels_.end(), [](const Kernel& a, const Kernel& b) { return a.start_ns < b.start_ns; });
  std::string s =
      "Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),"
      "Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,Input Data Types,Input Formats,"
      "Output Shapes,Output Data Types,Output Formats,Context ID\n";
  for (const Kernel& k : kernels_) {
    s += std::to_string(k.step) + ",4294967295," + std::to_string(k.op_id) + "," + (k.comm ? "0" : "2") + ",";
    s += csvField(k.kernel.type) + "," + csvField(k.kernel.type) + ",dynamic," + k.kernel.core + ",";
    s += wall(k.start_ns) + "\t," + microsText(k.dur_ns) + "," + microsText(k.wait_ns) + ",N/A,N/A,NO,";
    s += shapeCell(k.inputs.shapes) + "," + naIfEmpty(k.inputs.dtypes) + "," + naIfEmpty(k.inputs.formats) + ",N/A,N/A,N/A,N/A\n";
  }
  summary_.kernels = static_cast<int64_t>(kernels_.size());
  return writeFile(output_ + "/kernel_details.csv", s);
}

Status Writer::writeOpStatistic() {
  struct Agg {
    int64_t count = 0, total = 0, min = std::numeric_limits<int64_t>::max(), max = 0;
  };
  std::map<std::pair<std::string, std::string>, Agg> by_type;
  int64_t all = 0;
  for (const Kernel& k : kernels_) {
    Agg& a = by_type[{k.kernel.type, k.kernel.core}];
    ++a.count;
    a.total += k.dur_ns;
    a.min = std::min(a.min, k.dur_ns);
    a.max = std::max(a.max, k.dur_ns);
    all += k.dur_ns;
  }
  std::vector<std::pair<std::pair<std::string, std::string>, Agg>> rows(by_type.begin(), by_type.end());
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.total > b.second.total; });
  std::string s = "OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n";
  for (const auto& [key, a] : rows) {
    s += csvField(key.first) + "," + key.second + "," + std::to_string(a.count) + "," + microsText(a.total) + "," +
         microsText(a.min) + "," + microsText(a.total / a.count) + "," + microsText(a.max) + "," +
         number(all > 0 ? 100.0 * static_cast<double>(a.total) / static_cast<double>(all) : 0) + "\n";
  }
  return writeFile(output_ + "/op_statistic.csv", s);
}

// The launches of the predicted host (HostModelParams::launch_ns each), per op type, at CANN's
// "node" level, as api_statistic.csv lists a card's launches.
Status Writer::writeApiStatistic() {
  const HostModelParams params = hostModelParamsFor(run_);
  std::map<std::string, int64_t> count;
  for (const Kernel& k : kernels_) ++count[k.kernel.type];
  std::vector<std::pair<std::string, int64_t>> rows(count.begin(), count.end());
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string s = "Level,API Name,Time(us),Count,Avg(us),Min(us),Max(us),Variance\n";
  const std::string each = microsText(params.launch_ns);
  for (const auto& [type, n] : rows) {
    s += "node," + csvField(type) + "," + microsText(n * params.launch_ns) + "," + std::to_string(n) + "," + each + "," + each +
         "," + each + ",0\n";
  }
  return writeFile(output_ + "/api_statistic.csv", s);
}

Status Writer::writeStepTrace() {
  std::unordered_map<int64_t, const StepTime*> predicted;
  for (const StepTime& t : step_times_) predicted[t.step] = &t;
  std::string s =
      "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
      "Communication(Not Overlapped and Exclude Receive),Preparing\n";
  for (const StepRow& st : steps_) {
    auto it = predicted.find(st.step);
    int64_t computing = 0, comm = 0, not_overlapped = 0, stage = st.dur_ns, preparing = 0;
    if (it != predicted.end()) {
      const PredictedStep& p = it->second->p;
      const int devices = std::max(1, p.devices);
      computing = (p.device_busy_ns - p.comm_ns) / devices;
      if (computing < 0) computing = p.device_busy_ns / devices;
      comm = p.comm_ns / devices;
      not_overlapped = std::min(comm, p.comm_wait_ns / devices);
      stage = p.step_ns;
      preparing = std::max<int64_t>(0, it->second->first_kernel_ns);
    }
    const int64_t free = std::max<int64_t>(0, stage - computing - not_overlapped);
    s += std::to_string(st.step) + "," + microsText(computing) + "," + microsText(not_overlapped) + "," +
         microsText(comm - not_overlapped) + "," + microsText(comm) + "," + microsText(free) + "," + microsText(stage) + ",0," +
         microsText(not_overlapped) + "," + microsText(preparing) + "\n";
  }
  summary_.steps = static_cast<int64_t>(steps_.size());
  return writeFile(output_ + "/step_trace_time.csv", s);
}

// One row per recorded host op of the steps, with its (predicted) device time (operator_details.csv),
// and operator_memory.csv: with memory by owner (schema 10) one row per device block allocated in
// the steps, named by its allocating op, with its release time; otherwise the pool's growth
// attributed to the innermost op running when it grew.
Status Writer::writeOperators() {
  std::string s =
      "Name,Input Shapes,Call Stack,Host Self Duration(us),Host Total Duration(us),Device Self Duration(us),"
      "Device Total Duration(us),Device Self Duration With AICore(us),Device Total Duration With AICore(us)\n";
  std::string mem =
      "Name,Size(KB),Allocation Time(us),Release Time(us),Active Release Time(us),Duration(us),Active Duration(us),"
      "Allocation Total Allocated(MB),Allocation Total Reserved(MB),Allocation Total Active(MB),"
      "Release Total Allocated(MB),Release Total Reserved(MB),Release Total Active(MB),Stream Ptr,Device Type\n";
  std::unordered_map<int32_t, int64_t> last_allocated;
  size_t mem_pos = 0;
  auto memoryUntil = [&](int64_t end, const std::vector<OpSlice>* ops) {
    // Samples before `end`: a growth is attributed to the deepest op of `ops` running then.
    size_t next_op = 0;
    std::vector<const OpSlice*> active;
    for (; mem_pos < memory_.size() && memory_[mem_pos].ts_ns < end; ++mem_pos) {
      const MemorySample& m = memory_[mem_pos];
      auto [it, fresh] = last_allocated.try_emplace(m.device, 0);
      const int64_t grew = m.allocated - it->second;
      it->second = m.allocated;
      if (grew <= 0) continue;
      std::string owner = "unknown";
      if (ops) {
        while (next_op < ops->size() && (*ops)[next_op].start_ns <= m.ts_ns) active.push_back(&(*ops)[next_op++]);
        active.erase(std::remove_if(active.begin(), active.end(),
                                    [&](const OpSlice* o) { return o->start_ns + o->dur_ns <= m.ts_ns; }),
                     active.end());
        const OpSlice* best = nullptr;
        for (const OpSlice* o : active) {
          if (!best || o->depth > best->depth) best = o;
        }
        if (best) owner = std::string(best->name);
      }
      const std::string device = "NPU:" + std::to_string(m.device);
      mem += csvField(owner) + "," + number(static_cast<double>(grew) / 1024.0) + "," + wall(m.ts_ns) + "\t,,,,," +
             number(static_cast<double>(m.allocated) / kMiB) + "," + number(static_cast<double>(m.reserved) / kMiB) + "," +
             number(static_cast<double>(m.allocated) / kMiB) + ",,,,," + device + "\n";
    }
  };
  ASSIGN_OR_RETURN(std::vector<MemoryBlockRecord> blocks, reader_.memoryBlocks(run_.id));
  std::sort(blocks.begin(), blocks.end(),
            [](const MemoryBlockRecord& a, const MemoryBlockRecord& b) { return a.alloc_ns < b.alloc_ns; });
  // The blocks allocated in [begin, end), named by their ops (`ops`: the step's).
  auto blocksIn = [&](int64_t begin, int64_t end, const std::vector<OpSlice>& ops) {
    std::unordered_map<int64_t, std::string_view> names;
    for (const OpSlice& o : ops) names.emplace(o.id, o.name);
    auto it = std::lower_bound(blocks.begin(), blocks.end(), begin,
                               [](const MemoryBlockRecord& b, int64_t t) { return b.alloc_ns < t; });
    for (; it != blocks.end() && it->alloc_ns < end; ++it) {
      const MemoryBlockRecord& b = *it;
      auto n = names.find(b.op_id);
      const std::string owner = n != names.end() ? std::string(n->second) : !b.owner.empty() ? b.owner : "unknown";
      const std::string released = b.free_ns >= 0 ? wall(b.free_ns) + "\t" : "";
      const std::string held = b.free_ns >= 0 ? microsText(b.free_ns - b.alloc_ns) + "\t" : "";
      mem += csvField(owner) + "," + number(static_cast<double>(b.size) / 1024.0) + "," + wall(b.alloc_ns) + "\t," +
             released + "," + released + "," + held + "," + held + ",,,,,,,,NPU:" + std::to_string(b.device) + "\n";
    }
  };
  for (const StepRow& st : steps_) {
    ASSIGN_OR_RETURN(std::vector<OpSlice> ops, reader_.stepOps(run_.id, StepRange{st.step, st.step}));
    std::sort(ops.begin(), ops.end(), [](const OpSlice& a, const OpSlice& b) {
      return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.depth < b.depth;
    });
    std::unordered_map<int64_t, size_t> index;
    for (size_t i = 0; i < ops.size(); ++i) index.emplace(ops[i].id, i);
    std::vector<int64_t> child_host(ops.size(), 0), device_total(ops.size(), 0);
    // As trace_view.json: the emulator's work inside a kernel or a host fallback is left out.
    std::vector<uint8_t> hidden(ops.size(), 0);
    for (size_t i = 0; i < ops.size(); ++i) {
      auto p = index.find(ops[i].parent_id);
      if (ops[i].parent_id >= 0 && p != index.end() && p->second < i) {
        hidden[i] = hidden[p->second] || hidesInnerOps(ops[p->second]);
      }
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      auto d = device_ns_of_op_.find(ops[i].id);
      if (d != device_ns_of_op_.end()) device_total[i] += d->second;
    }
    // Children start after their parents: adding in reverse start order sums whole subtrees.
    for (size_t i = ops.size(); i-- > 0;) {
      auto p = index.find(ops[i].parent_id);
      if (hidden[i] || ops[i].parent_id < 0 || p == index.end()) continue;
      child_host[p->second] += std::max<int64_t>(0, ops[i].dur_ns);
      device_total[p->second] += device_total[i];
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      if (hidden[i]) continue;
      ++summary_.host_ops;
      const OpSlice& op = ops[i];
      auto d = device_ns_of_op_.find(op.id);
      const int64_t self_dev = d == device_ns_of_op_.end() ? 0 : d->second;
      const int64_t host = std::max<int64_t>(0, op.dur_ns);
      const std::string shapes = ascendInputs(op.input_shapes, op.input_dtypes).shapes;
      s += csvField(std::string(op.name)) + "," + csvField(shapes) + ",," + microsText(std::max<int64_t>(0, host - child_host[i])) +
           "," + microsText(host) + "," + microsText(self_dev) + "," + microsText(device_total[i]) + "," + microsText(self_dev) + "," +
           microsText(device_total[i]) + "\n";
    }
    if (!blocks.empty()) {
      blocksIn(st.start_ns, st.start_ns + st.dur_ns, ops);
    } else {
      memoryUntil(st.start_ns, nullptr);  // between steps: no op of a step holds it
      memoryUntil(st.start_ns + st.dur_ns, &ops);
    }
  }
  RETURN_IF_ERROR(writeFile(output_ + "/operator_details.csv", s));
  return writeFile(output_ + "/operator_memory.csv", mem);
}

Status Writer::writeMemory() {
  std::string s = "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Stream Ptr,Device Type\n";
  for (const MemorySample& m : memory_) {
    s += "PTA," + wall(m.ts_ns) + "\t," + number(static_cast<double>(m.allocated) / kMiB) + "," +
         number(static_cast<double>(m.reserved) / kMiB) + "," + number(static_cast<double>(m.allocated) / kMiB) + ",,NPU:" +
         std::to_string(m.device) + "\n";
  }
  summary_.memory_records = static_cast<int64_t>(memory_.size());
  return writeFile(output_ + "/memory_record.csv", s);
}

// Collectives (predicted on the communication stream), as torch_npu's communication.json and
// communication_matrix.json describe each: per step, "{op}@{group}" -> time and bandwidth.
Status Writer::writeCommunication() {
  json comm = json::object(), matrix = json::object();
  const int64_t world = std::max<int64_t>(1, run_.world_size);
  const int64_t rank = std::max<int64_t>(0, run_.rank);
  std::map<std::string, int> seen;
  for (const Kernel& k : kernels_) {
    if (!k.comm) continue;
    ++summary_.collectives;
    const std::string step = "step" + std::to_string(k.step);
    const std::string name = k.op_name + "_" + std::to_string(seen[step + k.op_name]++) + "@npuscope";
    const double mb = k.bytes > 0 ? static_cast<double>(k.bytes) / 1e6 : 0;
    const double ms = static_cast<double>(k.dur_ns) / 1e6;
    const double bw = ms > 0 ? mb / ms : 0;  // MB per ms = GB/s
    json link = {{"Transit Size(MB)", mb}, {"Transit Time(ms)", ms}, {"Bandwidth(GB/s)", bw},
                 {"Large Packet Ratio", 0}, {"Size Distribution", json::object()}};
    json none = {{"Transit Size(MB)", 0}, {"Transit Time(ms)", 0}, {"Bandwidth(GB/s)", 0},
                 {"Large Packet Ratio", 0}, {"Size Distribution", json::object()}};
    comm[step]["p2p"] = json::object();
    comm[step]["collective"][name] = {
        {"Communication Time Info",
         {{"Start Timestamp(us)", std::stod(wall(k.start_ns))},
          {"Elapse Time(ms)", ms},
          {"Transit Time(ms)", ms},
          {"Wait Time(ms)", 0},
          {"Synchronization Time(ms)", 0},
          {"Idle Time(ms)", 0},
          {"Wait Time Ratio", 0},
          {"Synchronization Time Ratio", 0}}},
        {"Communication Bandwidth Info", {{"RDMA", none}, {"HCCS", link}, {"PCIE", none}, {"SDMA", link}, {"SIO", none}}}};
    json peers = json::object();
    for (int64_t p = 0; p < world; ++p) {
      if (p == rank) continue;
      const double share = mb / static_cast<double>(world);
      peers[std::to_string(rank) + "-" + std::to_string(p)] = {
          {"Transport Type", "HCCS"}, {"Transit Size(MB)", share}, {"Transit Time(ms)", ms},
          {"Bandwidth(GB/s)", ms > 0 ? share / ms : 0}, {"Op Name", k.op_name}};
    }
    matrix[step]["p2p"] = json::object();
    matrix[step]["collective"][name] = peers;
  }
  if (summary_.collectives == 0) return Status::ok();
  RETURN_IF_ERROR(writeFile(output_ + "/communication.json", comm.dump() + "\n"));
  return writeFile(output_ + "/communication_matrix.json", matrix.dump() + "\n");
}

StatusOr<AscendPtSummary> Writer::run(const std::string& dir) {
  if (options_.run_id < 0) {
    ASSIGN_OR_RETURN(run_, reader_.latestRun());
  } else {
    ASSIGN_OR_RETURN(run_, reader_.run(options_.run_id));
  }
  if (run_.imported()) {
    return invalidArgument("run " + std::to_string(run_.id) + " was imported from " + run_.source +
                           " output: an ascend_pt folder is written for runs npuscope recorded");
  }
  ASSIGN_OR_RETURN(std::vector<StepRow> all, reader_.steps(run_.id));
  for (StepRow& s : all) {
    if (!options_.steps || (s.step >= options_.steps->first && s.step <= options_.steps->last)) steps_.push_back(s);
  }
  if (options_.steps) {
    if (steps_.empty()) {
      return invalidArgument("run " + std::to_string(run_.id) + " has no recorded step in " +
                             std::to_string(options_.steps->first) + ".." + std::to_string(options_.steps->last));
    }
    window_.begin_ns = steps_.front().start_ns;
    window_.end_ns = steps_.back().start_ns + std::max<int64_t>(1, steps_.back().dur_ns);
  }
  RETURN_IF_ERROR(pickFolder(dir));
  const Status written = writeAll();
  if (!written.isOk() && created_) {  // no half-written folder that looks like an export
    std::error_code ec;
    fs::remove_all(summary_.folder, ec);
    return Status(written.code(), written.message() + " (the unfinished " + summary_.folder + " was removed)");
  }
  RETURN_IF_ERROR(written);
  return summary_;
}

Status Writer::writeAll() {
  ChromeTraceOptions c;
  c.run_id = run_.id;
  c.window = window_;
  c.ascend_trace_view = true;
  c.on_predicted_step = [this](const PredictedStepView& v) { return predicted(v); };
  RETURN_IF_ERROR(exportChromeTrace(reader_, output_ + "/trace_view.json", c).status());

  ASSIGN_OR_RETURN(MemoryCursor cursor, reader_.openMemoryCursor(run_.id, window_));
  MemorySample m;
  while (cursor.next(&m)) memory_.push_back(m);
  RETURN_IF_ERROR(cursor.status());

  RETURN_IF_ERROR(writeKernels());
  RETURN_IF_ERROR(writeOpStatistic());
  RETURN_IF_ERROR(writeApiStatistic());
  RETURN_IF_ERROR(writeStepTrace());
  RETURN_IF_ERROR(writeOperators());
  RETURN_IF_ERROR(writeMemory());
  RETURN_IF_ERROR(writeCommunication());
  RETURN_IF_ERROR(writeInfo());
  return writeMetadata();
}

}  // namespace

StatusOr<AscendPtSummary> exportAscendPt(TraceReader& reader, const std::string& dir, const AscendPtOptions& options) {
  Writer w(reader, options);
  return w.run(dir);
}

}  // namespace npuscope
