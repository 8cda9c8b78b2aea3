// SHA-256 through libcrypto (OpenSSL 3's EVP interface).
#pragma once

#include <string>
#include <string_view>

namespace warden::audit {

// Lower-case hex SHA-256 of `data` (64 characters). Thread-safe.
std::string Sha256Hex(std::string_view data);

// The same digest of `prefix` followed by `data`, without concatenating them first.
std::string Sha256Hex(std::string_view prefix, std::string_view data);

}  // namespace warden::audit
