// Who may read /metrics (gateway/http/metrics_access.h): a peer on this host without a key; any
// other only with a key whose hash the policy lists. The HTTP side (401, 403, 405, the format a
// real parser reads) is tests/e2e/metrics.test.mjs.
#include "gateway/http/metrics_access.h"

#include <gtest/gtest.h>

#include "identity/identity.h"
#include "policy/policy.h"

namespace warden::gateway {
namespace {

policy::Policy WithMetricsKey(const std::string& key) {
  policy::Policy p;
  p.monitoring.metrics_keys.push_back(identity::HashApiKey(key));
  return p;
}

TEST(MetricsAccess, LoopbackPeersNeedNoKey) {
  policy::Policy none;
  for (const char* peer : {"127.0.0.1", "127.9.8.7", "::1", "::ffff:127.0.0.1"})
    EXPECT_TRUE(MetricsAccess(none, "", peer).ok()) << peer;
}

TEST(MetricsAccess, OtherPeersAreRefusedWithoutAKeyOfThePolicy) {
  policy::Policy none;
  for (const char* peer : {"10.0.0.5", "192.168.1.1", "::ffff:10.0.0.1", "2001:db8::1", "",
                           "not an address", "127.0.0.1.evil"}) {
    Status st = MetricsAccess(none, "", peer);
    ASSERT_FALSE(st.ok()) << peer;
    EXPECT_NE(st.message().find("monitoring.metrics.keys"), std::string::npos) << st.message();
  }
  policy::Policy keyed = WithMetricsKey("wk_metrics");
  EXPECT_TRUE(MetricsAccess(keyed, "Bearer wk_metrics", "10.0.0.5").ok());
  EXPECT_TRUE(MetricsAccess(keyed, "bearer   wk_metrics", "2001:db8::1").ok());
  EXPECT_FALSE(MetricsAccess(keyed, "", "10.0.0.5").ok());
  Status wrong = MetricsAccess(keyed, "Bearer wk_other", "10.0.0.5");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.message().find("wk_other"), std::string::npos) << "never echo the key";
  EXPECT_FALSE(MetricsAccess(keyed, "Basic d2s6bWV0cmljcw==", "10.0.0.5").ok());
  EXPECT_FALSE(MetricsAccess(keyed, "Bearer wk_metrics extra", "10.0.0.5").ok());
}

TEST(MetricsAccess, ALoopbackPeerThatSendsAKeyHasItChecked) {
  // A key sent from this host is still a claim: a wrong one is refused, not ignored.
  policy::Policy keyed = WithMetricsKey("wk_metrics");
  EXPECT_TRUE(MetricsAccess(keyed, "Bearer wk_metrics", "127.0.0.1").ok());
  EXPECT_FALSE(MetricsAccess(keyed, "Bearer wk_wrong", "127.0.0.1").ok());
}

}  // namespace
}  // namespace warden::gateway
