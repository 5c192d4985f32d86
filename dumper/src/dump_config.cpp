#include "npuscope/dumper/dump_config.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace npuscope::dumper {
namespace {

using nlohmann::json;

Status fieldError(const std::string& source, const std::string& field, const std::string& what) {
  return invalidArgument(source + ": dump." + field + ": " + what);
}

StatusOr<std::string> stringField(const json& o, const std::string& source, const std::string& field) {
  const json& v = o.at(field);
  if (!v.is_string()) return fieldError(source, field, "expected a string, got " + v.dump());
  return v.get<std::string>();
}

// One of `allowed`; the error lists them.
StatusOr<size_t> choice(const json& o, const std::string& source, const std::string& field,
                        const std::vector<std::string>& allowed) {
  ASSIGN_OR_RETURN(std::string s, stringField(o, source, field));
  for (size_t i = 0; i < allowed.size(); ++i)
    if (s == allowed[i]) return i;
  std::string list;
  for (size_t i = 0; i < allowed.size(); ++i) list += (i ? (i + 1 == allowed.size() ? " or " : ", ") : "") + allowed[i];
  return fieldError(source, field, "unknown value '" + s + "' (expected " + list + ")");
}

}  // namespace

const char* dumpModeName(DumpMode m) {
  switch (m) {
    case DumpMode::kInput: return "input";
    case DumpMode::kOutput: return "output";
    case DumpMode::kAll: break;
  }
  return "all";
}

const char* dumpDataName(DumpDataKind d) {
  switch (d) {
    case DumpDataKind::kTensor: return "tensor";
    case DumpDataKind::kStats: return "stats";
    case DumpDataKind::kOverflow: break;
  }
  return "overflow";
}

StatusOr<StepSet> StepSet::parse(const std::string& text) {
  StepSet set;
  std::stringstream ss(text);
  std::string part;
  auto bad = [&](const std::string& why) {
    return invalidArgument("'" + text + "': " + why + " (expected steps like 0|5|10-20)");
  };
  auto number = [](const std::string& s, int64_t* out) {
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 15) return false;
    *out = std::stoll(s);
    return true;
  };
  if (text.empty()) return set;
  while (std::getline(ss, part, '|')) {
    part.erase(0, part.find_first_not_of(' '));
    part.erase(part.find_last_not_of(' ') + 1);
    const size_t dash = part.find('-');
    int64_t a = 0, b = 0;
    if (dash == std::string::npos) {
      if (!number(part, &a)) return bad("'" + part + "' is not a step");
      b = a;
    } else if (!number(part.substr(0, dash), &a) || !number(part.substr(dash + 1), &b)) {
      return bad("'" + part + "' is not a step range");
    } else if (b < a) {
      return bad("range '" + part + "' ends before it starts");
    }
    set.ranges_.emplace_back(a, b);
  }
  if (!text.empty() && text.back() == '|') return bad("empty entry");
  if (set.ranges_.empty()) return bad("no step");
  return set;
}

bool StepSet::contains(int64_t step) const {
  if (ranges_.empty()) return true;
  for (const auto& [a, b] : ranges_)
    if (step >= a && step <= b) return true;
  return false;
}

int64_t StepSet::count() const {
  if (ranges_.empty()) return -1;
  int64_t n = 0;
  for (const auto& [a, b] : ranges_) n += b - a + 1;
  return n;
}

int64_t StepSet::countIn(int64_t first, int64_t end) const {
  if (end <= first) return 0;
  if (ranges_.empty()) return end - first;
  // Ranges may overlap ("1-5|3"): sorted by start, each step is counted once.
  auto sorted = ranges_;
  std::sort(sorted.begin(), sorted.end());
  int64_t n = 0, next = first;  // steps below `next` are counted or out of [first, end)
  for (const auto& [a0, b0] : sorted) {
    const int64_t a = std::max(a0, next), b = std::min(b0, end - 1);
    if (a > b) continue;
    n += b - a + 1;
    next = b + 1;
  }
  return n;
}

StatusOr<DumpConfig> DumpConfig::fromJson(const std::string& text, const std::string& source) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers past double
    return invalidArgument(source + ": not valid JSON: " + e.what());
  }
  if (!doc.is_object() || !doc.contains("dump") || !doc["dump"].is_object()) {
    return invalidArgument(source + ": dump: expected an object {\"dump\": {...}}");
  }
  const json& d = doc["dump"];
  DumpConfig c;
  for (const auto& [key, value] : d.items()) {
    if (key == "dump_path") {
      ASSIGN_OR_RETURN(c.dump_path, stringField(d, source, key));
    } else if (key == "dump_mode") {
      ASSIGN_OR_RETURN(size_t i, choice(d, source, key, {"input", "output", "all"}));
      c.mode = static_cast<DumpMode>(i);
    } else if (key == "dump_list") {
      if (!value.is_array()) return fieldError(source, key, "expected a list of op names or types");
      for (const json& e : value) {
        // Ascend nests model dumps as {"model_name":..., "layer":[...]}; npuscope takes names.
        if (e.is_string()) {
          c.dump_list.push_back(e.get<std::string>());
        } else if (e.is_object() && e.contains("layer") && e["layer"].is_array()) {
          for (const json& l : e["layer"]) {
            if (!l.is_string()) return fieldError(source, key, "layer entries must be strings");
            c.dump_list.push_back(l.get<std::string>());
          }
        } else {
          return fieldError(source, key, "entries must be op names or types (strings), got " + e.dump());
        }
      }
    } else if (key == "dump_op_switch") {
      ASSIGN_OR_RETURN(size_t i, choice(d, source, key, {"on", "off"}));
      c.op_switch = i == 0;
    } else if (key == "dump_step") {
      ASSIGN_OR_RETURN(std::string s, stringField(d, source, key));
      auto steps = StepSet::parse(s);
      if (!steps.isOk()) return fieldError(source, key, steps.status().message());
      c.steps = *steps;
    } else if (key == "dump_data") {
      ASSIGN_OR_RETURN(size_t i, choice(d, source, key, {"tensor", "stats", "overflow"}));
      c.data = static_cast<DumpDataKind>(i);
    } else if (key == "overflow_limit") {
      if (!value.is_number_integer() || value.get<int64_t>() < 1) {
        return fieldError(source, key, "expected a positive integer, got " + value.dump());
      }
      c.overflow_limit = value.get<int64_t>();
    } else if (key == "on_error") {
      ASSIGN_OR_RETURN(size_t i, choice(d, source, key, {"continue", "stop"}));
      c.stop_on_error = i == 1;
    } else if (key == "force" || key == "dump_update") {
      if (!value.is_boolean()) return fieldError(source, key, "expected true or false, got " + value.dump());
      (key == "force" ? c.force : c.dump_update) = value.get<bool>();
    } else {
      return fieldError(source, key,
                        "unknown field (known: dump_path, dump_mode, dump_list, dump_op_switch, dump_step, dump_data, "
                        "overflow_limit, on_error, force, dump_update)");
    }
  }
  if (!c.op_switch && c.dump_list.empty()) {
    return fieldError(source, "dump_op_switch", "is off and dump_list is empty: nothing would be dumped");
  }
  return c;
}

StatusOr<DumpConfig> DumpConfig::fromFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return notFound(path + ": cannot read the dump config: " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return fromJson(ss.str(), path);
}

Status DumpConfig::validate() const {
  if (dump_path.empty()) return Status::ok();
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dump_path, ec);
  if (ec) return invalidArgument("dump.dump_path: cannot create " + dump_path + ": " + ec.message());
  if (!fs::is_directory(dump_path)) return invalidArgument("dump.dump_path: " + dump_path + " is not a directory");
  if (::access(dump_path.c_str(), W_OK | X_OK) != 0) {
    return invalidArgument("dump.dump_path: cannot write " + dump_path + ": " + std::strerror(errno));
  }
  return Status::ok();
}

bool DumpConfig::keepsOp(const std::string& type, const std::string& name) const {
  if (dump_list.empty()) return op_switch;
  const std::string short_type = type.rfind("aten::", 0) == 0 ? type.substr(6) : type;
  for (const auto& e : dump_list)
    if (e == type || e == short_type || e == name) return true;
  return false;
}

StatusOr<bool> dumpRequestedByEnvironment() {
  const char* v = std::getenv("ACL_DUMP_DATA");
  if (!v || std::string(v).empty() || std::string(v) == "0") return false;
  if (std::string(v) != "1") return invalidArgument(std::string("ACL_DUMP_DATA: expected 0 or 1, got '") + v + "'");
  return true;
}

}  // namespace npuscope::dumper
