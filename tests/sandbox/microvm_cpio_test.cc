// The microvm backend's initramfs writer (cpio "newc") and the embedded guest init.
#include <elf.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sandbox/microvm_blob.h"
#include "sandbox/microvm_cpio.h"

namespace warden::sandbox::microvm {
namespace {

struct Entry {
  std::string name, data;
  uint32_t mode = 0;
};

// An independent reader of the format, as the kernel's unpacker walks it.
std::vector<Entry> Parse(const std::string& archive) {
  std::vector<Entry> out;
  size_t pos = 0;
  auto field = [&](int i) { return static_cast<uint32_t>(std::strtoul(archive.substr(pos + 6 + 8 * i, 8).c_str(), nullptr, 16)); };
  while (pos + 110 <= archive.size()) {
    EXPECT_EQ(archive.substr(pos, 6), "070701") << "bad magic at " << pos;
    Entry e;
    e.mode = field(1);
    uint32_t size = field(6), namesize = field(11);
    e.name = archive.substr(pos + 110, namesize - 1);
    EXPECT_EQ(archive[pos + 110 + namesize - 1], '\0');
    size_t data = (pos + 110 + namesize + 3) & ~size_t(3);
    e.data = archive.substr(data, size);
    pos = (data + size + 3) & ~size_t(3);
    if (e.name == "TRAILER!!!") {
      EXPECT_EQ(pos, archive.size()) << "bytes after the trailer";
      return out;
    }
    out.push_back(e);
  }
  ADD_FAILURE() << "no trailer";
  return out;
}

TEST(MicrovmCpio, EntriesRoundTripWithFourByteAlignment) {
  CpioWriter w;
  w.AddDirectory("etc");
  w.AddFile("etc/passwd", "root:x:0:0\n", 0644);
  w.AddFile("init", std::string("\x7f" "ELF\0odd", 8), 0755);
  w.AddSymlink("bin", "usr/bin");
  std::string archive = w.Finish();
  EXPECT_EQ(archive.size() % 4, 0u);
  auto entries = Parse(archive);
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_EQ(entries[0].name, "etc");
  EXPECT_TRUE(S_ISDIR(entries[0].mode));
  EXPECT_EQ(entries[1].data, "root:x:0:0\n");
  EXPECT_EQ(entries[1].mode, static_cast<uint32_t>(S_IFREG | 0644));
  EXPECT_EQ(entries[2].data, std::string("\x7f" "ELF\0odd", 8));
  EXPECT_EQ(entries[2].mode & 07777, 0755u);
  EXPECT_TRUE(S_ISLNK(entries[3].mode));
  EXPECT_EQ(entries[3].data, "usr/bin");
}

TEST(MicrovmCpio, WriterStartsAfreshAfterFinish) {
  CpioWriter w;
  w.AddFile("a", "1");
  w.Finish();
  w.AddFile("b", "2");
  auto entries = Parse(w.Finish());
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].name, "b");
}

TEST(MicrovmInit, EmbeddedInitIsAStaticExecutable) {
  std::string_view init = InitBinary();
  ASSERT_GT(init.size(), sizeof(Elf64_Ehdr));
  // Copied out: the embedded bytes need not be aligned for the ELF structs (UBSan says so).
  Elf64_Ehdr eh;
  std::memcpy(&eh, init.data(), sizeof eh);
  ASSERT_EQ(std::memcmp(eh.e_ident, ELFMAG, SELFMAG), 0);
  EXPECT_EQ(eh.e_type, ET_EXEC) << "the guest has no dynamic loader: init must be static, not PIE";
  for (int i = 0; i < eh.e_phnum; ++i) {
    const size_t at = eh.e_phoff + static_cast<size_t>(i) * eh.e_phentsize;
    ASSERT_LE(at + sizeof(Elf64_Phdr), init.size());
    Elf64_Phdr ph;
    std::memcpy(&ph, init.data() + at, sizeof ph);
    EXPECT_NE(ph.p_type, static_cast<uint32_t>(PT_INTERP)) << "init asks for a dynamic loader";
  }
}

}  // namespace
}  // namespace warden::sandbox::microvm
