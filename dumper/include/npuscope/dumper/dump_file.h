// Ascend-format dump files: a little-endian uint64 header length, a toolkit.dumpdata.DumpData
// protobuf header (dumper/proto/dump_data.proto) whose tensors carry `size` and an empty `data`,
// then the raw payloads in order: inputs, then outputs. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "npuscope/store/tensor_data.h"
#include "npuscope/store/status.h"

namespace npuscope::dumper {

// Storage formats of the header (references.md): NCHW=0, NHWC=1, ND=2, NC1HWC0=3.
int aclFormat(const std::string& name);  // 2 (ND) for unknown names
const char* aclFormatName(int format);

struct DumpFileTensor {
  tensor::DType dtype = tensor::DType::kUnknown;
  std::vector<int64_t> shape;
  std::string format = "ND";
  const uint8_t* data = nullptr;  // the payload; written after the header
  size_t size = 0;                // payload bytes
};

// `{op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}` with `aten::` dropped from the type
// and characters unsafe in file names replaced by '_'.
std::string dumpFileName(const std::string& op_type, const std::string& op_name, uint64_t task_id,
                         uint32_t stream_id, uint64_t timestamp_us);

// Writes one dump file in one gathered write (no copy of the payloads). kIoError names the path
// and the system's reason (e.g. disk full); a file that could not be written whole is removed.
// Honours injected full disks (NPUSCOPE_FAULT_DISK_BYTES, npuscope/store/disk_faults.h).
Status writeDumpFile(const std::string& path, const std::string& op_name, uint64_t dump_time_us,
                     const std::vector<DumpFileTensor>& inputs, const std::vector<DumpFileTensor>& outputs);

// Removes a dump file writeDumpFile() wrote (one dropped after an earlier op failed), giving its
// bytes back to an injected full disk.
void removeDumpFile(const std::string& path);

// The size of the file writeDumpFile() would write (for sizing passes; payloads need no data).
uint64_t dumpFileSize(const std::string& op_name, uint64_t dump_time_us, const std::vector<DumpFileTensor>& inputs,
                      const std::vector<DumpFileTensor>& outputs);

// A dump file read back, payloads included (for export round trips, checks and tests).
struct DecodedTensor {
  tensor::DType dtype = tensor::DType::kUnknown;
  int acl_data_type = 0;
  int format = 2;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};
struct DecodedDumpFile {
  std::string op_name;
  uint64_t dump_time_us = 0;
  uint64_t header_size = 0;
  std::vector<DecodedTensor> inputs, outputs;
};
// Checks the header length, the protobuf and that the payload sizes add up to the file size.
StatusOr<DecodedDumpFile> readDumpFile(const std::string& path);
// The same from the file's bytes; `name` names it in errors.
StatusOr<DecodedDumpFile> decodeDumpFile(const std::string& bytes, const std::string& name);

}  // namespace npuscope::dumper
