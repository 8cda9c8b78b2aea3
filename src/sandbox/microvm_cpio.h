// A writer for the cpio "newc" format, the one the Linux kernel unpacks as an initramfs
// (Documentation/driver-api/early-userspace/buffer-format.rst). Used by the microvm backend to
// build each VM's initramfs in memory.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace warden::sandbox::microvm {

class CpioWriter {
 public:
  // Paths are relative to the archive's root ("init", "etc/passwd"); parents must come first.
  void AddDirectory(std::string_view path, uint32_t mode = 0755);
  void AddFile(std::string_view path, std::string_view content, uint32_t mode = 0644);
  void AddSymlink(std::string_view path, std::string_view target);
  // Appends the trailer and returns the archive; the writer is empty afterwards.
  std::string Finish();

 private:
  void AddEntry(std::string_view path, uint32_t mode, std::string_view data);
  std::string out_;
  uint32_t next_inode_ = 1;
};

}  // namespace warden::sandbox::microvm
