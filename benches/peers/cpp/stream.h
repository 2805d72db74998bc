// The key/value stream of ../STREAM.md: SplitMix64 streams, zero-padded decimal keys and a
// buffer of half-compressible values. Every peer program reproduces it bit for bit; the test
// vectors of STREAM.md section 6 are checked by the `--self-test` of leveldb-bench and
// rocksdb-bench (vectors.h). Shared by ../leveldb and ../rocksdb.
#ifndef SLUICE_PEERS_CPP_STREAM_H_
#define SLUICE_PEERS_CPP_STREAM_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace stream {

// SplitMix64's increment, also the per-position seed step (frozen by STREAM.md).
constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
// The finalizer's multipliers; C1 is also the per-thread seed step.
constexpr uint64_t kMixC1 = 0xBF58476D1CE4E5B9ull;
constexpr uint64_t kMixC2 = 0x94D049BB133111EBull;

// The value buffer holds at least this many bytes, in pieces of kPieceBytes whose first
// kPieceRawBytes random bytes are repeated once.
constexpr size_t kValueBufferBytes = 1 << 20;
constexpr size_t kPieceBytes = 100;
constexpr size_t kPieceRawBytes = 50;

inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * kMixC1;
  z = (z ^ (z >> 27)) * kMixC2;
  return z ^ (z >> 31);
}

// A SplitMix64 generator.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}

  // The stream of the benchmark at `position` of the run, client thread `thread` (0 but for
  // readwhilewriting's readers): state = mix(seed + position * GOLDEN + thread * C1).
  static SplitMix64 ForBenchmark(uint64_t seed, uint64_t position, uint64_t thread) {
    return SplitMix64(Mix64(seed + position * kGolden + thread * kMixC1));
  }

  uint64_t Next() {
    state_ += kGolden;
    return Mix64(state_);
  }

  // A number in [0, n) by Lemire's multiply-shift, without rejection.
  uint64_t Below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }

  uint64_t state() const { return state_; }

 private:
  uint64_t state_;
};

// Decimal digits of n (1 for 0).
inline size_t DecimalDigits(uint64_t n) {
  size_t d = 1;
  while (n >= 10) {
    n /= 10;
    d++;
  }
  return d;
}

// Writes key number n as key_size zero-padded decimal bytes (a longer number keeps its low
// digits; callers check num - 1 fits).
inline void WriteKey(uint64_t n, size_t key_size, std::string* out) {
  out->assign(key_size, '0');
  for (size_t i = key_size; i > 0 && n > 0; i--) {
    (*out)[i - 1] = static_cast<char>('0' + n % 10);
    n /= 10;
  }
}

// Hands out consecutive slices of a buffer of half-compressible pieces (STREAM.md section 3).
class ValueGenerator {
 public:
  // Builds the buffer from g: pieces of 50 bytes 0x20 + Next() % 95, each written twice,
  // until it holds max(1 MiB, value_size) bytes.
  ValueGenerator(SplitMix64* g, size_t value_size) {
    size_t target = value_size > kValueBufferBytes ? value_size : kValueBufferBytes;
    data_.reserve(target + kPieceBytes);
    char raw[kPieceRawBytes];
    while (data_.size() < target) {
      for (char& b : raw) b = static_cast<char>(' ' + g->Next() % 95);
      data_.append(raw, sizeof(raw));
      data_.append(raw, sizeof(raw));
    }
  }

  // The next value of len bytes (at most the buffer's length), restarting at the buffer's
  // start when the rest is too short.
  std::string_view Generate(size_t len) {
    if (len > data_.size()) len = data_.size();
    if (pos_ + len > data_.size()) pos_ = 0;
    std::string_view v(data_.data() + pos_, len);
    pos_ += len;
    return v;
  }

  const std::string& data() const { return data_; }

 private:
  std::string data_;
  size_t pos_ = 0;
};

// The [first, end) slice of 0..total that thread `index` of `threads` owns: how
// readwhilewriting's readers divide --reads (STREAM.md section 4), as Sluice divides a
// benchmark's operations.
inline std::pair<uint64_t, uint64_t> Share(uint64_t total, uint64_t threads, uint64_t index) {
  auto at = [&](uint64_t i) {
    return static_cast<uint64_t>(static_cast<unsigned __int128>(total) * i / threads);
  };
  return {at(index), at(index + 1)};
}

// 64-bit FNV-1a.
inline uint64_t Fnv1a64(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char b : bytes) h = (h ^ b) * 0x100000001b3ull;
  return h;
}

}  // namespace stream

#endif  // SLUICE_PEERS_CPP_STREAM_H_
