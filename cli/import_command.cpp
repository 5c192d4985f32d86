// `npuscope import PATH`: a Kineto / torch.profiler trace, a torch_npu profiler folder or a
// folder of ranks into a trace file.

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>

#include "cli/commands.h"
#include "npuscope/store/format.h"
#include "npuscope/import/import.h"

namespace npuscope::cli {
namespace {

struct ImportOptions {
  std::string path;
  std::string db;  // default: <name of PATH>.npuscope.db in the current folder
  bool quiet = false;
};


std::atomic<int> g_stop{0};

std::string defaultDb(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const size_t slash = path.find_last_of('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  for (const char* ext : {".gz", ".json"}) {
    const std::string e = ext;
    if (name.size() > e.size() && name.compare(name.size() - e.size(), e.size(), e) == 0) name.resize(name.size() - e.size());
  }
  return name + ".npuscope.db";
}

int runImport(const ImportOptions& o) {
  const std::string db = o.db.empty() ? defaultDb(o.path) : o.db;
  auto format = import::detectFormat(o.path);
  if (!format.isOk()) return fail(format.status().message());
  // Ctrl-C / SIGTERM: the import stops at its next chunk; the rank being read is not written. A
  // run being written (the last seconds of an import) is finished first; a second signal ends the
  // process at once (the run is then ended failed when the file is next opened for writing).
  g_stop = 0;
  for (int sig : {SIGINT, SIGTERM}) {
    std::signal(sig, [](int s) {
      if (g_stop.load() != 0) std::_Exit(128 + s);
      g_stop = s;
    });
  }
  const bool tty = isatty(fileno(stderr)) != 0;
  const auto t0 = std::chrono::steady_clock::now();
  import::Options options;
  int last_pct = -1;
  options.progress = [&](int64_t done, int64_t total) {
    if (g_stop.load() != 0) return false;
    const int pct = total > 0 ? static_cast<int>(100 * done / total) : 0;
    if (!o.quiet && tty && pct != last_pct) {
      std::fprintf(stderr, "\rimporting %s: %d%%", o.path.c_str(), pct);
      last_pct = pct;
    }
    return true;
  };
  auto summary = import::importPath(o.path, db, options);
  if (!o.quiet && tty && last_pct >= 0) std::fprintf(stderr, "\n");
  if (g_stop.load() != 0 && !summary.isOk()) {
    // Stopped while reading: the rank being read was not written (ranks before it were).
    fail(o.path + ": import interrupted; the rank being read was not written");
    return 128 + g_stop.load();
  }
  // An interrupt while a run was being written lets that run finish: it is complete.
  if (!summary.isOk()) return fail(summary.status().message());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("imported %s (%s) into %s in %.1f s\n", o.path.c_str(), format->c_str(), db.c_str(), secs);
  for (const import::RunSummary& r : summary->runs) {
    std::printf("run %lld", static_cast<long long>(r.run_id));
    if (r.rank >= 0) std::printf("  rank %lld", static_cast<long long>(r.rank));
    std::printf("  %s  %s\n", r.source.c_str(), r.path.c_str());
    if (r.source == "msprobe") {
      std::printf("  %lld dumped calls, %lld tensors and arguments, %lld steps\n", static_cast<long long>(r.dump_entries),
                  static_cast<long long>(r.dump_tensors), static_cast<long long>(r.steps));
      for (const std::string& n : r.notes) std::printf("import: %s\n", n.c_str());
      continue;
    }
    if (r.source == "acl_dump") {
      std::printf("  %lld dumped ops, %lld tensors with their data, %lld steps (compare: npuscope compare %s OTHER)\n",
                  static_cast<long long>(r.dump_entries), static_cast<long long>(r.dump_tensors),
                  static_cast<long long>(r.steps), db.c_str());
      continue;
    }
    std::printf("  %lld host ops, %lld device tasks (%lld linked to the host op that launched them), %lld steps, "
                "%lld memory samples\n",
                static_cast<long long>(r.host_ops), static_cast<long long>(r.device_tasks),
                static_cast<long long>(r.linked_tasks), static_cast<long long>(r.steps),
                static_cast<long long>(r.memory_samples));
    if (r.memory_blocks > 0) {
      std::printf("  %lld operator allocations (memory by owner: npuscope memory %s)\n",
                  static_cast<long long>(r.memory_blocks), db.c_str());
    }
    if (r.memory_components > 0) {
      std::printf("  %lld samples of device memory by component (npu_module_mem)\n",
                  static_cast<long long>(r.memory_components));
    }
    for (const std::string& n : r.notes) std::printf("import: %s\n", n.c_str());
  }
  if (!summary->warning.empty()) std::fprintf(stderr, "npuscope: warning: %s\n", summary->warning.c_str());
  std::printf("see: npuscope report %s\n", db.c_str());
  return 0;
}

}  // namespace

void addImportCommand(Commands& cli) {
  auto o = std::make_shared<ImportOptions>();
  ImportOptions& imp = *o;
  auto* import_cmd = cli.app().add_subcommand(
      "import", "Read a trace another profiler wrote (Kineto / torch.profiler JSON, torch_npu) into a trace file");
  import_cmd->add_option("path", imp.path,
                         "A *.json or *.json.gz trace, a torch_npu *_ascend_pt folder (or its ASCEND_PROFILER_OUTPUT), "
                         "or a folder of ranks")
      ->required();
  import_cmd->add_option("--db", imp.db, "Trace file to add the runs to (default: NAME.npuscope.db here)");
  import_cmd->add_flag("-q,--quiet", imp.quiet, "No progress");
  cli.onParsed(import_cmd, [o] { return runImport(*o); });
}

}  // namespace npuscope::cli
