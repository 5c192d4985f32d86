// What this build is: npuscope's version, and the trace-file schema it writes (the newest of
// store/schema's migrations; files of an older schema are migrated on open, newer ones refused).
#pragma once

namespace npuscope {

const char* npuscopeVersion();  // the project's version, e.g. "0.1.0"
int traceSchemaVersion();       // PRAGMA user_version of a file this build writes

}  // namespace npuscope
