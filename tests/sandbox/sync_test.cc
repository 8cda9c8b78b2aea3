// The supervisor's side of the sync channel (sync::Gate): what a sandbox's init may send, and when.
// Code injected into init after the command starts could send anything on init's channel; the
// gate is what makes the supervisor refuse it (the cold supervisor and the pool server both use
// it, and kill the sandbox as a setup error when it refuses).
#include "sandbox/sync.h"

#include <gtest/gtest.h>

namespace warden::sandbox::sync {
namespace {

TEST(SyncGate, AColdRunsMessagesAreAccepted) {
  Gate gate;
  for (Type t : {kNote, kLandlock, kSocket, kSocket, kNotifyFd, kReady, kExecError, kExit}) {
    EXPECT_TRUE(gate.Admit(t).ok()) << static_cast<char>(t);
  }
}

TEST(SyncGate, APooledRunsMessagesAreAccepted) {
  Gate gate;
  for (Type t : {kNote, kLandlock, kNotifyFd, kReady, kSetupError}) {
    EXPECT_TRUE(gate.Admit(t).ok()) << static_cast<char>(t);
  }
}

// The issue-10 attack: a forged seccomp listener sent once the command runs would make the
// supervisor drop the real one, after which the sandbox can install its own and answer
// "continue" for refused syscalls.
TEST(SyncGate, ANotifyFdAfterReadyIsAnAttack) {
  Gate gate;
  ASSERT_TRUE(gate.Admit(kNotifyFd).ok());
  ASSERT_TRUE(gate.Admit(kReady).ok());
  Status st = gate.Admit(kNotifyFd);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'F'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("attack"), std::string::npos) << st.message();
}

TEST(SyncGate, ANotifyFdWhereNoneWasSentIsStillRefusedAfterReady) {
  Gate gate;  // a kernel without listeners: init sent none before its ready
  ASSERT_TRUE(gate.Admit(kReady).ok());
  EXPECT_FALSE(gate.Admit(kNotifyFd).ok());
}

TEST(SyncGate, ASecondNotifyFdIsRefused) {
  Gate gate;
  ASSERT_TRUE(gate.Admit(kNotifyFd).ok());
  EXPECT_FALSE(gate.Admit(kNotifyFd).ok());
}

TEST(SyncGate, BuildPhaseMessagesAfterReadyAreRefused) {
  for (Type t : {kNote, kLandlock, kSocket, kReady, kGo}) {
    Gate gate;
    ASSERT_TRUE(gate.Admit(kReady).ok());
    EXPECT_FALSE(gate.Admit(t).ok()) << static_cast<char>(t);
  }
}

TEST(SyncGate, TheEndIsReportedOnceAndOnlyAfterReady) {
  Gate early;
  EXPECT_FALSE(early.Admit(kExit).ok());
  Gate gate;
  ASSERT_TRUE(gate.Admit(kReady).ok());
  ASSERT_TRUE(gate.Admit(kExit).ok());
  EXPECT_FALSE(gate.Admit(kExit).ok());
  EXPECT_FALSE(gate.Admit(kExecError).ok());
  EXPECT_FALSE(gate.Admit(kSetupError).ok());
}

TEST(SyncGate, UnknownTypesAreRefused) {
  Gate gate;
  EXPECT_FALSE(gate.Admit(static_cast<Type>('Z')).ok());
}

}  // namespace
}  // namespace warden::sandbox::sync
