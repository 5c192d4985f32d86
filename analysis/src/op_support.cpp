#include "npuscope/analysis/op_support.h"

#include <algorithm>
#include <optional>
#include <string>

#include "npuscope/store/format.h"

namespace npuscope {
namespace {

// kOpSupportListText: analysis/data/torch_npu_ops_*.txt, embedded by core/CMakeLists.txt.
#include "npuscope_op_support_list.inc"

constexpr std::string_view kVersionTag = "#@version ";

struct LevelName {
  OpSupportLevel level;
  const char* name;
};
constexpr LevelName kLevelNames[] = {
    {OpSupportLevel::kNative, "native"},           {OpSupportLevel::kCustom, "custom"},
    {OpSupportLevel::kComposite, "composite"},     {OpSupportLevel::kAiCpu, "aicpu"},
    {OpSupportLevel::kFallback, "fallback"},       {OpSupportLevel::kUnsupported, "unsupported"},
    {OpSupportLevel::kNoKernel, "no_kernel"},      {OpSupportLevel::kUnknown, "unknown"},
};

std::optional<OpSupportLevel> parseLevel(std::string_view word) {
  for (const LevelName& l : kLevelNames) {
    if (word == l.name && l.level != OpSupportLevel::kUnknown) return l.level;
  }
  return std::nullopt;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}


struct ParsedList {
  std::string_view version;
  std::vector<OpSupportEntry> entries;  // sorted by name
};

// The file is ours and checked by the tests, so a malformed line is skipped, not reported.
ParsedList parseList(std::string_view text) {
  ParsedList list;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = trim(text.substr(0, eol));
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    if (startsWith(line, kVersionTag)) {
      list.version = trim(line.substr(kVersionTag.size()));
      continue;
    }
    if (line.empty() || line.front() == '#') continue;
    const size_t tab = line.find('\t');
    if (tab == std::string_view::npos) continue;
    const std::optional<OpSupportLevel> level = parseLevel(trim(line.substr(tab + 1)));
    if (!level) continue;
    list.entries.push_back({trim(line.substr(0, tab)), *level});
  }
  std::sort(list.entries.begin(), list.entries.end(),
            [](const OpSupportEntry& a, const OpSupportEntry& b) { return a.name < b.name; });
  return list;
}

const ParsedList& theList() {
  static const ParsedList list = parseList(kOpSupportListText);
  return list;
}

// Rules 1 and 2 of the header for "aten::<base>[.<overload>]" (`qualified`).
std::optional<OpSupportEntry> findEntry(std::string_view qualified, bool has_overload) {
  const std::vector<OpSupportEntry>& e = theList().entries;
  auto it = std::lower_bound(e.begin(), e.end(), qualified,
                             [](const OpSupportEntry& a, std::string_view n) { return a.name < n; });
  if (it != e.end() && it->name == qualified) return *it;
  if (has_overload) return std::nullopt;
  // The overloads ("aten::add.Scalar", ...) sort among the other names with this prefix
  // ("aten::add_", "aten::addmm", ...), which are skipped.
  std::optional<OpSupportEntry> best;
  for (; it != e.end() && startsWith(it->name, qualified); ++it) {
    if (it->name.size() <= qualified.size() || it->name[qualified.size()] != '.') continue;
    if (!best || it->level < best->level) best = *it;
  }
  return best;
}

OpSupport judge(std::string_view aten_name, bool via_functional) {
  const size_t dot = aten_name.find('.');
  const std::string_view base = aten_name.substr(0, dot);
  std::string qualified = "aten::";
  qualified.append(aten_name);
  if (const std::optional<OpSupportEntry> hit = findEntry(qualified, dot != std::string_view::npos)) {
    return {hit->level, hit->name, via_functional, false};
  }
  const bool in_place = base.size() > 1 && base.back() == '_' && !startsWith(base, "__");
  if (!via_functional && in_place) {
    // Rule 3 only for names the list lacks entirely, with or without an overload.
    if (!findEntry("aten::" + std::string(base), /*has_overload=*/false)) {
      std::string functional(base.substr(0, base.size() - 1));
      if (dot != std::string_view::npos) functional.append(aten_name.substr(dot));
      return judge(functional, true);
    }
  }
  return {};
}

}  // namespace

const char* opSupportLevelName(OpSupportLevel level) {
  for (const LevelName& l : kLevelNames) {
    if (l.level == level) return l.name;
  }
  return "unknown";
}

OpSupport opSupport(std::string_view name) {
  name = trim(name);
  if (startsWith(name, "npuscope::") || startsWith(name, "NpuFused")) {
    OpSupport ours;
    ours.level = OpSupportLevel::kCustom;
    ours.ours = true;
    return ours;
  }
  if (startsWith(name, "aten::")) {
    name.remove_prefix(6);
  } else if (startsWith(name, "npu::")) {
    // torch_npu 2.1 moved its custom ops to the npu namespace; only those are accepted there.
    name.remove_prefix(5);
    OpSupport s = judge(name, false);
    return s.level == OpSupportLevel::kCustom ? s : OpSupport{};
  } else if (name.find("::") != std::string_view::npos) {
    return {};
  }
  if (name.empty() || name.front() == '.') return {};
  // The dispatcher's cross-device copy hook of an out-of-tree backend (the emulator's): torch_npu
  // implements copy_ itself, so these never reach its list; judged as copy_.
  if (name == "_copy_from" || name == "_copy_from_and_resize") return judge("copy_", false);
  return judge(name, false);
}

std::string_view opSupportVersion() { return theList().version; }

const std::vector<OpSupportEntry>& opSupportList() { return theList().entries; }

}  // namespace npuscope
