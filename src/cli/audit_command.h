// `warden audit verify|tail|query|export|checkpoint|prove|consistency|public-key`: reads the audit
// log that `warden serve` writes, and proves it to others (docs/audit.md, "The Merkle tree").
// Exit status: 0 done (verify: the chain is intact); 1 verify found a bad entry; 2 warden
// could not do it (no database, bad option value, unreadable store).
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <iostream>
#include <optional>
#include <string>

#include "audit/audit_log.h"

namespace warden::cli {

class AuditCommand {
 public:
  // Adds the `audit` subcommand and its subcommands to `app`. Output goes to `out`,
  // messages about failures to `err` (tests pass string streams).
  explicit AuditCommand(CLI::App& app, std::ostream& out = std::cout,
                        std::ostream& err = std::cerr);
  bool parsed() const { return sub_->parsed(); }
  // Runs the parsed subcommand; returns the exit status above.
  int Execute();

 private:
  void AddCommonOptions(CLI::App* sub, bool filters);
  int Verify();
  int List(bool tail);
  int Export();
  int SignCheckpoint();
  int Prove();
  int Consistency();
  int PublicKey();
  std::string KeyPath() const;
  // The tree of an intact chain; else prints why (as `warden audit NAME`) and sets *exit_code.
  std::optional<audit::AuditLog::Tree> IntactTree(const char* name, int* exit_code);

  CLI::App* sub_;
  CLI::App *verify_, *tail_, *query_, *export_, *checkpoint_, *prove_, *consistency_, *public_key_;
  std::ostream& out_;
  std::ostream& err_;
  std::string db_;
  bool json_ = false, newest_ = false;
  size_t count_ = 20, limit_ = 0;
  std::string format_ = "jsonl";
  std::string since_, until_, tenant_, user_, agent_, session_, tool_, decision_, kind_;
  std::string key_, origin_ = "warden-audit", out_file_, post_url_, ca_file_;
  uint64_t entry_ = 0, tree_size_ = 0, old_size_ = 0, new_size_ = 0;
};

}  // namespace warden::cli
