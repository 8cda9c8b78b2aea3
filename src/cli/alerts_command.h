// `warden alerts list [--json] [--tenant T] [--agent A] [--detector D] [--since WHEN] [-n N]`:
// the alerts the anomaly detectors raised (docs/monitoring.md), read from the audit log, where
// each is an entry with decision "alert" and tool "alert:DETECTOR". Newest last.
// Exit status: 0 listed (also when there are none); 2 bad input or the database could not be read.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <iostream>
#include <string>

namespace warden::cli {

class AlertsCommand {
 public:
  explicit AlertsCommand(CLI::App& app, std::ostream& out = std::cout,
                         std::ostream& err = std::cerr);
  bool parsed() const { return alerts_->parsed(); }
  int Execute();

 private:
  CLI::App *alerts_, *list_;
  std::ostream& out_;
  std::ostream& err_;
  std::string db_, tenant_, agent_, detector_, since_;
  bool json_ = false;
  size_t lines_ = 20;
};

}  // namespace warden::cli
