package sluice.peers;

import java.io.IOException;
import java.util.Arrays;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.rocksdb.ColumnFamilyHandle;
import org.rocksdb.CompactRangeOptions;
import org.rocksdb.RocksDB;
import org.rocksdb.RocksDBException;
import org.rocksdb.RocksIterator;
import org.rocksdb.Status;
import org.rocksdb.Transaction;
import org.rocksdb.TickerType;

/**
 * The db_bench-style workloads (fillseq, fillrandom, overwrite, readrandom, seekrandom,
 * readwhilewriting, compact)
 * on an {@link Engine}, each reported as one JSON object with the field names of
 * {@code sluice bench --json} (see ../README.md "JSON"), plus the process's CPU time.
 */
final class Bench {
    private final Engine e;
    private final Config c;
    private final Stream.KeyFormat keys;

    Bench(Engine e) {
        this.e = e;
        this.c = e.c;
        this.keys = new Stream.KeyFormat(c.keySize, c.num);
    }

    /** What one benchmark's operations did, with every latency kept (exact percentiles). */
    private static final class Tally {
        long ops, bytes, found;
        private long[] nanos = new long[1024];

        void done(long startNanos, long moved) {
            if (ops == nanos.length) {
                nanos = Arrays.copyOf(nanos, nanos.length * 2);
            }
            nanos[(int) ops++] = Math.max(1, System.nanoTime() - startNanos);
            bytes += moved;
        }

        /** Adds another thread's operations. */
        void merge(Tally other) {
            int total = Math.toIntExact(ops + other.ops);
            if (total > nanos.length) {
                nanos = Arrays.copyOf(nanos, Math.max(total, nanos.length * 2));
            }
            System.arraycopy(other.nanos, 0, nanos, (int) ops, (int) other.ops);
            ops = total;
            bytes += other.bytes;
            found += other.found;
        }

        /** Sluice's latency_us: percentiles in microseconds. */
        Json latency() {
            long[] v = Arrays.copyOf(nanos, (int) ops);
            Arrays.sort(v);
            double sum = 0;
            for (long x : v) {
                sum += x;
            }
            return new Json().put("p50", at(v, 0.50)).put("p99", at(v, 0.99)).put("p999", at(v, 0.999))
                    .put("max", v.length == 0 ? 0.0 : v[v.length - 1] / 1e3)
                    .put("mean", v.length == 0 ? 0.0 : sum / v.length / 1e3);
        }

        private static double at(long[] sorted, double q) {
            if (sorted.length == 0) {
                return 0.0;
            }
            int rank = (int) (q * sorted.length);
            return sorted[Math.min(rank, sorted.length - 1)] / 1e3;
        }
    }

    /** Every byte RocksDB's flushes and compactions have written since open. The two tickers
     * are the flush and compaction threads' I/O counters (IOSTATS bytes_written, every file the
     * job writes), so with value separation they already include the blob files those jobs
     * write: BLOB_DB_BLOB_FILE_BYTES_WRITTEN is reported beside them (the blob object), not
     * added to them. */
    private long tableBytesWritten() {
        return e.ticker(TickerType.FLUSH_WRITE_BYTES) + e.ticker(TickerType.COMPACT_WRITE_BYTES);
    }

    /** Blob files of the current version and the blob bytes written so far (value separation
     * only): RocksDB's rocksdb.num-blob-files, live-blob-file-size (the current version's blob
     * files), live-blob-file-garbage-size and total-blob-file-size (every version's), and the
     * BLOB_DB_BLOB_FILE_BYTES_WRITTEN ticker since {@code blobWrittenBefore}. */
    private Json blob(long blobWrittenBefore) throws RocksDBException {
        return new Json().put("files", e.property("rocksdb.num-blob-files"))
                .put("bytes", e.property("rocksdb.live-blob-file-size"))
                .put("garbage_bytes", e.property("rocksdb.live-blob-file-garbage-size"))
                .put("total_blob_file_size", e.property("rocksdb.total-blob-file-size"))
                .put("file_bytes_written", e.ticker(TickerType.BLOB_DB_BLOB_FILE_BYTES_WRITTEN) - blobWrittenBefore);
    }

    /** Runs the benchmark {@code name} at {@code position} of the run and returns its line. */
    Json run(String name, int position) throws RocksDBException, IOException {
        Tally t = new Tally();
        long stallsBefore = e.ticker(TickerType.STALL_MICROS);
        long tablesBefore = tableBytesWritten();
        long blobWrittenBefore = e.ticker(TickerType.BLOB_DB_BLOB_FILE_BYTES_WRITTEN);
        Cpu cpuBefore = Cpu.now();
        long start = System.nanoTime();
        Json compaction = null;
        double seconds;
        long bytes;
        long userBytes = 0;
        long writes = -1; // readwhilewriting's and randomtransaction's puts
        long conflicts = -1; // randomtransaction's retries
        int threads = 1;
        int measured = 1; // the threads whose operations t counts
        switch (name) {
            case "fillseq", "fillrandom", "overwrite" -> {
                fill(position, !name.equals("fillseq"), t);
                // The benchmark is not over until the flushes and compactions it caused are.
                e.waitIdle();
                seconds = (System.nanoTime() - start) / 1e9;
                bytes = userBytes = t.bytes;
            }
            case "readrandom" -> {
                readRandom(position, t);
                seconds = (System.nanoTime() - start) / 1e9;
                bytes = t.bytes;
            }
            case "readwhilewriting" -> {
                long[] written = readWhileWriting(position, t);
                seconds = (System.nanoTime() - start) / 1e9;
                bytes = t.bytes;
                writes = written[0];
                userBytes = written[1];
                threads = c.threads + 1;
                measured = c.threads;
            }
            case "seekrandom" -> {
                seekRandom(position, t);
                seconds = (System.nanoTime() - start) / 1e9;
                bytes = t.bytes;
            }
            case "readseq" -> {
                readSeq(t);
                seconds = (System.nanoTime() - start) / 1e9;
                bytes = t.bytes;
            }
            case "randomtransaction" -> {
                long[] txn = randomTransaction(position, t);
                seconds = (System.nanoTime() - start) / 1e9;
                bytes = t.bytes;
                writes = txn[0];
                conflicts = txn[1];
                userBytes = txn[2];
                threads = measured = c.threads;
            }
            case "deleterange" -> {
                // The middle tenth of the key space, [0.45 num, 0.55 num), as sluice bench.
                byte[] from = new byte[c.keySize];
                byte[] to = new byte[c.keySize];
                keys.write(c.num * 45 / 100, from);
                keys.write(c.num * 55 / 100, to);
                long opStart = System.nanoTime();
                e.db.deleteRange(e.writeOptions, from, to);
                t.done(opStart, 0);
                seconds = (System.nanoTime() - start) / 1e9;
                bytes = 0;
            }
            default -> {
                CompactResult r = compact(t);
                compaction = r.json;
                seconds = r.seconds;
                bytes = r.inputBytes;
            }
        }
        Cpu cpu = Cpu.now().since(cpuBefore);
        Json out = new Json().put("name", name).put("engine", "rocksdb").put("engine_version", e.version)
                .put("ops", t.ops).put("threads", threads).put("seconds", seconds)
                .put("micros_per_op", t.ops > 0 ? seconds * measured * 1e6 / t.ops : 0.0)
                .put("ops_per_sec", seconds > 0 ? t.ops / seconds : 0.0)
                .put("bytes", bytes).put("mb_per_sec", seconds > 0 ? bytes / seconds / 1e6 : 0.0);
        if (name.equals("readrandom") || name.equals("seekrandom") || name.equals("readwhilewriting")
                || name.equals("randomtransaction")) {
            out.put("found", t.found);
        }
        if (writes >= 0) {
            out.put("writes", writes);
        }
        if (conflicts >= 0) {
            out.put("conflicts", conflicts);
        }
        out.put("latency_us", t.latency()).put("user_bytes", userBytes);
        if (userBytes > 0) {
            // Sluice's definition: table bytes (and, with value separation, blob file bytes)
            // flushed and compacted per user byte written.
            out.put("write_amp", (double) (tableBytesWritten() - tablesBefore) / userBytes);
        }
        out.put("write_stall_micros", e.ticker(TickerType.STALL_MICROS) - stallsBefore)
                .put("cpu", cpu.json());
        if (compaction != null) {
            out.put("compaction", compaction);
        }
        List<Engine.Level> shape = e.shape();
        long blobBytes = 0;
        if (c.minBlobSize > 0) {
            Json blob = blob(blobWrittenBefore);
            blobBytes = e.property("rocksdb.live-blob-file-size");
            out.put("blob", blob);
        }
        // Sluice's lsm.total_bytes: the current version's tables and blob files.
        out.put("total_bytes", Engine.totalBytes(shape) + blobBytes);
        return out.put("lsm", Engine.json(shape)).put("options", options())
                .put("settings_differ", e.settingsDiffer);
    }

    /** Sluice's options object, with the compression actually used, plus RocksDB's knobs. */
    private Json options() {
        return new Json().put("num", c.num).put("reads", c.reads()).put("key_size", c.keySize)
                .put("value_size", c.valueSize).put("seed", c.seed).put("sync", false)
                .put("compression", e.compression).put("write_buffer_size", c.writeBufferSize)
                .put("target_file_size", c.targetFileSize).put("block_size", c.blockSize)
                .put("bloom_bits", c.bloomBits).put("cache_size", c.cacheSize)
                .put("disable_auto_compactions", c.disableAutoCompactions)
                .put("compaction_threads", c.compactionThreads).put("subcompactions", c.subcompactions)
                .put("min_blob_size", c.minBlobSize).put("blob_file_size", c.blobFileSize);
    }

    /** Writes keys 0..num in order (fillseq) or num stream draws (fillrandom, overwrite), with
     * the WAL written but not synced (Sluice's default). Values are slices of one buffer, passed
     * with their offset so that no value is copied on the Java side. */
    private void fill(int position, boolean random, Tally t) throws RocksDBException {
        Stream.SplitMix64 g = Stream.SplitMix64.forBenchmark(c.seed, position, 0);
        Stream.ValueGenerator values = new Stream.ValueGenerator(g, c.valueSize);
        byte[] key = new byte[c.keySize];
        RocksDB db = e.db;
        for (long i = 0; i < c.num; i++) {
            keys.write(random ? g.below(c.num) : i, key);
            int len = values.next(c.valueSize);
            long start = System.nanoTime();
            db.put(e.writeOptions, key, 0, key.length, values.data(), values.offset(), len);
            t.done(start, key.length + len);
        }
    }

    /** Scans forward from the first key, up to {@code reads} entries. */
    private void readSeq(Tally t) {
        try (RocksIterator it = e.db.newIterator(e.readOptions)) {
            it.seekToFirst();
            for (long i = 0; i < c.reads() && it.isValid(); i++) {
                long start = System.nanoTime();
                long moved = it.key().length + it.value().length;
                it.next();
                t.done(start, moved);
            }
        }
    }

    /** {@code reads} seeks to uniform keys on one iterator (as Sluice's and db_bench's
     * seekrandom), reading the key and value each lands on into reused arrays; {@code found}
     * counts the seeks that land on the key sought. */
    private void seekRandom(int position, Tally t) throws RocksDBException {
        Stream.SplitMix64 g = Stream.SplitMix64.forBenchmark(c.seed, position, 0);
        byte[] key = new byte[c.keySize];
        byte[] landed = new byte[c.keySize];
        byte[] value = new byte[Math.max(c.valueSize, 1)];
        try (RocksIterator it = e.db.newIterator(e.readOptions)) {
            for (long i = 0; i < c.reads(); i++) {
                keys.write(g.below(c.num), key);
                long start = System.nanoTime();
                it.seek(key);
                long moved = 0;
                if (it.isValid()) {
                    int keyLen = it.key(landed);
                    moved = keyLen + it.value(value);
                    if (keyLen == key.length && Arrays.equals(landed, key)) {
                        t.found++;
                    }
                }
                t.done(start, moved);
            }
            it.status();
        }
    }

    /** Looks up {@code reads} uniform keys. */
    private void readRandom(int position, Tally t) throws RocksDBException {
        lookups(Stream.SplitMix64.forBenchmark(c.seed, position, 0), c.reads(), t);
    }

    /** db_bench's readwhilewriting (STREAM.md section 5): --threads reader threads, reader r
     * on thread r+1's stream looking up its share of --reads uniform keys as readrandom does,
     * while this thread, the writer, overwrites uniform keys from thread 0's stream as fill
     * does (WAL unsynced, no rate limit) until every reader is done. t gets the readers'
     * operations; returns the writer's puts and their key and value bytes. */
    private long[] readWhileWriting(int position, Tally t) throws RocksDBException {
        AtomicInteger readersLeft = new AtomicInteger(c.threads);
        List<Tally> tallies = new ArrayList<>();
        RocksDBException[] failures = new RocksDBException[c.threads];
        List<Thread> readers = new ArrayList<>();
        for (int r = 0; r < c.threads; r++) {
            Tally tally = new Tally();
            tallies.add(tally);
            long[] share = Stream.share(c.reads(), c.threads, r);
            Stream.SplitMix64 g = Stream.SplitMix64.forBenchmark(c.seed, position, r + 1);
            int index = r;
            Thread reader = new Thread(() -> {
                try {
                    lookups(g, share[1] - share[0], tally);
                } catch (RocksDBException ex) {
                    failures[index] = ex;
                } finally {
                    readersLeft.decrementAndGet();
                }
            }, "reader-" + r);
            readers.add(reader);
            reader.start();
        }
        Stream.SplitMix64 g = Stream.SplitMix64.forBenchmark(c.seed, position, 0);
        Stream.ValueGenerator values = new Stream.ValueGenerator(g, c.valueSize);
        byte[] key = new byte[c.keySize];
        long puts = 0;
        long written = 0;
        do {
            keys.write(g.below(c.num), key);
            int len = values.next(c.valueSize);
            e.db.put(e.writeOptions, key, 0, key.length, values.data(), values.offset(), len);
            puts++;
            written += key.length + len;
        } while (readersLeft.get() > 0);
        for (int r = 0; r < c.threads; r++) {
            try {
                readers.get(r).join();
            } catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted while waiting for the readers", ex);
            }
            if (failures[r] != null) {
                throw failures[r];
            }
            t.merge(tallies.get(r));
        }
        return new long[] {puts, written};
    }

    /** randomtransaction, as {@code sluice bench}'s (../STREAM.md section 9): --threads
     * threads, thread i on stream i doing its share of --reads transactions; each builds its
     * value buffer, then per transaction draws two keys and two values, reads both keys with
     * GetForUpdate, puts both and commits, timed as one operation with its retries. A Busy,
     * TryAgain or TimedOut failure rolls back and runs the same transaction again. Returns the
     * puts, the retries and the bytes put. */
    private long[] randomTransaction(int position, Tally t) throws RocksDBException {
        List<Tally> tallies = new ArrayList<>();
        long[][] counts = new long[c.threads][3];
        RocksDBException[] failures = new RocksDBException[c.threads];
        List<Thread> workers = new ArrayList<>();
        for (int w = 0; w < c.threads; w++) {
            Tally tally = new Tally();
            tallies.add(tally);
            long[] share = Stream.share(c.reads(), c.threads, w);
            Stream.SplitMix64 g = Stream.SplitMix64.forBenchmark(c.seed, position, w);
            int index = w;
            Thread worker = new Thread(() -> {
                try {
                    transactions(g, share[1] - share[0], tally, counts[index]);
                } catch (RocksDBException ex) {
                    failures[index] = ex;
                }
            }, "txn-" + w);
            workers.add(worker);
            worker.start();
        }
        long[] total = new long[3];
        for (int w = 0; w < c.threads; w++) {
            try {
                workers.get(w).join();
            } catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted while waiting for the workers", ex);
            }
            if (failures[w] != null) {
                throw failures[w];
            }
            t.merge(tallies.get(w));
            for (int k = 0; k < 3; k++) {
                total[k] += counts[w][k];
            }
        }
        return total;
    }

    /** One thread of randomtransaction: {@code n} transactions on keys and values from g;
     * counts[0] puts, counts[1] retries, counts[2] bytes put. */
    private void transactions(Stream.SplitMix64 g, long n, Tally t, long[] counts) throws RocksDBException {
        Stream.ValueGenerator values = new Stream.ValueGenerator(g, c.valueSize);
        for (long i = 0; i < n; i++) {
            byte[] first = new byte[c.keySize];
            byte[] second = new byte[c.keySize];
            keys.write(g.below(c.num), first);
            keys.write(g.below(c.num), second);
            int len = values.next(c.valueSize);
            byte[] a = Arrays.copyOfRange(values.data(), values.offset(), values.offset() + len);
            len = values.next(c.valueSize);
            byte[] b = Arrays.copyOfRange(values.data(), values.offset(), values.offset() + len);
            long start = System.nanoTime();
            long moved;
            long found;
            while (true) {
                try (Transaction txn = e.begin()) {
                    try {
                        byte[] oldFirst = txn.getForUpdate(e.readOptions, first, true);
                        byte[] oldSecond = txn.getForUpdate(e.readOptions, second, true);
                        txn.put(first, a);
                        txn.put(second, b);
                        txn.commit();
                        found = (oldFirst != null ? 1 : 0) + (oldSecond != null ? 1 : 0);
                        moved = (oldFirst != null ? first.length + oldFirst.length : 0)
                                + (oldSecond != null ? second.length + oldSecond.length : 0);
                        break;
                    } catch (RocksDBException ex) {
                        Status.Code code = ex.getStatus() == null ? null : ex.getStatus().getCode();
                        if (code != Status.Code.Busy && code != Status.Code.TryAgain
                                && code != Status.Code.TimedOut) {
                            throw ex;
                        }
                        txn.rollback();
                        counts[1]++;
                    }
                }
            }
            long put = first.length + a.length + second.length + b.length;
            t.found += found;
            t.done(start, moved + put);
            counts[0] += 2;
            counts[2] += put;
        }
    }

    /** Looks up {@code n} uniform keys drawn from g, into one reused value array. */
    private void lookups(Stream.SplitMix64 g, long n, Tally t) throws RocksDBException {
        byte[] key = new byte[c.keySize];
        byte[] value = new byte[Math.max(c.valueSize, 1)];
        RocksDB db = e.db;
        for (long i = 0; i < n; i++) {
            keys.write(g.below(c.num), key);
            long start = System.nanoTime();
            int size = db.get(e.readOptions, key, 0, key.length, value, 0, value.length);
            long moved = 0;
            if (size != RocksDB.NOT_FOUND) {
                t.found++;
                moved = key.length + size;
            }
            t.done(start, moved);
        }
    }

    private record CompactResult(Json json, double seconds, long inputBytes) {}

    /** Flushes the memtable (untimed), then times one manual compaction of the whole key
     * space: CompactRange(nullptr, nullptr) with the bottommost level forced (kForceOptimized,
     * as db_bench's compact), on --subcompactions threads. */
    private CompactResult compact(Tally t) throws RocksDBException, IOException {
        long flushStart = System.nanoTime();
        e.flush();
        e.waitIdle();
        double flushSeconds = (System.nanoTime() - flushStart) / 1e9;
        List<Engine.Level> before = e.shape();
        long inputBytes = Engine.totalBytes(before);
        long read0 = e.ticker(TickerType.COMPACT_READ_BYTES);
        long written0 = e.ticker(TickerType.COMPACT_WRITE_BYTES);
        int events0 = e.compactionEvents().size();
        ColumnFamilyHandle cf = e.db.getDefaultColumnFamily();
        double seconds;
        Cpu cpu;
        try (CompactRangeOptions o = new CompactRangeOptions()
                .setBottommostLevelCompaction(CompactRangeOptions.BottommostLevelCompaction.kForceOptimized)
                .setMaxSubcompactions(c.subcompactions)) {
            Cpu cpuBefore = Cpu.now();
            long start = System.nanoTime();
            e.db.compactRange(cf, null, null, o);
            t.done(start, 0);
            seconds = (System.nanoTime() - start) / 1e9;
            cpu = Cpu.now().since(cpuBefore);
        }
        List<Engine.Level> after = e.shape();
        List<Engine.CompactionEvent> events = e.compactionEvents();
        events = events.subList(Math.min(events0, events.size()), events.size());
        Json json = new Json().put("count", events.size()).put("input_bytes", inputBytes)
                .put("output_bytes", Engine.totalBytes(after))
                .put("output_files", Engine.totalFiles(after))
                .put("seconds", seconds).put("cpu_seconds", cpu.total())
                .put("engine_cpu_seconds", events.stream().mapToLong(Engine.CompactionEvent::cpuMicros).sum() / 1e6)
                .put("bandwidth_mb_s", seconds > 0 ? inputBytes / 1e6 / seconds : 0.0)
                .put("flush_seconds", flushSeconds)
                .put("engine_read_bytes", e.ticker(TickerType.COMPACT_READ_BYTES) - read0)
                .put("engine_written_bytes", e.ticker(TickerType.COMPACT_WRITE_BYTES) - written0)
                .put("subcompactions", c.subcompactions)
                .put("subcompactions_run", events.stream().mapToLong(Engine.CompactionEvent::subcompactions).max().orElse(-1))
                .put("lsm_before", Engine.json(before)).put("lsm_after", Engine.json(after));
        return new CompactResult(json, seconds, inputBytes);
    }
}
