// The one error type of the store library: the Store's business rules, its
// backends and the function that applies records to LMDB all throw it, and
// keyauthd maps each kind to one HTTP answer.
#pragma once

#include <stdexcept>
#include <string>

namespace keyauth {

class StoreError : public std::runtime_error {
public:
    // kUnavailable: the store cannot be reached now (etcd down or leaderless);
    // a write may or may not have been applied, the caller may retry.
    // kConflict: the state of what the write names forbids it (409);
    // kForbidden: the account may not do this (403). Both carry the error
    // code the console API answers with (KEY_REVOKED, SCOPE_NOT_ALLOWED...).
    enum class Kind { kInvalid, kNotFound, kConflict, kForbidden, kCorrupt, kBusy, kUnavailable };
    StoreError(Kind kind, std::string field, const std::string &message, std::string code = "")
        : std::runtime_error(message), kind_(kind), field_(std::move(field)), code_(std::move(code)) {}
    Kind kind() const noexcept { return kind_; }
    // For kInvalid: the offending input field ("name", "scopes", ...).
    const std::string &field() const noexcept { return field_; }
    const std::string &code() const noexcept { return code_; }

private:
    Kind kind_;
    std::string field_;
    std::string code_;
};

}  // namespace keyauth
