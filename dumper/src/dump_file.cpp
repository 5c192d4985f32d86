#include "npuscope/dumper/dump_file.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include <google/protobuf/stubs/logging.h>

#include "dump_data.pb.h"
#include "npuscope/store/disk_faults.h"

namespace npuscope::dumper {
namespace {

template <typename Msg>
void fillTensor(Msg* m, const DumpFileTensor& t) {
  m->set_data_type(static_cast<toolkit::dumpdata::OutputDataType>(tensor::aclDataType(t.dtype)));
  m->set_format(static_cast<toolkit::dumpdata::OutputFormat>(aclFormat(t.format)));
  for (int64_t d : t.shape) m->mutable_shape()->add_dim(static_cast<uint64_t>(d));
  m->set_size(t.size);
}

template <typename Msg>
DecodedTensor decodeTensor(const Msg& m) {
  DecodedTensor t;
  t.acl_data_type = m.data_type();
  t.dtype = tensor::fromAclDataType(m.data_type());
  t.format = m.format();
  for (uint64_t d : m.shape().dim()) t.shape.push_back(static_cast<int64_t>(d));
  t.data.resize(m.size());
  return t;
}

}  // namespace

int aclFormat(const std::string& name) {
  if (name == "NCHW") return 0;
  if (name == "NHWC") return 1;
  if (name == "NC1HWC0") return 3;
  return 2;
}

const char* aclFormatName(int format) {
  switch (format) {
    case 0: return "NCHW";
    case 1: return "NHWC";
    case 3: return "NC1HWC0";
    default: return "ND";
  }
}

std::string dumpFileName(const std::string& op_type, const std::string& op_name, uint64_t task_id,
                         uint32_t stream_id, uint64_t timestamp_us) {
  std::string type = op_type.rfind("aten::", 0) == 0 ? op_type.substr(6) : op_type;
  std::string name = type + "." + op_name + "." + std::to_string(task_id) + "." + std::to_string(stream_id) + "." +
                     std::to_string(timestamp_us);
  for (char& c : name)
    if (c == '/' || c == ':' || c == ' ') c = '_';
  return name;
}

namespace {

// The 8-byte length and the DumpData header of a file.
std::string encodeHeader(const std::string& op_name, uint64_t dump_time_us, const std::vector<DumpFileTensor>& inputs,
                         const std::vector<DumpFileTensor>& outputs) {
  toolkit::dumpdata::DumpData header;
  header.set_version("2.0");
  header.set_dump_time(dump_time_us);
  header.set_op_name(op_name);
  for (const auto& t : inputs) fillTensor(header.add_input(), t);
  for (const auto& t : outputs) fillTensor(header.add_output(), t);
  std::string bytes(8, '\0');
  header.AppendToString(&bytes);
  const uint64_t len = bytes.size() - 8;  // little-endian on every platform npuscope builds for
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(len >> (8 * i));
  return bytes;
}

// Owns a file descriptor (closed unless released by setting fd to -1).
struct ScopedFd {
  explicit ScopedFd(int f) : fd(f) {}
  ~ScopedFd() {
    if (fd >= 0) ::close(fd);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int fd;
};

}  // namespace

uint64_t dumpFileSize(const std::string& op_name, uint64_t dump_time_us, const std::vector<DumpFileTensor>& inputs,
                      const std::vector<DumpFileTensor>& outputs) {
  uint64_t n = encodeHeader(op_name, dump_time_us, inputs, outputs).size();
  for (const auto* list : {&inputs, &outputs})
    for (const auto& t : *list) n += t.size;
  return n;
}

Status writeDumpFile(const std::string& path, const std::string& op_name, uint64_t dump_time_us,
                     const std::vector<DumpFileTensor>& inputs, const std::vector<DumpFileTensor>& outputs) {
  const std::string header = encodeHeader(op_name, dump_time_us, inputs, outputs);
  // One gathered write of the header and every payload straight from the caller's buffers.
  std::vector<iovec> parts;
  parts.reserve(1 + inputs.size() + outputs.size());
  parts.push_back({const_cast<char*>(header.data()), header.size()});
  for (const auto* list : {&inputs, &outputs})
    for (const auto& t : *list)
      if (t.size) parts.push_back({const_cast<uint8_t*>(t.data), t.size});

  // Injected full disks (NPUSCOPE_FAULT_DISK_BYTES, tests): nullptr unless asked for.
  ASSIGN_OR_RETURN(DiskFaults* faults, DiskFaults::fromEnvironment());
  ScopedFd f(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (f.fd < 0) return ioError(path + ": cannot create the dump file: " + std::strerror(errno));
  uint64_t written = 0;
  // A file that could not be written whole is removed: a cut-off dump file must not pass for one
  // (and a full disk gets its bytes back).
  auto fail = [&](const char* what) {
    const int err = errno;
    ::unlink(path.c_str());
    if (faults != nullptr) faults->giveBack(DiskFaults::kDumpFiles, written);
    return ioError(path + ": " + what + ": " + std::strerror(err) + " (the partial file was removed)");
  };
  size_t first = 0;
  while (first < parts.size()) {
    const int count = static_cast<int>(std::min<size_t>(parts.size() - first, IOV_MAX));
    const ssize_t n = faults != nullptr ? faults->writev(DiskFaults::kDumpFiles, f.fd, parts.data() + first, count)
                                        : ::writev(f.fd, parts.data() + first, count);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("writing the dump file");
    }
    if (n == 0) {
      errno = EIO;
      return fail("writing the dump file");
    }
    written += static_cast<uint64_t>(n);
    // Skip what was written; a short write resumes inside the part it stopped in.
    size_t done = static_cast<size_t>(n);
    while (first < parts.size() && done >= parts[first].iov_len) done -= parts[first++].iov_len;
    if (first < parts.size()) {
      parts[first].iov_base = static_cast<char*>(parts[first].iov_base) + done;
      parts[first].iov_len -= done;
    }
  }
#ifdef __linux__
  // Write-back starts now: a dump is written once and not read back, so the disk works while
  // the next ops are captured instead of when dirty pages pile up (or at the final sync).
  ::sync_file_range(f.fd, 0, 0, SYNC_FILE_RANGE_WRITE);
#endif
  const int fd = f.fd;
  f.fd = -1;
  if (::close(fd) != 0) return fail("closing the dump file");  // some filesystems report a full disk only here
  return Status::ok();
}

void removeDumpFile(const std::string& path) {
  struct stat st {};
  const bool sized = ::stat(path.c_str(), &st) == 0;
  if (::unlink(path.c_str()) != 0 || !sized) return;
  auto faults = DiskFaults::fromEnvironment();
  if (faults.isOk() && *faults != nullptr) (*faults)->giveBack(DiskFaults::kDumpFiles, static_cast<uint64_t>(st.st_size));
}

StatusOr<DecodedDumpFile> readDumpFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return notFound(path + ": cannot open the dump file");
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return decodeDumpFile(all, path);
}

StatusOr<DecodedDumpFile> decodeDumpFile(const std::string& all, const std::string& name) {
  if (all.size() < 8) return invalidArgument(name + ": too short for a dump file header length");
  uint64_t len = 0;
  for (int i = 0; i < 8; ++i) len |= static_cast<uint64_t>(static_cast<uint8_t>(all[i])) << (8 * i);
  if (len > all.size() - 8) return invalidArgument(name + ": header length " + std::to_string(len) + " exceeds the file");
  toolkit::dumpdata::DumpData header;
  bool parsed = false;
  {
    google::protobuf::LogSilencer quiet;  // our one error line, not protobuf's log beside it
    parsed = header.ParseFromArray(all.data() + 8, static_cast<int>(len));
  }
  if (!parsed) return invalidArgument(name + ": the header is not a toolkit.dumpdata.DumpData message");
  // The payload sizes the header claims must fit in the file before anything is allocated.
  uint64_t claimed = 0;
  for (const auto& t : header.input()) claimed += std::min<uint64_t>(t.size(), all.size());
  for (const auto& t : header.output()) claimed += std::min<uint64_t>(t.size(), all.size());
  if (claimed > all.size() - 8 - len) return invalidArgument(name + ": payload sizes exceed the file");
  DecodedDumpFile out;
  out.op_name = header.op_name();
  out.dump_time_us = header.dump_time();
  out.header_size = len;
  for (const auto& t : header.input()) out.inputs.push_back(decodeTensor(t));
  for (const auto& t : header.output()) out.outputs.push_back(decodeTensor(t));
  size_t pos = 8 + len;
  for (auto* list : {&out.inputs, &out.outputs}) {
    for (auto& t : *list) {
      if (!t.data.empty()) std::memcpy(t.data.data(), all.data() + pos, t.data.size());
      pos += t.data.size();
    }
  }
  if (pos != all.size()) {
    return invalidArgument(name + ": " + std::to_string(all.size() - pos) + " bytes after the last payload");
  }
  return out;
}

}  // namespace npuscope::dumper
