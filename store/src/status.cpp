#include "npuscope/store/status.h"

namespace npuscope {

const char* statusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kOutOfMemory: return "out of memory";
    case StatusCode::kFailedPrecondition: return "failed precondition";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kIoError: return "i/o error";
    case StatusCode::kInternal: return "internal error";
  }
  return "unknown";
}

std::string Status::toString() const {
  if (isOk()) return "ok";
  return std::string(statusCodeName(code_)) + ": " + message_;
}

}  // namespace npuscope
