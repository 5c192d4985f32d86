#include "npuscope/dumper/dumper.h"

namespace npuscope::dumper {

StatusOr<bool> configureDumper(const DumpRequest& request) {
  Dumper& d = Dumper::instance();
  if (!request.dump_config.empty() || request.overflow_check > 0) {
    DumpConfig c;
    if (!request.dump_config.empty()) {
      ASSIGN_OR_RETURN(c, DumpConfig::fromFile(request.dump_config));
    }
    if (request.overflow_check > 0) {
      c.data = DumpDataKind::kOverflow;
      c.overflow_limit = request.overflow_check;
    }
    c.force = c.force || request.force;
    RETURN_IF_ERROR(d.configure(c));
    return true;
  }
  ASSIGN_OR_RETURN(bool requested, d.configureFromEnvironment());
  if (requested && request.force && !d.config().force) {
    DumpConfig c = d.config();
    c.force = true;
    RETURN_IF_ERROR(d.configure(c));
  }
  return requested;
}

}  // namespace npuscope::dumper
