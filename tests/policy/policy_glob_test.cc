#include <gtest/gtest.h>

#include "policy/glob.h"

namespace warden::policy {
namespace {

TEST(GlobTest, ExactNameMatchesOnlyItself) {
  Glob g("mail__send_email");
  EXPECT_TRUE(g.is_literal());
  EXPECT_TRUE(g.Matches("mail__send_email"));
  EXPECT_FALSE(g.Matches("mail__send_email2"));
  EXPECT_FALSE(g.Matches("mail__send_emai"));
}

TEST(GlobTest, StarMatchesAnyRunIncludingNone) {
  Glob g("mail__read_*");
  EXPECT_EQ(g.literal_prefix(), "mail__read_");
  EXPECT_TRUE(g.Matches("mail__read_"));
  EXPECT_TRUE(g.Matches("mail__read_inbox"));
  EXPECT_FALSE(g.Matches("mail__write_inbox"));
}

TEST(GlobTest, LeadingAndInnerStars) {
  Glob g("*__delete_*");
  EXPECT_EQ(g.literal_prefix(), "");
  EXPECT_TRUE(g.Matches("tracker__delete_issue"));
  EXPECT_TRUE(g.Matches("__delete_"));
  EXPECT_FALSE(g.Matches("tracker__undelete"));
  EXPECT_TRUE(Glob("a*b*c").Matches("aXXbYYbZc"));
  EXPECT_FALSE(Glob("a*b*c").Matches("aXXbYY"));
  EXPECT_TRUE(Glob("*suffix").Matches("with_suffix"));
}

TEST(GlobTest, QuestionMarkMatchesExactlyOneCharacter) {
  Glob g("fs__rea?");
  EXPECT_TRUE(g.Matches("fs__read"));
  EXPECT_FALSE(g.Matches("fs__rea"));
  EXPECT_FALSE(g.Matches("fs__reads"));
}

TEST(GlobTest, BracketsAreLiteral) {
  EXPECT_TRUE(Glob("a[b]").Matches("a[b]"));
  EXPECT_FALSE(Glob("a[b]").Matches("ab"));
}

TEST(GlobTest, DefaultAndStarMatchEverythingEvenEmpty) {
  EXPECT_TRUE(Glob().Matches(""));
  EXPECT_TRUE(Glob("*").Matches("anything"));
  EXPECT_TRUE(Glob("**").matches_all());
}

TEST(GlobTest, ManyStarsOnALongNameStayFast) {
  // A backtracking matcher would take exponential time here.
  Glob g("*a*a*a*a*a*a*a*a*a*b");
  std::string name(5000, 'a');
  EXPECT_FALSE(g.Matches(name));
}

TEST(GlobTest, CoveredByRecognisesPrefixesAndExactNames) {
  EXPECT_TRUE(Glob("mail__read_inbox").CoveredBy(Glob("mail__*")));
  EXPECT_TRUE(Glob("mail__read_*").CoveredBy(Glob("mail__*")));
  EXPECT_TRUE(Glob("x").CoveredBy(Glob("*")));
  EXPECT_FALSE(Glob("mail__*").CoveredBy(Glob("mail__read_*")));
  EXPECT_FALSE(Glob("*__delete_*").CoveredBy(Glob("mail__*")));
}

}  // namespace
}  // namespace warden::policy
