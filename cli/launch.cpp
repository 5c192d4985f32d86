#include "cli/launch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cli/command.h"

namespace npuscope::cli {
namespace {

std::vector<pid_t> g_children;
volatile sig_atomic_t g_signalled = 0;

void passOn(int sig) {
  for (pid_t p : g_children) {
    if (p > 0) ::kill(p, sig);
  }
}

void onSignal(int sig) {
  g_signalled = sig;
  passOn(sig);
}

int freePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

int exitCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

int launchRanks(int argc, char** argv, int nproc, const RankSetup& setup, int requested_port) {
  const int port = requested_port > 0 ? requested_port : freePort();
  if (port <= 0) return fail(std::string("--nproc: no free loopback port for the job's store: ") + std::strerror(errno));
  char host[256] = "host";
  ::gethostname(host, sizeof host - 1);
  const long long now = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
  const std::string job = std::string(host) + "-" + std::to_string(::getpid()) + "-" + std::to_string(now);
  // The ranks' command line: this one without --nproc, with the rank's place in the job.
  std::vector<std::string> base;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {  // the rest is a script's command line: kept as it is
      for (; i < argc; ++i) base.emplace_back(argv[i]);
      break;
    }
    if (a == "--nproc" || a == "--master-port") {
      ++i;
      continue;
    }
    if (a.rfind("--nproc=", 0) == 0 || a.rfind("--master-port=", 0) == 0) continue;
    base.push_back(a);
  }
  struct sigaction sa {};
  sa.sa_handler = onSignal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  std::fprintf(stderr, "npuscope: launching %d ranks (job %s, store 127.0.0.1:%d)\n", nproc, job.c_str(), port);
  for (int r = 0; r < nproc; ++r) {
    RankLaunch extra = setup ? setup(r, nproc, port, job)
                             : RankLaunch{{"--rank", std::to_string(r), "--world-size", std::to_string(nproc),
                                           "--master-port", std::to_string(port), "--job", job},
                                          {}};
    std::vector<std::string> args = base;
    // Options go before a script's "--".
    auto at = std::find(args.begin(), args.end(), std::string("--"));
    args.insert(at, extra.args.begin(), extra.args.end());
    std::vector<std::string> env = extra.env;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string kv = *e;
      const std::string name = kv.substr(0, kv.find('='));
      bool replaced = false;
      for (const std::string& x : extra.env) replaced = replaced || x.compare(0, name.size() + 1, name + "=") == 0;
      if (!replaced) env.push_back(kv);
    }
    std::vector<char*> cargs, cenv;
    for (std::string& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    for (std::string& e : env) cenv.push_back(e.data());
    cenv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) {
      passOn(SIGTERM);
      return fail(std::string("--nproc: cannot start rank ") + std::to_string(r) + ": " + std::strerror(errno));
    }
    if (pid == 0) {
      ::execve("/proc/self/exe", cargs.data(), cenv.data());
      std::fprintf(stderr, "npuscope: error: rank %d: cannot run /proc/self/exe: %s\n", r, std::strerror(errno));
      std::_Exit(127);
    }
    g_children.push_back(pid);
  }
  int first_failure = 0, failed_rank = -1;
  for (size_t left = g_children.size(); left > 0;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    --left;
    for (size_t r = 0; r < g_children.size(); ++r) {
      if (g_children[r] != pid) continue;
      g_children[r] = -1;
      const int code = exitCode(status);
      if (code != 0 && first_failure == 0) {
        first_failure = code;
        failed_rank = static_cast<int>(r);
        passOn(SIGTERM);  // the others would wait for it in their next collective
      }
    }
  }
  if (g_signalled != 0) {
    std::fprintf(stderr, "npuscope: error: the launcher got %s and passed it on to every rank\n",
                 g_signalled == SIGINT ? "SIGINT" : "SIGTERM");
  } else if (first_failure != 0) {
    std::fprintf(stderr, "npuscope: error: rank %d exited with code %d; the ranks still running were stopped (SIGTERM)\n", failed_rank,
                 first_failure);
  }
  return first_failure;
}

}  // namespace npuscope::cli
