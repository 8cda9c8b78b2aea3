// No exception leaves a gateway worker (issue 10 item 9): a job that throws is logged and
// dropped, and the pool goes on serving the next jobs instead of taking the process down.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <stdexcept>

#include "policy/default_policy.h"
#include "testing.h"

namespace warden::gateway {
namespace {

using testing::PolicyFromText;
using testing::TempDir;
using testing::TestGateway;

TEST(WorkerGuardTest, AJobThatThrowsIsLoggedAndTheWorkersGoOn) {
  TempDir dir;
  GatewayOptions options;
  options.worker_threads = 2;
  TestGateway g(PolicyFromText(std::string(policy::DefaultPolicyText())), dir.File("warden.db"),
                {"", "tester", "", ""}, options);
  ::testing::internal::CaptureStderr();
  // More throwing jobs than workers: each worker meets at least one.
  for (int i = 0; i < 8; ++i) {
    g.core->Post([] { throw std::ios_base::failure("basic_filebuf::underflow error reading"); });
  }
  std::promise<void> ran;
  g.core->Post([&ran] { ran.set_value(); });
  EXPECT_EQ(ran.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  std::promise<void> again;
  for (int i = 0; i < 4; ++i) g.core->Post([] { throw 42; });  // not even a std::exception
  g.core->Post([&again] { again.set_value(); });
  EXPECT_EQ(again.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("warden: gateway worker: uncaught exception: basic_filebuf::underflow"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("(not a std::exception)"), std::string::npos) << err;
}

}  // namespace
}  // namespace warden::gateway
