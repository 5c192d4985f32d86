// npuscope's forwarders: a torch subcommand (torch_commands.h) runs in npuscope-torch, which this
// process becomes (execv: same pid, environment, terminal and signals) with its command line
// unchanged, so what the user typed is parsed, answered and reported there.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace npuscope::cli {
namespace {

std::string ownDirectory() {
  std::vector<char> buf(4096);
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return ".";
  std::string self(buf.data(), static_cast<size_t>(n));
  const size_t slash = self.rfind('/');
  return slash == std::string::npos ? "." : self.substr(0, slash);
}

int runTorchCommand(const char* name, char** argv) {
  // Beside npuscope in a build tree; under libexec in an installed one (cli/CMakeLists.txt).
  const std::string dir = ownDirectory();
  const std::string candidates[] = {dir + "/npuscope-torch", dir + "/" NPUSCOPE_TORCH_CLI_FROM_BIN};
  for (const std::string& path : candidates) {
    if (::access(path.c_str(), X_OK) != 0) continue;
    ::execv(path.c_str(), argv);  // returns only when it exists but cannot run: say so
    return fail(std::string(name) + " runs in " + path + ", which cannot start: " + std::strerror(errno));
  }
  return fail(std::string(name) + " runs in npuscope-torch, which is not installed beside npuscope (looked for " +
              candidates[0] + " and " + candidates[1] + ")");
}

}  // namespace

void addForwardedCommand(Commands& cli, const TorchCommand& command) {
  CLI::App* sub = cli.app().add_subcommand(command.name, command.description);
  sub->set_help_flag();    // --help too is npuscope-torch's, which knows the options
  sub->prefix_command();   // everything after the name is left for npuscope-torch
  sub->allow_extras();
  const char* name = command.name;
  cli.onParsed(sub, [&cli, name] { return runTorchCommand(name, cli.argv()); });
}

}  // namespace npuscope::cli
