// The command line shared by ../leveldb (leveldb-bench) and ../rocksdb (rocksdb-bench): the
// flags of the other peer programs (--flag VALUE or --flag=VALUE; see ../README.md), and small
// helpers for their JSON output.
#ifndef SLUICE_PEERS_CPP_FLAGS_H_
#define SLUICE_PEERS_CPP_FLAGS_H_

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "stream.h"
#include "ycsb.h"

namespace peers {

inline const char*& ProgramName() {
  static const char* name = "peer-bench";
  return name;
}

[[noreturn]] inline void Fail(const std::string& msg) {
  std::fprintf(stderr, "%s: %s\n", ProgramName(), msg.c_str());
  std::exit(1);
}

const char* const kBenchmarks[] = {"fillseq", "fillrandom", "overwrite", "readrandom",
                                   "readwhilewriting", "compact"};

struct Flags {
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
  bool use_existing_db = false;
  bool parallel_compact = true;
  int compaction_threads = 2;
  uint64_t threads = 1;  // readwhilewriting's reader threads
  size_t dump_keys = 0;
  bool self_test = false;
  // YCSB mode (--ycsb WORKLOAD): ycsb holds the workload, records, operations and the key,
  // value and seed flags.
  bool ycsb_mode = false;
  ycsb::Config ycsb;
  uint64_t dump_ycsb_ops = 0;

  uint64_t Reads() const { return reads < 0 ? num : static_cast<uint64_t>(reads); }
};

inline uint64_t ParseU64(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  unsigned long long x = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || v[0] == '-') Fail("bad value for " + flag + ": " + v);
  return x;
}

inline bool ParseBool(const std::string& flag, const std::string& v) {
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  Fail("bad value for " + flag + ": " + v);
}

// Parses the flags; ycsb_only programs (rocksdb-bench) run nothing but YCSB and reject the
// db_bench-style flags.
inline Flags ParseFlags(const char* program, int argc, char** argv, bool ycsb_only) {
  ProgramName() = program;
  Flags c;
  c.ycsb_mode = ycsb_only;
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
    if (ycsb_only && (name == "benchmarks" || name == "num" || name == "reads" ||
                      name == "dump-keys" || name == "disable-auto-compactions" ||
                      name == "parallel-compact" || name == "threads" ||
                      name == "use-existing-db")) {
      Fail("--" + name + ": this program runs only YCSB (--ycsb); RocksDB's db_bench runs the rest");
    }
    if (name == "disable-auto-compactions") {
      c.disable_auto_compactions = has_value ? ParseBool(name, value) : true;
    } else if (name == "use-existing-db") {
      c.use_existing_db = has_value ? ParseBool(name, value) : true;
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
          Fail("unknown benchmark \"" + b +
               "\" (expected fillseq, fillrandom, overwrite, readrandom, readwhilewriting, compact)");
        c.benchmarks.push_back(b);
      }
    } else if (name == "ycsb") {
      c.ycsb_mode = true;
      c.ycsb.workload = next();
    } else if (name == "records") {
      c.ycsb.records = ParseU64(name, next());
    } else if (name == "operations") {
      c.ycsb.operations = ParseU64(name, next());
    } else if (name == "dump-ycsb-ops") {
      c.dump_ycsb_ops = ParseU64(name, next());
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
    } else if (name == "threads") {
      c.threads = ParseU64(name, next());
    } else if (name == "compaction-threads") {
      c.compaction_threads = static_cast<int>(ParseU64(name, next()));
    } else if (name == "dump-keys") {
      c.dump_keys = ParseU64(name, next());
    } else {
      Fail("unknown flag --" + name);
    }
  }
  c.ycsb.key_size = c.key_size;
  c.ycsb.value_size = c.value_size;
  c.ycsb.seed = c.seed;
  if (c.dump_ycsb_ops > 0) c.ycsb_mode = true;
  if (c.value_size > (64u << 20)) Fail("value-size must be at most 64 MiB");
  if (c.compaction_threads < 1) Fail("compaction-threads must be at least 1");
  if (c.threads < 1) Fail("threads must be at least 1");
  if (c.ycsb_mode) {
    std::string why = ycsb::Validate(c.ycsb);
    if (!why.empty()) Fail(why);
  } else {
    if (c.num == 0) Fail("num must be at least 1");
    if (c.key_size < stream::DecimalDigits(c.num - 1))
      Fail("key-size " + std::to_string(c.key_size) + " is too small for " + std::to_string(c.num) + " keys");
  }
  if (c.compression != "none" && c.compression != "snappy" && c.compression != "zstd" &&
      c.compression != "lz4")
    Fail("unknown compression \"" + c.compression + "\" (expected none, snappy, zstd or lz4)");
  return c;
}

// Fails unless dir is absent or an empty directory (which is removed, for the engine to create).
inline void RequireEmptyDb(const std::string& dir) {
  if (dir.empty()) Fail("--db is required");
  if (access(dir.c_str(), F_OK) == 0 && rmdir(dir.c_str()) != 0)
    Fail("--db " + dir + " must be empty or absent");
}

inline std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out.push_back('\\');
    out.push_back(ch);
  }
  return out + "\"";
}

inline std::string Hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 15]);
  }
  return out;
}

// The process's CPU time, every thread included (the client and the engine's background
// threads, exited ones too), from getrusage (microseconds): Sluice's cpu object.
struct CpuUsage {
  double user_seconds = 0, system_seconds = 0;

  static CpuUsage Now() {
    CpuUsage c;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
      c.user_seconds = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
      c.system_seconds = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    }
    return c;
  }

  // The CPU time spent since before.
  CpuUsage Since(const CpuUsage& before) const {
    CpuUsage c;
    c.user_seconds = user_seconds - before.user_seconds;
    c.system_seconds = system_seconds - before.system_seconds;
    return c;
  }

  double Total() const { return user_seconds + system_seconds; }

  std::string Json() const {
    char buf[160];
    std::snprintf(buf, sizeof(buf),
                  "{\"user_seconds\":%.6f,\"system_seconds\":%.6f,\"total_seconds\":%.6f}",
                  user_seconds, system_seconds, Total());
    return buf;
  }
};

// The "options" object of a YCSB line: what the engine ran with (compression as used).
inline std::string YcsbOptionsJson(const Flags& c, const std::string& compression, int threads) {
  char buf[700];
  std::snprintf(buf, sizeof(buf),
                "{\"records\":%" PRIu64 ",\"operations\":%" PRIu64 ",\"key_size\":%zu,"
                "\"value_size\":%zu,\"seed\":%" PRIu64 ",\"sync\":false,\"compression\":\"%s\","
                "\"write_buffer_size\":%zu,\"target_file_size\":%zu,\"block_size\":%zu,"
                "\"bloom_bits\":%d,\"cache_size\":%zu,\"compaction_threads\":%d}",
                c.ycsb.records, c.ycsb.operations, c.key_size, c.value_size, c.seed,
                compression.c_str(), c.write_buffer_size, c.target_file_size, c.block_size,
                c.bloom_bits, c.cache_size, threads);
  return buf;
}

}  // namespace peers

#endif  // SLUICE_PEERS_CPP_FLAGS_H_
