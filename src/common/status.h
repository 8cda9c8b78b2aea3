// Errors as values. A Status is either ok or carries a message that names the cause
// (and, for kernel failures, the step and the errno). No exceptions cross component
// boundaries; code that calls a throwing library converts at the call site.
#pragma once

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace warden {

class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  // A failure described by `message` (what was wrong and, where useful, what to do).
  static Status Error(std::string message) { return Status(std::move(message), 0); }
  // A failed system call during `step`: "step: strerror (errno N)".
  static Status FromErrno(const std::string& step, int err) {
    return Status(step + ": " + std::strerror(err) + " (errno " + std::to_string(err) + ")", err);
  }

  bool ok() const { return !message_.has_value(); }
  explicit operator bool() const { return ok(); }
  const std::string& message() const {
    static const std::string kOk = "ok";
    return message_ ? *message_ : kOk;
  }
  int err() const { return err_; }  // 0 unless made by FromErrno
  // Prefixes the message with more context: "context: message".
  Status Wrap(const std::string& context) const {
    if (ok()) return *this;
    return Status(context + ": " + *message_, err_);
  }

 private:
  Status(std::string message, int err) : message_(std::move(message)), err_(err) {}
  std::optional<std::string> message_;
  int err_ = 0;
};

// A value or the Status that explains why there is none.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}           // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}     // NOLINT: must not be ok
  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  const T& value() const& { return std::get<T>(v_); }
  T* operator->() { return &std::get<T>(v_); }
  const T* operator->() const { return &std::get<T>(v_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace warden

// Returns early from the enclosing function when `expr` (a Status) failed.
#define WARDEN_RETURN_IF_ERROR(expr)        \
  do {                                      \
    ::warden::Status _st = (expr);          \
    if (!_st.ok()) return _st;              \
  } while (0)
