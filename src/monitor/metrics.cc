#include "monitor/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace warden::monitor {

namespace {

constexpr char kJoin = '\x1f';

// A number as the format writes it: integers without a fraction, others in shortest form.
void AppendNumber(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
    return;
  }
  if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
    return;
  }
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  if (ec != std::errc()) {
    out += "NaN";
    return;
  }
  out.append(buf, end);
}

void AppendHelp(std::string& out, std::string_view help) {
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

const char* TypeName(Type t) {
  switch (t) {
    case Type::kCounter:
      return "counter";
    case Type::kGauge:
      return "gauge";
    case Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

void AppendHeader(std::string& out, std::string_view name, std::string_view help, Type type) {
  out += "# HELP ";
  out += name;
  out += ' ';
  AppendHelp(out, help);
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += TypeName(type);
  out += '\n';
}

// Length of the valid UTF-8 sequence at s[i], or 0.
std::size_t Utf8Length(std::string_view s, std::size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  std::size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xe ? 3 : (b >> 3) == 0x1e ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  uint32_t cp = n == 1 ? b : n == 2 ? (b & 0x1f) : n == 3 ? (b & 0x0f) : (b & 0x07);
  for (std::size_t k = 1; k < n; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c >> 6) != 0x2) return 0;
    cp = (cp << 6) | (c & 0x3f);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
  if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
      (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
    return 0;
  return n;
}

void AppendLabels(std::string& out, const std::vector<Label>& names,
                  const std::vector<std::string>& values, std::string_view le = {}) {
  if (names.empty() && le.empty()) return;
  out += '{';
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i) out += ',';
    out += names[i].name;
    out += "=\"";
    out += values[i];  // escaped when the series was made
    out += '"';
  }
  if (!le.empty()) {
    if (!names.empty()) out += ',';
    out += "le=\"";
    out += le;
    out += '"';
  }
  out += '}';
}

}  // namespace

std::size_t LatencyBucket(double seconds) {
  return static_cast<std::size_t>(
      std::lower_bound(kLatencyBuckets.begin(), kLatencyBuckets.end(), seconds) -
      kLatencyBuckets.begin());
}

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (std::size_t i = 0; i < value.size();) {
    const char c = value[i];
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x80) {
      std::size_t n = Utf8Length(value, i);
      if (n == 0) {
        out += '?';
        ++i;
      } else {
        out.append(value.substr(i, n));
        i += n;
      }
      continue;
    }
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else if (b < 0x20 || b == 0x7f) {
      out += '?';
    } else {
      out += c;
    }
    ++i;
  }
  return out;
}

Family::Family(std::string name, std::string help, Type type, std::vector<Label> labels,
               std::size_t max_series)
    : name_(std::move(name)),
      help_(std::move(help)),
      type_(type),
      labels_(std::move(labels)),
      max_series_(std::max<std::size_t>(1, max_series)),
      kept_(labels_.size()) {}

std::vector<std::string> Family::Fold(std::initializer_list<std::string_view> values) {
  std::vector<std::string> out;
  out.reserve(labels_.size());
  std::size_t i = 0;
  for (std::string_view v : values) {
    if (i >= labels_.size()) break;
    const Label& label = labels_[i];
    if (label.limit == 0) {
      out.push_back(EscapeLabelValue(v));
    } else {
      // A later label's values are kept per value of the first (per tenant); the first's over
      // the family. A first label folded to "other" shares one set of kept values.
      std::string scope = i == 0 ? std::string() : out[0];
      std::set<std::string>& kept = kept_[i][scope];
      std::string escaped = EscapeLabelValue(v);
      if (kept.contains(escaped)) {
        out.push_back(std::move(escaped));
      } else if (kept.size() < label.limit && escaped != kOther) {
        kept.insert(escaped);
        out.push_back(std::move(escaped));
      } else {
        out.emplace_back(kOther);
      }
    }
    ++i;
  }
  while (out.size() < labels_.size()) out.emplace_back();  // a caller that gave too few
  return out;
}

Family::Series& Family::SeriesFor(std::initializer_list<std::string_view> values) {
  // Fast path: the series exists under the values as given (the usual case).
  std::string key;
  bool plain = true;
  std::size_t n = 0;
  for (std::string_view v : values) {
    if (n++) key += kJoin;
    key.append(v);
    for (char c : v) {
      const auto b = static_cast<unsigned char>(c);
      if (b < 0x20 || b >= 0x7f || c == '\\' || c == '"') plain = false;
    }
  }
  if (plain && values.size() == labels_.size()) {
    if (auto it = series_.find(key); it != series_.end()) return it->second;
  }
  std::vector<std::string> folded = Fold(values);
  if (series_.size() >= max_series_) {
    // Past the cap: every limited label is "other" (a bounded set: the unlimited labels are
    // warden's own enumerations).
    for (std::size_t i = 0; i < folded.size(); ++i) {
      if (labels_[i].limit != 0) folded[i] = std::string(kOther);
    }
  }
  std::string folded_key;
  for (std::size_t i = 0; i < folded.size(); ++i) {
    if (i) folded_key += kJoin;
    folded_key += folded[i];
  }
  auto [it, inserted] = series_.try_emplace(folded_key);
  if (inserted) it->second.labels = std::move(folded);
  return it->second;
}

void Family::Add(std::initializer_list<std::string_view> values, double by) {
  std::lock_guard lock(mu_);
  SeriesFor(values).value += by;
}

void Family::Observe(std::initializer_list<std::string_view> values, double seconds) {
  std::lock_guard lock(mu_);
  Series& s = SeriesFor(values);
  s.value += seconds;
  ++s.count;
  ++s.buckets[LatencyBucket(seconds)];
}

double Family::Value(std::initializer_list<std::string_view> values) const {
  std::string key;
  std::size_t i = 0;
  for (std::string_view v : values) {
    if (i++) key += kJoin;
    key += EscapeLabelValue(v);
  }
  std::lock_guard lock(mu_);
  auto it = series_.find(key);
  if (it == series_.end()) return 0;
  return type_ == Type::kHistogram ? static_cast<double>(it->second.count) : it->second.value;
}

std::size_t Family::series() const {
  std::lock_guard lock(mu_);
  return series_.size();
}

void Family::Render(std::string& out) const {
  AppendHeader(out, name_, help_, type_);
  std::lock_guard lock(mu_);
  for (const auto& [key, s] : series_) {
    if (type_ != Type::kHistogram) {
      out += name_;
      AppendLabels(out, labels_, s.labels);
      out += ' ';
      AppendNumber(out, s.value);
      out += '\n';
      continue;
    }
    uint64_t cumulative = 0;
    for (std::size_t b = 0; b <= kLatencyBuckets.size(); ++b) {
      cumulative += s.buckets[b];
      std::string le;
      if (b < kLatencyBuckets.size()) {
        AppendNumber(le, kLatencyBuckets[b]);
      } else {
        le = "+Inf";
      }
      out += name_;
      out += "_bucket";
      AppendLabels(out, labels_, s.labels, le);
      out += ' ';
      AppendNumber(out, static_cast<double>(cumulative));
      out += '\n';
    }
    out += name_;
    out += "_sum";
    AppendLabels(out, labels_, s.labels);
    out += ' ';
    AppendNumber(out, s.value);
    out += '\n';
    out += name_;
    out += "_count";
    AppendLabels(out, labels_, s.labels);
    out += ' ';
    AppendNumber(out, static_cast<double>(s.count));
    out += '\n';
  }
}

void Exposition::Header(std::string_view name, std::string_view help, Type type) {
  AppendHeader(out_, name, help, type);
}

void Exposition::Sample(std::string_view name,
                        std::initializer_list<std::pair<std::string_view, std::string_view>> labels,
                        double value) {
  out_ += name;
  if (labels.size() != 0) {
    out_ += '{';
    bool first = true;
    for (const auto& [k, v] : labels) {
      if (!first) out_ += ',';
      first = false;
      out_ += k;
      out_ += "=\"";
      out_ += EscapeLabelValue(v);
      out_ += '"';
    }
    out_ += '}';
  }
  out_ += ' ';
  AppendNumber(out_, value);
  out_ += '\n';
}

struct Registry::Handle::Slot {
  std::mutex mu;  // held while the collector runs: Reset waits for a scrape in progress
  Collector collect;
};

Registry::Handle::~Handle() { Reset(); }

void Registry::Handle::Reset() {
  if (!slot_) return;
  {
    std::lock_guard lock(slot_->mu);
    slot_->collect = nullptr;
  }
  slot_.reset();
}

Family& Registry::Add(const std::string& name, const std::string& help, Type type,
                      std::vector<Label> labels, std::size_t max_series) {
  std::lock_guard lock(mu_);
  auto it = families_.find(name);
  if (it == families_.end()) {
    it = families_
             .emplace(name, std::make_unique<Family>(name, help, type, std::move(labels),
                                                     max_series))
             .first;
  }
  return *it->second;
}

Registry::Handle Registry::AddCollector(Collector collect) {
  Handle h;
  h.slot_ = std::make_shared<Handle::Slot>();
  h.slot_->collect = std::move(collect);
  std::lock_guard lock(mu_);
  collectors_.push_back(h.slot_);
  return h;
}

std::string Registry::Render() const {
  std::string out;
  std::vector<std::shared_ptr<Handle::Slot>> live;
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, family] : families_) family->Render(out);
    std::erase_if(collectors_, [](const auto& w) { return w.expired(); });
    for (const auto& w : collectors_)
      if (auto s = w.lock()) live.push_back(std::move(s));
  }
  // Outside the lock: a collector may take its own component's locks.
  Exposition e(out);
  for (const auto& s : live) {
    std::lock_guard lock(s->mu);
    if (s->collect) s->collect(e);
  }
  return out;
}

Registry& DefaultRegistry() {
  static Registry* registry = new Registry();  // never destroyed: threads may count at exit
  return *registry;
}

}  // namespace warden::monitor
