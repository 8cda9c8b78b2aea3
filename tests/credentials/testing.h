// What the credentials tests share: text assertions that say what the text held (gmock is not
// linked).
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace warden::credentials::testing {

// Whether `text` holds `part`, saying what it held when not.
inline ::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}
inline ::testing::AssertionResult Lacks(const std::string& text, const std::string& part) {
  if (text.find(part) == std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' contains '" << part << "'";
}

}  // namespace warden::credentials::testing
