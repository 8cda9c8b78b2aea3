// A fresh directory per test for the warden database, removed with its contents afterwards.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

namespace warden::state::testing {

class TempDb {
 public:
  TempDb() {
    char pattern[] = "/tmp/warden-state-XXXXXX";
    const char* made = mkdtemp(pattern);
    EXPECT_NE(made, nullptr);
    dir_ = made ? made : "/tmp";
  }
  ~TempDb() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TempDb(const TempDb&) = delete;
  TempDb& operator=(const TempDb&) = delete;
  const std::string& dir() const { return dir_; }
  // Under a subdirectory that does not exist yet: the stores create it.
  std::string path() const { return dir_ + "/var/warden/warden.db"; }

 private:
  std::string dir_;
};

}  // namespace warden::state::testing
