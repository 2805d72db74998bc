// rocksdb-bench runs YCSB workloads A, B, C and F (load, then run; one client thread) on
// RocksDB (Debian's librocksdb-dev) and prints the JSON object of `sluice ycsb --json`, with
// the keys, values and operation stream of ../STREAM.md (sections 1-4 and 8). RocksDB's
// db_bench (Debian's rocksdb-tools) has no YCSB and its own key stream; benches/peers/run
// still uses db_bench for the db_bench-style workloads and this program for YCSB.
//
// Build (benches/peers/run does this):
//   g++ -O2 -std=c++17 -ffp-contract=off -o rocksdb-bench main.cc -lrocksdb
//
// The workload code is ../cpp/ycsb.h, shared with ../leveldb; this file is the RocksDB adapter,
// the flags (the other peers' names) and the settings that differ from Sluice.
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/version.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../cpp/flags.h"
#include "../cpp/stream.h"
#include "../cpp/vectors.h"
#include "../cpp/ycsb.h"

namespace {

class Engine {
 public:
  explicit Engine(const peers::Flags& f) : f_(f) {
    rocksdb::BlockBasedTableOptions t;
    t.block_size = f.block_size;
    t.format_version = 5;
    t.block_cache = rocksdb::NewLRUCache(f.cache_size);
    if (f.bloom_bits > 0) t.filter_policy.reset(rocksdb::NewBloomFilterPolicy(f.bloom_bits, false));
    rocksdb::Options o;
    o.create_if_missing = true;
    o.error_if_exists = true;
    o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
    o.write_buffer_size = f.write_buffer_size;
    o.max_write_buffer_number = 2;  // Sluice: a memtable and one being flushed
    o.max_background_jobs = f.compaction_threads;
    o.target_file_size_base = f.target_file_size;
    o.level_compaction_dynamic_level_bytes = true;  // 7.8.3's default is off; Sluice's is on
    compression_ = f.compression;
    if (f.compression == "none") {
      o.compression = rocksdb::kNoCompression;
    } else if (f.compression == "snappy") {
      o.compression = rocksdb::kSnappyCompression;
    } else if (f.compression == "zstd") {
      o.compression = rocksdb::kZSTD;
    } else {
      o.compression = rocksdb::kLZ4Compression;
    }
    rocksdb::DB* db = nullptr;
    Check(rocksdb::DB::Open(o, f.db, &db), "open");
    db_.reset(db);
    notes_ = {
        "levels: RocksDB's leveled compaction with its defaults (L0 compaction trigger 4 files, "
        "slowdown 20, stop 36, as Sluice; max_bytes_for_level_base 256 MiB, x10 per level, "
        "level_compaction_dynamic_level_bytes on, as Sluice; 7.8.3's default is off)",
        "memtables: max_write_buffer_number 2 (Sluice: a memtable and one being flushed); "
        "max_background_jobs " + std::to_string(f.compaction_threads) +
            " (--compaction-threads) share flushes and compactions",
        "tables: block-based format_version 5, full filters (FastLocalBloom at --bloom-bits), "
        "index and filter blocks outside the block cache (RocksDB's default)",
        "the load waits until RocksDB reports no running or pending flush or compaction "
        "(rocksdb.num-running-flushes, num-running-compactions, mem-table-flush-pending, "
        "compaction-pending), as Sluice waits for its background work",
        "latency percentiles are exact (sorted samples), not an HDR histogram",
    };
  }

  ~Engine() {
    if (db_) Check(db_->Close(), "close");
  }

  void Put(const std::string& key, std::string_view value) {
    Check(db_->Put(wo_, key, rocksdb::Slice(value.data(), value.size())), "put");
  }

  bool Get(const std::string& key, std::string* value) {
    rocksdb::Status s = db_->Get(ro_, key, value);
    if (s.IsNotFound()) return false;
    Check(s, "get");
    return true;
  }

  // Returns once no flush or compaction runs or is pending, two checks 1 ms apart.
  void WaitIdle() {
    for (int quiet = 0; quiet < 2;) {
      if (Busy()) {
        quiet = 0;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      } else if (++quiet < 2) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  }

  std::string ExtraJson() const {
    std::string out = "\"engine\":\"rocksdb\",\"engine_version\":\"" +
                      std::to_string(ROCKSDB_MAJOR) + "." + std::to_string(ROCKSDB_MINOR) + "." +
                      std::to_string(ROCKSDB_PATCH) + "\",\"options\":" +
                      peers::YcsbOptionsJson(f_, compression_, f_.compaction_threads) +
                      ",\"settings_differ\":[";
    for (size_t i = 0; i < notes_.size(); i++) out += (i ? "," : "") + peers::Quote(notes_[i]);
    return out + "]";
  }

 private:
  static void Check(const rocksdb::Status& s, const char* what) {
    if (!s.ok()) peers::Fail(std::string(what) + ": " + s.ToString());
  }

  bool Busy() {
    for (const char* p : {"rocksdb.num-running-flushes", "rocksdb.num-running-compactions",
                          "rocksdb.mem-table-flush-pending", "rocksdb.compaction-pending"}) {
      uint64_t v = 0;
      if (db_->GetIntProperty(p, &v) && v > 0) return true;
    }
    return false;
  }

  const peers::Flags& f_;
  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::WriteOptions wo_;  // WAL written, not synced (Sluice's default)
  rocksdb::ReadOptions ro_;
  std::string compression_;
  std::vector<std::string> notes_;
};

}  // namespace

int main(int argc, char** argv) {
  peers::Flags f = peers::ParseFlags("rocksdb-bench", argc, argv, /*ycsb_only=*/true);
  if (f.self_test) return peers::SelfTest();
  if (f.dump_ycsb_ops > 0) {
    std::printf("%s\n", ycsb::DumpOps(f.ycsb, f.dump_ycsb_ops).c_str());
    return 0;
  }
  peers::RequireEmptyDb(f.db);
  std::string json;
  {
    Engine engine(f);
    json = ycsb::Run(f.ycsb, &engine);
  }  // Closed before the line is printed, as Sluice closes its database.
  std::printf("%s\n", json.c_str());
  return 0;
}
