package sluice.peers;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.rocksdb.BlockBasedTableConfig;
import org.rocksdb.BloomFilter;
import org.rocksdb.CompressionType;
import org.rocksdb.FlushOptions;
import org.rocksdb.HistogramType;
import org.rocksdb.LRUCache;
import org.rocksdb.LevelMetaData;
import org.rocksdb.Options;
import org.rocksdb.ReadOptions;
import org.rocksdb.RocksDB;
import org.rocksdb.RocksDBException;
import org.rocksdb.OptimisticTransactionDB;
import org.rocksdb.Statistics;
import org.rocksdb.TickerType;
import org.rocksdb.Transaction;
import org.rocksdb.TransactionDB;
import org.rocksdb.TransactionDBOptions;
import org.rocksdb.TransactionOptions;
import org.rocksdb.WriteOptions;

/**
 * An open RocksDB database with options mirroring Sluice's, and what the reports need to know
 * about it: the LSM shape, RocksDB's own counters, whether background work is still running,
 * and, in plain words, the settings that differ from Sluice's.
 */
final class Engine implements AutoCloseable {
    /** L0 triggers this high are never reached: with --disable-auto-compactions every flushed
     * table stays in L0 and the load never stalls on L0 (db_bench's --level0_*_trigger). */
    private static final int NO_STALL = 1_000_000;

    static {
        // Extracts the bundled librocksdbjni-linux64.so into java.io.tmpdir and loads it.
        RocksDB.loadLibrary();
    }

    final Config c;
    final RocksDB db;
    final String version = RocksDB.rocksdbVersion().toString();
    final String compression; // the compression actually used
    final List<String> settingsDiffer = new ArrayList<>();
    final WriteOptions writeOptions = new WriteOptions(); // WAL written, not synced (Sluice's default)
    final ReadOptions readOptions = new ReadOptions();
    private final Options options = new Options();
    private final LRUCache cache;
    private final BloomFilter filter;
    private final Statistics stats;
    private final TransactionDBOptions transactionDbOptions = new TransactionDBOptions();
    private final TransactionOptions transactionOptions =
            new TransactionOptions().setLockTimeout(1000).setDeadlockDetect(true);

    /** Opens (creates, unless --use-existing-db) the database at c.db. */
    Engine(Config c) throws RocksDBException {
        this.c = c;
        cache = new LRUCache(c.cacheSize);
        filter = c.bloomBits > 0 ? new BloomFilter(c.bloomBits) : null;
        BlockBasedTableConfig table = new BlockBasedTableConfig()
                .setBlockSize(c.blockSize)
                .setBlockCache(cache);
        if (filter != null) {
            table.setFilterPolicy(filter);
        }
        compression = c.compression;
        // Tickers only: every histogram is ignored, so RocksDB times nothing per operation
        // for them; the counters read below (stalls, compaction bytes) are cheap
        // per-core increments.
        stats = new Statistics(EnumSet.allOf(HistogramType.class));
        options.setCreateIfMissing(true)
                .setErrorIfExists(!c.useExistingDb)
                .setTableFormatConfig(table)
                .setWriteBufferSize(c.writeBufferSize)
                .setMaxWriteBufferNumber(2) // Sluice: a memtable and one being flushed
                .setMaxBackgroundJobs(c.compactionThreads)
                .setMaxSubcompactions(c.subcompactions)
                .setTargetFileSizeBase(c.targetFileSize)
                .setCompressionType(switch (c.compression) {
                    case "none" -> CompressionType.NO_COMPRESSION;
                    case "snappy" -> CompressionType.SNAPPY_COMPRESSION;
                    case "zstd" -> CompressionType.ZSTD_COMPRESSION;
                    default -> CompressionType.LZ4_COMPRESSION;
                })
                .setStatistics(stats);
        if (c.minBlobSize > 0) {
            // Value separation: RocksDB's integrated BlobDB with Sluice's BlobOptions defaults
            // (uncompressed blob files, garbage collection of the oldest quarter of blob files
            // during compactions, no forced compactions for garbage).
            options.setEnableBlobFiles(true)
                    .setMinBlobSize(c.minBlobSize)
                    .setBlobFileSize(c.blobFileSize)
                    .setBlobCompressionType(CompressionType.NO_COMPRESSION)
                    .setEnableBlobGarbageCollection(true)
                    .setBlobGarbageCollectionAgeCutoff(0.25)
                    .setBlobGarbageCollectionForceThreshold(1.0);
        }
        if (c.disableAutoCompactions) {
            options.setDisableAutoCompactions(true)
                    .setLevel0SlowdownWritesTrigger(NO_STALL)
                    .setLevel0StopWritesTrigger(NO_STALL);
        }
        describeDifferences(table);
        db = switch (c.transactionDb) {
            case "optimistic" -> OptimisticTransactionDB.open(options, c.db);
            case "pessimistic" -> TransactionDB.open(options, transactionDbOptions, c.db);
            default -> RocksDB.open(options, c.db);
        };
    }

    /** A transaction of the --transaction-db database: optimistic, or pessimistic with a lock
     * timeout of 1 s and deadlock detection on (Sluice's TransactionOptions defaults). */
    Transaction begin() {
        if (db instanceof OptimisticTransactionDB o) {
            return o.beginTransaction(writeOptions);
        }
        if (db instanceof TransactionDB t) {
            return t.beginTransaction(writeOptions, transactionOptions);
        }
        throw new IllegalStateException("randomtransaction needs --transaction-db");
    }

    private void note(String s) {
        settingsDiffer.add(s);
    }

    /** Lists, in plain words, the settings that differ from Sluice's. */
    private void describeDifferences(BlockBasedTableConfig table) {
        note("engine: RocksDB " + version + ", the release build of librocksdbjni-linux64.so bundled "
                + "in Maven Central's org.rocksdb:rocksdbjni jar, driven from Java 17: every put and get "
                + "crosses JNI (copying the key, and the value, between Java arrays and native "
                + "memory); flushes and compactions run natively on RocksDB's own threads");
        if (c.compression.equals("snappy")) {
            note("compression: the jar's bundled snappy is compiled unoptimised (about 2.7x slower "
                    + "than lz4 in a compaction); compare with lz4");
        }
        note("levels: RocksDB " + version + "'s defaults: level_compaction_dynamic_level_bytes "
                + options.levelCompactionDynamicLevelBytes() + " (L0 compacts into the base level, which "
                + "is the last level, L6, while the tree is small, as Sluice's), "
                + "max_bytes_for_level_base " + options.maxBytesForLevelBase() / (1 << 20) + " MiB, x"
                + String.valueOf(options.maxBytesForLevelMultiplier()).replaceAll("\\.0$", "")
                + " per level, L0 compaction trigger "
                + options.level0FileNumCompactionTrigger() + " files");
        note("memtables: max_write_buffer_number 2 (Sluice: a memtable and one being flushed); "
                + "max_background_jobs " + c.compactionThreads + " (--compaction-threads) share flushes "
                + "and compactions");
        if (c.disableAutoCompactions) {
            note("disable-auto-compactions: level0_slowdown_writes_trigger and "
                    + "level0_stop_writes_trigger " + NO_STALL + ", so the load never stalls on L0 (as "
                    + "db_bench's flags; Sluice also turns its L0 stalls off)");
        }
        if (c.minBlobSize > 0) {
            note("value separation: RocksDB's integrated BlobDB (enable_blob_files), min_blob_size "
                    + options.minBlobSize() + ", blob_file_size " + options.blobFileSize()
                    + ", blob_compression_type " + options.blobCompressionType()
                    + ", enable_blob_garbage_collection " + options.enableBlobGarbageCollection()
                    + ", blob_garbage_collection_age_cutoff " + options.blobGarbageCollectionAgeCutoff()
                    + ", blob_garbage_collection_force_threshold "
                    + options.blobGarbageCollectionForceThreshold() + ", blob_file_starting_level "
                    + options.blobFileStartingLevel() + " (Sluice's BlobOptions defaults); no blob "
                    + "cache (blob reads go to the file, through the page cache, as Sluice's)");
        }
        note("tables: block-based format_version " + table.formatVersion() + ", full filters "
                + "(FastLocalBloom, " + c.bloomBits + " bits per key), index and filter blocks outside "
                + "the block cache, restart interval " + table.blockRestartInterval()
                + " (RocksDB's defaults)");
        note("statistics: tickers only (every histogram ignored, so no per-operation timing): "
                + "write_stall_micros is RocksDB's STALL_MICROS, compaction.engine_read_bytes and "
                + "engine_written_bytes its COMPACT_READ_BYTES and COMPACT_WRITE_BYTES");
        if (c.ycsb.isEmpty()) {
            note("fills wait until RocksDB reports no running or pending flush (and, with automatic "
                    + "compactions on, no running or pending compaction), as Sluice waits for its "
                    + "background work");
            note("compact: the memtable is flushed before the timer starts (compaction.flush_seconds);"
                    + " then CompactRange over the whole key space with bottommost_level_compaction "
                    + "kForceOptimized and max_subcompactions = --subcompactions (compaction."
                    + "subcompactions), timed as the whole call; Sluice's compact seconds include "
                    + "flushing its memtable");
        } else {
            note("the YCSB load waits until RocksDB reports no running or pending flush or "
                    + "compaction, as Sluice waits for its background work");
        }
        note("cpu: the process's CPU time (user + system, every thread: the client, RocksDB's "
                + "background threads and the JVM's own, JIT compiler and garbage collector included;"
                + " from /proc/self/stat, in 10 ms ticks);"
                + " compaction.cpu_seconds is the process's CPU time during the compaction; "
                + "compaction.count, engine_cpu_seconds and subcompactions_run come from the "
                + "compaction_finished events of RocksDB's LOG (jobs, compaction_time_cpu_micros, "
                + "num_subcompactions): RocksDB gives each subcompaction at least a target file's "
                + "worth of input, so a compaction of less than two target files runs one");
        note("latency percentiles are exact (sorted samples), not an HDR histogram");
        if (!c.transactionDb.isEmpty()) {
            note("randomtransaction: " + (c.transactionDb.equals("optimistic")
                    ? "OptimisticTransactionDB (validation at commit, in the write thread)"
                    : "TransactionDB with lock_timeout 1000 ms and deadlock_detect on (RocksDB's "
                    + "default is off; Sluice's is on)") + "; each transaction reads two keys with "
                    + "GetForUpdate, puts both and commits; a commit or lock that fails with Busy, "
                    + "TryAgain or TimedOut is rolled back and run again (conflicts)");
        }
    }

    long ticker(TickerType t) {
        return stats.getTickerCount(t);
    }

    /** An integer property of the default column family (e.g. rocksdb.live-blob-file-size). */
    long property(String name) throws RocksDBException {
        return db.getLongProperty(name);
    }

    /** The files and bytes of one level. */
    record Level(int level, int files, long bytes) {
        Json json() {
            return new Json().put("level", level).put("files", files).put("bytes", bytes);
        }
    }

    /** The current LSM: files and bytes of every level. */
    List<Level> shape() {
        List<Level> out = new ArrayList<>();
        for (LevelMetaData l : db.getColumnFamilyMetaData().levels()) {
            out.add(new Level(l.level(), l.files().size(), l.size()));
        }
        return out;
    }

    static List<Json> json(List<Level> shape) {
        return shape.stream().map(Level::json).toList();
    }

    static long totalBytes(List<Level> shape) {
        return shape.stream().mapToLong(Level::bytes).sum();
    }

    static int totalFiles(List<Level> shape) {
        return shape.stream().mapToInt(Level::files).sum();
    }

    /** One compaction_finished event of RocksDB's info log. */
    record CompactionEvent(long subcompactions, long cpuMicros) {}

    /** The compaction_finished events RocksDB's info log (the LOG file of the database) holds
     * so far. RocksDB flushes its info log at the end of every compaction job. The JSON event
     * is the only place that says how many subcompactions a compaction actually ran: RocksDB
     * gives each one at least a target file's worth of input, so a small compaction runs one
     * whatever max_subcompactions says. */
    List<CompactionEvent> compactionEvents() throws IOException {
        Path log = Path.of(c.db, "LOG");
        List<CompactionEvent> out = new ArrayList<>();
        if (!Files.exists(log)) {
            return out;
        }
        try (var lines = Files.lines(log, StandardCharsets.ISO_8859_1)) {
            lines.filter(l -> l.contains("\"event\": \"compaction_finished\""))
                    .forEach(l -> out.add(new CompactionEvent(field(l, "num_subcompactions"),
                            field(l, "compaction_time_cpu_micros"))));
        }
        return out;
    }

    /** The integer after "name": in an event line, or -1. */
    private static long field(String line, String name) {
        Matcher m = Pattern.compile("\"" + name + "\": (\\d+)").matcher(line);
        return m.find() ? Long.parseLong(m.group(1)) : -1;
    }

    /** Flushes the memtable and waits for the flush. */
    void flush() throws RocksDBException {
        try (FlushOptions f = new FlushOptions().setWaitForFlush(true)) {
            db.flush(f);
        }
    }

    /** True while a flush or compaction runs or is pending. Without automatic compactions a
     * compaction stays "pending" (RocksDB's picker still scores L0) but never starts: only
     * flushes count then. */
    private boolean busy() throws RocksDBException {
        List<String> props = new ArrayList<>(List.of("rocksdb.num-running-flushes",
                "rocksdb.mem-table-flush-pending", "rocksdb.num-running-compactions"));
        if (!c.disableAutoCompactions) {
            props.add("rocksdb.compaction-pending");
        }
        for (String p : props) {
            if (db.getLongProperty(p) > 0) {
                return true;
            }
        }
        return false;
    }

    /** Returns once no flush or compaction runs or is pending, two checks 1 ms apart: a fill is
     * not over until the background work it caused is, as in Sluice. */
    void waitIdle() throws RocksDBException {
        for (int quiet = 0; quiet < 2; ) {
            if (busy()) {
                quiet = 0;
                sleep(5);
            } else if (++quiet < 2) {
                sleep(1);
            }
        }
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Closes the database first, then the objects its options refer to. */
    @Override
    public void close() throws RocksDBException {
        db.closeE();
        for (AutoCloseable o : new AutoCloseable[] {writeOptions, readOptions, options, stats, cache, filter}) {
            if (o != null) {
                try {
                    o.close();
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            }
        }
    }
}
