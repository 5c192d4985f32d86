#include "ascend_csv.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>

#include "text.h"

namespace npuscope::import {
namespace {

constexpr int64_t kCsvHardwarePid = 1 << 20;  // the synthetic processes of a folder without a timeline
constexpr int64_t kCsvHcclPid = kCsvHardwarePid + 1;

}  // namespace

StatusOr<std::map<std::string, size_t>> csvColumns(const std::string& file, const std::vector<std::string>& header,
                                                   std::initializer_list<const char*> needed) {
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  for (const char* need : needed) {
    if (!col.count(need)) return invalidArgument(file + ": line 1: no column '" + need + "'");
  }
  return col;
}

std::string csvWhere(const std::string& file, int64_t line) {
  return file + ": line " + std::to_string(line) + ": ";
}

Status forEachCsvRow(const std::string& file, std::string text, std::initializer_list<const char*> needed,
                     const CsvRowFn& fn) {
  CsvReader csv(std::move(text));
  int64_t line = 0;
  auto header = csv.next(&line);
  if (!header) return Status::ok();
  ASSIGN_OR_RETURN(auto col, csvColumns(file, *header, needed));
  std::vector<size_t> cols;
  for (const char* n : needed) cols.push_back(col[n]);
  const size_t need = cols.empty() ? 0 : *std::max_element(cols.begin(), cols.end()) + 1;
  while (auto row = csv.next(&line)) {
    if (row->size() < need) {
      return invalidArgument(csvWhere(file, line) + std::to_string(row->size()) + " fields (expected " +
                             std::to_string(header->size()) + ")");
    }
    RETURN_IF_ERROR(fn(*row, cols, line));
  }
  return Status::ok();
}

namespace {

// "NPU:3" (torch_npu's Device Type / Device) as 3; 0 without a colon.
int32_t deviceOf(const std::string& text) {
  const size_t colon = text.find(':');
  return colon == std::string::npos ? 0 : std::atoi(text.c_str() + colon + 1);
}

// Megabytes written as text to bytes: 0 for an empty, non-numeric or negative field (none, as
// torch_npu leaves it); nothing from 9.2e18 bytes (2^63) on, which a 64-bit integer cannot hold
// (found by fuzz_npu_folder: 1.7e15 MB overflowed the cast).
std::optional<uint64_t> megabytes(const std::string& s) {
  const double v = std::strtod(s.c_str(), nullptr);
  if (std::isnan(v) || v <= 0) return uint64_t{0};
  const double bytes = v * 1024.0 * 1024.0;
  if (!(bytes < 9.2e18)) return std::nullopt;  // also infinity
  return static_cast<uint64_t>(bytes + 0.5);
}

// One "{op}@{group}" entry of communication.json: its group and the largest Transit Size(MB) of
// its links.
CollectiveInfo collectiveOf(const std::string& key, const nlohmann::json& op) {
  const size_t at = key.find('@');
  CollectiveInfo c;
  c.group = at == std::string::npos ? std::string() : key.substr(at + 1);
  if (op.is_object() && op.contains("Communication Bandwidth Info") && op["Communication Bandwidth Info"].is_object()) {
    double mb = 0;
    for (const auto& [link, v] : op["Communication Bandwidth Info"].items()) {
      if (v.is_object() && v.contains("Transit Size(MB)") && v["Transit Size(MB)"].is_number()) {
        mb = std::max(mb, v["Transit Size(MB)"].get<double>());
      }
    }
    if (mb > 0 && mb < 1e12) c.bytes = static_cast<int64_t>(mb * 1024 * 1024);
  }
  return c;
}

// Calls fn(step key, op key, op) for every op of every step and kind.
template <typename Fn>
void forEachCollective(const nlohmann::json& j, Fn fn) {
  if (!j.is_object()) return;
  for (const auto& [step, kinds] : j.items()) {
    if (!kinds.is_object()) continue;
    for (const auto& [kind, ops] : kinds.items()) {
      if (!ops.is_object()) continue;
      for (const auto& [key, op] : ops.items()) fn(step, key, op);
    }
  }
}

}  // namespace

std::map<std::string, CollectiveInfo> parseCommunication(std::string_view json_text) {
  std::map<std::string, CollectiveInfo> out;
  forEachCollective(nlohmann::json::parse(json_text, nullptr, false),
                    [&](const std::string&, const std::string& key, const nlohmann::json& op) {
                      out[key.substr(0, key.find('@'))] = collectiveOf(key, op);
                    });
  return out;
}

StatusOr<nlohmann::json> parseStepTraceTime(const std::string& file, std::string text) {
  CsvReader csv(std::move(text));
  int64_t line = 0;
  auto header = csv.next(&line);
  if (!header) return invalidArgument(file + ": empty (expected torch_npu's step_trace_time.csv header)");
  ASSIGN_OR_RETURN(auto col, csvColumns(file, *header, {"Step"}));
  nlohmann::json rows = nlohmann::json::array();
  while (auto row = csv.next(&line)) {
    nlohmann::json r = nlohmann::json::object();
    for (size_t i = 0; i < header->size() && i < row->size(); ++i) {
      const std::string& v = (*row)[i];
      if (v.empty() || v.size() > 40) continue;
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (end != v.c_str() + v.size() || !std::isfinite(x)) continue;
      r[(*header)[i]] = x;
    }
    const auto step = r.find("Step");
    if (step == r.end() || *step < 0 || *step > 1e15 || *step != std::floor(step->get<double>())) continue;
    r["Step"] = static_cast<int64_t>(step->get<double>());
    rows.push_back(std::move(r));
  }
  return rows;
}

int64_t addCommunicationTasks(std::string_view json_text, const nlohmann::json& step_rows, TraceModel& model) {
  model.addName(kCsvHcclPid, 0, "process_name", "HCCL");
  model.addName(kCsvHcclPid, 0, "thread_name", "Group 0 Communication");
  std::map<int64_t, int64_t> first;  // step -> its first collective's start
  int64_t tasks = 0;
  forEachCollective(nlohmann::json::parse(json_text, nullptr, false), [&](const std::string& step, const std::string& key,
                                                                          const nlohmann::json& op) {
    if (!op.is_object() || !op.contains("Communication Time Info")) return;
    const nlohmann::json& t = op["Communication Time Info"];
    if (!t.is_object() || !t.contains("Start Timestamp(us)") || !t.contains("Elapse Time(ms)")) return;
    const nlohmann::json &start = t["Start Timestamp(us)"], &elapse = t["Elapse Time(ms)"];
    if (!start.is_number() || !elapse.is_number()) return;
    const double start_us = start.get<double>(), elapse_ms = elapse.get<double>();
    if (!(start_us >= 0 && start_us < 9e15 && elapse_ms >= 0 && elapse_ms < 9e9)) return;
    const CollectiveInfo c = collectiveOf(key, op);
    const std::string name = key.substr(0, key.find('@'));
    const int64_t ts = static_cast<int64_t>(start_us * 1e3);
    EventFields e;
    e.ph = "X";
    e.name = name;
    e.ts_ns = ts;
    e.dur_ns = static_cast<int64_t>(elapse_ms * 1e6);
    e.pid = kCsvHcclPid;
    e.tid = 0;
    e.group = c.group;
    if (c.bytes >= 0) e.bytes = c.bytes;
    model.addEvent(e);
    ++tasks;
    if (step.rfind("step", 0) == 0 && step.size() > 4 && step.size() < 20 &&
        step.find_first_not_of("0123456789", 4) == std::string::npos) {
      const int64_t n = std::stoll(step.substr(4));
      auto [it, fresh] = first.try_emplace(n, ts);
      if (!fresh) it->second = std::min(it->second, ts);
    }
  });
  if (step_rows.is_array()) {
    for (const auto& r : step_rows) {
      if (!r.is_object() || !r.contains("Step")) continue;
      const int64_t n = r["Step"].get<int64_t>();
      auto it = first.find(n);
      const int64_t start = it == first.end() ? 0 : it->second;
      const double stage_us = r.contains("Stage") ? r["Stage"].get<double>() : 0.0;
      model.addStep(n, start, start + static_cast<int64_t>(std::max(0.0, std::min(stage_us, 9e12)) * 1e3));
    }
  }
  model.note("no host ops and no kernels: the folder has neither trace_view.json nor kernel_details.csv; " +
             std::to_string(tasks) + " collectives from communication.json, the steps' breakdown from step_trace_time.csv");
  return tasks;
}

Status addKernelTasks(const std::string& file, std::string text, const std::map<std::string, CollectiveInfo>& collectives,
                      TraceModel& model) {
  CsvReader csv(std::move(text));
  int64_t line = 0;
  auto header = csv.next(&line);
  if (!header) return invalidArgument(file + ": empty (expected torch_npu's kernel_details.csv header)");
  ASSIGN_OR_RETURN(auto col, csvColumns(file, *header, {"Name", "Type", "Start Time(us)", "Duration(us)"}));
  auto optional = [&](const char* name) { return col.count(name) ? col[name] : SIZE_MAX; };
  const size_t c_name = col["Name"], c_type = col["Type"], c_start = col["Start Time(us)"],
               c_dur = col["Duration(us)"], c_core = optional("Accelerator Core"), c_shapes = optional("Input Shapes"),
               c_dtypes = optional("Input Data Types"), c_stream = optional("Stream ID"),
               c_step = optional("Step Id"), c_device = optional("Device_id");
  model.addName(kCsvHardwarePid, 0, "process_name", "Ascend Hardware");
  model.addName(kCsvHcclPid, 0, "process_name", "HCCL");
  model.addName(kCsvHcclPid, 0, "thread_name", "Group 0 Communication");
  std::map<int64_t, std::pair<int64_t, int64_t>> steps;  // Step Id -> first start, last end
  int64_t rows = 0;
  auto unquote = [](std::string_view v) {
    while (!v.empty() && v.front() == '"') v.remove_prefix(1);
    while (!v.empty() && v.back() == '"') v.remove_suffix(1);
    return v == "N/A" ? std::string_view() : v;
  };
  while (auto row = csv.next(&line)) {
    auto field = [&](size_t c) -> std::string_view {
      return c < row->size() ? std::string_view((*row)[c]) : std::string_view();
    };
    if (row->size() <= std::max({c_name, c_type, c_start, c_dur})) {
      return invalidArgument(file + ": line " + std::to_string(line) + ": " + std::to_string(row->size()) +
                             " fields (expected " + std::to_string(header->size()) + ")");
    }
    auto start = microsToNs(field(c_start));
    auto dur = microsToNs(field(c_dur));
    if (!start) {
      return invalidArgument(file + ": line " + std::to_string(line) + ": bad Start Time(us) '" +
                             std::string(field(c_start)) + "'");
    }
    if (!dur || *dur < 0) {
      return invalidArgument(file + ": line " + std::to_string(line) + ": bad Duration(us) '" +
                             std::string(field(c_dur)) + "'");
    }
    const std::string_view core = field(c_core);
    const std::string name((*row)[c_name]);
    const bool comm = core == "COMMUNICATION" || core == "HCCL" || name.rfind("hcom_", 0) == 0;
    EventFields e;
    e.ph = "X";
    e.name = name;
    e.ts_ns = *start;
    e.dur_ns = *dur;
    e.op_type = field(c_type);
    e.core_type = core;
    e.input_dims = unquote(field(c_shapes));
    e.input_types = unquote(field(c_dtypes));
    auto number = [&](size_t c) -> std::optional<int64_t> {
      const std::string_view v = field(c);
      if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
      return std::stoll(std::string(v));
    };
    if (auto d = number(c_device)) e.device = *d;
    if (comm) {
      e.pid = kCsvHcclPid;
      e.tid = 0;
      auto it = collectives.find(name);
      if (it != collectives.end()) {
        e.group = it->second.group;
        if (it->second.bytes >= 0) e.bytes = it->second.bytes;
      }
    } else {
      e.pid = kCsvHardwarePid;
      e.tid = number(c_stream).value_or(0);
      e.physic_stream = e.tid;
    }
    model.addEvent(e);
    if (auto st = number(c_step)) {
      auto [it, fresh] = steps.try_emplace(*st, *start, *start + *dur);
      if (!fresh) {
        it->second.first = std::min(it->second.first, *start);
        it->second.second = std::max(it->second.second, *start + *dur);
      }
    }
    ++rows;
  }
  for (const auto& [n, span] : steps) model.addStep(n, span.first, span.second);
  model.note("no host ops: the folder has no timeline (trace_view.json); " + std::to_string(rows) +
             " device tasks from kernel_details.csv");
  return Status::ok();
}

// torch_npu's operator_memory.csv: one row per allocation an op made while profiling (size in
// KB, allocation and release times in us; an empty release: still live at the end), read as
// memory blocks (schema 10) owned by the op's name, without a category (the file has none).
Status addOperatorMemory(const std::string& file, std::string text, TraceModel& model) {
  return forEachCsvRow(
      file, std::move(text), {"Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)", "Device Type"},
      [&](const std::vector<std::string>& row, const std::vector<size_t>& c, int64_t line) -> Status {
        const std::string &name = row[c[0]], &size = row[c[1]], &alloc_text = row[c[2]], &free_text = row[c[3]];
        auto alloc = microsToNs(alloc_text);
        if (!alloc) return invalidArgument(csvWhere(file, line) + "bad Allocation Time(us) '" + fieldText(alloc_text) + "'");
        std::optional<int64_t> release;
        if (free_text.find_first_not_of(" \t") != std::string::npos) {
          release = microsToNs(free_text);
          if (!release || *release < *alloc) {
            return invalidArgument(csvWhere(file, line) + "bad Release Time(us) '" + fieldText(free_text) +
                                   "' (expected empty or a time after the allocation)");
          }
        }
        char* end = nullptr;
        const double kb = std::strtod(size.c_str(), &end);
        if (end == size.c_str() || !(kb >= 0) || !(kb * 1024.0 < 9.2e18)) {
          return invalidArgument(csvWhere(file, line) + "Size(KB) '" + fieldText(size) +
                                 "' is not a size (expected kilobytes below 9e15)");
        }
        MemoryBlockRecord b;
        b.alloc_ns = *alloc;
        b.free_ns = release ? *release : -1;
        b.size = b.requested = static_cast<int64_t>(kb * 1024.0 + 0.5);
        b.device = deviceOf(row[c[4]]);
        b.owner = name;
        model.addMemoryBlock(b);
        return Status::ok();
      });
}

Status addMemoryRecord(const std::string& file, std::string text, TraceModel& model, int32_t* device) {
  return forEachCsvRow(
      file, std::move(text), {"Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)", "Device Type"},
      [&](const std::vector<std::string>& row, const std::vector<size_t>& c, int64_t line) -> Status {
        if (row[c[0]] != "PTA") return Status::ok();
        auto ts = microsToNs(row[c[1]]);
        if (!ts) return invalidArgument(csvWhere(file, line) + "bad Timestamp(us) '" + fieldText(row[c[1]]) + "'");
        const auto allocated = megabytes(row[c[2]]), reserved = megabytes(row[c[3]]);
        if (!allocated || !reserved) {
          const bool a = !allocated;
          return invalidArgument(csvWhere(file, line) + (a ? "Total Allocated(MB)" : "Total Reserved(MB)") + " '" +
                                 fieldText(row[c[a ? 2 : 3]]) + "' is out of range (expected megabytes below 8.8e12)");
        }
        MemoryRecord m;
        m.ts_ns = *ts;
        m.device = *device = deviceOf(row[c[4]]);
        m.allocated = *allocated;
        m.reserved = *reserved;
        model.addMemory(m);
        return Status::ok();
      });
}

Status addModuleMemory(const std::string& file, std::string text, TraceModel& model) {
  std::vector<MemoryComponentRecord> rows;
  std::map<std::pair<int32_t, std::string>, bool> reserved_any;  // (device, component) -> ever above 0
  RETURN_IF_ERROR(forEachCsvRow(
      file, std::move(text), {"Component", "Timestamp(us)", "Total Reserved(MB)", "Device"},
      [&](const std::vector<std::string>& row, const std::vector<size_t>& c, int64_t line) -> Status {
        const std::string& mb_text = row[c[2]];
        if (mb_text.find_first_not_of(" \t") == std::string::npos) return Status::ok();  // none reserved
        auto ts = microsToNs(row[c[1]]);
        if (!ts) return invalidArgument(csvWhere(file, line) + "bad Timestamp(us) '" + fieldText(row[c[1]]) + "'");
        const auto bytes = megabytes(mb_text);
        if (!bytes) {
          return invalidArgument(csvWhere(file, line) + "Total Reserved(MB) '" + fieldText(mb_text) +
                                 "' is out of range (expected megabytes below 8.8e12)");
        }
        MemoryComponentRecord r;
        r.device = deviceOf(row[c[3]]);
        r.component = row[c[0]];
        r.ts_ns = *ts;
        r.reserved = static_cast<int64_t>(*bytes);
        reserved_any[{r.device, r.component}] |= r.reserved > 0;
        rows.push_back(std::move(r));
        return Status::ok();
      }));
  for (MemoryComponentRecord& r : rows) {
    if (reserved_any[{r.device, r.component}]) model.addMemoryComponent(std::move(r));
  }
  return Status::ok();
}

}  // namespace npuscope::import
