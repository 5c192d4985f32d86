// Injected full disks: what a full disk does to a run, testable where no small filesystem can be
// mounted (non-root CI, containers). Off unless the environment asks for it:
//
//   NPUSCOPE_FAULT_DISK_BYTES=BYTES[:FILES]
//
// BYTES (a count, or with K, M, G) is the room left on a pretend disk that the governed files
// share; FILES is a comma list of `db` (the trace file, and its rollback journal), `wal` (its
// write-ahead log) and `dump` (Ascend dump files), all three when left out. A governed file that
// would grow past the room fails as on a full disk: SQLite sees SQLITE_FULL ("database or disk
// is full"), a dump file a short write and then ENOSPC. Shrinking or deleting a governed file
// gives its bytes back. Files that were there before count only with what they grow by.
//
// The variable is read once per process, at the first TraceWriter::open or dump file written.
// Unset, nothing changes: trace files open on SQLite's default VFS and dump files are written
// with writev(2) directly. docs/schema.md ("Full disks") describes what a full disk does.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "npuscope/store/status.h"

struct sqlite3_vfs;

namespace npuscope {

class DiskFaults {
 public:
  // Kinds of governed files (bits of FILES).
  enum File : unsigned { kTraceDb = 1, kTraceWal = 2, kDumpFiles = 4 };
  static constexpr const char* kVariable = "NPUSCOPE_FAULT_DISK_BYTES";

  // The process's injected faults: nullptr when NPUSCOPE_FAULT_DISK_BYTES is unset or empty, an
  // error naming the variable and the expected form when it is malformed. Read at the first call.
  static StatusOr<DiskFaults*> fromEnvironment();
  // Faults as the variable's value `spec` describes them (tests make their own).
  static StatusOr<std::unique_ptr<DiskFaults>> parse(const std::string& spec);
  ~DiskFaults();
  DiskFaults(const DiskFaults&) = delete;
  DiskFaults& operator=(const DiskFaults&) = delete;

  // The name of the SQLite VFS (for sqlite3_open_v2) that applies these faults: the default VFS
  // with the growth of the governed trace files counted. Registered while this object lives.
  const char* sqliteVfs() const;
  // "NPUSCOPE_FAULT_DISK_BYTES=<spec>", for messages that must not blame a real disk.
  std::string describe() const;
  bool governs(File kind) const { return (files_ & kind) != 0; }
  // Room left, in bytes.
  uint64_t room() const;

  // writev(2) appending to a file of `kind`: a write that does not fit in the room is cut short
  // (-1 with ENOSPC when nothing fits), as the kernel does on a full disk.
  ssize_t writev(File kind, int fd, const iovec* iov, int count);
  // A file of `kind` written with writev() shrank or was removed: `bytes` come back.
  void giveBack(File kind, uint64_t bytes);

  struct Vfs;  // the SQLite VFS, defined in disk_faults.cpp

 private:
  DiskFaults(std::string spec, uint64_t bytes, unsigned files);
  // Takes up to `bytes` of room for a file of `kind` (all of them when it is not governed);
  // returns how many it got. Under mu_.
  uint64_t takeLocked(File kind, uint64_t bytes);

  std::string spec_;
  unsigned files_;
  mutable std::mutex mu_;
  uint64_t room_;
  // The governed trace files by path: their size as this process last made it, or found it on
  // first opening them (under mu_). Entries stay (a removed file has size 0), so the VFS's
  // open files may point at them.
  std::map<std::string, uint64_t> sizes_;
  std::unique_ptr<Vfs> vfs_;
};

}  // namespace npuscope
