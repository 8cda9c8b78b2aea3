// Signed checkpoints and proofs of the audit tree: the key file's rules, the signed note, and
// `warden audit checkpoint|prove|consistency|public-key` checked by the outside verifier
// (tests/audit/verify_proof.py: Python's standard library and the openssl command, no warden),
// including against the attack the hash chain alone cannot see: a log rebuilt from scratch.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "audit/checkpoint.h"
#include "audit/merkle.h"
#include "cli_runner.h"
#include "test_support.h"

namespace warden::audit {
namespace {

using nlohmann::json;
using testing::CliRun;
using testing::RunCli;
using testing::TempDir;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string s;
  std::getline(in, s, '\0');
  return s;
}

void WriteAll(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

struct Shell {
  int code;
  std::string out;
};

Shell Sh(const std::string& command, const std::string& dir) {
  const std::string out = dir + "/sh.out";
  int rc = std::system((command + " > " + out + " 2>&1").c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, ReadAll(out)};
}

// The outside verifier, run as a third party would run it.
Shell Verifier(const std::string& args, const std::string& dir) {
  return Sh("python3 " + std::string(WARDEN_AUDIT_TEST_DIR) + "/verify_proof.py " + args, dir);
}

// Appends entries 1..n to the log at `path`; with `rewrite`, entry 2 says "allow" where the
// honest log said "deny" (what someone who controls the database wants history to say).
void Populate(const std::string& path, int n, bool rewrite = false, int first = 1) {
  auto log = testing::OpenLog(path);
  ASSERT_NE(log, nullptr);
  for (int i = first; i < first + n; ++i) {
    AuditEntry e = testing::SampleEntry(i);
    e.time = "2025-04-01T10:00:0" + std::to_string(i % 10) + ".000000Z";
    e.decision = i == 2 ? (rewrite ? "allow" : "deny") : "allow";
    ASSERT_TRUE(log->Append(e).ok());
  }
}

TEST(CheckpointKey, IsMadeOnceWithMode0600AndSignsNotesOnlyItVerifies) {
  TempDir dir;
  const std::string path = dir.path() + "/audit-checkpoint.key";
  auto key = CheckpointKey::Load(path, /*create=*/true);
  ASSERT_TRUE(key.ok()) << key.status().message();
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto again = CheckpointKey::Load(path, /*create=*/true);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->PublicKeyPem(), key->PublicKeyPem());  // loaded, not replaced

  Checkpoint c{"warden-audit", 42, LeafHash("root")};
  auto note = key->Sign(c);
  ASSERT_TRUE(note.ok());
  EXPECT_TRUE(note->starts_with(CheckpointBody(c) + "\n\xe2\x80\x94 warden-audit ")) << *note;
  auto back = VerifyCheckpoint(*note, key->PublicKeyPem());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->size, 42u);
  EXPECT_EQ(back->root, c.root);
  EXPECT_EQ(back->origin, "warden-audit");

  // Any change to what was signed: refused.
  std::string bigger = *note;
  bigger.replace(bigger.find("\n42\n"), 4, "\n43\n");
  EXPECT_NE(VerifyCheckpoint(bigger, key->PublicKeyPem()).status().message().find("does not verify"),
            std::string::npos);
  std::string other_root = *note;
  other_root[other_root.find('\n', 13) + 1] ^= 1;
  EXPECT_FALSE(VerifyCheckpoint(other_root, key->PublicKeyPem()).ok());
  // Another key's public half finds no signature of its own.
  auto other = CheckpointKey::Load(dir.path() + "/other.key", true);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(VerifyCheckpoint(*note, other->PublicKeyPem()).status().message().find("no signature by this key"),
            std::string::npos);
  EXPECT_FALSE(VerifyCheckpoint(CheckpointBody(c), key->PublicKeyPem()).ok());
  EXPECT_FALSE(key->Sign({"has space", 1, {}}).ok());
}

TEST(CheckpointKey, AReadableLinkedMissingOrForeignKeyIsRefused) {
  TempDir dir;
  const std::string path = dir.path() + "/k.key";
  ASSERT_TRUE(CheckpointKey::Load(path, true).ok());
  chmod(path.c_str(), 0644);
  auto readable = CheckpointKey::Load(path, false);
  ASSERT_FALSE(readable.ok());
  EXPECT_NE(readable.status().message().find("mode 0644"), std::string::npos) << readable.status().message();
  chmod(path.c_str(), 0600);
  const std::string link = dir.path() + "/link.key";
  ASSERT_EQ(symlink(path.c_str(), link.c_str()), 0);
  auto linked = CheckpointKey::Load(link, true);
  ASSERT_FALSE(linked.ok());
  EXPECT_NE(linked.status().message().find("symbolic link"), std::string::npos);
  EXPECT_FALSE(CheckpointKey::Load(dir.path() + "/none.key", false).ok());
  const std::string ec = dir.path() + "/ec.key";
  ASSERT_EQ(Sh("openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out " + ec +
                   " && chmod 600 " + ec, dir.path()).code, 0);
  auto foreign = CheckpointKey::Load(ec, false);
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.status().message().find("not an Ed25519 key"), std::string::npos);
}

class ProofCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("python3 -c 'import json, hashlib' >/dev/null 2>&1 && openssl version >/dev/null 2>&1") != 0)
      GTEST_SKIP() << "no python3 or openssl";
    Populate(dir_.db(), 5);
  }
  std::string P(const std::string& name) const { return dir_.path() + "/" + name; }
  // Runs a subcommand that prints JSON or a note and keeps what it printed in `file`.
  CliRun Keep(std::vector<std::string> args, const std::string& file) {
    args.push_back("--db");
    args.push_back(dir_.db());
    CliRun r = RunCli(args);
    WriteAll(P(file), r.out);
    return r;
  }
  void ExportEntry(uint64_t id, const std::string& file) {
    CliRun r = RunCli({"audit", "export", "--format", "jsonl", "--db", dir_.db()});
    std::istringstream in(r.out);
    std::string line;
    for (uint64_t i = 0; i < id; ++i) std::getline(in, line);
    WriteAll(P(file), line + "\n");
  }
  TempDir dir_;
};

TEST_F(ProofCommandTest, AThirdPartyChecksCheckpointsInclusionAndConsistencyWithoutWarden) {
  CliRun cp = RunCli({"audit", "checkpoint", "--db", dir_.db(), "--out", P("cp5")});
  ASSERT_EQ(cp.code, 0) << cp.err;
  EXPECT_TRUE(std::filesystem::exists(dir_.path() + "/var/warden/audit-checkpoint.key"));
  ASSERT_EQ(Keep({"audit", "public-key"}, "pub.pem").code, 0);
  Shell v = Verifier("checkpoint " + P("pub.pem") + " " + P("cp5"), dir_.path());
  EXPECT_EQ(v.code, 0) << v.out;
  EXPECT_NE(v.out.find("ok: warden-audit has 5 entries"), std::string::npos) << v.out;

  for (uint64_t id = 1; id <= 5; ++id) {
    CliRun proof = Keep({"audit", "prove", std::to_string(id)}, "prove.json");
    ASSERT_EQ(proof.code, 0) << proof.err;
    ExportEntry(id, "entry.json");
    v = Verifier("inclusion " + P("pub.pem") + " " + P("cp5") + " " + P("prove.json") + " " + P("entry.json"),
                 dir_.path());
    EXPECT_EQ(v.code, 0) << id << ": " << v.out;
  }
  // The proof of entry 5 does not pass for entry 4's line.
  ExportEntry(4, "entry.json");
  v = Verifier("inclusion " + P("pub.pem") + " " + P("cp5") + " " + P("prove.json") + " " + P("entry.json"),
               dir_.path());
  EXPECT_EQ(v.code, 1) << v.out;

  // The log grows; the new checkpoint provably extends the old one.
  Populate(dir_.db(), 4, false, 6);
  ASSERT_EQ(RunCli({"audit", "checkpoint", "--db", dir_.db(), "--out", P("cp9")}).code, 0);
  ASSERT_EQ(Keep({"audit", "consistency", "5", "9"}, "cons.json").code, 0);
  v = Verifier("consistency " + P("pub.pem") + " " + P("cp5") + " " + P("cp9") + " " + P("cons.json"), dir_.path());
  EXPECT_EQ(v.code, 0) << v.out;
  EXPECT_NE(v.out.find("extends the tree of 5"), std::string::npos) << v.out;
  // A proof for other sizes than the checkpoints': refused, whatever it says.
  ASSERT_EQ(Keep({"audit", "consistency", "4", "9"}, "cons4.json").code, 0);
  v = Verifier("consistency " + P("pub.pem") + " " + P("cp5") + " " + P("cp9") + " " + P("cons4.json"), dir_.path());
  EXPECT_EQ(v.code, 1) << v.out;
  // A checkpoint signed by another key: refused.
  ASSERT_EQ(RunCli({"audit", "checkpoint", "--db", dir_.db(), "--key", P("other.key"), "--out", P("cpx")}).code, 0);
  v = Verifier("checkpoint " + P("pub.pem") + " " + P("cpx"), dir_.path());
  EXPECT_EQ(v.code, 1) << v.out;
}

// Someone who controls the database rebuilds it with entry 2 changed, every hash and the head
// recomputed, and even signs new checkpoints with the log's own key: `warden audit verify` finds
// nothing, but a checkpoint exported before the rewrite catches it.
TEST_F(ProofCommandTest, ALogRebuiltFromScratchIsCaughtByACheckpointExportedBefore) {
  ASSERT_EQ(RunCli({"audit", "checkpoint", "--db", dir_.db(), "--out", P("cp5")}).code, 0);
  ASSERT_EQ(Keep({"audit", "public-key"}, "pub.pem").code, 0);

  TempDir forged;
  Populate(forged.db(), 5, /*rewrite=*/true);
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(dir_.db() + suffix);
  std::filesystem::copy_file(forged.db(), dir_.db());
  CliRun verify = RunCli({"audit", "verify", "--db", dir_.db()});
  EXPECT_EQ(verify.code, 0) << "the chain alone cannot see a rebuild: " << verify.out;

  Populate(dir_.db(), 2, false, 6);
  ASSERT_EQ(RunCli({"audit", "checkpoint", "--db", dir_.db(), "--out", P("cp7")}).code, 0);
  ASSERT_EQ(Keep({"audit", "consistency", "5", "7"}, "cons.json").code, 0);
  Shell v = Verifier("consistency " + P("pub.pem") + " " + P("cp5") + " " + P("cp7") + " " + P("cons.json"),
                     dir_.path());
  EXPECT_EQ(v.code, 1) << v.out;
  EXPECT_NE(v.out.find("was rewritten"), std::string::npos) << v.out;
  // Nor does any entry of the forged history prove into the old checkpoint.
  ASSERT_EQ(Keep({"audit", "prove", "2", "--size", "5"}, "prove.json").code, 0);
  ExportEntry(2, "entry.json");
  v = Verifier("inclusion " + P("pub.pem") + " " + P("cp5") + " " + P("prove.json") + " " + P("entry.json"),
               dir_.path());
  EXPECT_EQ(v.code, 1) << v.out;
}

TEST_F(ProofCommandTest, ABrokenChainGetsNoCheckpointOrProof) {
  testing::Tamper(dir_.db(), "UPDATE audit_entries SET tool = 'x' WHERE id = 3");
  CliRun cp = RunCli({"audit", "checkpoint", "--db", dir_.db()});
  EXPECT_EQ(cp.code, 1);
  EXPECT_NE(cp.err.find("broken at entry 3 (edited)"), std::string::npos) << cp.err;
  EXPECT_TRUE(cp.out.empty());
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/var/warden/audit-checkpoint.key"));
  EXPECT_EQ(RunCli({"audit", "prove", "1", "--db", dir_.db()}).code, 1);
  EXPECT_EQ(RunCli({"audit", "consistency", "1", "2", "--db", dir_.db()}).code, 1);
}

TEST_F(ProofCommandTest, OutOfRangeArgumentsAreErrorsNamingTheBounds) {
  CliRun r = RunCli({"audit", "prove", "6", "--db", dir_.db()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("entry 6 is not in the tree of 5 entries"), std::string::npos) << r.err;
  r = RunCli({"audit", "prove", "3", "--size", "9", "--db", dir_.db()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("the log has 5 entries"), std::string::npos) << r.err;
  r = RunCli({"audit", "consistency", "4", "3", "--db", dir_.db()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("OLD <= NEW <= 5"), std::string::npos) << r.err;
  r = RunCli({"audit", "public-key", "--db", dir_.db()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("warden audit checkpoint makes the key"), std::string::npos) << r.err;
  r = RunCli({"audit", "checkpoint", "--origin", "two words", "--db", dir_.db()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--origin"), std::string::npos) << r.err;
}

TEST_F(ProofCommandTest, ProofsMatchTheTreeComputedFromTheExport) {
  CliRun r = RunCli({"audit", "export", "--format", "jsonl", "--db", dir_.db()});
  std::vector<Digest> leaves;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) leaves.push_back(*EntryLeafHash(json::parse(line)["hash"].get<std::string>()));
  ASSERT_EQ(leaves.size(), 5u);
  json proof = json::parse(RunCli({"audit", "prove", "4", "--db", dir_.db()}).out);
  EXPECT_EQ(proof["root"], ToHex(MerkleRoot(leaves)));
  EXPECT_EQ(proof["leaf_hash"], ToHex(leaves[3]));
  EXPECT_EQ(proof["leaf_index"], 3);
  json cons = json::parse(RunCli({"audit", "consistency", "3", "5", "--db", dir_.db()}).out);
  EXPECT_EQ(cons["old_root"], ToHex(MerkleRoot(std::span<const Digest>(leaves).first(3))));
  EXPECT_EQ(cons["proof"].size(), ConsistencyProof(leaves, 3).size());
}

// A receiver the test starts on loopback (Python's http.server): it keeps each POST's body and
// answers with the status it was started with.
TEST_F(ProofCommandTest, PostSendsTheNoteAndAFailedPostIsAnError) {
  const std::string server = P("receiver.py");
  WriteAll(server, R"(
import http.server, sys
status = int(sys.argv[2])
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        open(sys.argv[1] + ".body", "wb").write(body)
        open(sys.argv[1] + ".type", "w").write(self.headers["Content-Type"])
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1] + ".port.tmp", "w").write(str(s.server_port))
__import__("os").rename(sys.argv[1] + ".port.tmp", sys.argv[1] + ".port")
s.handle_request()
)");
  for (int status : {204, 500}) {
    const std::string base = P("r" + std::to_string(status));
    pid_t pid = fork();
    if (pid == 0) {
      execlp("python3", "python3", server.c_str(), base.c_str(), std::to_string(status).c_str(), nullptr);
      _exit(127);
    }
    std::string port;
    for (int i = 0; i < 200 && port.empty(); ++i) {
      usleep(20 * 1000);
      port = ReadAll(base + ".port");
    }
    ASSERT_FALSE(port.empty()) << "the receiver did not start";
    CliRun r = RunCli({"audit", "checkpoint", "--db", dir_.db(), "--post", "http://127.0.0.1:" + port + "/checkpoints"});
    waitpid(pid, nullptr, 0);
    EXPECT_EQ(ReadAll(base + ".body"), r.out) << "the receiver got what was printed";
    EXPECT_TRUE(ReadAll(base + ".type").starts_with("text/plain"));
    if (status == 204) {
      EXPECT_EQ(r.code, 0) << r.err;
      EXPECT_TRUE(r.out.starts_with("warden-audit\n5\n")) << r.out;
    } else {
      EXPECT_EQ(r.code, 2);
      EXPECT_NE(r.err.find("--post http://127.0.0.1:" + port + ": HTTP 500"), std::string::npos) << r.err;
    }
  }
}

}  // namespace
}  // namespace warden::audit
