package sluice.peers;

/**
 * The key/value stream of ../STREAM.md: SplitMix64 streams, zero-padded decimal keys and a
 * buffer of half-compressible values. Every peer program reproduces it bit for bit; the test
 * vectors of STREAM.md section 6 are checked by {@code --self-test} ({@link SelfTest}).
 *
 * <p>Java's {@code long} is a signed 64-bit integer whose arithmetic wraps exactly as
 * STREAM.md's unsigned arithmetic does; only division, remainder and the high half of a
 * product need their unsigned forms.
 */
final class Stream {
    /** SplitMix64's increment, also the per-position seed step (frozen by STREAM.md). */
    static final long GOLDEN = 0x9E3779B97F4A7C15L;
    /** The finalizer's multipliers; C1 is also the per-thread seed step. */
    static final long MIX_C1 = 0xBF58476D1CE4E5B9L;
    static final long MIX_C2 = 0x94D049BB133111EBL;

    /** The value buffer holds at least this many bytes, in pieces of PIECE_BYTES whose first
     * PIECE_RAW_BYTES random bytes are repeated once. */
    static final int VALUE_BUFFER_BYTES = 1 << 20;
    static final int PIECE_BYTES = 100;
    static final int PIECE_RAW_BYTES = 50;

    private Stream() {}

    /** SplitMix64's finalizer. */
    static long mix64(long z) {
        z = (z ^ (z >>> 30)) * MIX_C1;
        z = (z ^ (z >>> 27)) * MIX_C2;
        return z ^ (z >>> 31);
    }

    /** A SplitMix64 generator. */
    static final class SplitMix64 {
        private long state;

        SplitMix64(long state) {
            this.state = state;
        }

        /** The stream of the benchmark at {@code position} of the run, client thread
         * {@code thread} (0 but for readwhilewriting's readers): state = mix(seed + position *
         * GOLDEN + thread * C1). */
        static SplitMix64 forBenchmark(long seed, long position, long thread) {
            return new SplitMix64(mix64(seed + position * GOLDEN + thread * MIX_C1));
        }

        long next() {
            state += GOLDEN;
            return mix64(state);
        }

        /** A number in [0, n) by Lemire's multiply-shift, without rejection: the high 64 bits
         * of the unsigned 128-bit product next() * n. */
        long below(long n) {
            return unsignedMultiplyHigh(next(), n);
        }

        long state() {
            return state;
        }
    }

    /** The [first, end) slice of 0..total that thread {@code index} of {@code threads} owns:
     * how readwhilewriting's readers divide --reads (STREAM.md section 4), as Sluice divides a
     * benchmark's operations. */
    static long[] share(long total, int threads, int index) {
        java.math.BigInteger t = java.math.BigInteger.valueOf(total);
        java.math.BigInteger n = java.math.BigInteger.valueOf(threads);
        return new long[] {t.multiply(java.math.BigInteger.valueOf(index)).divide(n).longValueExact(),
                t.multiply(java.math.BigInteger.valueOf(index + 1L)).divide(n).longValueExact()};
    }

    /** The high 64 bits of the unsigned 128-bit product x * y (Java 18's
     * Math.unsignedMultiplyHigh): multiplyHigh is the signed high half, and adding back what
     * the sign bits subtracted gives the unsigned one. */
    static long unsignedMultiplyHigh(long x, long y) {
        return Math.multiplyHigh(x, y) + ((x >> 63) & y) + ((y >> 63) & x);
    }

    /** Decimal digits of the unsigned n (1 for 0). */
    static int decimalDigits(long n) {
        return Long.toUnsignedString(n).length();
    }

    /** Writes key numbers as {@code size} zero-padded decimal bytes. */
    static final class KeyFormat {
        final int size;

        /** Fails when num - 1 needs more than keySize digits (keys would collide). */
        KeyFormat(int keySize, long num) {
            int need = num == 0 ? 1 : decimalDigits(num - 1);
            if (keySize < need) {
                throw new IllegalArgumentException("key-size " + keySize + " is too small for "
                        + Long.toUnsignedString(num) + " keys (needs at least " + need + " digits)");
            }
            this.size = keySize;
        }

        /** Fills key (of length size) with the key of the unsigned n and returns it. */
        byte[] write(long n, byte[] key) {
            for (int i = size - 1; i >= 0; i--) {
                key[i] = (byte) ('0' + Long.remainderUnsigned(n, 10));
                n = Long.divideUnsigned(n, 10);
            }
            return key;
        }

        String string(long n) {
            return new String(write(n, new byte[size]), java.nio.charset.StandardCharsets.US_ASCII);
        }
    }

    /** Hands out consecutive slices of a buffer of half-compressible pieces (STREAM.md 3). A
     * value is the slice [offset(), offset() + length) of data(), as no copy is made. */
    static final class ValueGenerator {
        private final byte[] data;
        private int pos;
        private int offset;

        /** Builds the buffer from g: pieces of 50 bytes 0x20 + next() % 95, each written twice,
         * until it holds max(1 MiB, valueSize) bytes. */
        ValueGenerator(SplitMix64 g, int valueSize) {
            int target = Math.max(VALUE_BUFFER_BYTES, valueSize);
            int pieces = (target + PIECE_BYTES - 1) / PIECE_BYTES;
            data = new byte[pieces * PIECE_BYTES];
            for (int at = 0; at < data.length; at += PIECE_BYTES) {
                for (int i = 0; i < PIECE_RAW_BYTES; i++) {
                    data[at + i] = (byte) (' ' + Long.remainderUnsigned(g.next(), 95));
                }
                System.arraycopy(data, at, data, at + PIECE_RAW_BYTES, PIECE_RAW_BYTES);
            }
        }

        /** Moves to the next value of len bytes (at most the buffer's length), restarting at
         * the buffer's start when the rest is too short; returns its length. */
        int next(int len) {
            len = Math.min(len, data.length);
            if (pos + len > data.length) {
                pos = 0;
            }
            offset = pos;
            pos += len;
            return len;
        }

        /** Where the value of the last next() starts in data(). */
        int offset() {
            return offset;
        }

        byte[] data() {
            return data;
        }
    }

    /** 64-bit FNV-1a (used to check value buffers across languages). */
    static long fnv1a64(byte[] b, int from, int to) {
        long h = 0xcbf29ce484222325L;
        for (int i = from; i < to; i++) {
            h = (h ^ (b[i] & 0xff)) * 0x100000001b3L;
        }
        return h;
    }

    static String hex64(long x) {
        return String.format("%016x", x);
    }
}
