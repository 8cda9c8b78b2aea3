// How a microVM's egress connections cross to the host (docs/backends.md, "microvm", Network).
// The guest has no network device: its init listens on the guest's 127.0.0.1:PORT and carries each
// accepted connection over one of kEgressPorts virtio-console ports, one connection per port at a
// time; the host turns it into a connection to warden's egress proxy. Shared by the guest's init
// and the host (microvm_egress.cc); plain constants so that the static init can use it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace warden::sandbox::microvm::wire {

// Ports named "warden.egress0" .. "warden.egress7": at most this many connections at once.
constexpr int kEgressPorts = 8;
constexpr const char* kEgressPortPrefix = "warden.egress";

// A frame: one type byte, the payload length (big-endian, 16 bits), the payload.
constexpr size_t kHeaderBytes = 3;
constexpr size_t kMaxPayload = 65535;
constexpr char kOpen = 'O';  // guest -> host: a connection starts (no payload)
constexpr char kData = 'D';  // either way: bytes of the connection
constexpr char kEnd = 'E';   // either way: this direction has ended (no payload)
// A port is free for the next connection once each side has sent and received kEnd.

inline void AppendHeader(char* out, char type, size_t length) {
  out[0] = type;
  out[1] = static_cast<char>((length >> 8) & 0xff);
  out[2] = static_cast<char>(length & 0xff);
}

inline size_t PayloadLength(const char* header) {
  return (static_cast<size_t>(static_cast<unsigned char>(header[1])) << 8) | static_cast<unsigned char>(header[2]);
}

}  // namespace warden::sandbox::microvm::wire
