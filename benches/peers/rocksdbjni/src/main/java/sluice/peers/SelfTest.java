package sluice.peers;

import java.io.PrintStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * --self-test: the test vectors of ../STREAM.md section 6 (the key/value stream) and section
 * 8.4 (the YCSB operation stream), as ../cpp/vectors.h checks them for the C++ programs, plus
 * 8.4's digests at other sizes (several million zipfian draws, which is what puts
 * {@link Ycsb#pow} to the test). Prints "self-test: P passed, F failed".
 */
final class SelfTest {
    /** {@code --dump-ycsb-ops 5 --ycsb a|f --records 1000000 --operations 1000000} (seed 301,
     * values of 100 bytes): the same bytes in every peer program, and Sluice's own Chooser's
     * operations. */
    static final String DUMP_A = "{\"workload\":\"a\",\"distribution\":\"zipfian\",\"records\":1000000,\"operations\":1000000,\"seed\":301,\"value_size\":100,\"load_value_buffer_fnv1a64\":\"eaa93389abcf248d\",\"run_value_buffer_fnv1a64\":\"96f9f4a4a4348e8d\",\"op_counts\":{\"read\":499683,\"update\":500317,\"insert\":0,\"scan\":0,\"read-modify-write\":0},\"ops_fnv1a64\":\"404df34d30a68eca\",\"first_ops\":[\"update 49015\",\"update 291577\",\"update 842051\",\"read 342734\",\"read 213555\"]}";
    static final String DUMP_F = "{\"workload\":\"f\",\"distribution\":\"zipfian\",\"records\":1000000,\"operations\":1000000,\"seed\":301,\"value_size\":100,\"load_value_buffer_fnv1a64\":\"eaa93389abcf248d\",\"run_value_buffer_fnv1a64\":\"96f9f4a4a4348e8d\",\"op_counts\":{\"read\":499683,\"update\":0,\"insert\":0,\"scan\":0,\"read-modify-write\":500317},\"ops_fnv1a64\":\"1fa7a5825029d1cf\",\"first_ops\":[\"read-modify-write 49015\",\"read-modify-write 291577\",\"read-modify-write 842051\",\"read 342734\",\"read 213555\"]}";

    private int passed, failed;

    private SelfTest() {}

    private void check(boolean ok, String what) {
        if (ok) {
            passed++;
        } else {
            System.err.println("self-test: " + what + " failed");
            failed++;
        }
    }

    /** Runs every check and returns the process exit code. */
    static int run(PrintStream out) {
        SelfTest t = new SelfTest();
        t.stream();
        t.ycsb();
        out.println("self-test: " + t.passed + " passed, " + t.failed + " failed");
        return t.failed == 0 ? 0 : 1;
    }

    /** Section 6: SplitMix64, the streams' seeds, key numbers and value buffers. */
    private void stream() {
        Stream.SplitMix64 zero = new Stream.SplitMix64(0);
        check(zero.next() == 0xe220a8397b1dcdafL && zero.next() == 0x6e789e6aa1b965f4L
                && zero.next() == 0x06c45d188009454fL, "SplitMix64 reference");
        check(Stream.mix64(301) == 0x2ea7d2fa987b76ebL, "mix(301)");
        Stream.SplitMix64 s = Stream.SplitMix64.forBenchmark(301, 0, 0);
        check(s.next() == 0xccfab28b74453852L && s.next() == 0x6f89713b8aeb9f8dL
                && s.next() == 0x8141311f6ad3d253L && s.next() == 0x86a93c15cfafa663L
                && s.next() == 0xc34a84a95ecb7732L, "position 0's first five outputs");
        check(Stream.SplitMix64.forBenchmark(301, 1, 0).state() == 0xe525d2a3b2002e14L, "position 1 state");
        long[][] expected = {{568985, 555461, 548675, 856306, 142518},
                             {200265, 681718, 426965, 265444, 238721},
                             {587334, 706572, 126095, 749313, 128125}};
        long[] fnv = {0xeaa93389abcf248dL, 0, 0x5efd3fff3cbd09b1L};
        for (int pos = 0; pos < 3; pos++) {
            Stream.SplitMix64 g = Stream.SplitMix64.forBenchmark(301, pos, 0);
            if (pos != 1) { // fillrandom and overwrite build their value buffer first.
                Stream.ValueGenerator v = new Stream.ValueGenerator(g, 100);
                byte[] d = v.data();
                check(d.length == 1048600 && Stream.fnv1a64(d, 0, d.length) == fnv[pos], "value buffer");
                int len = v.next(100);
                String first = new String(d, v.offset(), len, StandardCharsets.US_ASCII);
                if (pos == 0) {
                    String half = "$}8:b7b*;5T7eSSN&G? ~4p3K-(C@qNXn@=&bQt!Ff|v5em_gj";
                    check(first.equals(half + half), "first value");
                    v.next(100);
                    check(java.util.HexFormat.of().formatHex(d, v.offset(), v.offset() + 16)
                            .equals("7560342074345949372c322f61754f29"), "second value");
                } else {
                    check(first.startsWith("S94!^-65"), "overwrite's first value");
                }
            }
            long[] got = new long[5];
            for (int i = 0; i < 5; i++) {
                got[i] = g.below(1_000_000);
            }
            check(Arrays.equals(got, expected[pos]), "key numbers of position " + pos);
        }
        // readwhilewriting's readers: threads 1 and 2 of position 0, and their shares.
        check(Stream.SplitMix64.forBenchmark(301, 0, 1).state() == 0xe3b0b46bb6dda086L, "thread 1 state");
        long[][] readers = {{262325, 89055, 863800, 829571, 336372},
                            {655449, 522333, 949794, 372108, 980815}};
        for (int r = 0; r < 2; r++) {
            Stream.SplitMix64 g = Stream.SplitMix64.forBenchmark(301, 0, r + 1);
            long[] got = new long[5];
            for (int i = 0; i < 5; i++) {
                got[i] = g.below(1_000_000);
            }
            check(Arrays.equals(got, readers[r]), "key numbers of reader " + r);
        }
        check(Arrays.equals(Stream.share(10, 3, 0), new long[] {0, 3})
                && Arrays.equals(Stream.share(10, 3, 1), new long[] {3, 6})
                && Arrays.equals(Stream.share(10, 3, 2), new long[] {6, 10}), "reader shares");
        byte[] big = new Stream.ValueGenerator(Stream.SplitMix64.forBenchmark(301, 0, 0), 3 << 20).data();
        check(big.length == 3145800 && Stream.fnv1a64(big, 0, big.length) == 0xce218f4e3e3ed34dL, "3 MiB buffer");
        check(new Stream.KeyFormat(16, 1_000_000).string(568985).equals("0000000000568985"), "key bytes");
        // Lemire's draw needs the unsigned high half, also for outputs with the top bit set.
        Stream.SplitMix64 r = new Stream.SplitMix64(7);
        boolean ok = true;
        for (int i = 0; i < 1000; i++) {
            long x = r.next();
            long y = i % 2 == 0 ? r.next() : r.next() >>> 1;
            BigInteger want = new BigInteger(Long.toUnsignedString(x))
                    .multiply(new BigInteger(Long.toUnsignedString(y))).shiftRight(64);
            ok &= want.longValue() == Stream.unsignedMultiplyHigh(x, y);
        }
        check(ok, "unsigned multiply-high");
    }

    /** Section 8.4: the YCSB operation stream. */
    private void ycsb() {
        check(Ycsb.fnv64(0) == 0x573807cdd7e5c63bL, "fnvhash64(0)");
        check(new Ycsb.ScrambledZipfian(1_000_000).eta() == 0x1.b295ee6b5a1dep-3, "eta");
        Config c = new Config();
        c.records = 1_000_000;
        c.operations = 1_000_000;
        c.ycsb = "a";
        check(Ycsb.dumpOps(c, 5).equals(DUMP_A), "workload a's operations");
        c.ycsb = "f";
        check(Ycsb.dumpOps(c, 5).equals(DUMP_F), "workload f's operations");
        String[][] digests = {{"a", "100000", "100000", "641351126abda989"},
                              {"f", "1000", "500000", "cfa71c891be98a0d"},
                              {"a", "2000000", "2000000", "dd48e8cc6aea9737"},
                              {"b", "1000000", "300000", "c02c76510fa18266"}};
        for (String[] d : digests) {
            c.ycsb = d[0];
            c.records = Long.parseLong(d[1]);
            c.operations = Long.parseLong(d[2]);
            check(Ycsb.dumpOps(c, 0).contains("\"ops_fnv1a64\":\"" + d[3] + "\""),
                    "workload " + d[0] + " digest at " + d[1] + " records, " + d[2] + " operations");
        }
    }
}
