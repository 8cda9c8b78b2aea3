// warden's metrics in the Prometheus text exposition format (version 0.0.4), what `GET /metrics`
// serves (docs/monitoring.md). A Registry holds families of counters and histograms that code on
// the call path updates (one mutex per family, a map lookup: well under a microsecond), and
// collectors that compute gauges when a scrape asks (kill switches in force, pending approvals,
// upstream instances), so that nothing on the call path maintains them.
//
// Label cardinality is bounded by construction: each label of a family has a limit of distinct
// values (the first label's counted over the family, a later label's per value of the first:
// per tenant); a value past its limit is reported as "other", and a family past its series cap
// reports every limited label as "other". A hostile caller inventing tool names therefore grows
// no series past the limits (docs/monitoring.md, "Cardinality").
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace warden::monitor {

// Upper bounds, in seconds, of every latency histogram's buckets (and +Inf): from 5 µs (a policy
// decision) to a minute (a call that waited for a sandbox or an upstream).
inline constexpr std::array<double, 21> kLatencyBuckets = {
    0.000005, 0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
    0.025,    0.05,    0.1,      0.25,    0.5,    1,       2.5,    5,     10,    60};
// The bucket a duration of `seconds` falls in: 0 .. kLatencyBuckets.size() (the last is +Inf).
std::size_t LatencyBucket(double seconds);

// What a value past its label's limit is reported as.
inline constexpr std::string_view kOther = "other";

// One label of a family: its name and how many distinct values it keeps before "other" (0: no
// limit, for labels whose values warden itself chooses from a fixed set, such as a decision).
struct Label {
  std::string name;
  std::size_t limit = 0;
};

enum class Type { kCounter, kGauge, kHistogram };

// A family of series that share a name, a help text, a type and label names. Thread-safe.
class Family {
 public:
  Family(std::string name, std::string help, Type type, std::vector<Label> labels,
         std::size_t max_series);
  Family(const Family&) = delete;
  Family& operator=(const Family&) = delete;

  // Counters and gauges: adds `by` to the series of `values` (one per label, in order).
  void Add(std::initializer_list<std::string_view> values, double by = 1);
  // Histograms: one observation of `seconds`.
  void Observe(std::initializer_list<std::string_view> values, double seconds);

  const std::string& name() const { return name_; }
  // The family in the exposition format: HELP, TYPE, then every series in a stable order.
  void Render(std::string& out) const;
  // The value of one series as it is reported (label values after folding), for tests; a
  // histogram's count. 0 when the series does not exist.
  double Value(std::initializer_list<std::string_view> values) const;
  std::size_t series() const;

 private:
  struct Series {
    std::vector<std::string> labels;
    double value = 0;  // counter, gauge; a histogram's sum
    uint64_t count = 0;
    std::array<uint64_t, kLatencyBuckets.size() + 1> buckets{};
  };
  // The series for `values` after the limits, created when new; under mu_.
  Series& SeriesFor(std::initializer_list<std::string_view> values);
  std::vector<std::string> Fold(std::initializer_list<std::string_view> values);

  const std::string name_, help_;
  const Type type_;
  const std::vector<Label> labels_;
  const std::size_t max_series_;
  mutable std::mutex mu_;
  std::map<std::string, Series> series_;  // by the folded values, joined with '\x1f'
  // The values each limited label keeps: [label index][value of the first label ("" for it)].
  std::vector<std::map<std::string, std::set<std::string>, std::less<>>> kept_;
};

// Writes samples of a family a collector computes at scrape time.
class Exposition {
 public:
  explicit Exposition(std::string& out) : out_(out) {}
  // HELP and TYPE lines; once per family, before its samples.
  void Header(std::string_view name, std::string_view help, Type type);
  // One sample line: NAME{LABEL="VALUE",...} VALUE.
  void Sample(std::string_view name,
              std::initializer_list<std::pair<std::string_view, std::string_view>> labels,
              double value);

 private:
  std::string& out_;
};

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // The family named `name`, created on first use (later calls with the same name return it;
  // the type and labels must match, as they do when one place declares each family).
  Family& Add(const std::string& name, const std::string& help, Type type,
              std::vector<Label> labels, std::size_t max_series = 10000);

  // A collector runs at every Render and writes whole families (Header, then samples). It is
  // removed when the returned handle goes (which waits for a scrape that is running it, so
  // what it reads may be destroyed right after); a handle may outlive the registry. A collector
  // must not destroy its own handle.
  using Collector = std::function<void(Exposition&)>;
  class Handle {
   public:
    Handle() = default;
    Handle(Handle&&) noexcept = default;
    Handle& operator=(Handle&& other) noexcept {
      if (this != &other) {
        Reset();
        slot_ = std::move(other.slot_);
      }
      return *this;
    }
    ~Handle();
    void Reset();

   private:
    friend class Registry;
    struct Slot;
    std::shared_ptr<Slot> slot_;
  };
  [[nodiscard]] Handle AddCollector(Collector collect);

  // Every family, then every collector's: the body of GET /metrics.
  std::string Render() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Family>> families_;
  mutable std::vector<std::weak_ptr<Handle::Slot>> collectors_;  // pruned by Render
};

// The process's registry: what the gateway's /metrics serves and what every component counts
// into (as Prometheus client libraries have a default registry).
Registry& DefaultRegistry();

// Label values and help texts as the format allows: label values escape backslash, double
// quote and newline; bytes that are not printable or not valid UTF-8 become '?'.
std::string EscapeLabelValue(std::string_view value);

// The media type of the format.
inline constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace warden::monitor
