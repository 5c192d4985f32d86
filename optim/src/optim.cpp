#include "npuscope/optim/optim.h"

namespace npuscope::optim {
const char* componentName() { return "optim"; }
}  // namespace npuscope::optim
