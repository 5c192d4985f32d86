#include "cli/run_command.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "cli/fail.h"
#include "cli/report.h"

namespace npuscope::cli {
namespace {

bool exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0;
}

// The directory holding the npuscope package: NPUSCOPE_PYTHONPATH, else this build's tree,
// else the install location; "" when none has it.
std::string packageDir() {
  if (const char* env = std::getenv("NPUSCOPE_PYTHONPATH"); env != nullptr && *env != '\0') return env;
  for (const char* dir : {NPUSCOPE_PYTHON_BUILD_DIR, NPUSCOPE_PYTHON_INSTALL_DIR}) {
    if (exists(std::string(dir) + "/npuscope/__init__.py")) return dir;
  }
  return "";
}

}  // namespace

int runScript(const RunOptions& o) {
  if (o.script.empty()) return fail("run: no script given (npuscope run [options] -- script.py [args...])");
  if (!exists(o.script.front())) return fail("run: " + o.script.front() + ": no such script");
  const char* envPython = std::getenv("NPUSCOPE_PYTHON");
  const std::string python = envPython != nullptr && *envPython != '\0' ? envPython : NPUSCOPE_PYTHON_EXECUTABLE;
  if (!exists(python)) {
    return fail("run: the Python interpreter " + python + " is missing (install python3-torch, or set NPUSCOPE_PYTHON)");
  }
  const std::string pkg = packageDir();
  if (pkg.empty()) {
    return fail("run: the npuscope Python package is not built (build with -DNPUSCOPE_BUILD_PYTHON=ON) or set "
                "NPUSCOPE_PYTHONPATH");
  }
  char idTemplate[] = "/tmp/npuscope-run-XXXXXX";
  const int fd = ::mkstemp(idTemplate);
  if (fd < 0) return fail("run: cannot create a temporary file in /tmp");
  ::close(fd);
  const std::string idFile = idTemplate;

  std::vector<std::string> args{python, "-m", "npuscope._run", "--db", o.db, "--run-id-file", idFile};
  if (!o.dump_config.empty()) args.insert(args.end(), {"--dump-config", o.dump_config});
  if (o.transfer_to_npu) args.emplace_back("--transfer-to-npu");
  if (!o.schedule.empty()) args.insert(args.end(), {"--schedule", o.schedule});
  args.emplace_back("--");
  args.insert(args.end(), o.script.begin(), o.script.end());

  std::string pythonPath = pkg;
  if (const char* old = std::getenv("PYTHONPATH"); old != nullptr && *old != '\0') pythonPath += ":" + std::string(old);

  // Ctrl-C reaches the script (same process group), which ends its run "failed"; npuscope
  // waits for it instead of dying first.
  struct sigaction ignore{}, oldInt{}, oldTerm{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGINT, &ignore, &oldInt);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::sigaction(SIGINT, &oldInt, nullptr);
    ::setenv("PYTHONPATH", pythonPath.c_str(), 1);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(python.c_str(), argv.data());
    std::fprintf(stderr, "npuscope: error: run: cannot start %s\n", python.c_str());
    ::_exit(127);
  }
  if (pid < 0) {
    ::sigaction(SIGINT, &oldInt, nullptr);
    return fail("run: cannot start a process");
  }
  // SIGTERM to npuscope is passed on to the script.
  static pid_t child = 0;
  child = pid;
  struct sigaction forward{};
  forward.sa_handler = [](int sig) { if (child > 0) ::kill(child, sig); };
  ::sigaction(SIGTERM, &forward, &oldTerm);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  ::sigaction(SIGINT, &oldInt, nullptr);
  ::sigaction(SIGTERM, &oldTerm, nullptr);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);

  int64_t runId = -1;
  {
    std::ifstream in(idFile);
    in >> runId;
  }
  std::remove(idFile.c_str());
  if (runId < 0) return code != 0 ? code : fail("run: the script's run was not recorded");
  std::fflush(stdout);
  std::fprintf(stderr, "npuscope: recorded run %lld in %s (script exit status %d)\n", static_cast<long long>(runId),
               o.db.c_str(), code);
  if (o.report) {
    ReportOptions rep;
    rep.file = o.db;
    rep.run = runId;
    (void)runReport(rep);
  }
  return code;
}

}  // namespace npuscope::cli
