#include "npuscope/amp/amp.h"
namespace npuscope::amp {
const char* componentName() { return "amp"; }
}
