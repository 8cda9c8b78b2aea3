// The microVM guest's init (microvm_init/init.cc), built static and embedded here at build time,
// so that warden needs no file beside itself to build a VM's initramfs.
#include "sandbox/microvm_blob.h"

#ifndef WARDEN_MICROVM_INIT_PATH
#error "WARDEN_MICROVM_INIT_PATH must name the built microvm init (src/sandbox/microvm_init/CMakeLists.txt)"
#endif

asm(".section .rodata.warden_microvm_init,\"a\"\n"
    ".global warden_microvm_init_begin\n"
    "warden_microvm_init_begin:\n"
    ".incbin \"" WARDEN_MICROVM_INIT_PATH "\"\n"
    ".global warden_microvm_init_end\n"
    "warden_microvm_init_end:\n"
    ".previous\n");

extern "C" const char warden_microvm_init_begin[];
extern "C" const char warden_microvm_init_end[];

namespace warden::sandbox::microvm {

std::string_view InitBinary() {
  return std::string_view(warden_microvm_init_begin, warden_microvm_init_end - warden_microvm_init_begin);
}

}  // namespace warden::sandbox::microvm
