// torch_npu's profiler CSV and JSON files read into a TraceModel: the column lookup every CSV
// reader uses, and the folders without the timeline (kernel_details.csv as the device tasks,
// communication.json's collective groups). In memory, so the fuzzer reaches them without files.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "npuscope/store/status.h"
#include "trace_model.h"

namespace npuscope::import {

// Column name -> index of a CSV header; an error naming `file` and the first missing column.
StatusOr<std::map<std::string, size_t>> csvColumns(const std::string& file, const std::vector<std::string>& header,
                                                   std::initializer_list<const char*> needed);

// The rows of a CSV (`text`, read from `file`) with the columns `needed`: fn(row, cols, line)
// for each record, cols holding the needed columns' indexes in the order asked; a record with
// fewer fields than the last of them is refused ("FILE: line N: 3 fields (expected 6)"), as is
// a header without one of them. An empty text has no rows. The first error fn returns ends it.
using CsvRowFn = std::function<Status(const std::vector<std::string>& row, const std::vector<size_t>& cols, int64_t line)>;
Status forEachCsvRow(const std::string& file, std::string text, std::initializer_list<const char*> needed,
                     const CsvRowFn& fn);
// "FILE: line N: what", the start of a row's error.
std::string csvWhere(const std::string& file, int64_t line);

// A collective of communication.json ("{op}@{group}" keys per step, p2p and collective).
struct CollectiveInfo {
  std::string group;
  int64_t bytes = -1;  // the largest Transit Size(MB) of its links, in bytes; -1: none
};
// op name -> its group and bytes; empty when the text is not such a JSON object (a folder's
// collectives then have no group, which costs no more than that).
std::map<std::string, CollectiveInfo> parseCommunication(std::string_view json_text);

// kernel_details.csv (`csv`, read from `file`) as the run's device tasks, for a folder without
// the timeline: each row a task on the "Ascend Hardware" process's stream (Stream ID) with its op
// type, core, input shapes and dtypes; COMMUNICATION / HCCL rows on an "HCCL" group lane with
// their group and bytes from `collectives`; each Step Id a step from its first kernel's start to
// its last kernel's end. A row without a readable Start Time(us) or Duration(us) is refused
// ("FILE: line N: bad Duration(us) 'x'").
Status addKernelTasks(const std::string& file, std::string csv, const std::map<std::string, CollectiveInfo>& collectives,
                      TraceModel& model);

// step_trace_time.csv as rows: {"Step": N, "Computing": µs, ...} for every numeric column
// (torch_npu's own step breakdown). A file without a Step column is refused
// ("FILE: line 1: no column 'Step'"); rows whose Step is not a number are skipped.
StatusOr<nlohmann::json> parseStepTraceTime(const std::string& file, std::string csv);

// A folder with neither the timeline nor kernel_details.csv (the ranks of a pipeline-parallel
// job whose export kept only step_trace_time.csv and communication.json): each collective of
// communication.json as an HCCL task (its Start Timestamp(us), Elapse Time(ms), group and bytes),
// and each row of `step_rows` a step starting at its first collective and lasting its Stage.
// Returns the number of tasks added.
int64_t addCommunicationTasks(std::string_view json_text, const nlohmann::json& step_rows, TraceModel& model);

// operator_memory.csv (`csv`, read from `file`): one memory block per row (schema 10), owned by
// the op's name, sized by Size(KB), from Allocation Time(us) to Release Time(us) (empty: live at
// the end). A row with a bad time or size is refused ("FILE: line N: bad Release Time(us) 'x'
// (...)").
Status addOperatorMemory(const std::string& file, std::string csv, TraceModel& model);

// memory_record.csv: the PyTorch allocator's samples (Component PTA; allocated and reserved MB)
// as the run's memory samples; `device` becomes the device of the last. Other components' rows
// are skipped. A bad time stamp or a size beyond 8.8e12 MB is refused.
Status addMemoryRecord(const std::string& file, std::string csv, TraceModel& model, int32_t* device);

// npu_module_mem.csv: the memory each component of the device software reserved over time (APP,
// HCCL, RUNTIME, GE, SLOG ...; Total Reserved(MB)), as memory components (schema 11). Rows with
// an empty reservation are skipped, and so are the samples of a component that never reserved
// anything (most of the seventy-odd the file lists). A bad time stamp or size is refused.
Status addModuleMemory(const std::string& file, std::string csv, TraceModel& model);

}  // namespace npuscope::import
