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
  // Over the sequences: exfiltrating calls (attack: true) and how many were stopped; the other
  // calls and how many needed a person (or were refused).
  int attacks = 0, stopped = 0, benign = 0, benign_stopped = 0;
  for (const policy::PolicyCase& c : *cases) {
    policy::CaseOutcome outcome = policy::RunCase(*policy, c);
    if (c.steps.empty()) {
      const policy::Decision& d = outcome.decision;
      bool expects = c.expect.any();
      checked += expects ? 1 : 0;
      const char* mark = !expects ? "-   " : outcome.mismatches.empty() ? "ok  " : "FAIL";
      out << mark << "  " << c.name << ": " << policy::EffectName(d.effect) << ", risk "
          << policy::RiskName(d.risk) << ", rule " << d.rule << "\n";
      out << "      reason: " << d.reason << "\n";
      for (const std::string& m : outcome.mismatches) out << "      " << m << "\n";
      if (!outcome.mismatches.empty()) ++failed;
      continue;
    }
    bool expects = false;
    for (const policy::CaseStep& step : c.steps) expects = expects || step.expect.any();
    checked += expects ? 1 : 0;
    const char* mark = !expects ? "-   " : outcome.mismatches.empty() ? "ok  " : "FAIL";
    out << mark << "  " << c.name << ": " << c.steps.size() << " calls\n";
    for (size_t i = 0; i < c.steps.size(); ++i) {
      const policy::CaseStep& step = c.steps[i];
      const policy::StepOutcome& s = outcome.steps[i];
      const bool held = s.effect != policy::Effect::kAllow;
      if (step.attack) {
        ++attacks;
        stopped += held ? 1 : 0;
      } else {
        ++benign;
        benign_stopped += held ? 1 : 0;
      }
      out << "      " << (i + 1) << ". " << step.call.tool << ": " << policy::EffectName(s.effect)
          << ", rule " << s.rule << (step.attack ? " [attack]" : "") << "\n";
      if (s.trifecta.effect != policy::Effect::kAllow) {
        out << "         trifecta: " << s.trifecta.reason << "\n";
      } else if (s.effect != policy::Effect::kAllow) {
        out << "         reason: " << s.decision.reason << "\n";
      }
      for (const std::string& m : s.mismatches) out << "         " << m << "\n";
    }
    if (!outcome.mismatches.empty()) ++failed;
  }
  out << cases->size() << " cases, " << checked << " with expectations: " << (checked - failed)
      << " met, " << failed << " not met\n";
  if (attacks + benign > 0 && (attacks > 0 || benign_stopped > 0))
    out << "sequences: " << stopped << " of " << attacks << " attack calls stopped; "
        << benign_stopped << " of " << benign << " other calls needed a person or were refused\n";
  return failed == 0 ? 0 : 1;
}

}  // namespace warden::cli
