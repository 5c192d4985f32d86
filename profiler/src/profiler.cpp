#include "npuscope/profiler/profiler.h"
namespace npuscope::profiler {
const char* componentName() { return "profiler"; }
}
