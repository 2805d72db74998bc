package sluice.peers;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.HexFormat;
import org.rocksdb.CompactRangeOptions;
import org.rocksdb.FlushOptions;
import org.rocksdb.MergeOperator;
import org.rocksdb.Options;
import org.rocksdb.ReadOptions;
import org.rocksdb.RocksDB;
import org.rocksdb.RocksDBException;
import org.rocksdb.RocksIterator;
import org.rocksdb.Snapshot;
import org.rocksdb.StringAppendOperator;
import org.rocksdb.UInt64AddOperator;
import org.rocksdb.WriteBatch;
import org.rocksdb.WriteOptions;

/**
 * Replays an operation script on RocksDB 11 and prints what every read returned: one half of
 * Sluice's differential test (crates/sluice/tests/rocksdb_differential.rs writes the script,
 * runs the same operations on Sluice and compares the two outputs line for line).
 *
 * <p>Run: {@code java -cp rocksdbjni-bench.jar sluice.peers.Replay DIR < script}. The script
 * is one operation per line, keys and values in hex ({@code -} for an empty one):
 *
 * <pre>
 * operator append|u64add         the merge operator (first line)
 * put K V | delete K | merge K V | delete_range A B
 * batch N                        the next N put/delete/merge/delete_range lines, atomically
 * flush | compact | compact_range A B
 * snapshot | release             take a snapshot / release the oldest one
 * get K | get_at K               read K (at the newest snapshot): prints "get K V" or "get K none"
 * scan | scan_reverse | scan_at  print every "K V" (backward / at the newest snapshot), then "end"
 * </pre>
 */
public final class Replay {
    private Replay() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: Replay DIR < script");
            System.exit(2);
        }
        RocksDB.loadLibrary();
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String first = in.readLine();
        if (first == null || !first.startsWith("operator ")) {
            throw new IllegalArgumentException("the script must start with 'operator NAME'");
        }
        MergeOperator operator = switch (first.substring("operator ".length())) {
            case "append" -> new StringAppendOperator(',');
            case "u64add" -> new UInt64AddOperator();
            default -> throw new IllegalArgumentException(first);
        };
        Deque<Snapshot> snapshots = new ArrayDeque<>();
        try (Options options = new Options()
                        .setCreateIfMissing(true)
                        .setMergeOperator(operator)
                        .setWriteBufferSize(64 << 10)
                        .setTargetFileSizeBase(64 << 10)
                        .setMaxBytesForLevelBase(256 << 10)
                        .setLevel0FileNumCompactionTrigger(2);
                RocksDB db = RocksDB.open(options, args[0]);
                WriteOptions wo = new WriteOptions()) {
            String line;
            while ((line = in.readLine()) != null) {
                String[] f = line.split(" ");
                switch (f[0]) {
                    case "batch" -> {
                        try (WriteBatch batch = new WriteBatch()) {
                            int n = Integer.parseInt(f[1]);
                            for (int i = 0; i < n; i++) {
                                String[] e = in.readLine().split(" ");
                                switch (e[0]) {
                                    case "put" -> batch.put(hex(e[1]), hex(e[2]));
                                    case "delete" -> batch.delete(hex(e[1]));
                                    case "merge" -> batch.merge(hex(e[1]), hex(e[2]));
                                    case "delete_range" -> batch.deleteRange(hex(e[1]), hex(e[2]));
                                    default -> throw new IllegalArgumentException(e[0]);
                                }
                            }
                            db.write(wo, batch);
                        }
                    }
                    case "put" -> db.put(wo, hex(f[1]), hex(f[2]));
                    case "delete" -> db.delete(wo, hex(f[1]));
                    case "merge" -> db.merge(wo, hex(f[1]), hex(f[2]));
                    case "delete_range" -> db.deleteRange(wo, hex(f[1]), hex(f[2]));
                    case "flush" -> {
                        try (FlushOptions fo = new FlushOptions().setWaitForFlush(true)) {
                            db.flush(fo);
                        }
                    }
                    case "compact" -> db.compactRange();
                    case "compact_range" -> {
                        try (CompactRangeOptions co = new CompactRangeOptions()) {
                            db.compactRange(null, hex(f[1]), hex(f[2]), co);
                        }
                    }
                    case "snapshot" -> snapshots.addLast(db.getSnapshot());
                    case "release" -> {
                        Snapshot s = snapshots.pollFirst();
                        if (s != null) {
                            db.releaseSnapshot(s);
                        }
                    }
                    case "get", "get_at" -> {
                        try (ReadOptions ro = readAt(f[0].equals("get_at"), snapshots)) {
                            byte[] v = db.get(ro, hex(f[1]));
                            out.println("get " + f[1] + " " + (v == null ? "none" : text(v)));
                        }
                    }
                    case "scan", "scan_reverse", "scan_at" -> {
                        try (ReadOptions ro = readAt(f[0].equals("scan_at"), snapshots);
                                RocksIterator it = db.newIterator(ro)) {
                            boolean back = f[0].equals("scan_reverse");
                            if (back) {
                                it.seekToLast();
                            } else {
                                it.seekToFirst();
                            }
                            while (it.isValid()) {
                                out.println(text(it.key()) + " " + text(it.value()));
                                if (back) {
                                    it.prev();
                                } else {
                                    it.next();
                                }
                            }
                            it.status();
                            out.println("end");
                        }
                    }
                    default -> throw new IllegalArgumentException("unknown operation: " + line);
                }
            }
            for (Snapshot s : snapshots) {
                db.releaseSnapshot(s);
            }
        } catch (RocksDBException ex) {
            System.err.println("Replay: " + ex);
            System.exit(1);
        }
        out.flush();
    }

    private static ReadOptions readAt(boolean atSnapshot, Deque<Snapshot> snapshots) {
        ReadOptions ro = new ReadOptions();
        if (atSnapshot && !snapshots.isEmpty()) {
            ro.setSnapshot(snapshots.peekLast());
        }
        return ro;
    }

    private static byte[] hex(String s) {
        return s.equals("-") ? new byte[0] : HexFormat.of().parseHex(s);
    }

    private static String text(byte[] b) {
        return b.length == 0 ? "-" : HexFormat.of().formatHex(b);
    }
}
