// The op dumper's configuration: Ascend's acl.json `dump` object, the environment switch
// (ACL_DUMP_DATA=1) and the options npuscope adds. Torch-free.
//
//   {"dump": {"dump_path": "dumps", "dump_mode": "all", "dump_list": ["addmm", "relu.0.forward"],
//             "dump_op_switch": "on", "dump_step": "0|5|10-20", "dump_data": "tensor"}}
//
// Fields (all optional; defaults in DumpConfig):
//   dump_path       directory of Ascend-format dump files; "" or absent: the trace file only
//   dump_mode       input | output | all
//   dump_list       op types (`addmm` or `aten::addmm`) or op names (`addmm.3.forward`) to keep;
//                   empty: every op (when dump_op_switch is on)
//   dump_op_switch  on | off. off with an empty dump_list dumps nothing and is refused
//   dump_step       steps to dump: `N`, `A-B`, joined by `|`; "" or absent: every step
//   dump_data       tensor (statistics and data) | stats (statistics only) | overflow
//                   (check every op's outputs; dump the first overflow_limit overflowing ops)
// npuscope's own fields:
//   overflow_limit  N of overflow mode (default 1)
//   on_error        continue (default: dumping stops, training goes on) | stop
//   force           true: do not refuse for lack of free space (warn instead)
//   dump_update     true: also dump the parameter update after backward (ops inside a
//                   Dumper::UpdatePhase: amp's unscale, the optimizer step), named
//                   `{type}.{n}.update`; false (default): leave it out, as msprobe does
// Any other field, a wrong type or an unknown value is an error naming the field.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "npuscope/store/status.h"

namespace npuscope::dumper {

enum class DumpMode { kInput, kOutput, kAll };
enum class DumpDataKind { kTensor, kStats, kOverflow };

const char* dumpModeName(DumpMode m);
const char* dumpDataName(DumpDataKind d);

// A set of steps as acl.json writes it ("0|5|10-20"). Empty: every step.
class StepSet {
 public:
  static StatusOr<StepSet> parse(const std::string& text);
  bool contains(int64_t step) const;
  bool all() const { return ranges_.empty(); }
  // Number of steps in the set; -1 when unbounded (every step).
  int64_t count() const;
  // Number of steps of [first, end) in the set (all of them when the set is every step).
  int64_t countIn(int64_t first, int64_t end) const;
  const std::vector<std::pair<int64_t, int64_t>>& ranges() const { return ranges_; }

 private:
  std::vector<std::pair<int64_t, int64_t>> ranges_;  // inclusive
};

struct DumpConfig {
  std::string dump_path;
  DumpMode mode = DumpMode::kAll;
  std::vector<std::string> dump_list;
  bool op_switch = true;
  StepSet steps;
  DumpDataKind data = DumpDataKind::kTensor;
  int64_t overflow_limit = 1;
  bool stop_on_error = false;
  bool force = false;
  bool dump_update = false;

  // Parses acl.json text; `source` names the file in messages ("acl.json: dump.dump_mode: ...").
  static StatusOr<DumpConfig> fromJson(const std::string& text, const std::string& source = "acl.json");
  static StatusOr<DumpConfig> fromFile(const std::string& path);
  // Checks what can only be checked on this machine: dump_path can be created and written.
  // The error names the field: "dump.dump_path: cannot write /x: Permission denied".
  Status validate() const;
  bool wantsInputs() const { return mode != DumpMode::kOutput || data == DumpDataKind::kOverflow; }
  bool wantsOutputs() const { return mode != DumpMode::kInput || data == DumpDataKind::kOverflow; }
  // Whether the op of `type` (e.g. "aten::addmm") and `name` (e.g. "addmm.3.forward") is kept.
  bool keepsOp(const std::string& type, const std::string& name) const;
};

// ACL_DUMP_DATA=1 in the environment: the config of `config_path` (default ./acl.json).
// Returns false when the variable is unset or 0; a malformed variable or file is an error.
StatusOr<bool> dumpRequestedByEnvironment();

}  // namespace npuscope::dumper
