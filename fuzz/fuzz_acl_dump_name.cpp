// Ascend ACL dump files' names and folders (acl_dump.h's parseAclDumpName, as `npuscope import`
// and `compare` find dump files in a folder): the input is a path, '/'-separated, its last part
// the file name, the others the folders below the search root. Seeds: the real layout's path
// ({time}/{device}/{model}/{model_id}/{step}/{type}.{name}.{task}.{stream}.{ts}), npuscope's own
// ({time}/{device}/...), names with dots in the op name, and names that are not dump files. No
// file is opened. A name is either refused or read with its parts in range: never an exception
// (std::stoull's out_of_range on a 20-digit part was the first thing this target was for).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "npuscope/import/acl_dump.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> folders(1);
  for (char c : path) {
    if (c == '/') {
      folders.emplace_back();
    } else {
      folders.back() += c;
    }
  }
  const std::string name = folders.back();
  folders.pop_back();
  npuscope::import::AclDumpFile f;
  if (!npuscope::import::parseAclDumpName(name, folders, &f)) return 0;
  if (f.op_type.empty() || f.op_type.find('.') != std::string::npos) __builtin_trap();
  if (f.device < 0 || f.device > 999999 || f.step < -1) __builtin_trap();
  return 0;
}
