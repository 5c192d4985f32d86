// Ascend ACL dump folders read into npuscope's terms. With ACL_DUMP_DATA / acl.json's dump_path,
// a real NPU (and npuscope's own dumper) writes one file per dumped op named
// `{op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}`: a protobuf header (op name, each
// input's and output's dtype, format and shape) and the tensors' bytes. Real NPUs lay them out
// as `{dump_path}/{time}/{device}/{model_name}/{model_id}/{step}/`, npuscope as
// `{dump_path}/{time}/{device}/`. Each device becomes a run of source "acl_dump" whose
// `tensor_dumps` rows hold every tensor with its data and statistics, so `npuscope compare`
// computes msprobe's tensor metrics (cosine, max errors, error ratios) between two such folders
// or between a folder and a recorded run. docs/import.md has the mapping.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace npuscope::import {

struct AclDumpFile {
  std::string path;
  std::string op_type;     // the name's first part
  uint64_t task_id = 0;
  uint64_t timestamp = 0;  // the name's last part (µs)
  int64_t device = 0;      // the folder after the time folder, 0 when none
  int64_t step = -1;       // the step folder of the real layout, -1 when none
};

// Reads `file`'s name (its last path component) as a dump file's, `folders` being the folders
// between the search root and it (the time folder, the device, the real layout's step); false
// when it is not one.
bool parseAclDumpName(const std::string& file, const std::vector<std::string>& folders, AclDumpFile* out);

// The dump files under PATH (searched 8 folders deep; PATH may be one file): every regular file
// whose name has at least five dot-separated parts, the last three numbers. Sorted by device,
// step, time stamp and task id. Empty when PATH holds none.
std::vector<AclDumpFile> aclDumpFiles(const std::string& path);

}  // namespace npuscope::import
