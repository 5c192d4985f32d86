// Where the targets that need a file per input write it: tmpfs (/dev/shm) where the machine has
// one writable, else /tmp. On a disk, writing and truncating the input's files cost the kernel a
// quarter of a target's time (perf); on tmpfs they never reach a disk. Each process has its own
// names, and what it wrote there is removed when it exits (tmpfs is memory).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace npuscope_fuzz {

// "<dir>/npuscope_fuzz_<what>_<pid>": the target adds its suffixes (".db", "_ascend_pt", ...).
// Every file or folder of the directory named so (and a suffix not starting with a digit) is
// removed at exit.
inline std::string scratchPath(const std::string& what) {
  static const std::string dir = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  static std::vector<std::string> prefixes;  // constructed before the handler is registered
  static const bool registered = std::atexit([] {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      for (const std::string& p : prefixes) {
        // The pid ends where a digit does not follow (pid 12 must not take pid 123's files).
        const bool ours = name.compare(0, p.size(), p) == 0 &&
                          (name.size() == p.size() || name[p.size()] < '0' || name[p.size()] > '9');
        if (ours) std::filesystem::remove_all(entry.path(), ec);
      }
    }
  }) == 0;
  (void)registered;
  const std::string name = "npuscope_fuzz_" + what + "_" + std::to_string(::getpid());
  prefixes.push_back(name);
  return dir + "/" + name;
}

}  // namespace npuscope_fuzz
