// `npuscope run [options] -- script.py args...`: a user's unmodified Python script on the npu
// under recording (what `nsys profile python3 train.py` is to a GPU), then that run's report.
// Runs the script with Debian's interpreter (NPUSCOPE_PYTHON overrides) and the npuscope
// package of this build or install (NPUSCOPE_PYTHONPATH overrides); returns the script's exit
// status (128 + signal when it was killed by one).

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "cli/commands.h"
#include "cli/launch.h"
#include "cli/report.h"

namespace npuscope::cli {
namespace {

struct RunOptions {
  std::string db = "npuscope.db";
  std::string dump_config;  // acl.json to dump with ("" : ACL_DUMP_DATA=1 decides, as for train)
  bool transfer_to_npu = false;
  std::string schedule;
  bool report = true;
  std::vector<std::string> script;  // script.py and its arguments
  bool no_report = false;          // --no-report (sets `report`)
  int nproc = 1, master_port = 0;   // --nproc: a job of ranks launched as torchrun would
};


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

// 0 when the script to run is given and exists; else the failure's exit code (one line said).
int checkScript(const RunOptions& o) {
  if (o.script.empty()) return fail("run: no script given (npuscope run [options] -- script.py [args...])");
  if (!exists(o.script.front())) return fail("run: " + o.script.front() + ": no such script");
  return 0;
}

int runScript(const RunOptions& o) {
  if (const int bad = checkScript(o); bad != 0) return bad;
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
  // Everything the child needs is built before fork(): between fork and exec only
  // async-signal-safe calls run.
  std::vector<std::string> env{"PYTHONPATH=" + pythonPath};
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "PYTHONPATH=", 11) != 0) env.emplace_back(*e);
  }
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string cannotStart = "npuscope: error: run: cannot start " + python + "\n";

  // Ctrl-C reaches the script (same process group), which ends its run "failed"; npuscope
  // waits for it instead of dying first. SIGTERM to npuscope is passed on to the script.
  static std::atomic<pid_t> child{0};
  child = 0;
  struct sigaction ignore{}, forward{}, oldInt{}, oldTerm{};
  ignore.sa_handler = SIG_IGN;
  forward.sa_handler = [](int sig) {
    if (const pid_t c = child.load(); c > 0) ::kill(c, sig);
  };
  ::sigaction(SIGINT, &ignore, &oldInt);
  ::sigaction(SIGTERM, &forward, &oldTerm);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::sigaction(SIGINT, &oldInt, nullptr);
    ::sigaction(SIGTERM, &oldTerm, nullptr);
    ::execve(python.c_str(), argv.data(), envp.data());
    (void)!::write(2, cannotStart.data(), cannotStart.size());
    ::_exit(127);
  }
  if (pid < 0) {
    ::sigaction(SIGINT, &oldInt, nullptr);
    ::sigaction(SIGTERM, &oldTerm, nullptr);
    return fail("run: cannot start a process");
  }
  child = pid;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  ::sigaction(SIGINT, &oldInt, nullptr);
  ::sigaction(SIGTERM, &oldTerm, nullptr);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);

  int64_t runId = -1;
  int recordingFailed = 0, scriptCode = code;  // the script's own status, as its process would exit
  std::string db = o.db;                       // the file recorded into (a rank's may be a sibling)
  {
    std::ifstream in(idFile);
    std::string line;
    if (in >> runId && std::getline(in, line) && std::getline(in, line) && !line.empty()) db = line;
    if (!(in >> recordingFailed >> scriptCode)) recordingFailed = 0;
  }
  std::remove(idFile.c_str());
  if (runId < 0) return code != 0 ? code : fail("run: the script's run was not recorded");
  std::fflush(stdout);
  if (recordingFailed != 0 && scriptCode != code) {
    std::fprintf(stderr, "npuscope: recorded run %lld in %s (script exit status %d; exit status %d: the recording failed)\n",
                 static_cast<long long>(runId), db.c_str(), scriptCode, code);
  } else {
    std::fprintf(stderr, "npuscope: recorded run %lld in %s (script exit status %d)\n", static_cast<long long>(runId),
                 db.c_str(), code);
  }
  if (o.report) {
    ReportOptions rep;
    rep.file = db;
    rep.run = runId;
    (void)runReport(rep);
  }
  return code;
}

// `run --nproc N`: N ranks of the script, each `npuscope run` with torchrun's environment
// (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), its output lines
// prefixed "[rankR] ", its recording in DB (rank 0) or DB's .rankR sibling; then the job's
// cluster report.
int runJob(const RunOptions& o, int argc, char** argv) {
  if (o.nproc < 1 || o.nproc > 64) return fail("run --nproc " + std::to_string(o.nproc) + ": expected 1 to 64 ranks");
  if (const int bad = checkScript(o); bad != 0) return bad;
  if (o.master_port < 0 || o.master_port > 65535) {
    return fail("run --master-port " + std::to_string(o.master_port) + ": expected a TCP port (1-65535)");
  }
  RankSetup setup = [](int rank, int nproc, int port, const std::string& job) {
    const std::string r = std::to_string(rank), n = std::to_string(nproc);
    return RankLaunch{{"--no-report"},
                      {"RANK=" + r, "LOCAL_RANK=" + r, "WORLD_SIZE=" + n, "LOCAL_WORLD_SIZE=" + n, "GROUP_RANK=0",
                       "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port), "NPUSCOPE_JOB=" + job,
                       "NPUSCOPE_OUTPUT_PREFIX=[rank" + r + "] "}};
  };
  const int code = launchRanks(argc, argv, o.nproc, setup, o.master_port);
  if (o.report) {
    std::fflush(stdout);
    const int rep = runClusterReport({o.db}, "", 0.05, false);
    if (code == 0 && rep != 0) return rep;
  }
  return code;
}

}  // namespace

void addRunCommand(Commands& cli) {
  auto o = std::make_shared<RunOptions>();
  RunOptions& run = *o;
  auto* run_cmd = cli.app().add_subcommand(
      "run", "Run your own Python training script on the npu under recording, then print its report");
  run_cmd->add_option("--db", run.db, "Trace file the run is recorded into")->capture_default_str();
  run_cmd->add_option("--dump-config", run.dump_config, "Dump op tensors as this acl.json says (else ACL_DUMP_DATA=1 "
                                                        "with ./acl.json)");
  run_cmd->add_flag("--transfer-to-npu", run.transfer_to_npu,
                    "Run an unmodified CUDA script: cuda devices, torch.cuda.* and torch.cuda.amp mean the npu");
  run_cmd->add_option("--schedule", run.schedule, "Profiler schedule: skip_first=N,wait=N,warmup=N,active=N,repeat=N");
  run_cmd->add_flag("--no-report", o->no_report, "Do not print the report after the script");
  run_cmd->add_option("--nproc", o->nproc,
                      "Run N ranks of the script as torchrun does (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, "
                      "MASTER_PORT set); rank R records into DB's .rankR sibling; the cluster report follows")
      ->capture_default_str();
  run_cmd->add_option("--master-port", o->master_port, "With --nproc: the job's store port (default: a free one)");
  run_cmd->add_option("script", run.script, "-- script.py [its arguments...]")->required();
  run_cmd->footer("Example: npuscope run --db run.db -- train.py --epochs 1\n"
                  "The script runs with /usr/bin/python3 (NPUSCOPE_PYTHON overrides) and keeps its exit status.");
  cli.onParsed(run_cmd, [o, &cli] {
    o->report = !o->no_report;
    return o->nproc != 1 ? runJob(*o, cli.argc(), cli.argv()) : runScript(*o);
  });
}

}  // namespace npuscope::cli
