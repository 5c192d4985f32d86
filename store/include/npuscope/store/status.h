// Status / StatusOr: the error model of core and of every torch-free layer.
// A Status is either OK or carries a code and a one-line message meant for a person.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace npuscope {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // the caller passed something malformed
  kNotFound,          // a named thing does not exist
  kOutOfMemory,       // a device pool cannot satisfy a request
  kFailedPrecondition,// the object is not in a state for this call
  kUnsupported,       // valid request the emulated device refuses (e.g. fp64)
  kIoError,           // file system or database failure
  kInternal,          // a bug of ours
};

const char* statusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok() { return Status(); }

  bool isOk() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "code: message", or "ok".
  std::string toString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status notFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status outOfMemory(std::string m) { return {StatusCode::kOutOfMemory, std::move(m)}; }
inline Status failedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
inline Status ioError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status internalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design

  bool isOk() const { return status_.isOk(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace npuscope

#define NPUSCOPE_CONCAT_INNER(a, b) a##b
#define NPUSCOPE_CONCAT(a, b) NPUSCOPE_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function when it is not OK.
#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::npuscope::Status _npuscope_st = (expr);          \
    if (!_npuscope_st.isOk()) return _npuscope_st;     \
  } while (0)

// ASSIGN_OR_RETURN(lhs, expr): lhs = value of a StatusOr, or return its Status.
#define ASSIGN_OR_RETURN(lhs, expr)                                   \
  auto NPUSCOPE_CONCAT(_npuscope_or_, __LINE__) = (expr);             \
  if (!NPUSCOPE_CONCAT(_npuscope_or_, __LINE__).isOk())               \
    return NPUSCOPE_CONCAT(_npuscope_or_, __LINE__).status();         \
  lhs = std::move(NPUSCOPE_CONCAT(_npuscope_or_, __LINE__)).value()
