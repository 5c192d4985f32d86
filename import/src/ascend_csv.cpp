#include "ascend_csv.h"

#include <algorithm>
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

std::map<std::string, CollectiveInfo> parseCommunication(std::string_view json_text) {
  std::map<std::string, CollectiveInfo> out;
  const nlohmann::json j = nlohmann::json::parse(json_text, nullptr, false);
  if (!j.is_object()) return out;
  for (const auto& [step, kinds] : j.items()) {
    if (!kinds.is_object()) continue;
    for (const auto& [kind, ops] : kinds.items()) {
      if (!ops.is_object()) continue;
      for (const auto& [key, op] : ops.items()) {
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
        out[key.substr(0, at)] = c;
      }
    }
  }
  return out;
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

}  // namespace npuscope::import
