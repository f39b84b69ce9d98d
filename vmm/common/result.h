// Result types: the one error policy of the project.
//
// A fallible function returns Result<T> (or Status for no value). An Error carries one
// actionable line: what failed, the errno text where there is one, and what to do about it.
// Whoever decides what to do with a failure logs it once; nothing below that logs.
#pragma once

#include <cerrno>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace vmm {

class Error {
public:
    explicit Error(std::string message) : message_(std::move(message)) {}

    // "<what>: <strerror(err)>[; <hint>]"
    static Error from_errno(std::string_view what, int err = errno, std::string_view hint = {});
    // `message` as it is, carrying `err` for a decider (e.g. ECONNREFUSED: nothing listens).
    static Error with_errno(std::string message, int err);

    const std::string& message() const { return message_; }
    // The errno a from_errno error was made with (0 otherwise): for a decider that acts on what
    // the system said (a refused connection), never for the wording.
    int sys_errno() const { return errno_; }

    // Prefix context: Error("x").context("loading config") -> "loading config: x".
    Error context(std::string_view where) const;

private:
    std::string message_;
    int errno_ = 0;
};

template <typename T>
class [[nodiscard]] Result {
public:
    Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
    Result(Error error) : v_(std::move(error)) {}  // NOLINT

    bool ok() const { return v_.index() == 0; }
    explicit operator bool() const { return ok(); }

    T& value() & { return std::get<0>(v_); }
    const T& value() const& { return std::get<0>(v_); }
    T&& value() && { return std::get<0>(std::move(v_)); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

    const Error& error() const { return std::get<1>(v_); }

private:
    std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
public:
    Result() = default;
    Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT

    bool ok() const { return ok_; }
    explicit operator bool() const { return ok_; }
    const Error& error() const { return error_; }

private:
    Error error_{""};
    bool ok_ = true;
};

using Status = Result<void>;

inline Status ok_status() { return {}; }

}  // namespace vmm
