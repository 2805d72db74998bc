package sluice.peers;

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

/**
 * rocksdbjni-bench runs Sluice's db_bench-style workloads (fillseq, fillrandom, overwrite,
 * readrandom, seekrandom, readwhilewriting, compact) on RocksDB 11 (the release build bundled in Maven Central's
 * org.rocksdb:rocksdbjni jar) and prints one JSON object per benchmark, with the field names
 * of {@code sluice bench --json}, so the two can be compared side by side; with --ycsb it runs
 * YCSB A, B, C or F instead and prints the object of {@code sluice ycsb --json}. Keys, values
 * and YCSB operations follow ../STREAM.md, as in the Go, Rust and C++ peer programs.
 *
 * <p>Build with {@code mvn -q package}; run with {@code java -jar target/rocksdbjni-bench.jar
 * --db DIR ...} (../README.md lists the flags).
 */
public final class Main {
    private Main() {}

    public static void main(String[] args) {
        Config c;
        try {
            c = Config.parse(args);
        } catch (IllegalArgumentException ex) {
            fail(ex.getMessage());
            return;
        }
        // One line at a time, flushed: benches/peers/run pauses the process between benchmarks.
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        try {
            if (c.selfTest) {
                System.exit(SelfTest.run(out));
            } else if (c.dumpYcsbOps > 0) {
                out.println(Ycsb.dumpOps(c, c.dumpYcsbOps));
            } else if (c.dumpKeys > 0) {
                dumpStreams(c, out);
            } else {
                run(c, out);
            }
        } catch (IllegalArgumentException ex) {
            fail(ex.getMessage());
        } catch (Exception ex) {
            fail(ex.toString());
        }
    }

    private static void fail(String message) {
        System.err.println("rocksdbjni-bench: " + message);
        System.exit(1);
    }

    /** --dump-keys: each benchmark's position, first keys, first value (hex) and value buffer
     * FNV-1a 64, one line per benchmark: the same bytes as the other peers print. For
     * readwhilewriting these are its writer's, and reader_keys has each reader's first keys. */
    static void dumpStreams(Config c, PrintStream out) {
        Stream.KeyFormat keys = new Stream.KeyFormat(c.keySize, c.num);
        for (int pos = 0; pos < c.benchmarks.size(); pos++) {
            String name = c.benchmarks.get(pos);
            Stream.SplitMix64 g = Stream.SplitMix64.forBenchmark(c.seed, pos, 0);
            String firstValue = "";
            String fnv = "";
            if (isWrite(name) || name.equals("readwhilewriting")) {
                Stream.ValueGenerator v = new Stream.ValueGenerator(g, c.valueSize);
                fnv = Stream.hex64(Stream.fnv1a64(v.data(), 0, v.data().length));
                int len = v.next(c.valueSize);
                firstValue = HexFormat.of().formatHex(v.data(), v.offset(), v.offset() + len);
            }
            List<String> dumped = new ArrayList<>();
            if (name.equals("fillseq")) {
                for (long i = 0; i < c.dumpKeys; i++) {
                    dumped.add(keys.string(i));
                }
            } else if (!name.equals("compact")) {
                dumped = drawn(c, keys, g);
            }
            Json line = new Json().put("benchmark", name).put("position", pos).put("keys", dumped)
                    .put("first_value", firstValue).put("value_buffer_fnv1a64", fnv);
            if (name.equals("readwhilewriting")) {
                List<List<String>> readers = new ArrayList<>();
                for (int r = 1; r <= c.threads; r++) {
                    readers.add(drawn(c, keys, Stream.SplitMix64.forBenchmark(c.seed, pos, r)));
                }
                line.put("reader_keys", readers);
            }
            out.println(line);
        }
    }

    /** The first --dump-keys keys drawn from g. */
    private static List<String> drawn(Config c, Stream.KeyFormat keys, Stream.SplitMix64 g) {
        List<String> out = new ArrayList<>();
        for (long i = 0; i < c.dumpKeys; i++) {
            out.add(keys.string(g.below(c.num)));
        }
        return out;
    }

    static boolean isWrite(String name) {
        return name.equals("fillseq") || name.equals("fillrandom") || name.equals("overwrite");
    }

    /** Opens the database and runs every benchmark in order (or YCSB), printing each result as
     * it ends. */
    private static void run(Config c, PrintStream out) throws Exception {
        if (c.db.isEmpty()) {
            throw new IllegalArgumentException("--db is required");
        }
        Path dir = Path.of(c.db);
        if (!c.useExistingDb && Files.isDirectory(dir)) {
            try (var entries = Files.list(dir)) {
                if (entries.findAny().isPresent()) {
                    throw new IllegalArgumentException("--db " + c.db + " is not empty");
                }
            }
        }
        if (!c.ycsb.isEmpty()) {
            String line;
            try (Engine e = new Engine(c)) {
                line = Ycsb.run(c, e).toString();
            } // Closed before the line is printed, as Sluice closes its database.
            out.println(line);
            return;
        }
        try (Engine e = new Engine(c)) {
            if (c.compression.equals("snappy")) {
                System.err.println("rocksdbjni-bench: note: " + e.settingsDiffer.stream()
                        .filter(n -> n.startsWith("compression")).findFirst().orElse(""));
            }
            Bench bench = new Bench(e);
            for (int pos = 0; pos < c.benchmarks.size(); pos++) {
                out.println(bench.run(c.benchmarks.get(pos), pos));
            }
        }
    }
}
