package sluice.peers;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.rocksdb.RocksDB;
import org.rocksdb.RocksDBException;

/**
 * YCSB workloads A, B, C and F with a load and a run phase, as {@code sluice ycsb} runs them:
 * the operation stream of ../STREAM.md section 8 (YCSB's scrambled zipfian keys, constant
 * 0.99), one client thread, and the JSON object of {@code sluice ycsb --json}. The Java twin
 * of ../cpp/ycsb.h.
 *
 * <p>Floating point: Java's double arithmetic is IEEE 754 binary64 with every operation
 * rounded once and no fused multiply-add (unless Math.fma is called), which is what STREAM.md
 * section 8 asks for. Its pow is C's libm pow; {@link #pow} says how that is met here.
 */
final class Ycsb {
    /** YCSB's ZipfianGenerator.ZIPFIAN_CONSTANT. */
    static final double ZIPFIAN_CONSTANT = 0.99;
    /** YCSB's ScrambledZipfianGenerator.ITEM_COUNT and ZETAN = zeta(ITEM_COUNT, 0.99). */
    static final long SCRAMBLED_ITEMS = 10_000_000_000L;
    static final double SCRAMBLED_ZETAN = 26.46902820178302;
    /** Redraws of a key not yet inserted before taking the newest key (Sluice's MAX_REDRAWS). */
    static final int MAX_REDRAWS = 64;

    /** Operation codes: Sluice's Operation discriminants, also the byte hashed into ops_fnv1a64. */
    static final int READ = 0, UPDATE = 1, INSERT = 2, SCAN = 3, READ_MODIFY_WRITE = 4;
    static final String[] OP_NAMES = {"read", "update", "insert", "scan", "read-modify-write"};

    private Ycsb() {}

    /**
     * C's pow, as STREAM.md 8 specifies. Java's StrictMath.pow is fdlibm's, which is not
     * glibc's; both are within an ulp of the exact power, and a key moves only when such an ulp
     * carries trunc(N * pow(...)) across an integer (N = 10^10, so about once in 10^6 differing
     * draws). --self-test checks STREAM.md 8.4's digests (millions of draws), and
     * benches/peers/run compares this program's whole operation stream with Sluice's before
     * measuring, so a draw that moved would stop the run, never go unnoticed.
     */
    static double pow(double x, double y) {
        return StrictMath.pow(x, y);
    }

    /** A double in [0, 1) from the top 53 bits of one draw. */
    static double nextF64(Stream.SplitMix64 g) {
        return (g.next() >>> 11) * 0x1.0p-53;
    }

    /** YCSB's fnvhash64: FNV-1a of the 8 little-endian bytes of v, then the absolute value of
     * the result read as a signed 64-bit integer (-2^63 stays 2^63 read unsigned). */
    static long fnv64(long v) {
        long h = 0xcbf29ce484222325L;
        for (int i = 0; i < 8; i++) {
            h = (h ^ ((v >>> (8 * i)) & 0xff)) * 0x100000001b3L;
        }
        return h < 0 ? -h : h;
    }

    /** YCSB's ScrambledZipfianGenerator over [0, items): Gray et al.'s zipfian draw over
     * SCRAMBLED_ITEMS items (zeta is YCSB's constant), hashed and reduced modulo items. */
    static final class ScrambledZipfian {
        private final long items;
        private final double alpha, eta, second;

        ScrambledZipfian(long items) {
            this.items = items == 0 ? 1 : items;
            double theta = ZIPFIAN_CONSTANT;
            double zeta2theta = (0.0 + 1.0 / pow(1.0, theta)) + 1.0 / pow(2.0, theta);
            alpha = 1.0 / (1.0 - theta);
            eta = (1.0 - pow(2.0 / SCRAMBLED_ITEMS, 1.0 - theta)) / (1.0 - zeta2theta / SCRAMBLED_ZETAN);
            second = 1.0 + pow(0.5, theta);
        }

        /** The zipfian item (0 is the most popular) before scrambling. */
        long zipfian(Stream.SplitMix64 g) {
            double u = nextF64(g);
            double uz = u * SCRAMBLED_ZETAN;
            if (uz < 1.0) {
                return 0;
            }
            if (uz < second) {
                return 1;
            }
            double base = eta * u - eta + 1.0;
            return Math.min((long) (SCRAMBLED_ITEMS * pow(base, alpha)), SCRAMBLED_ITEMS - 1);
        }

        long next(Stream.SplitMix64 g) {
            return Long.remainderUnsigned(fnv64(zipfian(g)), items);
        }

        double eta() {
            return eta;
        }
    }

    /** A workload's share of each operation, indexed by operation code; null for workloads
     * with inserts or scans (D, E), which the peers do not run. */
    static double[] mixFor(String workload) {
        return switch (workload) {
            case "a" -> new double[] {0.5, 0.5, 0, 0, 0};
            case "b" -> new double[] {0.95, 0.05, 0, 0, 0};
            case "c" -> new double[] {1.0, 0, 0, 0, 0};
            case "f" -> new double[] {0.5, 0, 0, 0, 0.5};
            default -> null;
        };
    }

    /** The first operation (in code order, skipping zero shares) whose cumulative share exceeds
     * u; the last one when rounding leaves the sum just below 1. */
    static int pick(double[] share, double u) {
        double acc = 0.0;
        int last = READ;
        for (int op = 0; op < share.length; op++) {
            if (share[op] <= 0.0) {
                continue;
            }
            acc += share[op];
            last = op;
            if (u < acc) {
                return op;
            }
        }
        return last;
    }

    /** The run phase's source of operations (STREAM.md 8.3): op codes and key numbers. */
    static final class Chooser {
        private final double[] share;
        private final ScrambledZipfian zipf;
        private final Stream.SplitMix64 g;
        int op;
        long key;

        Chooser(double[] share, long records, long operations, long seed) {
            this.share = share;
            this.zipf = new ScrambledZipfian(records + (long) (operations * share[INSERT] * 2.0));
            this.g = Stream.SplitMix64.forBenchmark(seed, 0, 0);
        }

        /** Draws the next operation into op and key, given that keys 0..inserted exist. */
        void next(long inserted) {
            op = pick(share, nextF64(g));
            inserted = Math.max(inserted, 1);
            for (int i = 0; i < MAX_REDRAWS; i++) {
                key = zipf.next(g);
                if (Long.compareUnsigned(key, inserted) < 0) {
                    return;
                }
            }
            key = inserted - 1;
        }
    }

    /** An error message, or null when the configuration can run. */
    static String validate(Config c) {
        if (mixFor(c.ycsb) == null) {
            return "unknown or unsupported YCSB workload \"" + c.ycsb
                    + "\" (the peers run a, b, c and f: the workloads without inserts or scans)";
        }
        if (c.records == 0) {
            return "records must be at least 1";
        }
        if (c.keySize < Stream.decimalDigits(c.records + c.operations - 1)) {
            return "key-size " + c.keySize + " is too small for " + (c.records + c.operations) + " key numbers";
        }
        return null;
    }

    private static long bufferFnv(long seed, int position, int valueSize) {
        byte[] data = new Stream.ValueGenerator(Stream.SplitMix64.forBenchmark(seed, position, 0), valueSize).data();
        return Stream.fnv1a64(data, 0, data.length);
    }

    /** --dump-ycsb-ops N: the whole run phase's operation counts and FNV-1a 64 digest (per
     * operation: its code byte, then the key number's 8 little-endian bytes), the value buffers'
     * digests and the first N operations, as one JSON line; every peer prints the same bytes. */
    static String dumpOps(Config c, long n) {
        Chooser chooser = new Chooser(mixFor(c.ycsb), c.records, c.operations, c.seed);
        long[] counts = new long[OP_NAMES.length];
        long h = 0xcbf29ce484222325L;
        List<String> first = new ArrayList<>();
        for (long i = 0; i < c.operations; i++) {
            chooser.next(c.records);
            counts[chooser.op]++;
            h = (h ^ chooser.op) * 0x100000001b3L;
            for (int b = 0; b < 8; b++) {
                h = (h ^ ((chooser.key >>> (8 * b)) & 0xff)) * 0x100000001b3L;
            }
            if (i < n) {
                first.add(OP_NAMES[chooser.op] + " " + Long.toUnsignedString(chooser.key));
            }
        }
        Json opCounts = new Json();
        for (int op = 0; op < OP_NAMES.length; op++) {
            opCounts.put(OP_NAMES[op], counts[op]);
        }
        return new Json().put("workload", c.ycsb).put("distribution", "zipfian")
                .put("records", c.records).put("operations", c.operations).put("seed", c.seed)
                .put("value_size", c.valueSize)
                .put("load_value_buffer_fnv1a64", Stream.hex64(bufferFnv(c.seed, 0, c.valueSize)))
                .put("run_value_buffer_fnv1a64", Stream.hex64(bufferFnv(c.seed, 1, c.valueSize)))
                .put("op_counts", opCounts).put("ops_fnv1a64", Stream.hex64(h))
                .put("first_ops", first).toString();
    }

    /** One phase's measurements: exact latencies per operation type (sorted samples, not an
     * HDR histogram) and completions per second. */
    private static final class Phase {
        private final long start = System.nanoTime();
        private final long[][] nanos = new long[OP_NAMES.length][];
        private final int[] counts = new int[OP_NAMES.length];
        private long[] perSecond = new long[16];
        private int seconds;
        long notFound;

        void record(int op, long t0) {
            long end = System.nanoTime();
            if (nanos[op] == null) {
                nanos[op] = new long[1024];
            } else if (counts[op] == nanos[op].length) {
                nanos[op] = Arrays.copyOf(nanos[op], counts[op] * 2);
            }
            nanos[op][counts[op]++] = Math.max(1, end - t0);
            int second = (int) ((end - start) / 1_000_000_000L);
            if (second >= perSecond.length) {
                perSecond = Arrays.copyOf(perSecond, Math.max(second + 1, perSecond.length * 2));
            }
            perSecond[second]++;
            seconds = Math.max(seconds, second + 1);
        }

        /** Ends the phase (its seconds run from construction to now): the fields of Sluice's
         * PhaseReport. */
        Json finish(String name) {
            double secs = (System.nanoTime() - start) / 1e9;
            long ops = 0;
            List<Json> operations = new ArrayList<>();
            for (int op = 0; op < OP_NAMES.length; op++) {
                if (counts[op] == 0) {
                    continue;
                }
                long[] v = Arrays.copyOf(nanos[op], counts[op]);
                Arrays.sort(v);
                ops += v.length;
                double sum = 0;
                for (long x : v) {
                    sum += x;
                }
                operations.add(new Json().put("op", OP_NAMES[op]).put("count", v.length)
                        .put("ops_per_sec", secs > 0 ? v.length / secs : 0.0)
                        .put("p50_us", at(v, 0.50)).put("p95_us", at(v, 0.95)).put("p99_us", at(v, 0.99))
                        .put("p999_us", at(v, 0.999)).put("max_us", v[v.length - 1] / 1e3)
                        .put("mean_us", sum / v.length / 1e3));
            }
            List<Long> samples = new ArrayList<>();
            for (int i = 0; i < seconds; i++) {
                samples.add(perSecond[i]);
            }
            return new Json().put("phase", name).put("ops", ops).put("seconds", secs)
                    .put("ops_per_sec", secs > 0 ? ops / secs : 0.0).put("not_found", notFound)
                    .put("stopped", false).put("per_second", samples).put("operations", operations);
        }

        private static double at(long[] sorted, double q) {
            return sorted[Math.min((int) (q * sorted.length), sorted.length - 1)] / 1e3;
        }
    }

    /** Loads keys 0..records in order (values from stream position 0) and waits for the
     * engine's background work, then runs the operations (values from stream position 1);
     * returns the object of {@code sluice ycsb --json} plus engine, options and
     * settings_differ. */
    static Json run(Config c, Engine e) throws RocksDBException {
        RocksDB db = e.db;
        Stream.KeyFormat keys = new Stream.KeyFormat(c.keySize, c.records + c.operations);
        byte[] key = new byte[c.keySize];
        Phase load = new Phase();
        Stream.ValueGenerator values = new Stream.ValueGenerator(Stream.SplitMix64.forBenchmark(c.seed, 0, 0), c.valueSize);
        for (long n = 0; n < c.records; n++) {
            long t0 = System.nanoTime();
            keys.write(n, key);
            int len = values.next(c.valueSize);
            db.put(e.writeOptions, key, 0, key.length, values.data(), values.offset(), len);
            load.record(INSERT, t0);
        }
        e.waitIdle(); // The load is not over until the work it caused is, as in Sluice.
        Json loadJson = load.finish("load");

        Chooser chooser = new Chooser(mixFor(c.ycsb), c.records, c.operations, c.seed);
        values = new Stream.ValueGenerator(Stream.SplitMix64.forBenchmark(c.seed, 1, 0), c.valueSize);
        byte[] value = new byte[Math.max(c.valueSize, 1)];
        Phase run = new Phase();
        for (long i = 0; i < c.operations; i++) {
            chooser.next(c.records);
            long t0 = System.nanoTime();
            keys.write(chooser.key, key);
            if (chooser.op != UPDATE
                    && db.get(e.readOptions, key, 0, key.length, value, 0, value.length) == RocksDB.NOT_FOUND) {
                run.notFound++;
            }
            if (chooser.op == UPDATE || chooser.op == READ_MODIFY_WRITE) {
                int len = values.next(c.valueSize);
                db.put(e.writeOptions, key, 0, key.length, values.data(), values.offset(), len);
            }
            run.record(chooser.op, t0);
        }
        Json runJson = run.finish("run");

        Json options = new Json().put("records", c.records).put("operations", c.operations)
                .put("key_size", c.keySize).put("value_size", c.valueSize).put("seed", c.seed)
                .put("sync", false).put("compression", e.compression)
                .put("write_buffer_size", c.writeBufferSize).put("target_file_size", c.targetFileSize)
                .put("block_size", c.blockSize).put("bloom_bits", c.bloomBits).put("cache_size", c.cacheSize)
                .put("compaction_threads", c.compactionThreads)
                .put("min_blob_size", c.minBlobSize).put("blob_file_size", c.blobFileSize);
        return new Json().put("workload", c.ycsb).put("distribution", "zipfian")
                .put("records", c.records).put("operations", c.operations).put("threads", 1)
                .put("key_size", c.keySize).put("value_size", c.valueSize).put("seed", c.seed)
                .put("load", loadJson).put("run", runJson)
                .put("engine", "rocksdb").put("engine_version", e.version)
                .put("lsm", Engine.json(e.shape())).put("options", options)
                .put("settings_differ", e.settingsDiffer);
    }
}
