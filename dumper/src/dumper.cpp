#include "npuscope/dumper/dumper.h"
namespace npuscope::dumper {
const char* componentName() { return "dumper"; }
}
