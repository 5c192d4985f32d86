// msprobe's dumps read into npuscope's terms. msprobe (Ascend's accuracy tool) writes one folder
// per step and rank: `{dump_path}/step{N}/rank{R}/dump.json` with one entry per API or module
// call (`Functional.conv2d.0.forward`, `Module.layer1.0.conv1.Conv2d.forward.0`, backward
// entries), each with its inputs' and outputs' dtype, shape and statistics (Max, Min, Mean,
// Norm); beside it `stack.json` (each entry's Python call stack) and `construct.json` (each
// entry's enclosing module). An entry's tensors become `tensor_dumps` rows named by msprobe's
// argument path (`input.0`, `input.0.1`, `input.bias`, `output.0`), its module and stack a
// `dump_entries` row; a rank is a run of source "msprobe". docs/import.md has the mapping.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "npuscope/store/records.h"
#include "npuscope/store/status.h"

namespace npuscope::import {

// One step of one rank: a folder holding dump.json.
struct MsprobeFolder {
  std::string path;
  int64_t step = -1;  // from a `step{N}` folder name, -1 when none
  int64_t rank = -1;  // from a `rank{R}` folder name, -1 when none (msprobe's `rank` of a single process)
};

// The dump folders under PATH: PATH itself when it holds dump.json, else its `rank*` folders,
// else its `step*/rank*` folders (and `step*` folders holding dump.json); sorted by rank, then
// step. Empty when PATH is no msprobe dump.
std::vector<MsprobeFolder> msprobeFolders(const std::string& path);

// What one dump.json holds, read.
struct MsprobeDump {
  std::string task, level, framework;  // as the file says ("statistics", "mix", "pytorch")
  std::vector<DumpEntryRecord> entries;    // in the file's order; parent and stack filled by the other files
  std::vector<TensorDumpRecord> tensors;   // every entry's tensors, in order, op_id -1
  int64_t skipped_values = 0;              // non-tensor arguments without a number (None, slices, strings)
};

// Parses the text of a dump.json (`file` names it in errors). Python's bare NaN / Infinity /
// -Infinity tokens are read as such. Every tensor gets `step`.
Status parseMsprobeDump(std::string_view text, const std::string& file, int64_t step, MsprobeDump* out);
// Adds stack.json (entry -> frames) and construct.json (entry -> parent entry) to the entries.
Status applyMsprobeStacks(std::string_view text, const std::string& file, MsprobeDump* dump);
Status applyMsprobeConstruct(std::string_view text, const std::string& file, MsprobeDump* dump);

// msprobe's dtype name ("torch.float16", MindSpore's "Float16") in npuscope's ("float16").
std::string msprobeDtype(std::string_view name);
// The API or module of an entry name: "Functional.conv2d" for "Functional.conv2d.0.forward",
// "Module.Conv2d" for "Module.layer1.0.conv1.Conv2d.forward.0".
std::string msprobeOpType(std::string_view entry);

}  // namespace npuscope::import
