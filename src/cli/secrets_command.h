// `warden secrets set NAME [--tenant T] [--user U] [--upstream X]` (the value from stdin, never
// argv), `warden secrets list [--tenant T] [--json]` (names and metadata, never values),
// `warden secrets rm NAME [--tenant T] [--user U] [--upstream X]` and `warden secrets rotate
// [--signing-key]` and `warden secrets jwks` (the public keys of the tokens warden mints, as
// `warden serve` publishes them at /.well-known/jwks.json): the secret store (docs/credentials.md), found like `warden serve` finds it
// (`--config FILE`: its credentials.master_key and storage.sqlite; `--db PATH` overrides the
// file). A running gateway sees a change at its next call. Every change is an admin entry in the
// audit log (the name and scope, never the value).
// Exit status: 0 done; 1 done, but the audit entry could not be written; 2 bad input, or a store
// that could not be used; 3 `rm` of a secret that does not exist.
#pragma once

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

#include "common/status.h"

namespace warden::cli {

class SecretsCommand {
 public:
  explicit SecretsCommand(CLI::App& app, std::istream& in = std::cin, std::ostream& out = std::cout,
                          std::ostream& err = std::cerr);
  bool parsed() const { return sub_->parsed(); }
  int Execute();

 private:
  int Set();
  int List();
  int Remove();
  int Rotate();
  int Jwks();

  std::istream& in_;
  std::ostream& out_;
  std::ostream& err_;
  CLI::App* sub_ = nullptr;
  CLI::App* set_ = nullptr;
  CLI::App* list_ = nullptr;
  CLI::App* rm_ = nullptr;
  CLI::App* rotate_ = nullptr;
  CLI::App* jwks_ = nullptr;
  std::string config_, db_, name_, tenant_, user_, upstream_;
  bool json_ = false;
  bool signing_key_ = false;
};

}  // namespace warden::cli
