// leveldb-bench runs Sluice's db_bench-style workloads (fillseq, fillrandom, overwrite,
// readrandom, compact) on LevelDB (Debian's libleveldb-dev 1.23, which packages no db_bench)
// and prints one JSON object per benchmark with the field names of `sluice bench --json`, as
// ../pebble and ../fjall do. Keys and values follow ../STREAM.md (stream.h).
//
// Build (benches/peers/run does this):
//   g++ -O2 -std=c++17 -o leveldb-bench main.cc -lleveldb
//
// Flags are the other peers' (--flag VALUE or --flag=VALUE); see ../README.md. LevelDB has no
// lz4 (snappy is used), no switch for automatic compactions, and one background thread: each
// line's settings_differ says so in full.
#include <leveldb/cache.h>
#include <leveldb/db.h>
#include <leveldb/filter_policy.h>
#include <leveldb/write_batch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "stream.h"

namespace {

using Clock = std::chrono::steady_clock;

const char* const kBenchmarks[] = {"fillseq", "fillrandom", "overwrite", "readrandom",
                                   "compact"};

// LevelDB 1.23's compile-time constants (db/dbformat.h, db/version_set.cc), mirrored to tell
// when its background thread still has work (WaitIdle).
constexpr int kNumLevels = 7;
constexpr int kL0CompactionTrigger = 4;
constexpr double kL1MaxBytes = 10.0 * 1048576.0;

struct Config {
  std::string db;
  std::vector<std::string> benchmarks = {"fillseq", "fillrandom", "overwrite", "readrandom",
                                         "compact"};
  uint64_t num = 1000000;
  int64_t reads = -1;
  size_t key_size = 16;
  size_t value_size = 100;
  uint64_t seed = 301;
  std::string compression = "lz4";
  size_t block_size = 4096;
  int bloom_bits = 10;
  size_t write_buffer_size = 64 << 20;
  size_t target_file_size = 64 << 20;
  size_t cache_size = 64 << 20;
  bool disable_auto_compactions = false;
  bool parallel_compact = true;
  int compaction_threads = 2;
  size_t dump_keys = 0;
  bool self_test = false;

  uint64_t Reads() const { return reads < 0 ? num : static_cast<uint64_t>(reads); }
};

[[noreturn]] void Fail(const std::string& msg) {
  std::fprintf(stderr, "leveldb-bench: %s\n", msg.c_str());
  std::exit(1);
}

uint64_t ParseU64(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  unsigned long long x = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || v[0] == '-') Fail("bad value for " + flag + ": " + v);
  return x;
}

bool ParseBool(const std::string& flag, const std::string& v) {
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  Fail("bad value for " + flag + ": " + v);
}

Config ParseFlags(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; i++) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) Fail("unexpected argument " + arg);
    std::string name = arg.substr(2), value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    auto next = [&]() -> std::string {
      if (has_value) return value;
      if (i + 1 >= argc) Fail("--" + name + " needs a value");
      return argv[++i];
    };
    if (name == "disable-auto-compactions") {
      c.disable_auto_compactions = has_value ? ParseBool(name, value) : true;
    } else if (name == "parallel-compact") {
      c.parallel_compact = has_value ? ParseBool(name, value) : true;
    } else if (name == "self-test") {
      c.self_test = true;
    } else if (name == "db") {
      c.db = next();
    } else if (name == "benchmarks") {
      c.benchmarks.clear();
      std::stringstream list(next());
      for (std::string b; std::getline(list, b, ',');) {
        if (b.empty()) continue;
        if (std::find(std::begin(kBenchmarks), std::end(kBenchmarks), b) == std::end(kBenchmarks))
          Fail("unknown benchmark \"" + b + "\" (expected fillseq, fillrandom, overwrite, readrandom, compact)");
        c.benchmarks.push_back(b);
      }
    } else if (name == "num") {
      c.num = ParseU64(name, next());
    } else if (name == "reads") {
      c.reads = static_cast<int64_t>(ParseU64(name, next()));
    } else if (name == "key-size") {
      c.key_size = ParseU64(name, next());
    } else if (name == "value-size") {
      c.value_size = ParseU64(name, next());
    } else if (name == "seed") {
      c.seed = ParseU64(name, next());
    } else if (name == "compression") {
      c.compression = next();
    } else if (name == "block-size") {
      c.block_size = ParseU64(name, next());
    } else if (name == "bloom-bits") {
      c.bloom_bits = static_cast<int>(ParseU64(name, next()));
    } else if (name == "write-buffer-size") {
      c.write_buffer_size = ParseU64(name, next());
    } else if (name == "target-file-size") {
      c.target_file_size = ParseU64(name, next());
    } else if (name == "cache-size") {
      c.cache_size = ParseU64(name, next());
    } else if (name == "compaction-threads") {
      c.compaction_threads = static_cast<int>(ParseU64(name, next()));
    } else if (name == "dump-keys") {
      c.dump_keys = ParseU64(name, next());
    } else {
      Fail("unknown flag --" + name);
    }
  }
  if (c.num == 0) Fail("num must be at least 1");
  if (c.value_size > (64u << 20)) Fail("value-size must be at most 64 MiB");
  if (c.key_size < stream::DecimalDigits(c.num - 1))
    Fail("key-size " + std::to_string(c.key_size) + " is too small for " + std::to_string(c.num) + " keys");
  if (c.compression != "none" && c.compression != "snappy" && c.compression != "zstd" &&
      c.compression != "lz4")
    Fail("unknown compression \"" + c.compression + "\" (expected none, snappy, zstd or lz4)");
  return c;
}

std::string Hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 15]);
  }
  return out;
}

bool IsWrite(const std::string& name) {
  return name == "fillseq" || name == "fillrandom" || name == "overwrite";
}

// --dump-keys: the same bytes as the Pebble and fjall peers print.
void DumpStreams(const Config& c) {
  for (size_t pos = 0; pos < c.benchmarks.size(); pos++) {
    const std::string& name = c.benchmarks[pos];
    auto g = stream::SplitMix64::ForBenchmark(c.seed, pos, 0);
    std::string first_value, fnv;
    if (IsWrite(name)) {
      stream::ValueGenerator v(&g, c.value_size);
      char buf[17];
      std::snprintf(buf, sizeof(buf), "%016" PRIx64, stream::Fnv1a64(v.data()));
      fnv = buf;
      first_value = Hex(v.Generate(c.value_size));
    }
    std::string keys, key;
    if (name != "compact") {
      for (uint64_t i = 0; i < c.dump_keys; i++) {
        stream::WriteKey(name == "fillseq" ? i : g.Below(c.num), c.key_size, &key);
        keys += (i ? ",\"" : "\"") + key + "\"";
      }
    }
    std::printf("{\"benchmark\":\"%s\",\"position\":%zu,\"keys\":[%s],\"first_value\":\"%s\","
                "\"value_buffer_fnv1a64\":\"%s\"}\n",
                name.c_str(), pos, keys.c_str(), first_value.c_str(), fnv.c_str());
  }
}

// --self-test: STREAM.md section 6's vectors.
int SelfTest() {
  int failures = 0;
  auto check = [&](bool ok, const char* what) {
    if (!ok) {
      std::fprintf(stderr, "self-test: %s failed\n", what);
      failures++;
    }
  };
  stream::SplitMix64 zero(0);
  check(zero.Next() == 0xe220a8397b1dcdafull && zero.Next() == 0x6e789e6aa1b965f4ull &&
            zero.Next() == 0x06c45d188009454full,
        "SplitMix64 reference");
  check(stream::Mix64(301) == 0x2ea7d2fa987b76ebull, "mix(301)");
  check(stream::SplitMix64::ForBenchmark(301, 1, 0).state() == 0xe525d2a3b2002e14ull,
        "position 1 state");
  const uint64_t expected[3][5] = {{568985, 555461, 548675, 856306, 142518},
                                   {200265, 681718, 426965, 265444, 238721},
                                   {587334, 706572, 126095, 749313, 128125}};
  const uint64_t fnv[3] = {0xeaa93389abcf248dull, 0, 0x5efd3fff3cbd09b1ull};
  for (uint64_t pos = 0; pos < 3; pos++) {
    auto g = stream::SplitMix64::ForBenchmark(301, pos, 0);
    if (pos != 1) {  // fillrandom and overwrite build their value buffer first.
      stream::ValueGenerator v(&g, 100);
      check(v.data().size() == 1048600 && stream::Fnv1a64(v.data()) == fnv[pos], "value buffer");
      std::string_view first = v.Generate(100);
      if (pos == 0) {
        check(first.substr(0, 50) == "$}8:b7b*;5T7eSSN&G? ~4p3K-(C@qNXn@=&bQt!Ff|v5em_gj" &&
                  first.substr(50) == first.substr(0, 50),
              "first value");
      } else {
        check(first.substr(0, 8) == "S94!^-65", "overwrite's first value");
      }
    }
    for (uint64_t n : expected[pos]) check(g.Below(1000000) == n, "key number");
  }
  auto g = stream::SplitMix64::ForBenchmark(301, 0, 0);
  stream::ValueGenerator big(&g, 3 << 20);
  check(big.data().size() == 3145800 && stream::Fnv1a64(big.data()) == 0xce218f4e3e3ed34dull,
        "3 MiB buffer");
  std::string key;
  stream::WriteKey(568985, 16, &key);
  check(key == "0000000000568985", "key bytes");
  std::printf("self-test: %d passed, %d failed\n", failures ? 0 : 1, failures ? 1 : 0);
  return failures ? 1 : 0;
}

struct LevelShape {
  int files = 0;
  uint64_t bytes = 0;
};

// Latencies of one benchmark's operations, in nanoseconds.
struct Tally {
  uint64_t ops = 0, bytes = 0, found = 0;
  std::vector<uint64_t> nanos;

  void Done(Clock::time_point start, size_t moved) {
    nanos.push_back(std::max<uint64_t>(
        1, std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count()));
    ops++;
    bytes += moved;
  }

  std::string LatencyJson() {
    if (nanos.empty()) return "{\"p50\":0,\"p99\":0,\"p999\":0,\"max\":0,\"mean\":0}";
    std::sort(nanos.begin(), nanos.end());
    auto at = [&](double q) {
      size_t rank = static_cast<size_t>(q * static_cast<double>(nanos.size()));
      return nanos[std::min(rank, nanos.size() - 1)] / 1e3;
    };
    double sum = 0;
    for (uint64_t n : nanos) sum += static_cast<double>(n);
    char buf[200];
    std::snprintf(buf, sizeof(buf), "{\"p50\":%.3f,\"p99\":%.3f,\"p999\":%.3f,\"max\":%.3f,\"mean\":%.3f}",
                  at(0.50), at(0.99), at(0.999), nanos.back() / 1e3, sum / nanos.size() / 1e3);
    return buf;
  }
};

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out.push_back('\\');
    out.push_back(ch);
  }
  return out + "\"";
}

std::string ShapeJson(const std::vector<LevelShape>& shape) {
  std::string out = "[";
  for (size_t l = 0; l < shape.size(); l++) {
    char buf[100];
    std::snprintf(buf, sizeof(buf), "%s{\"level\":%zu,\"files\":%d,\"bytes\":%" PRIu64 "}",
                  l ? "," : "", l, shape[l].files, shape[l].bytes);
    out += buf;
  }
  return out + "]";
}

uint64_t TotalBytes(const std::vector<LevelShape>& shape) {
  uint64_t sum = 0;
  for (const auto& l : shape) sum += l.bytes;
  return sum;
}

class Engine {
 public:
  explicit Engine(const Config& c) : c_(c) {
    cache_.reset(leveldb::NewLRUCache(c.cache_size));
    if (c.bloom_bits > 0) filter_.reset(leveldb::NewBloomFilterPolicy(c.bloom_bits));
    leveldb::Options o;
    o.create_if_missing = true;
    o.error_if_exists = true;
    o.write_buffer_size = c.write_buffer_size;
    o.max_file_size = c.target_file_size;
    o.block_size = c.block_size;
    o.block_cache = cache_.get();
    o.filter_policy = filter_.get();
    o.compression = c.compression == "none" ? leveldb::kNoCompression : leveldb::kSnappyCompression;
    compression_ = c.compression == "none" ? "none" : "snappy";
    leveldb::DB* db = nullptr;
    Check(leveldb::DB::Open(o, c.db, &db), "open");
    db_.reset(db);
    Notes();
  }

  // Runs the benchmark `name` at `position` of the run and prints its JSON line.
  void Run(const std::string& name, uint64_t position) {
    Tally t;
    std::string compaction;
    auto start = Clock::now();
    double seconds = 0;
    uint64_t user_bytes = 0, bytes = 0;
    if (IsWrite(name)) {
      Fill(position, name != "fillseq", &t);
      WaitIdle();  // The benchmark is not over until the work it caused is.
      user_bytes = bytes = t.bytes;
    } else if (name == "readrandom") {
      ReadRandom(position, &t);
      bytes = t.bytes;
    } else {
      compaction = Compact(&t, &seconds, &bytes);
    }
    if (name != "compact") seconds = Secs(Clock::now() - start);
    double per_sec = seconds > 0 ? 1 / seconds : 0;
    std::string out;
    char buf[600];
    std::snprintf(buf, sizeof(buf),
                  "{\"name\":\"%s\",\"engine\":\"leveldb\",\"engine_version\":\"%d.%d\",\"ops\":%" PRIu64
                  ",\"threads\":1,\"seconds\":%.9f,\"micros_per_op\":%.6f,\"ops_per_sec\":%.3f,"
                  "\"bytes\":%" PRIu64 ",\"mb_per_sec\":%.6f,",
                  name.c_str(), leveldb::kMajorVersion, leveldb::kMinorVersion, t.ops, seconds,
                  t.ops ? seconds * 1e6 / t.ops : 0.0, t.ops * per_sec, bytes, bytes * per_sec / 1e6);
    out += buf;
    if (name == "readrandom") out += "\"found\":" + std::to_string(t.found) + ",";
    out += "\"latency_us\":" + t.LatencyJson() + ",\"user_bytes\":" + std::to_string(user_bytes) +
           ",\"write_stall_micros\":0,";
    if (!compaction.empty()) out += "\"compaction\":" + compaction + ",";
    out += "\"lsm\":" + ShapeJson(Shape()) + ",\"options\":" + OptionsJson() + ",\"settings_differ\":[";
    for (size_t i = 0; i < notes_.size(); i++) out += (i ? "," : "") + Quote(notes_[i]);
    out += "]}\n";
    std::fputs(out.c_str(), stdout);
    std::fflush(stdout);  // A line at a time: the run script pauses us between benchmarks.
  }

 private:
  static double Secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

  void Check(const leveldb::Status& s, const char* what) {
    if (!s.ok()) Fail(std::string(what) + ": " + s.ToString());
  }

  void Notes() {
    if (c_.compression != compression_)
      notes_.push_back("compression: LevelDB has only snappy; --compression " + c_.compression +
                       " uses snappy");
    notes_.push_back(
        "automatic compactions cannot be turned off: --disable-auto-compactions has no effect, so "
        "compact compacts the tree LevelDB's own compactions left (L0 holds at most a few tables), "
        "not an inverted LSM");
    notes_.push_back(
        "L0 triggers are compile-time constants: compaction at 4 tables, 1 ms write slowdown at 8, "
        "stop at 12 (Sluice: 4, 20, 36)");
    notes_.push_back(
        "levels: L1 holds 10 MiB (compile-time; Sluice: 256 MiB), x10 per level, 7 levels; a "
        "flushed memtable may be placed directly in L1 or L2 when it overlaps nothing there");
    notes_.push_back(
        "one background thread does every flush and compaction, one compaction at a time; "
        "--parallel-compact and --compaction-threads have no effect");
    notes_.push_back("max_file_size = --target-file-size at every level");
    notes_.push_back(
        "fills wait until no level needs a compaction (LevelDB's scores recomputed from "
        "leveldb.sstables) and no immutable memtable is left (from "
        "leveldb.approximate-memory-usage)");
    notes_.push_back(
        "compact: flushes the memtable with CompactRange over an empty key range (untimed), then "
        "times CompactRange(nullptr, nullptr), which compacts L0 into L1 and then each level into "
        "the next, down to the deepest level holding data");
    notes_.push_back("write stalls are not reported (write_stall_micros is 0)");
  }

  std::string OptionsJson() const {
    char buf[700];
    std::snprintf(buf, sizeof(buf),
                  "{\"num\":%" PRIu64 ",\"reads\":%" PRIu64 ",\"key_size\":%zu,\"value_size\":%zu,"
                  "\"seed\":%" PRIu64 ",\"sync\":false,\"compression\":\"%s\",\"write_buffer_size\":%zu,"
                  "\"target_file_size\":%zu,\"block_size\":%zu,\"bloom_bits\":%d,\"cache_size\":%zu,"
                  "\"disable_auto_compactions\":%s,\"parallel_compact\":%s,\"compaction_threads\":1}",
                  c_.num, c_.Reads(), c_.key_size, c_.value_size, c_.seed, compression_.c_str(),
                  c_.write_buffer_size, c_.target_file_size, c_.block_size, c_.bloom_bits, c_.cache_size,
                  c_.disable_auto_compactions ? "true" : "false", c_.parallel_compact ? "true" : "false");
    return buf;
  }

  // fillseq writes keys 0..num in order, fillrandom and overwrite num stream draws; the WAL
  // is not synced (Sluice's default).
  void Fill(uint64_t position, bool random, Tally* t) {
    auto g = stream::SplitMix64::ForBenchmark(c_.seed, position, 0);
    stream::ValueGenerator values(&g, c_.value_size);
    std::string key;
    leveldb::WriteOptions wo;
    for (uint64_t i = 0; i < c_.num; i++) {
      stream::WriteKey(random ? g.Below(c_.num) : i, c_.key_size, &key);
      std::string_view value = values.Generate(c_.value_size);
      auto start = Clock::now();
      Check(db_->Put(wo, key, leveldb::Slice(value.data(), value.size())), "put");
      t->Done(start, key.size() + value.size());
    }
  }

  void ReadRandom(uint64_t position, Tally* t) {
    auto g = stream::SplitMix64::ForBenchmark(c_.seed, position, 0);
    std::string key, value;
    leveldb::ReadOptions ro;
    for (uint64_t i = 0; i < c_.Reads(); i++) {
      stream::WriteKey(g.Below(c_.num), c_.key_size, &key);
      auto start = Clock::now();
      leveldb::Status s = db_->Get(ro, key, &value);
      size_t moved = 0;
      if (s.ok()) {
        t->found++;
        moved = key.size() + value.size();
      } else if (!s.IsNotFound()) {
        Check(s, "get");
      }
      t->Done(start, moved);
    }
  }

  // Flushes the memtable (untimed), then times one full manual compaction. Returns the
  // compaction JSON object; `seconds` and `bytes` get the compaction's time and input bytes.
  std::string Compact(Tally* t, double* seconds, uint64_t* bytes) {
    auto flush_start = Clock::now();
    // CompactRange flushes the memtable first; over a range above every key (digits sort
    // before '~') it then finds nothing to compact.
    leveldb::Slice above("~");
    db_->CompactRange(&above, &above);
    WaitIdle();
    double flush_seconds = Secs(Clock::now() - flush_start);
    std::vector<LevelShape> before = Shape();
    auto start = Clock::now();
    db_->CompactRange(nullptr, nullptr);
    t->Done(start, 0);
    *seconds = Secs(Clock::now() - start);
    std::vector<LevelShape> after = Shape();
    *bytes = TotalBytes(before);
    char buf[400];
    std::snprintf(buf, sizeof(buf),
                  "{\"count\":1,\"input_bytes\":%" PRIu64 ",\"output_bytes\":%" PRIu64
                  ",\"seconds\":%.9f,\"bandwidth_mb_s\":%.6f,\"flush_seconds\":%.9f,",
                  *bytes, TotalBytes(after), *seconds,
                  *seconds > 0 ? *bytes / *seconds / 1e6 : 0.0, flush_seconds);
    return buf + std::string("\"lsm_before\":") + ShapeJson(before) + ",\"lsm_after\":" +
           ShapeJson(after) + "}";
  }

  // Files and bytes per level, from the leveldb.sstables property: "--- level N ---" headers
  // followed by one " number:size[smallest .. largest]" line per table.
  std::vector<LevelShape> Shape() {
    std::vector<LevelShape> shape(kNumLevels);
    std::string tables;
    if (!db_->GetProperty("leveldb.sstables", &tables)) Fail("no leveldb.sstables property");
    std::istringstream lines(tables);
    int level = 0;
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("--- level ", 0) == 0) {
        level = std::atoi(line.c_str() + 10);
      } else if (!line.empty() && line[0] == ' ' && level >= 0 && level < kNumLevels) {
        size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        shape[level].files++;
        shape[level].bytes += std::strtoull(line.c_str() + colon + 1, nullptr, 10);
      }
    }
    return shape;
  }

  // True while LevelDB's background thread has work: an immutable memtable to flush (the
  // memory in use, less the block cache, exceeds one memtable; a fresh memtable holds less
  // than the 64 KiB margin only for a few hundred writes after a switch) or a level whose
  // compaction score (VersionSet::Finalize) is at least 1.
  bool Busy() {
    std::string usage;
    if (db_->GetProperty("leveldb.approximate-memory-usage", &usage)) {
      uint64_t total = std::strtoull(usage.c_str(), nullptr, 10);
      uint64_t cached = std::min<uint64_t>(total, cache_->TotalCharge());
      uint64_t memtables = total - cached;
      if (memtables > c_.write_buffer_size + (64 << 10)) return true;
    }
    std::vector<LevelShape> shape = Shape();
    if (shape[0].files >= kL0CompactionTrigger) return true;
    double max_bytes = kL1MaxBytes;
    for (int level = 1; level < kNumLevels - 1; level++, max_bytes *= 10) {
      if (static_cast<double>(shape[level].bytes) >= max_bytes) return true;
    }
    return false;
  }

  void WaitIdle() {
    while (Busy()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  const Config& c_;
  std::unique_ptr<leveldb::Cache> cache_;
  std::unique_ptr<const leveldb::FilterPolicy> filter_;
  std::unique_ptr<leveldb::DB> db_;  // Declared last: closed before the cache and filter.
  std::string compression_;
  std::vector<std::string> notes_;
};

}  // namespace

int main(int argc, char** argv) {
  Config c = ParseFlags(argc, argv);
  if (c.self_test) return SelfTest();
  if (c.dump_keys > 0) {
    DumpStreams(c);
    return 0;
  }
  if (c.db.empty()) Fail("--db is required");
  if (access(c.db.c_str(), F_OK) == 0 && rmdir(c.db.c_str()) != 0)
    Fail("--db " + c.db + " must be empty or absent");
  Engine engine(c);
  for (size_t pos = 0; pos < c.benchmarks.size(); pos++) engine.Run(c.benchmarks[pos], pos);
  return 0;
}
