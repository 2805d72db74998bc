package sluice.peers;

import java.util.ArrayList;
import java.util.List;

/**
 * The command line: the flags of the other peer programs (--flag VALUE or --flag=VALUE; see
 * ../README.md), plus {@code --subcompactions} (RocksDB's max_subcompactions),
 * {@code --min-blob-size} and {@code --blob-file-size} (value separation: RocksDB's integrated
 * BlobDB, as {@code sluice bench}'s flags of the same names) and {@code --self-test}. A boolean
 * flag alone means true.
 */
final class Config {
    static final List<String> BENCHMARKS =
            List.of("fillseq", "fillrandom", "overwrite", "readrandom", "compact");
    /** Benchmarks a run may name that the default list leaves out, as in {@code sluice bench}:
     * deleterange deletes the middle tenth of the key space with one range tombstone, and
     * readseq scans forward (up to --reads entries), seekrandom seeks to --reads uniform keys,
     * readwhilewriting runs --threads readers sharing --reads lookups while one more thread
     * overwrites uniform keys until they are done, and randomtransaction runs --reads
     * transactions on --threads threads (each reads two uniform keys for update and writes
     * both) on a database opened as --transaction-db optimistic or pessimistic. */
    static final List<String> EXTRA_BENCHMARKS =
            List.of("deleterange", "readseq", "seekrandom", "readwhilewriting", "randomtransaction");

    /** The flags that take a value (the others are booleans). */
    private static final List<String> VALUE_FLAGS = List.of("db", "benchmarks", "num", "reads",
            "key-size", "value-size", "seed", "compression", "block-size", "bloom-bits",
            "write-buffer-size", "target-file-size", "cache-size", "compaction-threads", "threads",
            "subcompactions", "dump-keys", "ycsb", "records", "operations", "dump-ycsb-ops",
            "min-blob-size", "blob-file-size", "transaction-db");

    String db = "";
    List<String> benchmarks = new ArrayList<>(BENCHMARKS);
    long num = 1_000_000;
    long reads = -1; // -1: the same as num
    int keySize = 16;
    int valueSize = 100;
    long seed = 301;
    String compression = "lz4";
    int blockSize = 4096;
    int bloomBits = 10;
    long writeBufferSize = 64 << 20;
    long targetFileSize = 64 << 20;
    long cacheSize = 64 << 20;
    boolean disableAutoCompactions;
    boolean useExistingDb;
    int compactionThreads = 2; // RocksDB's max_background_jobs
    int threads = 1; // readwhilewriting's reader threads (the other benchmarks run on one)
    int subcompactions = 1; // RocksDB's max_subcompactions (its default is 1)
    // Value separation (RocksDB's integrated BlobDB), as sluice's --min-blob-size and
    // --blob-file-size: values of at least minBlobSize bytes go to blob files; 0 = off.
    long minBlobSize;
    long blobFileSize = 256L << 20;
    // randomtransaction: "optimistic" opens an OptimisticTransactionDB, "pessimistic" a
    // TransactionDB; "" a plain RocksDB.
    String transactionDb = "";
    int dumpKeys;
    boolean selfTest;
    // YCSB (--ycsb WORKLOAD): the load and run phases of ../STREAM.md section 8.
    String ycsb = ""; // "": the db_bench-style benchmarks
    long records = 100_000;
    long operations = 100_000;
    long dumpYcsbOps;

    long reads() {
        return reads < 0 ? num : reads;
    }

    /** Parses args; throws IllegalArgumentException with the message to print. */
    static Config parse(String[] args) {
        Config c = new Config();
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            if (!arg.startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument " + arg);
            }
            String name = arg.substring(2);
            String value = null;
            int eq = name.indexOf('=');
            if (eq >= 0) {
                value = name.substring(eq + 1);
                name = name.substring(0, eq);
            }
            switch (name) {
                case "disable-auto-compactions" -> c.disableAutoCompactions = bool(name, value);
                case "use-existing-db" -> c.useExistingDb = bool(name, value);
                case "self-test" -> c.selfTest = bool(name, value);
                default -> {
                    if (!VALUE_FLAGS.contains(name)) {
                        throw new IllegalArgumentException("unknown flag --" + name);
                    }
                    if (value == null) {
                        if (i + 1 >= args.length) {
                            throw new IllegalArgumentException("--" + name + " needs a value");
                        }
                        value = args[++i];
                    }
                    c.set(name, value);
                }
            }
        }
        c.validate();
        return c;
    }

    private void set(String name, String v) {
        switch (name) {
            case "db" -> db = v;
            case "benchmarks" -> {
                benchmarks = new ArrayList<>();
                for (String b : v.split(",")) {
                    b = b.trim();
                    if (b.isEmpty()) {
                        continue;
                    }
                    if (!BENCHMARKS.contains(b) && !EXTRA_BENCHMARKS.contains(b)) {
                        throw new IllegalArgumentException("unknown benchmark \"" + b
                                + "\" (expected one of " + String.join(", ", BENCHMARKS) + ", "
                                + String.join(", ", EXTRA_BENCHMARKS) + ")");
                    }
                    benchmarks.add(b);
                }
            }
            case "num" -> num = number(name, v);
            case "reads" -> reads = number(name, v);
            case "key-size" -> keySize = small(name, v);
            case "value-size" -> valueSize = small(name, v);
            case "seed" -> seed = number(name, v);
            case "compression" -> compression = v;
            case "block-size" -> blockSize = small(name, v);
            case "bloom-bits" -> bloomBits = small(name, v);
            case "write-buffer-size" -> writeBufferSize = number(name, v);
            case "target-file-size" -> targetFileSize = number(name, v);
            case "cache-size" -> cacheSize = number(name, v);
            case "compaction-threads" -> compactionThreads = small(name, v);
            case "threads" -> threads = small(name, v);
            case "subcompactions" -> subcompactions = small(name, v);
            case "dump-keys" -> dumpKeys = small(name, v);
            case "ycsb" -> ycsb = v;
            case "records" -> records = number(name, v);
            case "operations" -> operations = number(name, v);
            case "dump-ycsb-ops" -> dumpYcsbOps = number(name, v);
            case "min-blob-size" -> minBlobSize = number(name, v);
            case "blob-file-size" -> blobFileSize = number(name, v);
            case "transaction-db" -> {
                if (!List.of("optimistic", "pessimistic").contains(v)) {
                    throw new IllegalArgumentException("--transaction-db takes optimistic or pessimistic, got \"" + v + "\"");
                }
                transactionDb = v;
            }
            default -> throw new IllegalArgumentException("unknown flag --" + name);
        }
    }

    private void validate() {
        if (benchmarks.contains("randomtransaction") && transactionDb.isEmpty()) {
            throw new IllegalArgumentException("randomtransaction needs --transaction-db optimistic or pessimistic");
        }
        if (valueSize > 64 << 20) {
            throw new IllegalArgumentException("value-size must be at most 64 MiB");
        }
        if (compactionThreads < 1 || subcompactions < 1 || threads < 1) {
            throw new IllegalArgumentException("compaction-threads, subcompactions and threads must be at least 1");
        }
        if (blockSize < 1 || writeBufferSize < 1 || targetFileSize < 1) {
            throw new IllegalArgumentException("sizes must be positive (cache-size and bloom-bits may be 0)");
        }
        if (blobFileSize < 4096) {
            // Sluice's own bound (BlobOptions::validate).
            throw new IllegalArgumentException("blob-file-size must be at least 4 KiB, got " + blobFileSize);
        }
        if (!List.of("none", "snappy", "zstd", "lz4").contains(compression)) {
            throw new IllegalArgumentException("unknown compression \"" + compression
                    + "\" (expected none, snappy, zstd or lz4)");
        }
        if (dumpYcsbOps > 0 && ycsb.isEmpty()) {
            ycsb = "a";
        }
        if (!ycsb.isEmpty()) {
            String why = Ycsb.validate(this);
            if (why != null) {
                throw new IllegalArgumentException(why);
            }
            return;
        }
        if (num == 0) {
            throw new IllegalArgumentException("num must be at least 1");
        }
        new Stream.KeyFormat(keySize, num); // throws when num - 1 does not fit
    }

    private static long number(String name, String v) {
        try {
            long x = Long.parseLong(v);
            if (x < 0) {
                throw new NumberFormatException();
            }
            return x;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("bad value for --" + name + ": " + v);
        }
    }

    /** A flag that must fit an int (sizes in bytes of one key, value or block, counts). */
    private static int small(String name, String v) {
        long x = number(name, v);
        if (x > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("--" + name + " is too large: " + v);
        }
        return (int) x;
    }

    private static boolean bool(String name, String v) {
        if (v == null || v.equals("true") || v.equals("1")) {
            return true;
        }
        if (v.equals("false") || v.equals("0")) {
            return false;
        }
        throw new IllegalArgumentException("bad value for --" + name + ": " + v);
    }
}
