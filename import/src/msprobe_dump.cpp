#include "npuscope/import/msprobe.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "files.h"

namespace npuscope::import {
namespace {

using json = nlohmann::ordered_json;

// The number after `prefix` in a folder name ("rank3" -> 3); -1 for the bare prefix ("rank");
// none (-2) when the name is something else.
int64_t numberAfter(const std::string& name, const std::string& prefix) {
  if (name.compare(0, prefix.size(), prefix) != 0) return -2;
  if (name.size() == prefix.size()) return -1;
  int64_t v = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || v > (INT64_MAX - 9) / 10) return -2;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

std::string parentOf(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.find_last_of('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

// Python's json module writes NaN, Infinity and -Infinity bare; JSON has no such tokens. They
// become strings here (outside string literals only), which statistic() reads back.
std::string withPythonNumbersQuoted(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 64);
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) {
        out += text[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      continue;
    }
    auto token = [&](std::string_view t) { return text.substr(i, t.size()) == t; };
    if (token("NaN")) {
      out += "\"NaN\"";
      i += 2;
    } else if (token("-Infinity")) {
      out += "\"-Infinity\"";
      i += 8;
    } else if (token("Infinity")) {
      out += "\"Infinity\"";
      i += 7;
    } else {
      out += c;
    }
  }
  return out;
}

// A statistic as msprobe writes it: a number, a bool (Max / Min of a bool tensor), null, or one
// of the Python tokens above. NaN when there is none.
double statistic(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s == "Infinity" || s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity" || s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  return std::numeric_limits<double>::quiet_NaN();
}

std::string shapeText(const json& shape) {
  std::string s = "[";
  if (shape.is_array()) {
    for (size_t i = 0; i < shape.size(); ++i) {
      if (i) s += ", ";
      s += shape[i].is_number_integer() ? std::to_string(shape[i].get<int64_t>()) : shape[i].dump();
    }
  }
  return s + "]";
}

struct EntryReader {
  MsprobeDump* out;
  const std::string* entry;
  int64_t step;
  int64_t next_idx[2] = {0, 0};  // input, output

  // One value at `arg` (e.g. "input.0.1"): a tensor or a scalar becomes a row; a list or tuple
  // its elements; None, strings and other objects without a number are counted as skipped.
  void value(const json& v, const std::string& io, const std::string& arg, int depth) {
    if (depth > 16) {
      ++out->skipped_values;
      return;
    }
    if (v.is_array()) {
      for (size_t i = 0; i < v.size(); ++i) value(v[i], io, arg + "." + std::to_string(i), depth + 1);
      return;
    }
    if (!v.is_object()) {
      ++out->skipped_values;  // null: an argument or output that was None
      return;
    }
    const auto type = v.find("type");
    if (type == v.end() || !type->is_string()) {
      // A dict argument: its values by key.
      for (auto it = v.begin(); it != v.end(); ++it) value(it.value(), io, arg + "." + it.key(), depth + 1);
      return;
    }
    const std::string& t = type->get_ref<const std::string&>();
    TensorDumpRecord r;
    r.step = step;
    r.op_name = *entry;
    r.op_type = msprobeOpType(*entry);
    r.io = io;
    r.idx = next_idx[io == "output"]++;
    r.arg = arg;
    const bool tensor = t.find("Tensor") != std::string::npos || v.contains("dtype");
    if (tensor) {
      const auto dt = v.find("dtype");
      r.dtype = dt != v.end() && dt->is_string() ? msprobeDtype(dt->get_ref<const std::string&>()) : "unknown";
      const auto sh = v.find("shape");
      r.shape = sh != v.end() ? shapeText(*sh) : "[]";
      auto stat = [&](const char* key) {
        const auto it = v.find(key);
        return it == v.end() ? std::numeric_limits<double>::quiet_NaN() : statistic(*it);
      };
      r.max = stat("Max");
      r.min = stat("Min");
      r.mean = stat("Mean");
      r.l2norm = stat("Norm");
      r.has_stats = true;
      // msprobe gives no counts; its statistics tell whether there are any: torch's max and min
      // propagate NaN, and an infinite element is the max or the min. 1 means "at least one".
      const bool any_nan = (v.contains("Max") && std::isnan(r.max) && v["Max"].is_string()) ||
                           (v.contains("Min") && std::isnan(r.min) && v["Min"].is_string());
      const bool numbers = v.contains("Max") && v["Max"].is_number() && v.contains("Min") && v["Min"].is_number();
      if (any_nan) {
        r.nan_count = 1;
        r.inf_count = -1;
      } else if (numbers) {
        r.nan_count = 0;
        r.inf_count = std::isinf(r.max) || std::isinf(r.min) ? 1 : 0;
      } else if (v.contains("Max") && v["Max"].is_string()) {
        r.nan_count = 0;
        r.inf_count = 1;
      } else {
        r.nan_count = -1;
        r.inf_count = -1;
      }
    } else {
      // A scalar argument (int, float, bool): msprobe keeps its value; a row of shape [] whose
      // statistics are that value lets a compare see it change.
      const auto val = v.find("value");
      if (val == v.end() || !(val->is_number() || val->is_boolean())) {
        ++out->skipped_values;  // slice, torch.Size, str, dtype, ...
        --next_idx[io == "output"];
        return;
      }
      const double x = statistic(*val);
      r.dtype = t;
      r.shape = "[]";
      r.max = r.min = r.mean = x;
      r.l2norm = std::fabs(x);
      r.has_stats = true;
      r.nan_count = std::isnan(x) ? 1 : 0;
      r.inf_count = std::isinf(x) ? 1 : 0;
    }
    out->tensors.push_back(std::move(r));
  }
};

StatusOr<json> parseJson(std::string_view text, const std::string& file) {
  json j = json::parse(withPythonNumbersQuoted(text), nullptr, false);
  if (j.is_discarded()) return invalidArgument(file + ": not valid JSON (expected msprobe's " + baseName(file) + ")");
  if (!j.is_object()) return invalidArgument(file + ": expected a JSON object (msprobe's " + baseName(file) + ")");
  return j;
}

}  // namespace

std::string msprobeDtype(std::string_view name) {
  std::string s(name);
  if (s.compare(0, 6, "torch.") == 0) s = s.substr(6);
  if (s.compare(0, 9, "mindspore") == 0) {
    const size_t dot = s.find('.');
    if (dot != std::string::npos) s = s.substr(dot + 1);
  }
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s == "float" || s == "float_") return "float32";
  if (s == "half") return "float16";
  if (s == "double") return "float64";
  if (s == "bool_") return "bool";
  return s;
}

std::string msprobeOpType(std::string_view entry) {
  // Split at dots: Module.{path...}.{Class}.{forward|backward}.{n}; API.{name}.{n}.{forward|backward}.
  std::vector<std::string_view> parts;
  size_t at = 0;
  while (at <= entry.size()) {
    const size_t dot = entry.find('.', at);
    parts.push_back(entry.substr(at, dot == std::string_view::npos ? std::string_view::npos : dot - at));
    if (dot == std::string_view::npos) break;
    at = dot + 1;
  }
  if (parts.size() >= 4 && (parts[0] == "Module" || parts[0] == "Cell")) {
    return std::string(parts[0]) + "." + std::string(parts[parts.size() - 3]);
  }
  if (parts.size() >= 4) {
    std::string s(parts[0]);
    for (size_t i = 1; i + 2 < parts.size(); ++i) s += "." + std::string(parts[i]);
    return s;
  }
  return std::string(entry);
}

std::vector<MsprobeFolder> msprobeFolders(const std::string& path) {
  std::vector<MsprobeFolder> out;
  auto folderAt = [](const std::string& dir, int64_t step, int64_t rank) {
    MsprobeFolder f;
    f.path = dir;
    f.step = step;
    f.rank = rank;
    return f;
  };
  if (!isDir(path)) return out;
  if (isFile(join(path, "dump.json"))) {
    const std::string base = baseName(path), parent = baseName(parentOf(path));
    int64_t rank = numberAfter(base, "rank"), step = numberAfter(parent, "step");
    if (rank == -2) {
      rank = -1;
      step = numberAfter(base, "step");
    }
    out.push_back(folderAt(path, std::max<int64_t>(step, -1), rank));
    return out;
  }
  auto rankFolders = [&](const std::string& dir, int64_t step) {
    for (const std::string& n : listDir(dir)) {
      const int64_t rank = numberAfter(n, "rank");
      const std::string p = join(dir, n);
      if (rank != -2 && isFile(join(p, "dump.json"))) out.push_back(folderAt(p, step, rank));
    }
  };
  rankFolders(path, numberAfter(baseName(path), "step") >= 0 ? numberAfter(baseName(path), "step") : -1);
  if (out.empty()) {
    for (const std::string& n : listDir(path)) {
      const int64_t step = numberAfter(n, "step");
      const std::string p = join(path, n);
      if (step < 0 || !isDir(p)) continue;
      if (isFile(join(p, "dump.json"))) {
        out.push_back(folderAt(p, step, -1));
      } else {
        rankFolders(p, step);
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const MsprobeFolder& a, const MsprobeFolder& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.step < b.step;
  });
  return out;
}

Status parseMsprobeDump(std::string_view text, const std::string& file, int64_t step, MsprobeDump* out) {
  ASSIGN_OR_RETURN(json j, parseJson(text, file));
  auto str = [&](const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  out->task = str("task");
  out->level = str("level");
  out->framework = str("framework");
  const auto data = j.find("data");
  if (data == j.end() || !data->is_object()) {
    return invalidArgument(file + ": no \"data\" object (expected msprobe's dump.json: {\"task\", \"level\", \"data\": {entry: ...}})");
  }
  for (auto it = data->begin(); it != data->end(); ++it) {
    const std::string& name = it.key();
    DumpEntryRecord e;
    e.step = step;
    e.name = name;
    out->entries.push_back(e);
    if (!it.value().is_object()) {
      return invalidArgument(file + ": entry \"" + name + "\" is not an object (expected input_args, output, ...)");
    }
    EntryReader r{out, &out->entries.back().name, step, {0, 0}};
    for (auto f = it.value().begin(); f != it.value().end(); ++f) {
      const std::string& key = f.key();
      if (key == "input_args" || key == "input") {
        r.value(f.value(), "input", "input", 0);
      } else if (key == "input_kwargs") {
        if (f.value().is_object()) {
          for (auto k = f.value().begin(); k != f.value().end(); ++k) r.value(k.value(), "input", "input." + k.key(), 1);
        }
      } else if (key == "output") {
        // A single returned value may stand alone rather than in a list.
        if (f.value().is_object() && f.value().contains("type")) {
          r.value(f.value(), "output", "output.0", 1);
        } else {
          r.value(f.value(), "output", "output", 0);
        }
      } else if (f.value().is_array() || f.value().is_object()) {
        r.value(f.value(), key == "parameters_grad" ? "output" : "input", key, 0);  // e.g. parameters
      }
    }
  }
  return Status::ok();
}

Status applyMsprobeStacks(std::string_view text, const std::string& file, MsprobeDump* dump) {
  ASSIGN_OR_RETURN(json j, parseJson(text, file));
  std::map<std::string, std::string> stacks;
  auto frames = [](const json& v) {
    std::string s;
    if (!v.is_array()) return s;
    for (const json& f : v) {
      if (!f.is_string()) continue;
      if (!s.empty()) s += '\n';
      s += f.get<std::string>();
    }
    return s;
  };
  for (auto it = j.begin(); it != j.end(); ++it) {
    const json& v = it.value();
    // Newer msprobe: {"0": [[entry names...], [frames...]]}; older: {entry: [frames...]}.
    if (v.is_array() && v.size() == 2 && v[0].is_array() && v[1].is_array()) {
      const std::string s = frames(v[1]);
      for (const json& n : v[0])
        if (n.is_string()) stacks[n.get<std::string>()] = s;
    } else {
      stacks[it.key()] = frames(v);
    }
  }
  for (DumpEntryRecord& e : dump->entries) {
    auto it = stacks.find(e.name);
    if (it != stacks.end()) e.stack = it->second;
  }
  return Status::ok();
}

Status applyMsprobeConstruct(std::string_view text, const std::string& file, MsprobeDump* dump) {
  ASSIGN_OR_RETURN(json j, parseJson(text, file));
  for (DumpEntryRecord& e : dump->entries) {
    auto it = j.find(e.name);
    if (it != j.end() && it->is_string()) e.parent = it->get<std::string>();
  }
  return Status::ok();
}

}  // namespace npuscope::import
