#include "sandbox/options.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string_view>

namespace warden::sandbox {

bool ValidEnvName(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name) {
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

namespace {

constexpr const char* kCredentialSyntax = "expected ENV=HOST[:PORT] or ENV=https://HOST[:PORT], then optionally ;header=NAME and ;template=TEXT";

}  // namespace

namespace {

std::string LowerAscii(std::string text) {
  for (auto& ch : text) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return text;
}

}  // namespace

Result<CredentialPlacement> CheckCredentialPlacement(const std::string& what, std::string header,
                                                     std::string value_template) {
  CredentialPlacement p;
  p.header = header.empty() ? std::string(kDefaultCredentialHeader) : std::move(header);
  for (char ch : p.header) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) &&
        std::string_view("!#$%&'*+-.^_`|~").find(ch) == std::string_view::npos)
      return Status::Error(what + ": header '" + p.header +
                           "' is not a field name (letters, digits and !#$%&'*+-.^_`|~)");
  }
  const std::string lower = LowerAscii(p.header);
  static constexpr std::string_view kManaged[] = {"host",       "content-length", "transfer-encoding",
                                                  "connection", "keep-alive",     "te",
                                                  "trailer",    "upgrade",        "accept-encoding"};
  if (std::find(std::begin(kManaged), std::end(kManaged), lower) != std::end(kManaged) ||
      lower.starts_with("proxy-"))
    return Status::Error(what + ": header " + p.header +
                         " is managed by the proxy (framing, hop-by-hop or encoding); name another");
  if (value_template.empty())
    value_template = lower == LowerAscii(std::string(kDefaultCredentialHeader))
                         ? std::string(kDefaultAuthorizationTemplate)
                         : "{}";
  const size_t first = value_template.find("{}");
  if (first == std::string::npos || value_template.find("{}", first + 2) != std::string::npos)
    return Status::Error(what + ": template '" + value_template +
                         "' must hold {} (where the value goes) exactly once");
  for (unsigned char ch : value_template) {
    if (ch < 0x20 || ch == 0x7f || ch == ';')
      return Status::Error(what + ": the template holds a control character or ';'");
  }
  p.value_template = std::move(value_template);
  return p;
}

Result<EgressCredentialSpec> ParseEgressCredentialSpec(const std::string& text) {
  const std::string what = "--egress-credential " + text;
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) return Status::Error(what + ": " + kCredentialSyntax);
  EgressCredentialSpec c;
  c.env = text.substr(0, eq);
  std::string target = text.substr(eq + 1);
  // ;header=NAME;template=TEXT after the destination
  for (size_t semi = target.find(';'); semi != std::string::npos; semi = target.find(';')) {
    std::string option = target.substr(semi + 1);
    const size_t next = option.find(';');
    target = target.substr(0, semi) + (next == std::string::npos ? "" : option.substr(next));
    option = option.substr(0, next);
    const size_t oeq = option.find('=');
    const std::string key = option.substr(0, oeq), value = oeq == std::string::npos ? "" : option.substr(oeq + 1);
    std::string* field = key == "header" ? &c.header : key == "template" ? &c.value_template : nullptr;
    if (field == nullptr || oeq == std::string::npos || value.empty())
      return Status::Error(what + ": unknown option '" + option + "' (" + kCredentialSyntax + ")");
    if (!field->empty()) return Status::Error(what + ": " + key + " given twice");
    *field = value;
  }
  if (auto placed = CheckCredentialPlacement("--egress-credential " + c.env, c.header, c.value_template);
      !placed)
    return placed.status();
  if (target.starts_with("https://")) {
    c.tls = true;
    c.port = 443;
    target = target.substr(8);
    if (!target.empty() && target.back() == '/') target.pop_back();
  } else if (target.find("://") != std::string::npos) {
    return Status::Error(what + ": the only scheme is https:// (plain HTTP is HOST[:PORT])");
  }
  // HOST, HOST:PORT, [V6]:PORT
  auto colon = target.rfind(':');
  const bool bracketed = !target.empty() && target[0] == '[';
  if (colon != std::string::npos && (!bracketed || target[colon - 1] == ']')) {
    std::string port = target.substr(colon + 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos || std::stoul(port) == 0 ||
        std::stoul(port) > 65535)
      return Status::Error(what + ": bad port '" + port + "'");
    c.port = static_cast<uint16_t>(std::stoul(port));
    target.resize(colon);
  }
  if (bracketed && target.size() > 2 && target.back() == ']') target = target.substr(1, target.size() - 2);
  if (target.empty()) return Status::Error(what + ": " + kCredentialSyntax);
  c.host = target;
  return c;
}

std::string EgressCredentialArg(const EgressCredentialSpec& c) {
  const bool v6 = c.host.find(':') != std::string::npos;
  return c.env + "=" + (c.tls ? "https://" : "") + (v6 ? "[" + c.host + "]" : c.host) + ":" + std::to_string(c.port) +
         (c.header.empty() ? "" : ";header=" + c.header) + (c.value_template.empty() ? "" : ";template=" + c.value_template);
}
namespace {

// Splits "12.5k" into 12.5 and "k". Returns false when the number part is missing or malformed.
bool SplitNumber(const std::string& text, double* number, std::string* suffix) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) return false;
  std::string num = text.substr(0, i);
  if (num.find('.') != num.rfind('.')) return false;
  char* end = nullptr;
  *number = std::strtod(num.c_str(), &end);
  if (end != num.c_str() + num.size() || !std::isfinite(*number)) return false;
  *suffix = text.substr(i);
  for (auto& c : *suffix) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return true;
}

}  // namespace

Result<uint64_t> ParseSize(const std::string& text) {
  double number = 0;
  std::string suffix;
  if (!SplitNumber(text, &number, &suffix)) {
    return Status::Error("invalid size '" + text + "': expected a number with an optional unit (k, M, G), e.g. 512M");
  }
  double scale = 0;
  if (suffix.empty() || suffix == "b") scale = 1;
  else if (suffix == "k" || suffix == "kb" || suffix == "kib") scale = 1024.0;
  else if (suffix == "m" || suffix == "mb" || suffix == "mib") scale = 1024.0 * 1024;
  else if (suffix == "g" || suffix == "gb" || suffix == "gib") scale = 1024.0 * 1024 * 1024;
  else if (suffix == "t" || suffix == "tb" || suffix == "tib") scale = 1024.0 * 1024 * 1024 * 1024;
  else return Status::Error("invalid size '" + text + "': unknown unit '" + suffix + "' (use k, M, G or T)");
  double bytes = number * scale;
  if (bytes >= 18446744073709551615.0) return Status::Error("invalid size '" + text + "': too large");
  return static_cast<uint64_t>(bytes);
}

Result<uint64_t> ParseDuration(const std::string& text) {
  double number = 0;
  std::string suffix;
  if (!SplitNumber(text, &number, &suffix)) {
    return Status::Error("invalid duration '" + text + "': expected a number with an optional unit (ms, s, m, h), e.g. 30s");
  }
  double scale = 0;
  if (suffix.empty() || suffix == "s") scale = 1000;
  else if (suffix == "ms") scale = 1;
  else if (suffix == "m") scale = 60'000;
  else if (suffix == "h") scale = 3'600'000;
  else return Status::Error("invalid duration '" + text + "': unknown unit '" + suffix + "' (use ms, s, m or h)");
  double ms = number * scale;
  if (ms > 1e15) return Status::Error("invalid duration '" + text + "': too large");
  if (number > 0 && ms < 1) ms = 1;
  return static_cast<uint64_t>(ms);
}

std::string NormalInsidePath(const std::string& path) {
  if (path.empty() || path[0] != '/') return path;
  std::string out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    const std::string part = path.substr(start, slash - start);
    if (!part.empty() && part != ".") out += "/" + part;
    start = slash + 1;
  }
  return out.empty() ? "/" : out;
}

Status Validate(const Options& o) {
  if (o.argv.empty()) return Status::Error("no command given: usage: warden run [OPTIONS] -- COMMAND [ARG...]");
  if (o.backend != "native" && o.backend != "gvisor" && o.backend != "microvm") {
    return Status::Error("--backend " + o.backend + " is unknown: use native, gvisor or microvm");
  }
  if (o.memory_bytes != 0 && o.memory_bytes < (4ull << 20)) {
    return Status::Error("--memory " + std::to_string(o.memory_bytes) + " bytes is too small to start a process: use at least 4M");
  }
  if (o.pids == 1) return Status::Error("--pids 1 leaves no room for the command (the sandbox's init counts too): use at least 2");
  if (o.tmpfs_bytes < 4096) return Status::Error("--tmpfs-size must be at least 4k");
  if (o.open_files < 8) return Status::Error("open files limit must be at least 8");
  for (const auto& b : o.binds) {
    const char* flag = b.writable ? "--rw" : "--ro";
    if (b.host.empty()) return Status::Error(std::string(flag) + ": empty host path");
    if (!b.inside.empty() && b.inside[0] != '/') {
      return Status::Error(std::string(flag) + " " + b.host + ":" + b.inside + ": the path inside must be absolute");
    }
    // Checked in the form the mount code uses: "/proc/", "/dev/." and "//" are /proc, /dev, /.
    const std::string inside = NormalInsidePath(b.inside);
    if ((inside + "/").find("/../") != std::string::npos) {
      return Status::Error(std::string(flag) + " " + b.host + ":" + b.inside + ": '..' is not allowed in the path inside");
    }
    for (const char* reserved : {"/proc", "/dev", "/"}) {
      if (inside == reserved) {
        return Status::Error(std::string(flag) + " " + b.host + ":" + b.inside + ": " + reserved + " is managed by warden and cannot be replaced");
      }
    }
    if (inside.starts_with("/proc/")) {
      return Status::Error(std::string(flag) + " " + b.host + ":" + b.inside + ": the sandbox's /proc is managed by warden; nothing can be bound inside it");
    }
  }
  for (const auto& p : o.protect) {
    if (p.empty() || p[0] == '/' || p == ".." || p.starts_with("../") || p.find("/../") != std::string::npos || p.ends_with("/..")) {
      return Status::Error("protect path '" + p + "' must be relative to a --rw bind and must not contain '..'");
    }
  }
  if (!o.workdir.empty() && o.workdir[0] != '/') return Status::Error("--workdir " + o.workdir + ": must be an absolute path inside the sandbox");
  for (const auto& [name, value] : o.env) {
    if (name.empty() || name.find('=') != std::string::npos) return Status::Error("--env '" + name + "': invalid variable name");
  }
  if (o.net == NetMode::kNone && !o.allow.empty()) return Status::Error("--allow needs --net proxy (or no --net at all)");
  for (size_t i = 0; i < o.egress_credentials.size(); ++i) {
    const EgressCredentialSpec& c = o.egress_credentials[i];
    const std::string what = "--egress-credential " + c.env;
    if (!ValidEnvName(c.env)) return Status::Error(what + ": expected a variable name (letters, digits, _)");
    if (o.net != NetMode::kProxy) return Status::Error(what + ": needs --net proxy and an --allow entry for " + c.host);
    if (c.host.empty() || c.port == 0) return Status::Error(what + ": expected HOST[:PORT]");
    if (c.tls && (c.host.find(':') != std::string::npos || c.host.find_first_not_of("0123456789.") == std::string::npos))
      return Status::Error(what + ": a credential over HTTPS needs a host name, not an address (its certificate names the host)");
    if (o.env.count(c.env) || std::find(o.inherit_env.begin(), o.inherit_env.end(), c.env) != o.inherit_env.end())
      return Status::Error(what + ": the variable is also set by --env or --env-inherit; the sandbox may only see the placeholder");
    auto placed = CheckCredentialPlacement(what, c.header, c.value_template);
    if (!placed) return placed.status();
    auto header_of = [](const EgressCredentialSpec& s) {
      return LowerAscii(s.header.empty() ? std::string(kDefaultCredentialHeader) : s.header);
    };
    for (size_t j = 0; j < i; ++j) {
      const EgressCredentialSpec& other = o.egress_credentials[j];
      if (other.env == c.env) return Status::Error(what + ": named twice");
      if (other.host == c.host && other.port == c.port && other.tls == c.tls && header_of(other) == header_of(c))
        return Status::Error(what + ": credential " + other.env + " already goes in header " + header_of(c) + " to " + c.host + ":" +
                             std::to_string(c.port) + " (name another header)");
    }
  }
  return Status::Ok();
}

}  // namespace warden::sandbox
