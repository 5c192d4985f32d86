#include "npuscope/store/disk_faults.h"

#include <sqlite3.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <vector>

namespace npuscope {

namespace {

// What sqlite3_vfs::szOsFile bytes hold: this header, then the default VFS's file.
struct FaultFile {
  sqlite3_file base;  // pMethods: the shim's, or nullptr when the open failed
  DiskFaults* faults;
  DiskFaults::File kind;
  bool governed;
  uint64_t* size;  // governed: this path's entry of DiskFaults::sizes_
  sqlite3_file* real() { return reinterpret_cast<sqlite3_file*>(this + 1); }
};
static_assert(sizeof(FaultFile) % 8 == 0, "the default VFS's file follows the header, aligned");

FaultFile* asFault(sqlite3_file* f) { return reinterpret_cast<FaultFile*>(f); }
sqlite3_file* realOf(sqlite3_file* f) { return asFault(f)->real(); }

}  // namespace

// A SQLite VFS wrapping the default one (unix): every call is passed on, and writes and
// truncations of governed files are first counted against the room. Files opened through it
// are the default VFS's files with a small header in front, so locks, the WAL index (-shm) and
// connections to the same file on the default VFS work as before.
struct DiskFaults::Vfs {
  sqlite3_vfs vfs{};  // first: a sqlite3_vfs* is a Vfs*
  sqlite3_vfs* real = nullptr;
  std::string name;

  static DiskFaults* faults(sqlite3_vfs* v) { return static_cast<DiskFaults*>(v->pAppData); }
  static sqlite3_vfs* realVfs(sqlite3_vfs* v) { return reinterpret_cast<Vfs*>(v)->real; }

  static int write(sqlite3_file* f, const void* buf, int amt, sqlite3_int64 off) {
    FaultFile* ff = asFault(f);
    if (ff->governed) {
      DiskFaults& d = *ff->faults;
      std::lock_guard<std::mutex> lock(d.mu_);
      const uint64_t end = static_cast<uint64_t>(off) + static_cast<uint64_t>(amt);
      if (end > *ff->size) {
        const uint64_t grow = end - *ff->size;
        if (d.room_ < grow) return SQLITE_FULL;  // nothing written, as a full disk refuses it
        d.room_ -= grow;
        *ff->size = end;
      }
    }
    sqlite3_file* r = ff->real();
    return r->pMethods->xWrite(r, buf, amt, off);
  }
  static int truncate(sqlite3_file* f, sqlite3_int64 size) {
    FaultFile* ff = asFault(f);
    if (ff->governed) {
      DiskFaults& d = *ff->faults;
      std::lock_guard<std::mutex> lock(d.mu_);
      const uint64_t to = static_cast<uint64_t>(size);
      if (to > *ff->size) {
        if (d.room_ < to - *ff->size) return SQLITE_FULL;
        d.room_ -= to - *ff->size;
      } else {
        d.room_ += *ff->size - to;
      }
      *ff->size = to;
    }
    sqlite3_file* r = ff->real();
    return r->pMethods->xTruncate(r, size);
  }

  static int open(sqlite3_vfs* v, const char* name, sqlite3_file* file, int flags, int* out_flags) {
    FaultFile* ff = asFault(file);
    ff->base.pMethods = nullptr;
    ff->faults = faults(v);
    ff->kind = (flags & SQLITE_OPEN_WAL) != 0 ? kTraceWal : kTraceDb;
    ff->governed = name != nullptr &&
                   (flags & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_MAIN_JOURNAL | SQLITE_OPEN_WAL)) != 0 &&
                   ff->faults->governs(ff->kind);
    ff->size = nullptr;
    sqlite3_file* r = ff->real();
    r->pMethods = nullptr;
    const int rc = realVfs(v)->xOpen(realVfs(v), name, r, flags, out_flags);
    if (rc != SQLITE_OK) return rc;  // SQLite closes `file` only when its pMethods is set
    if (r->pMethods == nullptr || r->pMethods->iVersion < 3) {
      if (r->pMethods != nullptr) r->pMethods->xClose(r);
      return SQLITE_CANTOPEN;  // not the unix VFS this shim forwards to
    }
    if (ff->governed) {
      sqlite3_int64 size = 0;
      if (r->pMethods->xFileSize(r, &size) != SQLITE_OK) size = 0;
      DiskFaults& d = *ff->faults;
      std::lock_guard<std::mutex> lock(d.mu_);
      ff->size = &d.sizes_.try_emplace(name, static_cast<uint64_t>(size)).first->second;
    }
    ff->base.pMethods = &kMethods;
    return SQLITE_OK;
  }
  static int remove(sqlite3_vfs* v, const char* name, int sync_dir) {
    const int rc = realVfs(v)->xDelete(realVfs(v), name, sync_dir);
    if (rc == SQLITE_OK && name != nullptr) {
      DiskFaults& d = *faults(v);
      std::lock_guard<std::mutex> lock(d.mu_);
      auto it = d.sizes_.find(name);
      if (it != d.sizes_.end()) {  // only governed files are tracked
        d.room_ += it->second;
        it->second = 0;
      }
    }
    return rc;
  }

  static const sqlite3_io_methods kMethods;
};

namespace {

int xClose(sqlite3_file* f) {
  sqlite3_file* r = realOf(f);
  const int rc = r->pMethods != nullptr ? r->pMethods->xClose(r) : SQLITE_OK;
  f->pMethods = nullptr;
  return rc;
}
int xRead(sqlite3_file* f, void* buf, int amt, sqlite3_int64 off) {
  sqlite3_file* r = realOf(f);
  return r->pMethods->xRead(r, buf, amt, off);
}
int xSync(sqlite3_file* f, int flags) {
  sqlite3_file* r = realOf(f);
  return r->pMethods->xSync(r, flags);
}
int xFileSize(sqlite3_file* f, sqlite3_int64* size) {
  sqlite3_file* r = realOf(f);
  return r->pMethods->xFileSize(r, size);
}
int xLock(sqlite3_file* f, int level) {
  sqlite3_file* r = realOf(f);
  return r->pMethods->xLock(r, level);
}
int xUnlock(sqlite3_file* f, int level) {
  sqlite3_file* r = realOf(f);
  return r->pMethods->xUnlock(r, level);
}
int xCheckReservedLock(sqlite3_file* f, int* out) {
  sqlite3_file* r = realOf(f);
  return r->pMethods->xCheckReservedLock(r, out);
}
int xFileControl(sqlite3_file* f, int op, void* arg) {
  sqlite3_file* r = realOf(f);
  return r->pMethods->xFileControl(r, op, arg);
}
int xSectorSize(sqlite3_file* f) {
  sqlite3_file* r = realOf(f);
  return r->pMethods->xSectorSize(r);
}
int xDeviceCharacteristics(sqlite3_file* f) {
  sqlite3_file* r = realOf(f);
  return r->pMethods->xDeviceCharacteristics(r);
}
int xShmMap(sqlite3_file* f, int region, int size, int extend, void volatile** out) {
  sqlite3_file* r = realOf(f);
  return r->pMethods->xShmMap(r, region, size, extend, out);
}
int xShmLock(sqlite3_file* f, int offset, int n, int flags) {
  sqlite3_file* r = realOf(f);
  return r->pMethods->xShmLock(r, offset, n, flags);
}
void xShmBarrier(sqlite3_file* f) {
  sqlite3_file* r = realOf(f);
  r->pMethods->xShmBarrier(r);
}
int xShmUnmap(sqlite3_file* f, int remove) {
  sqlite3_file* r = realOf(f);
  return r->pMethods->xShmUnmap(r, remove);
}
int xFetch(sqlite3_file* f, sqlite3_int64 off, int amt, void** out) {
  sqlite3_file* r = realOf(f);
  return r->pMethods->xFetch(r, off, amt, out);
}
int xUnfetch(sqlite3_file* f, sqlite3_int64 off, void* p) {
  sqlite3_file* r = realOf(f);
  return r->pMethods->xUnfetch(r, off, p);
}

using V = DiskFaults::Vfs;
sqlite3_vfs* realVfs(sqlite3_vfs* v) { return V::realVfs(v); }
int vfsAccess(sqlite3_vfs* v, const char* n, int f, int* out) { return realVfs(v)->xAccess(realVfs(v), n, f, out); }
int vfsFullPathname(sqlite3_vfs* v, const char* n, int size, char* out) {
  return realVfs(v)->xFullPathname(realVfs(v), n, size, out);
}
void* vfsDlOpen(sqlite3_vfs* v, const char* n) { return realVfs(v)->xDlOpen(realVfs(v), n); }
void vfsDlError(sqlite3_vfs* v, int n, char* out) { realVfs(v)->xDlError(realVfs(v), n, out); }
void (*vfsDlSym(sqlite3_vfs* v, void* h, const char* s))(void) { return realVfs(v)->xDlSym(realVfs(v), h, s); }
void vfsDlClose(sqlite3_vfs* v, void* h) { realVfs(v)->xDlClose(realVfs(v), h); }
int vfsRandomness(sqlite3_vfs* v, int n, char* out) { return realVfs(v)->xRandomness(realVfs(v), n, out); }
int vfsSleep(sqlite3_vfs* v, int us) { return realVfs(v)->xSleep(realVfs(v), us); }
int vfsCurrentTime(sqlite3_vfs* v, double* out) { return realVfs(v)->xCurrentTime(realVfs(v), out); }
int vfsGetLastError(sqlite3_vfs* v, int n, char* out) { return realVfs(v)->xGetLastError(realVfs(v), n, out); }
int vfsCurrentTimeInt64(sqlite3_vfs* v, sqlite3_int64* out) {
  return realVfs(v)->xCurrentTimeInt64(realVfs(v), out);
}
int vfsSetSystemCall(sqlite3_vfs* v, const char* n, sqlite3_syscall_ptr p) {
  return realVfs(v)->xSetSystemCall(realVfs(v), n, p);
}
sqlite3_syscall_ptr vfsGetSystemCall(sqlite3_vfs* v, const char* n) {
  return realVfs(v)->xGetSystemCall(realVfs(v), n);
}
const char* vfsNextSystemCall(sqlite3_vfs* v, const char* n) { return realVfs(v)->xNextSystemCall(realVfs(v), n); }

// "64M" -> 64 MiB; false when malformed.
bool parseBytes(const std::string& text, uint64_t* out) {
  if (text.empty() || text[0] < '0' || text[0] > '9') return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0) return false;
  const std::string unit = end;
  const int shift = unit.empty() ? 0 : unit == "K" ? 10 : unit == "M" ? 20 : unit == "G" ? 30 : -1;
  if (shift < 0 || v > (~0ULL >> shift)) return false;
  *out = static_cast<uint64_t>(v) << shift;
  return true;
}

}  // namespace

// Version 3 (shared memory, memory-mapped reads), as the default VFS's files (Vfs::open checks).
const sqlite3_io_methods DiskFaults::Vfs::kMethods = {
    3,       xClose,    xRead,   V::write, V::truncate,  xSync,       xFileSize, xLock,   xUnlock,
    xCheckReservedLock, xFileControl,      xSectorSize, xDeviceCharacteristics, xShmMap, xShmLock,
    xShmBarrier,        xShmUnmap,         xFetch,      xUnfetch};

DiskFaults::DiskFaults(std::string spec, uint64_t bytes, unsigned files)
    : spec_(std::move(spec)), files_(files), room_(bytes), vfs_(std::make_unique<Vfs>()) {
  static std::atomic<int> next{0};
  Vfs& v = *vfs_;
  v.real = sqlite3_vfs_find(nullptr);
  v.name = "npuscope-disk-faults-" + std::to_string(next.fetch_add(1));
  sqlite3_vfs& s = v.vfs;
  s.iVersion = 3;
  s.szOsFile = static_cast<int>(sizeof(FaultFile)) + v.real->szOsFile;
  s.mxPathname = v.real->mxPathname;
  s.zName = v.name.c_str();
  s.pAppData = this;
  s.xOpen = Vfs::open;
  s.xDelete = Vfs::remove;
  s.xAccess = vfsAccess;
  s.xFullPathname = vfsFullPathname;
  s.xDlOpen = vfsDlOpen;
  s.xDlError = vfsDlError;
  s.xDlSym = vfsDlSym;
  s.xDlClose = vfsDlClose;
  s.xRandomness = vfsRandomness;
  s.xSleep = vfsSleep;
  s.xCurrentTime = vfsCurrentTime;
  s.xGetLastError = vfsGetLastError;
  s.xCurrentTimeInt64 = vfsCurrentTimeInt64;
  s.xSetSystemCall = vfsSetSystemCall;
  s.xGetSystemCall = vfsGetSystemCall;
  s.xNextSystemCall = vfsNextSystemCall;
  sqlite3_vfs_register(&s, 0);
}

DiskFaults::~DiskFaults() { sqlite3_vfs_unregister(&vfs_->vfs); }

StatusOr<std::unique_ptr<DiskFaults>> DiskFaults::parse(const std::string& spec) {
  const size_t colon = spec.find(':');
  uint64_t bytes = 0;
  unsigned files = colon == std::string::npos ? kTraceDb | kTraceWal | kDumpFiles : 0;
  bool ok = parseBytes(spec.substr(0, colon), &bytes);
  if (ok && colon != std::string::npos) {
    const std::string list = spec.substr(colon + 1);
    size_t at = 0;
    while (ok) {
      const size_t comma = list.find(',', at);
      const std::string f = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
      const unsigned bit = f == "db" ? kTraceDb : f == "wal" ? kTraceWal : f == "dump" ? kDumpFiles : 0u;
      ok = bit != 0;
      files |= bit;
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
  }
  if (!ok) {
    return invalidArgument(std::string(kVariable) + "=" + spec +
                           ": expected BYTES[:FILES], BYTES a count or with K, M, G, and FILES a comma list of "
                           "db, wal, dump");
  }
  if (sqlite3_vfs_find(nullptr) == nullptr) return internalError("SQLite has no default VFS");
  return std::unique_ptr<DiskFaults>(new DiskFaults(spec, bytes, files));
}

StatusOr<DiskFaults*> DiskFaults::fromEnvironment() {
  // Read once; the faults live as long as the process (trace files may be open until its end).
  static const StatusOr<DiskFaults*> faults = []() -> StatusOr<DiskFaults*> {
    const char* spec = std::getenv(kVariable);
    if (spec == nullptr || *spec == '\0') return static_cast<DiskFaults*>(nullptr);
    ASSIGN_OR_RETURN(std::unique_ptr<DiskFaults> f, parse(spec));
    return f.release();
  }();
  return faults;
}

const char* DiskFaults::sqliteVfs() const { return vfs_->name.c_str(); }

std::string DiskFaults::describe() const { return std::string(kVariable) + "=" + spec_; }

uint64_t DiskFaults::room() const {
  std::lock_guard<std::mutex> lock(mu_);
  return room_;
}

uint64_t DiskFaults::takeLocked(File kind, uint64_t bytes) {
  if (!governs(kind)) return bytes;
  const uint64_t got = bytes < room_ ? bytes : room_;
  room_ -= got;
  return got;
}

void DiskFaults::giveBack(File kind, uint64_t bytes) {
  if (!governs(kind)) return;
  std::lock_guard<std::mutex> lock(mu_);
  room_ += bytes;
}

ssize_t DiskFaults::writev(File kind, int fd, const iovec* iov, int count) {
  if (!governs(kind)) return ::writev(fd, iov, count);
  size_t want = 0;
  for (int i = 0; i < count; ++i) want += iov[i].iov_len;
  uint64_t got = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    got = takeLocked(kind, want);
  }
  if (got == 0 && want > 0) {
    errno = ENOSPC;
    return -1;
  }
  if (got == want) return ::writev(fd, iov, count);
  // Cut short: the parts that fit, the last of them partly.
  std::vector<iovec> part;
  uint64_t left = got;
  for (int i = 0; i < count && left > 0; ++i) {
    part.push_back(iov[i]);
    if (part.back().iov_len > left) part.back().iov_len = left;
    left -= part.back().iov_len;
  }
  return ::writev(fd, part.data(), static_cast<int>(part.size()));
}

}  // namespace npuscope
