// leveldb-bench runs Sluice's db_bench-style workloads (fillseq, fillrandom, overwrite,
// readrandom, readwhilewriting, compact) on LevelDB (Debian's libleveldb-dev 1.23, which packages no db_bench)
// and prints one JSON object per benchmark with the field names of `sluice bench --json`, as
// ../pebble and ../fjall do; with --ycsb WORKLOAD it runs YCSB A, B, C or F instead and prints
// the object of `sluice ycsb --json` (../cpp/ycsb.h, shared with ../rocksdb). Keys, values and
// YCSB operations follow ../STREAM.md (../cpp/stream.h, ../cpp/ycsb.h).
//
// Build (benches/peers/run does this):
//   g++ -O2 -std=c++17 -ffp-contract=off -o leveldb-bench main.cc -lleveldb
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
#include <atomic>
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

#include "../cpp/flags.h"
#include "../cpp/stream.h"
#include "../cpp/vectors.h"
#include "../cpp/ycsb.h"

namespace {

using Clock = std::chrono::steady_clock;

// LevelDB 1.23's compile-time constants (db/dbformat.h, db/version_set.cc), mirrored to tell
// when its background thread still has work (WaitIdle).
constexpr int kNumLevels = 7;
constexpr int kL0CompactionTrigger = 4;
constexpr double kL1MaxBytes = 10.0 * 1048576.0;

using peers::Fail;
using peers::Hex;
using peers::Quote;
using Config = peers::Flags;

bool IsWrite(const std::string& name) {
  return name == "fillseq" || name == "fillrandom" || name == "overwrite";
}

// The first n keys drawn from g, as a JSON list.
std::string DrawnKeys(const Config& c, stream::SplitMix64 g, uint64_t n) {
  std::string keys, key;
  for (uint64_t i = 0; i < n; i++) {
    stream::WriteKey(g.Below(c.num), c.key_size, &key);
    keys += (i ? ",\"" : "\"") + key + "\"";
  }
  return "[" + keys + "]";
}

// --dump-keys: the same bytes as the other peers print (readwhilewriting: its writer's stream,
// and the first keys of each reader thread).
void DumpStreams(const Config& c) {
  for (size_t pos = 0; pos < c.benchmarks.size(); pos++) {
    const std::string& name = c.benchmarks[pos];
    auto g = stream::SplitMix64::ForBenchmark(c.seed, pos, 0);
    std::string first_value, fnv;
    if (IsWrite(name) || name == "readwhilewriting") {
      stream::ValueGenerator v(&g, c.value_size);
      char buf[17];
      std::snprintf(buf, sizeof(buf), "%016" PRIx64, stream::Fnv1a64(v.data()));
      fnv = buf;
      first_value = Hex(v.Generate(c.value_size));
    }
    std::string keys = "[]", key, readers;
    if (name == "fillseq") {
      keys.clear();
      for (uint64_t i = 0; i < c.dump_keys; i++) {
        stream::WriteKey(i, c.key_size, &key);
        keys += (i ? ",\"" : "[\"") + key + "\"";
      }
      keys += "]";
    } else if (name != "compact") {
      keys = DrawnKeys(c, g, c.dump_keys);
    }
    if (name == "readwhilewriting") {
      for (uint64_t r = 0; r < c.threads; r++)
        readers += (r ? "," : ",\"reader_keys\":[") +
                   DrawnKeys(c, stream::SplitMix64::ForBenchmark(c.seed, pos, r + 1), c.dump_keys);
      readers += "]";
    }
    std::printf("{\"benchmark\":\"%s\",\"position\":%zu,\"keys\":%s,\"first_value\":\"%s\","
                "\"value_buffer_fnv1a64\":\"%s\"%s}\n",
                name.c_str(), pos, keys.c_str(), first_value.c_str(), fnv.c_str(), readers.c_str());
  }
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

  // Adds another thread's operations.
  void Merge(const Tally& other) {
    ops += other.ops;
    bytes += other.bytes;
    found += other.found;
    nanos.insert(nanos.end(), other.nanos.begin(), other.nanos.end());
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
    o.error_if_exists = !c.use_existing_db;
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
    uint64_t user_bytes = 0, bytes = 0, writes = 0;
    uint64_t threads = 1, measured = 1;  // threads that ran, and those t counts
    peers::CpuUsage cpu_before = peers::CpuUsage::Now();
    if (IsWrite(name)) {
      Fill(position, name != "fillseq", &t);
      WaitIdle();  // The benchmark is not over until the work it caused is.
      user_bytes = bytes = t.bytes;
    } else if (name == "readrandom") {
      ReadRandom(position, &t);
      bytes = t.bytes;
    } else if (name == "readwhilewriting") {
      writes = ReadWhileWriting(position, &t, &user_bytes);
      bytes = t.bytes;
      threads = c_.threads + 1;
      measured = c_.threads;
    } else {
      compaction = Compact(&t, &seconds, &bytes);
    }
    if (name != "compact") seconds = Secs(Clock::now() - start);
    peers::CpuUsage cpu = peers::CpuUsage::Now().Since(cpu_before);
    double per_sec = seconds > 0 ? 1 / seconds : 0;
    std::string out;
    char buf[600];
    std::snprintf(buf, sizeof(buf),
                  "{\"name\":\"%s\",\"engine\":\"leveldb\",\"engine_version\":\"%d.%d\",\"ops\":%" PRIu64
                  ",\"threads\":%" PRIu64 ",\"seconds\":%.9f,\"micros_per_op\":%.6f,\"ops_per_sec\":%.3f,"
                  "\"bytes\":%" PRIu64 ",\"mb_per_sec\":%.6f,",
                  name.c_str(), leveldb::kMajorVersion, leveldb::kMinorVersion, t.ops, threads, seconds,
                  t.ops ? seconds * measured * 1e6 / t.ops : 0.0, t.ops * per_sec, bytes,
                  bytes * per_sec / 1e6);
    out += buf;
    if (name == "readrandom" || name == "readwhilewriting")
      out += "\"found\":" + std::to_string(t.found) + ",";
    if (name == "readwhilewriting") out += "\"writes\":" + std::to_string(writes) + ",";
    out += "\"latency_us\":" + t.LatencyJson() + ",\"user_bytes\":" + std::to_string(user_bytes) +
           ",\"write_stall_micros\":0,\"cpu\":" + cpu.Json() + ",";
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
    if (!c_.ycsb_mode)
      notes_.push_back(
          "automatic compactions cannot be turned off: --disable-auto-compactions has no effect, "
          "so compact compacts the tree LevelDB's own compactions left (L0 holds at most a few "
          "tables), not an inverted LSM");
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
        std::string(c_.ycsb_mode ? "the YCSB load waits" : "fills wait") +
        " until no level needs a compaction (LevelDB's scores recomputed from "
        "leveldb.sstables) and no immutable memtable is left (from "
        "leveldb.approximate-memory-usage)");
    if (c_.ycsb_mode) {
      notes_.push_back("latency percentiles are exact (sorted samples), not an HDR histogram");
      return;
    }
    notes_.push_back(
        "compact: flushes the memtable with CompactRange over an empty key range (untimed), then "
        "times CompactRange(nullptr, nullptr), which compacts L0 into L1 and then each level into "
        "the next, down to the deepest level holding data");
    notes_.push_back("write stalls are not reported (write_stall_micros is 0)");
  }

 public:
  // The YCSB adapter of ../cpp/ycsb.h.
  void Put(const std::string& key, std::string_view value) {
    Check(db_->Put(leveldb::WriteOptions(), key, leveldb::Slice(value.data(), value.size())), "put");
  }

  bool Get(const std::string& key, std::string* value) {
    leveldb::Status s = db_->Get(leveldb::ReadOptions(), key, value);
    if (s.IsNotFound()) return false;
    Check(s, "get");
    return true;
  }

  std::string ExtraJson() {
    std::string out = "\"engine\":\"leveldb\",\"engine_version\":\"" +
                      std::to_string(leveldb::kMajorVersion) + "." +
                      std::to_string(leveldb::kMinorVersion) + "\",\"lsm\":" + ShapeJson(Shape()) +
                      ",\"options\":" + peers::YcsbOptionsJson(c_, compression_, 1) +
                      ",\"settings_differ\":[";
    for (size_t i = 0; i < notes_.size(); i++) out += (i ? "," : "") + Quote(notes_[i]);
    return out + "]";
  }

 private:

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
    Lookups(stream::SplitMix64::ForBenchmark(c_.seed, position, 0), c_.Reads(), t);
  }

  // db_bench's readwhilewriting (STREAM.md section 5): --threads reader threads, reader r on
  // thread r+1's stream looking up its share of --reads uniform keys as readrandom does, while
  // this thread, the writer, overwrites uniform keys from thread 0's stream (WAL unsynced, no
  // rate limit) until every reader is done. t gets the readers' operations, *written the
  // writer's key and value bytes; returns the writer's puts.
  uint64_t ReadWhileWriting(uint64_t position, Tally* t, uint64_t* written) {
    std::atomic<uint64_t> readers_left{c_.threads};
    std::vector<Tally> tallies(c_.threads);
    std::vector<std::thread> readers;
    for (uint64_t r = 0; r < c_.threads; r++) {
      readers.emplace_back([this, r, position, &tallies, &readers_left] {
        auto [first, end] = stream::Share(c_.Reads(), c_.threads, r);
        Lookups(stream::SplitMix64::ForBenchmark(c_.seed, position, r + 1), end - first, &tallies[r]);
        readers_left.fetch_sub(1, std::memory_order_release);
      });
    }
    auto g = stream::SplitMix64::ForBenchmark(c_.seed, position, 0);
    stream::ValueGenerator values(&g, c_.value_size);
    std::string key;
    uint64_t puts = 0;
    do {
      stream::WriteKey(g.Below(c_.num), c_.key_size, &key);
      std::string_view value = values.Generate(c_.value_size);
      Put(key, value);
      puts++;
      *written += key.size() + value.size();
    } while (readers_left.load(std::memory_order_acquire) > 0);
    for (uint64_t r = 0; r < c_.threads; r++) {
      readers[r].join();
      t->Merge(tallies[r]);
    }
    return puts;
  }

  // n point lookups of uniform keys drawn from g.
  void Lookups(stream::SplitMix64 g, uint64_t n, Tally* t) {
    std::string key, value;
    leveldb::ReadOptions ro;
    for (uint64_t i = 0; i < n; i++) {
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
    peers::CpuUsage cpu_before = peers::CpuUsage::Now();
    auto start = Clock::now();
    db_->CompactRange(nullptr, nullptr);
    t->Done(start, 0);
    *seconds = Secs(Clock::now() - start);
    double cpu_seconds = peers::CpuUsage::Now().Since(cpu_before).Total();
    std::vector<LevelShape> after = Shape();
    *bytes = TotalBytes(before);
    char buf[400];
    std::snprintf(buf, sizeof(buf),
                  "{\"count\":1,\"input_bytes\":%" PRIu64 ",\"output_bytes\":%" PRIu64
                  ",\"seconds\":%.9f,\"cpu_seconds\":%.6f,\"bandwidth_mb_s\":%.6f,"
                  "\"flush_seconds\":%.9f,",
                  *bytes, TotalBytes(after), *seconds, cpu_seconds,
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


 public:
  void WaitIdle() {
    while (Busy()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

 private:

  const Config& c_;
  std::unique_ptr<leveldb::Cache> cache_;
  std::unique_ptr<const leveldb::FilterPolicy> filter_;
  std::unique_ptr<leveldb::DB> db_;  // Declared last: closed before the cache and filter.
  std::string compression_;
  std::vector<std::string> notes_;
};

}  // namespace

int main(int argc, char** argv) {
  Config c = peers::ParseFlags("leveldb-bench", argc, argv, /*ycsb_only=*/false);
  if (c.self_test) return peers::SelfTest();
  if (c.dump_ycsb_ops > 0) {
    std::printf("%s\n", ycsb::DumpOps(c.ycsb, c.dump_ycsb_ops).c_str());
    return 0;
  }
  if (c.dump_keys > 0) {
    DumpStreams(c);
    return 0;
  }
  if (c.use_existing_db && !c.ycsb_mode) {
    if (c.db.empty()) Fail("--db is required");
  } else {
    peers::RequireEmptyDb(c.db);
  }
  if (c.ycsb_mode) {
    std::string json;
    {
      Engine engine(c);
      json = ycsb::Run(c.ycsb, &engine);
    }  // Closed before the line is printed, as Sluice closes its database.
    std::printf("%s\n", json.c_str());
    return 0;
  }
  Engine engine(c);
  for (size_t pos = 0; pos < c.benchmarks.size(); pos++) engine.Run(c.benchmarks[pos], pos);
  return 0;
}
