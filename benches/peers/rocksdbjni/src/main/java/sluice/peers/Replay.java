package sluice.peers;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import org.rocksdb.ColumnFamilyDescriptor;
import org.rocksdb.ColumnFamilyHandle;
import org.rocksdb.ColumnFamilyOptions;
import org.rocksdb.CompactRangeOptions;
import org.rocksdb.DBOptions;
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
 * cf NAME                        create column family NAME, with the default one's options
 * reopen                         release every snapshot, close the database and open it again
 *                                with every column family it lists; prints
 *                                "cfs default NAME..." (the others sorted by name)
 * </pre>
 *
 * <p>Any operation but {@code operator}, {@code batch}, {@code snapshot}, {@code release},
 * {@code cf} and {@code reopen} may name a column family with a prefix {@code @NAME }, also
 * inside a batch (one batch may write several): {@code @users put K V}, {@code @users get_at
 * K}, {@code @users scan}, {@code @users flush}. Without one it works on the default column
 * family. Snapshots are the database's, so {@code get_at} and {@code scan_at} read any column
 * family at the newest one.
 */
public final class Replay implements AutoCloseable {
    private final String path;
    private final DBOptions dbOptions;
    private final ColumnFamilyOptions cfOptions;
    private final WriteOptions wo = new WriteOptions();
    private final Deque<Snapshot> snapshots = new ArrayDeque<>();
    /** Every open column family handle, by name. */
    private final Map<String, ColumnFamilyHandle> families = new LinkedHashMap<>();
    private RocksDB db;

    private Replay(String path, MergeOperator operator) {
        this.path = path;
        this.dbOptions = new DBOptions().setCreateIfMissing(true);
        this.cfOptions = new ColumnFamilyOptions()
                .setMergeOperator(operator)
                .setWriteBufferSize(64 << 10)
                .setTargetFileSizeBase(64 << 10)
                .setMaxBytesForLevelBase(256 << 10)
                .setLevel0FileNumCompactionTrigger(2);
    }

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
        try (Replay replay = new Replay(args[0], operator)) {
            replay.open(List.of(RocksDB.DEFAULT_COLUMN_FAMILY));
            String line;
            while ((line = in.readLine()) != null) {
                replay.run(line, in, out);
            }
        } catch (RocksDBException ex) {
            System.err.println("Replay: " + ex);
            System.exit(1);
        }
        out.flush();
    }

    /** Opens the database with the column families {@code names} ("default" among them). */
    private void open(List<byte[]> names) throws RocksDBException {
        List<ColumnFamilyDescriptor> descriptors = new ArrayList<>();
        for (byte[] name : names) {
            descriptors.add(new ColumnFamilyDescriptor(name, cfOptions));
        }
        List<ColumnFamilyHandle> handles = new ArrayList<>();
        db = RocksDB.open(dbOptions, path, descriptors, handles);
        for (ColumnFamilyHandle h : handles) {
            families.put(new String(h.getName(), StandardCharsets.UTF_8), h);
        }
    }

    /** Releases every snapshot and closes every handle and the database. */
    private void closeDb() throws RocksDBException {
        for (Snapshot s : snapshots) {
            db.releaseSnapshot(s);
        }
        snapshots.clear();
        for (ColumnFamilyHandle h : families.values()) {
            h.close();
        }
        families.clear();
        db.closeE();
        db = null;
    }

    @Override
    public void close() throws RocksDBException {
        if (db != null) {
            closeDb();
        }
        wo.close();
        cfOptions.close();
        dbOptions.close();
    }

    /** The column family a line names with "@NAME " (or the default one), and the rest. */
    private record Target(ColumnFamilyHandle cf, String[] f) {}

    private Target target(String line) {
        if (!line.startsWith("@")) {
            return new Target(families.get("default"), line.split(" "));
        }
        int space = line.indexOf(' ');
        String name = line.substring(1, space);
        ColumnFamilyHandle cf = families.get(name);
        if (cf == null) {
            throw new IllegalArgumentException("no column family " + name + ": " + line);
        }
        return new Target(cf, line.substring(space + 1).split(" "));
    }

    private void run(String line, BufferedReader in, PrintStream out) throws Exception {
        Target t = target(line);
        ColumnFamilyHandle cf = t.cf();
        String[] f = t.f();
        switch (f[0]) {
            case "batch" -> {
                try (WriteBatch batch = new WriteBatch()) {
                    int n = Integer.parseInt(f[1]);
                    for (int i = 0; i < n; i++) {
                        Target et = target(in.readLine());
                        ColumnFamilyHandle ecf = et.cf();
                        String[] e = et.f();
                        switch (e[0]) {
                            case "put" -> batch.put(ecf, hex(e[1]), hex(e[2]));
                            case "delete" -> batch.delete(ecf, hex(e[1]));
                            case "merge" -> batch.merge(ecf, hex(e[1]), hex(e[2]));
                            case "delete_range" -> batch.deleteRange(ecf, hex(e[1]), hex(e[2]));
                            default -> throw new IllegalArgumentException(e[0]);
                        }
                    }
                    db.write(wo, batch);
                }
            }
            case "put" -> db.put(cf, wo, hex(f[1]), hex(f[2]));
            case "delete" -> db.delete(cf, wo, hex(f[1]));
            case "merge" -> db.merge(cf, wo, hex(f[1]), hex(f[2]));
            case "delete_range" -> db.deleteRange(cf, wo, hex(f[1]), hex(f[2]));
            case "flush" -> {
                try (FlushOptions fo = new FlushOptions().setWaitForFlush(true)) {
                    db.flush(fo, cf);
                }
            }
            case "compact" -> db.compactRange(cf);
            case "compact_range" -> {
                try (CompactRangeOptions co = new CompactRangeOptions()) {
                    db.compactRange(cf, hex(f[1]), hex(f[2]), co);
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
                try (ReadOptions ro = readAt(f[0].equals("get_at"))) {
                    byte[] v = db.get(cf, ro, hex(f[1]));
                    out.println("get " + f[1] + " " + (v == null ? "none" : text(v)));
                }
            }
            case "scan", "scan_reverse", "scan_at" -> {
                try (ReadOptions ro = readAt(f[0].equals("scan_at"));
                        RocksIterator it = db.newIterator(cf, ro)) {
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
            case "cf" -> {
                String name = f[1];
                if (families.containsKey(name)) {
                    throw new IllegalArgumentException("column family " + name + " exists");
                }
                families.put(name, db.createColumnFamily(
                        new ColumnFamilyDescriptor(name.getBytes(StandardCharsets.UTF_8), cfOptions)));
            }
            case "reopen" -> {
                closeDb();
                List<byte[]> names;
                try (Options o = new Options(dbOptions, cfOptions)) {
                    names = RocksDB.listColumnFamilies(o, path);
                }
                open(names);
                TreeSet<String> others = new TreeSet<>(families.keySet());
                others.remove("default");
                out.println("cfs default" + (others.isEmpty() ? "" : " " + String.join(" ", others)));
            }
            default -> throw new IllegalArgumentException("unknown operation: " + line);
        }
    }

    private ReadOptions readAt(boolean atSnapshot) {
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
