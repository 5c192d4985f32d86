// Imports traces that other profilers wrote into an npuscope trace file, one run per rank:
//   - torch.profiler / Kineto chrome traces (*.json, *.json.gz; current and 2021-era names),
//   - torch_npu's profiler output (a *_ascend_pt folder or its ASCEND_PROFILER_OUTPUT), text or
//     database export (ascend_pytorch_profiler_{rank}.db, which may also be given itself),
//   - a folder holding several ranks of either kind (one run per rank, a cluster),
//   - msprobe's dumps (a dump.json folder, or its step*/rank* tree; npuscope/import/msprobe.h).
// Reading streams: JSON in bounded chunks (simdjson), gzip through zlib, the database row by
// row (SQLite); only compact event records are held, so memory stays a fraction of the file.
// docs/import.md has the mapping.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "npuscope/store/status.h"

namespace npuscope::import {

struct Options {
  // Called now and then with bytes read so far and the total; returning false cancels the
  // import (nothing of the run being read is written).
  std::function<bool(int64_t done, int64_t total)> progress;
};

struct RunSummary {
  int64_t run_id = -1;
  std::string source;       // kineto | torch_npu | msprobe
  std::string path;         // the file or folder of this rank
  int64_t rank = -1;
  int64_t host_ops = 0, device_tasks = 0, linked_tasks = 0, steps = 0, memory_samples = 0;
  int64_t memory_blocks = 0;  // operator_memory.csv allocations (schema 10)
  int64_t memory_components = 0;  // npu_module_mem.csv samples kept (schema 11)
  int64_t events = 0;       // events read
  int64_t dump_entries = 0, dump_tensors = 0;  // an msprobe dump: calls and their tensors
  std::vector<std::string> notes;  // what was skipped, once per kind, with counts
};

struct Summary {
  std::vector<RunSummary> runs;
  // Set when the file's last checkpoint failed for lack of room: every run is in the file's
  // WAL, which must stay beside it (TraceWriter::close). Empty otherwise.
  std::string warning;
};

// A CSV file's cells: its header, and each record's fields (a record may be shorter).
struct CsvTable {
  std::string path;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  // The index of column `name`, -1 when there is none.
  int64_t column(const std::string& name) const;
};

// torch_npu's kernel_details.csv read as the importer reads it (quotes, tab-ended cells). PATH:
// the CSV itself, an *_ascend_pt folder or its ASCEND_PROFILER_OUTPUT. Errors name the file.
StatusOr<CsvTable> kernelDetailsTable(const std::string& path);

// What PATH is, for messages and the GUI: kineto | torch_npu | cluster | msprobe; an error when
// it is none.
StatusOr<std::string> detectFormat(const std::string& path);

// Imports PATH into the trace file `db` (created when missing). Errors name the file and the place.
StatusOr<Summary> importPath(const std::string& path, const std::string& db, const Options& options = {});

}  // namespace npuscope::import
