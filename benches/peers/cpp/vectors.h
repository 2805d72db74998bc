// --self-test of leveldb-bench and rocksdb-bench: the test vectors of ../STREAM.md section 6
// (the key/value stream) and section 8.4 (the YCSB operation stream).
#ifndef SLUICE_PEERS_CPP_VECTORS_H_
#define SLUICE_PEERS_CPP_VECTORS_H_

#include <cstdint>
#include <cstdio>
#include <string>

#include "stream.h"
#include "ycsb.h"

namespace peers {

// `--dump-ycsb-ops 5 --ycsb a|f --records 1000000 --operations 1000000` (seed 301, values of
// 100 bytes): the same bytes in every peer program, and Sluice's own Chooser's operations.
inline const char* const kDumpA =
    "{\"workload\":\"a\",\"distribution\":\"zipfian\",\"records\":1000000,\"operations\":1000000,\"seed\":301,\"value_size\":100,\"load_value_buffer_fnv1a64\":\"eaa93389abcf248d\",\"run_value_buffer_fnv1a64\":\"96f9f4a4a4348e8d\",\"op_counts\":{\"read\":499683,\"update\":500317,\"insert\":0,\"scan\":0,\"read-modify-write\":0},\"ops_fnv1a64\":\"404df34d30a68eca\",\"first_ops\":[\"update 49015\",\"update 291577\",\"update 842051\",\"read 342734\",\"read 213555\"]}";
inline const char* const kDumpF =
    "{\"workload\":\"f\",\"distribution\":\"zipfian\",\"records\":1000000,\"operations\":1000000,\"seed\":301,\"value_size\":100,\"load_value_buffer_fnv1a64\":\"eaa93389abcf248d\",\"run_value_buffer_fnv1a64\":\"96f9f4a4a4348e8d\",\"op_counts\":{\"read\":499683,\"update\":0,\"insert\":0,\"scan\":0,\"read-modify-write\":500317},\"ops_fnv1a64\":\"1fa7a5825029d1cf\",\"first_ops\":[\"read-modify-write 49015\",\"read-modify-write 291577\",\"read-modify-write 842051\",\"read 342734\",\"read 213555\"]}";

// Prints "self-test: P passed, F failed" and returns the process exit code.
inline int SelfTest() {
  int passed = 0, failed = 0;
  auto check = [&](bool ok, const char* what) {
    if (ok) {
      passed++;
    } else {
      std::fprintf(stderr, "self-test: %s failed\n", what);
      failed++;
    }
  };

  // Section 6: SplitMix64, the streams' seeds, key numbers and value buffers.
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
    bool keys_ok = true;
    for (uint64_t n : expected[pos]) keys_ok = keys_ok && g.Below(1000000) == n;
    check(keys_ok, "key numbers");
  }
  // readwhilewriting's readers: threads 1 and 2 of position 0, and their shares of the reads.
  check(stream::SplitMix64::ForBenchmark(301, 0, 1).state() == 0xe3b0b46bb6dda086ull,
        "thread 1 state");
  const uint64_t readers[2][5] = {{262325, 89055, 863800, 829571, 336372},
                                  {655449, 522333, 949794, 372108, 980815}};
  for (uint64_t r = 0; r < 2; r++) {
    auto reader = stream::SplitMix64::ForBenchmark(301, 0, r + 1);
    bool keys_ok = true;
    for (uint64_t n : readers[r]) keys_ok = keys_ok && reader.Below(1000000) == n;
    check(keys_ok, "reader key numbers");
  }
  check(stream::Share(10, 3, 0) == std::make_pair<uint64_t, uint64_t>(0, 3) &&
            stream::Share(10, 3, 1) == std::make_pair<uint64_t, uint64_t>(3, 6) &&
            stream::Share(10, 3, 2) == std::make_pair<uint64_t, uint64_t>(6, 10),
        "reader shares");
  auto g = stream::SplitMix64::ForBenchmark(301, 0, 0);
  stream::ValueGenerator big(&g, 3 << 20);
  check(big.data().size() == 3145800 && stream::Fnv1a64(big.data()) == 0xce218f4e3e3ed34dull,
        "3 MiB buffer");
  std::string key;
  stream::WriteKey(568985, 16, &key);
  check(key == "0000000000568985", "key bytes");

  // Section 8.4: the YCSB operation stream.
  check(ycsb::YcsbFnv64(0) == 0x573807cdd7e5c63bull, "fnvhash64(0)");
  ycsb::ScrambledZipfian z(1000000);
  check(z.eta() == 0x1.b295ee6b5a1dep-3, "eta");
  ycsb::Config c;
  c.records = 1000000;
  c.operations = 1000000;
  c.workload = "a";
  check(ycsb::DumpOps(c, 5) == kDumpA, "workload a's operations");
  c.workload = "f";
  check(ycsb::DumpOps(c, 5) == kDumpF, "workload f's operations");

  std::printf("self-test: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}

}  // namespace peers

#endif  // SLUICE_PEERS_CPP_VECTORS_H_
