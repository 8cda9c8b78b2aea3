// Helpers the policy tests share.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "policy/policy.h"

namespace warden::policy::testing {

// `yaml` loaded as the file `source`; a failure is the test's (and an empty policy comes back).
inline Policy MustLoad(const std::string& yaml, const std::string& source = "test.yaml") {
  auto p = LoadPolicyText(yaml, source);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? std::move(p).value() : Policy{};
}

}  // namespace warden::policy::testing
