#include "cli/policy_command.h"

#include <iostream>

#include "policy/cases.h"
#include "policy/policy.h"

namespace warden::cli {

PolicyCommand::PolicyCommand(CLI::App& app) {
  sub_ = app.add_subcommand("policy", "Check a policy file, or test what it decides");
  sub_->require_subcommand(1);
  check_ = sub_->add_subcommand("check", "Validate FILE and print its effective rules in order");
  check_->add_option("file", check_file_, "The policy file (YAML)")->required();
  test_ = sub_->add_subcommand("test",
                               "Print the decision, risk, rule and reason for each case in CASES");
  test_->add_option("file", test_file_, "The policy file (YAML)")->required();
  test_->add_option("cases", test_cases_, "The cases file (YAML list of calls and expectations)")
      ->required();
}

int PolicyCommand::Execute() {
  if (check_->parsed()) return PolicyCheck(check_file_, std::cout, std::cerr);
  return PolicyTest(test_file_, test_cases_, std::cout, std::cerr);
}

int PolicyCheck(const std::string& file, std::ostream& out, std::ostream& err) {
  auto policy = policy::LoadPolicyFile(file);
  if (!policy.ok()) {
    err << "warden: " << policy.status().message() << "\n";
    return 1;
  }
  out << policy::Explain(*policy);
  out << "ok: " << file << " is valid (" << policy->rules.size()
      << (policy->rules.size() == 1 ? " rule" : " rules") << ")\n";
  return 0;
}

int PolicyTest(const std::string& file, const std::string& cases_file, std::ostream& out,
               std::ostream& err) {
  auto policy = policy::LoadPolicyFile(file);
  if (!policy.ok()) {
    err << "warden: " << policy.status().message() << "\n";
    return 1;
  }
  auto cases = policy::LoadCasesFile(cases_file, *policy);
  if (!cases.ok()) {
    err << "warden: " << cases.status().message() << "\n";
    return 1;
  }
  int failed = 0, checked = 0;
  for (const policy::PolicyCase& c : *cases) {
    policy::CaseOutcome outcome = policy::RunCase(*policy, c);
    const policy::Decision& d = outcome.decision;
    bool expects = c.expect_effect || c.expect_risk || c.expect_rule;
    checked += expects ? 1 : 0;
    const char* mark = !expects ? "-   " : outcome.mismatches.empty() ? "ok  " : "FAIL";
    out << mark << "  " << c.name << ": " << policy::EffectName(d.effect) << ", risk "
        << policy::RiskName(d.risk) << ", rule " << d.rule << "\n";
    out << "      reason: " << d.reason << "\n";
    for (const std::string& m : outcome.mismatches) out << "      " << m << "\n";
    if (!outcome.mismatches.empty()) ++failed;
  }
  out << cases->size() << " cases, " << checked << " with expectations: " << (checked - failed)
      << " met, " << failed << " not met\n";
  return failed == 0 ? 0 : 1;
}

}  // namespace warden::cli
