// YCSB workloads A, B, C and F with a load and a run phase, engine-neutral, as
// `sluice ycsb` runs them: the operation stream of ../STREAM.md section 8 (scrambled zipfian
// keys, YCSB's constant 0.99), one client thread, and the JSON object of `sluice ycsb --json`.
//
// An engine is any class with
//   void Put(const std::string& key, std::string_view value);      // fails the program on error
//   bool Get(const std::string& key, std::string* value);          // false: not found
//   void WaitIdle();            // returns once the flushes and compactions it started are over
//   std::string ExtraJson();    // more fields of the object: "engine":...,"options":...
// and Run<Engine>() drives it. ../leveldb/main.cc and ../rocksdb/main.cc are the adapters.
//
// Floating point: STREAM.md section 8 computes the zipfian draw with C's libm pow() on IEEE
// doubles, no fused multiply-add. Pow() below calls libm's pow through a volatile function
// pointer so that the compiler can neither constant-fold it (GCC folds pow of constants with
// MPFR, which may round differently) nor replace it; build without -ffast-math and with
// -ffp-contract=off (run does).
#ifndef SLUICE_PEERS_CPP_YCSB_H_
#define SLUICE_PEERS_CPP_YCSB_H_

#include <math.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "stream.h"

namespace ycsb {

using Clock = std::chrono::steady_clock;

// YCSB's ZipfianGenerator.ZIPFIAN_CONSTANT.
constexpr double kZipfianConstant = 0.99;
// YCSB's ScrambledZipfianGenerator.ITEM_COUNT and ZETAN = zeta(ITEM_COUNT, 0.99).
constexpr uint64_t kScrambledItems = 10000000000ull;
constexpr double kScrambledZetan = 26.46902820178302;
// Redraws of a key not yet inserted before taking the newest key (Sluice's MAX_REDRAWS).
constexpr int kMaxRedraws = 64;

// Operation codes: Sluice's `Operation` discriminants, also the byte hashed into ops_fnv1a64.
enum Op : int { kRead = 0, kUpdate = 1, kInsert = 2, kScan = 3, kReadModifyWrite = 4 };
constexpr int kOps = 5;

inline const char* OpName(int op) {
  static const char* const names[kOps] = {"read", "update", "insert", "scan",
                                          "read-modify-write"};
  return names[op];
}

// libm's pow, never constant-folded (see the header comment).
inline double Pow(double x, double y) {
  static double (*volatile libm_pow)(double, double) = ::pow;
  return libm_pow(x, y);
}

// A double in [0, 1) from the top 53 bits of one draw.
inline double NextF64(stream::SplitMix64* g) {
  return static_cast<double>(g->Next() >> 11) * (1.0 / 9007199254740992.0);
}

// YCSB's fnvhash64: FNV-1a of the 8 little-endian bytes of v, then the absolute value of the
// result read as a signed 64-bit integer (2^63 stays 2^63).
inline uint64_t YcsbFnv64(uint64_t v) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int i = 0; i < 8; i++) h = (h ^ ((v >> (8 * i)) & 0xff)) * 0x100000001b3ull;
  return (h >> 63) ? 0 - h : h;
}

// YCSB's ScrambledZipfianGenerator over [0, items): Gray et al.'s zipfian draw over
// kScrambledItems items (zeta is YCSB's constant), hashed and reduced modulo items.
class ScrambledZipfian {
 public:
  explicit ScrambledZipfian(uint64_t items) : items_(items ? items : 1) {
    const double theta = kZipfianConstant;
    const double zeta2theta = (0.0 + 1.0 / Pow(1.0, theta)) + 1.0 / Pow(2.0, theta);
    alpha_ = 1.0 / (1.0 - theta);
    eta_ = (1.0 - Pow(2.0 / static_cast<double>(kScrambledItems), 1.0 - theta)) /
           (1.0 - zeta2theta / kScrambledZetan);
    second_ = 1.0 + Pow(0.5, theta);
  }

  // The zipfian item (0 is the most popular) before scrambling.
  uint64_t Zipfian(stream::SplitMix64* g) const {
    const double u = NextF64(g);
    const double uz = u * kScrambledZetan;
    if (uz < 1.0) return 0;
    if (uz < second_) return 1;
    const double base = eta_ * u - eta_ + 1.0;
    const double spread = static_cast<double>(kScrambledItems) * Pow(base, alpha_);
    const uint64_t item = static_cast<uint64_t>(spread);
    return std::min(item, kScrambledItems - 1);
  }

  uint64_t Next(stream::SplitMix64* g) const { return YcsbFnv64(Zipfian(g)) % items_; }

  double eta() const { return eta_; }

 private:
  uint64_t items_;
  double alpha_ = 0, eta_ = 0, second_ = 0;
};

// A workload's share of each operation, indexed by Op.
struct Mix {
  double share[kOps] = {0, 0, 0, 0, 0};

  // The first operation (in Op order, skipping zero shares) whose cumulative share exceeds u;
  // the last one when rounding leaves the sum just below 1.
  int Pick(double u) const {
    double acc = 0.0;
    int last = kRead;
    for (int op = 0; op < kOps; op++) {
      if (share[op] <= 0.0) continue;
      acc += share[op];
      last = op;
      if (u < acc) return op;
    }
    return last;
  }
};

// The workloads the peers run: those without inserts or scans. False for any other name.
inline bool MixFor(const std::string& workload, Mix* mix) {
  *mix = Mix();
  if (workload == "a") {
    mix->share[kRead] = 0.5;
    mix->share[kUpdate] = 0.5;
  } else if (workload == "b") {
    mix->share[kRead] = 0.95;
    mix->share[kUpdate] = 0.05;
  } else if (workload == "c") {
    mix->share[kRead] = 1.0;
  } else if (workload == "f") {
    mix->share[kRead] = 0.5;
    mix->share[kReadModifyWrite] = 0.5;
  } else {
    return false;
  }
  return true;
}

struct Request {
  int op;
  uint64_t key;
};

// The run phase's source of operations: STREAM.md section 8.
class Chooser {
 public:
  Chooser(const Mix& mix, uint64_t records, uint64_t operations, uint64_t seed)
      : mix_(mix),
        zipf_(records + static_cast<uint64_t>(static_cast<double>(operations) *
                                              mix.share[kInsert] * 2.0)),
        g_(stream::SplitMix64::ForBenchmark(seed, 0, 0)) {}

  // The next operation, given that keys 0..inserted exist.
  Request Next(uint64_t inserted) {
    Request r{mix_.Pick(NextF64(&g_)), 0};
    if (inserted == 0) inserted = 1;
    for (int i = 0; i < kMaxRedraws; i++) {
      r.key = zipf_.Next(&g_);
      if (r.key < inserted) return r;
    }
    r.key = inserted - 1;
    return r;
  }

 private:
  Mix mix_;
  ScrambledZipfian zipf_;
  stream::SplitMix64 g_;
};

struct Config {
  std::string workload = "a";
  uint64_t records = 100000;
  uint64_t operations = 100000;
  size_t key_size = 16;
  size_t value_size = 100;
  uint64_t seed = 301;
};

// An error message, or "" when the configuration can run.
inline std::string Validate(const Config& c) {
  Mix mix;
  if (!MixFor(c.workload, &mix))
    return "unknown or unsupported YCSB workload \"" + c.workload +
           "\" (the peers run a, b, c and f: the workloads without inserts or scans)";
  if (c.records == 0) return "records must be at least 1";
  if (c.key_size < stream::DecimalDigits(c.records + c.operations - 1))
    return "key-size " + std::to_string(c.key_size) + " is too small for " +
           std::to_string(c.records + c.operations) + " key numbers";
  return "";
}

inline std::string Hex64(uint64_t x) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, x);
  return buf;
}

// --dump-ycsb-ops N: the whole run phase's operation counts and FNV-1a 64 digest (per
// operation: its Op byte, then the key number's 8 little-endian bytes), the value buffers'
// digests and the first N operations, as one JSON line; every peer prints the same bytes.
inline std::string DumpOps(const Config& c, uint64_t n) {
  Mix mix;
  MixFor(c.workload, &mix);
  Chooser chooser(mix, c.records, c.operations, c.seed);
  uint64_t counts[kOps] = {0, 0, 0, 0, 0};
  uint64_t h = 0xcbf29ce484222325ull;
  std::string first;
  for (uint64_t i = 0; i < c.operations; i++) {
    Request r = chooser.Next(c.records);
    counts[r.op]++;
    h = (h ^ static_cast<uint64_t>(r.op)) * 0x100000001b3ull;
    for (int b = 0; b < 8; b++) h = (h ^ ((r.key >> (8 * b)) & 0xff)) * 0x100000001b3ull;
    if (i < n) first += std::string(i ? ",\"" : "\"") + OpName(r.op) + " " + std::to_string(r.key) + "\"";
  }
  auto load_g = stream::SplitMix64::ForBenchmark(c.seed, 0, 0);
  auto run_g = stream::SplitMix64::ForBenchmark(c.seed, 1, 0);
  stream::ValueGenerator load_values(&load_g, c.value_size), run_values(&run_g, c.value_size);
  std::string out = "{\"workload\":\"" + c.workload + "\",\"distribution\":\"zipfian\",\"records\":" +
                    std::to_string(c.records) + ",\"operations\":" + std::to_string(c.operations) +
                    ",\"seed\":" + std::to_string(c.seed) + ",\"value_size\":" +
                    std::to_string(c.value_size) + ",\"load_value_buffer_fnv1a64\":\"" +
                    Hex64(stream::Fnv1a64(load_values.data())) +
                    "\",\"run_value_buffer_fnv1a64\":\"" + Hex64(stream::Fnv1a64(run_values.data())) +
                    "\",\"op_counts\":{";
  for (int op = 0; op < kOps; op++)
    out += std::string(op ? "," : "") + "\"" + OpName(op) + "\":" + std::to_string(counts[op]);
  return out + "},\"ops_fnv1a64\":\"" + Hex64(h) + "\",\"first_ops\":[" + first + "]}";
}

// One phase's measurements: exact latencies per operation type (sorted samples, not an HDR
// histogram) and completions per second.
class Phase {
 public:
  Phase() : start_(Clock::now()) {}

  void Record(int op, Clock::time_point t0) {
    Clock::time_point end = Clock::now();
    nanos_[op].push_back(std::max<int64_t>(
        1, std::chrono::duration_cast<std::chrono::nanoseconds>(end - t0).count()));
    size_t second = static_cast<size_t>(std::chrono::duration_cast<std::chrono::seconds>(end - start_).count());
    if (per_second_.size() <= second) per_second_.resize(second + 1, 0);
    per_second_[second]++;
  }

  void NotFound() { not_found_++; }

  // Ends the phase (its seconds run from construction to now) and returns its JSON object, with
  // the fields of Sluice's PhaseReport.
  std::string Finish(const char* name) {
    double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    uint64_t ops = 0;
    std::string operations;
    for (int op = 0; op < kOps; op++) {
      std::vector<int64_t>& v = nanos_[op];
      if (v.empty()) continue;
      ops += v.size();
      std::sort(v.begin(), v.end());
      auto at = [&](double q) {
        size_t rank = static_cast<size_t>(q * static_cast<double>(v.size()));
        return v[std::min(rank, v.size() - 1)] / 1e3;
      };
      double sum = 0;
      for (int64_t x : v) sum += static_cast<double>(x);
      char buf[400];
      std::snprintf(buf, sizeof(buf),
                    "%s{\"op\":\"%s\",\"count\":%zu,\"ops_per_sec\":%.3f,\"p50_us\":%.3f,"
                    "\"p95_us\":%.3f,\"p99_us\":%.3f,\"p999_us\":%.3f,\"max_us\":%.3f,"
                    "\"mean_us\":%.3f}",
                    operations.empty() ? "" : ",", OpName(op), v.size(),
                    seconds > 0 ? v.size() / seconds : 0.0, at(0.50), at(0.95), at(0.99),
                    at(0.999), v.back() / 1e3, sum / v.size() / 1e3);
      operations += buf;
    }
    std::string samples;
    for (size_t i = 0; i < per_second_.size(); i++)
      samples += (i ? "," : "") + std::to_string(per_second_[i]);
    char head[300];
    std::snprintf(head, sizeof(head),
                  "{\"phase\":\"%s\",\"ops\":%" PRIu64 ",\"seconds\":%.9f,\"ops_per_sec\":%.3f,"
                  "\"not_found\":%" PRIu64 ",\"stopped\":false,",
                  name, ops, seconds, seconds > 0 ? ops / seconds : 0.0, not_found_);
    return head + std::string("\"per_second\":[") + samples + "],\"operations\":[" + operations + "]}";
  }

 private:
  Clock::time_point start_;
  std::vector<int64_t> nanos_[kOps];
  std::vector<uint64_t> per_second_;
  uint64_t not_found_ = 0;
};

// Loads keys 0..records in order (values from stream position 0) and waits for the engine's
// background work, then runs the operations (values from stream position 1); returns the JSON
// object of `sluice ycsb --json` plus the engine's ExtraJson() fields. c must be valid.
template <class Engine>
std::string Run(const Config& c, Engine* e) {
  Mix mix;
  MixFor(c.workload, &mix);
  std::string key, value;
  Phase load;
  {
    auto g = stream::SplitMix64::ForBenchmark(c.seed, 0, 0);
    stream::ValueGenerator values(&g, c.value_size);
    for (uint64_t n = 0; n < c.records; n++) {
      auto t0 = Clock::now();
      stream::WriteKey(n, c.key_size, &key);
      e->Put(key, values.Generate(c.value_size));
      load.Record(kInsert, t0);
    }
    e->WaitIdle();  // The load is not over until the work it caused is, as in Sluice.
  }
  std::string load_json = load.Finish("load");

  Chooser chooser(mix, c.records, c.operations, c.seed);
  Phase run;
  {
    auto g = stream::SplitMix64::ForBenchmark(c.seed, 1, 0);
    stream::ValueGenerator values(&g, c.value_size);
    for (uint64_t i = 0; i < c.operations; i++) {
      Request r = chooser.Next(c.records);
      auto t0 = Clock::now();
      stream::WriteKey(r.key, c.key_size, &key);
      if (r.op == kUpdate) {
        e->Put(key, values.Generate(c.value_size));
      } else {
        if (!e->Get(key, &value)) run.NotFound();
        if (r.op == kReadModifyWrite) e->Put(key, values.Generate(c.value_size));
      }
      run.Record(r.op, t0);
    }
  }
  std::string run_json = run.Finish("run");

  char head[400];
  std::snprintf(head, sizeof(head),
                "{\"workload\":\"%s\",\"distribution\":\"zipfian\",\"records\":%" PRIu64
                ",\"operations\":%" PRIu64 ",\"threads\":1,\"key_size\":%zu,\"value_size\":%zu,"
                "\"seed\":%" PRIu64 ",",
                c.workload.c_str(), c.records, c.operations, c.key_size, c.value_size, c.seed);
  return head + std::string("\"load\":") + load_json + ",\"run\":" + run_json + "," +
         e->ExtraJson() + "}";
}

}  // namespace ycsb

#endif  // SLUICE_PEERS_CPP_YCSB_H_
