#include "sandbox/microvm_cpio.h"

#include <sys/stat.h>

#include <cstdio>

namespace warden::sandbox::microvm {

namespace {

void PadTo4(std::string* s) {
  while (s->size() % 4 != 0) s->push_back('\0');
}

}  // namespace

void CpioWriter::AddEntry(std::string_view path, uint32_t mode, std::string_view data) {
  // newc header: magic then 13 fields of 8 hex digits; name (with its NUL) and data each padded
  // to a multiple of 4 bytes counted from the start of the archive.
  const uint32_t fields[13] = {next_inode_++, mode, 0, 0, 1, 0, static_cast<uint32_t>(data.size()),
                               0, 0, 0, 0, static_cast<uint32_t>(path.size() + 1), 0};
  out_ += "070701";
  char hex[9];
  for (uint32_t f : fields) {
    snprintf(hex, sizeof(hex), "%08X", f);
    out_.append(hex, 8);
  }
  out_.append(path);
  out_.push_back('\0');
  PadTo4(&out_);
  out_.append(data);
  PadTo4(&out_);
}

void CpioWriter::AddDirectory(std::string_view path, uint32_t mode) { AddEntry(path, S_IFDIR | mode, {}); }

void CpioWriter::AddFile(std::string_view path, std::string_view content, uint32_t mode) {
  AddEntry(path, S_IFREG | mode, content);
}

void CpioWriter::AddSymlink(std::string_view path, std::string_view target) {
  AddEntry(path, S_IFLNK | 0777, target);
}

std::string CpioWriter::Finish() {
  AddEntry("TRAILER!!!", 0, {});
  std::string done;
  done.swap(out_);
  next_inode_ = 1;
  return done;
}

}  // namespace warden::sandbox::microvm
