package main

import (
	"bytes"
	"context"
	"errors"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/cockroachdb/pebble/v2"
)

// latencySummary is Sluice's latency_us: percentiles in microseconds.
type latencySummary struct {
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// compaction is the compact benchmark's measurement (Sluice's compaction object, plus the
// flush before it and the LSM shape around it).
type compaction struct {
	Count        int64   `json:"count"`
	InputBytes   int64   `json:"input_bytes"`
	OutputBytes  int64   `json:"output_bytes"`
	Seconds      float64 `json:"seconds"`
	CPUSeconds   float64 `json:"cpu_seconds"` // the process's, during the compaction
	BandwidthMBs float64 `json:"bandwidth_mb_s"`
	FlushSeconds float64 `json:"flush_seconds"`
	// What Pebble's own level metrics say the compactions did: bytes read from tables,
	// written to tables, and moved down without a rewrite (a single non-overlapping L0 table
	// is moved, not rewritten, which makes its "bandwidth" meaningless).
	EngineReadBytes    uint64       `json:"engine_read_bytes"`
	EngineWrittenBytes uint64       `json:"engine_written_bytes"`
	MovedBytes         uint64       `json:"moved_bytes"`
	LsmBefore          []levelShape `json:"lsm_before"`
	LsmAfter           []levelShape `json:"lsm_after"`
}

// runOptions is Sluice's options object plus the peer's own knobs.
type runOptions struct {
	Num                   uint64 `json:"num"`
	Reads                 uint64 `json:"reads"`
	KeySize               int    `json:"key_size"`
	ValueSize             int    `json:"value_size"`
	Seed                  uint64 `json:"seed"`
	Sync                  bool   `json:"sync"`
	Compression           string `json:"compression"`
	WriteBufferSize       int64  `json:"write_buffer_size"`
	TargetFileSize        int64  `json:"target_file_size"`
	BlockSize             int    `json:"block_size"`
	BloomBits             int    `json:"bloom_bits"`
	CacheSize             int64  `json:"cache_size"`
	DisableAutoCompaction bool   `json:"disable_auto_compactions"`
	ParallelCompact       bool   `json:"parallel_compact"`
	CompactionThreads     int    `json:"compaction_threads"`
}

// result is one JSON line. Fields shared with `sluice bench --json` keep its names.
type result struct {
	Name             string         `json:"name"`
	Engine           string         `json:"engine"`
	EngineVersion    string         `json:"engine_version"`
	Ops              uint64         `json:"ops"`
	Threads          int            `json:"threads"`
	Seconds          float64        `json:"seconds"`
	MicrosPerOp      float64        `json:"micros_per_op"`
	OpsPerSec        float64        `json:"ops_per_sec"`
	Bytes            uint64         `json:"bytes"`
	MBPerSec         float64        `json:"mb_per_sec"`
	Found            *uint64        `json:"found,omitempty"`
	Writes           *uint64        `json:"writes,omitempty"` // readwhilewriting: the writer's puts
	LatencyUs        latencySummary `json:"latency_us"`
	UserBytes        uint64         `json:"user_bytes"`
	WriteAmp         *float64       `json:"write_amp,omitempty"` // fills: table bytes written / user bytes
	WriteStallMicros uint64         `json:"write_stall_micros"`
	CPU              cpuUsage       `json:"cpu"` // the process's, during the benchmark
	Compaction       *compaction    `json:"compaction,omitempty"`
	Lsm              []levelShape   `json:"lsm"`
	Options          runOptions     `json:"options"`
	SettingsDiffer   []string       `json:"settings_differ"`
}

// tally is what a benchmark's operations did.
type tally struct {
	ops, bytes, found, userBytes uint64
	hist                         *hdrhistogram.Histogram
}

func newTally() *tally {
	// 1 ns to 1 hour, 3 significant digits: Sluice's histogram.
	return &tally{hist: hdrhistogram.New(1, 3_600_000_000_000, 3)}
}

func (t *tally) done(start time.Time, bytes int) {
	ns := max(int64(time.Since(start)), 1)
	_ = t.hist.RecordValue(min(ns, t.hist.HighestTrackableValue()))
	t.ops++
	t.bytes += uint64(bytes)
}

// merge adds another thread's operations.
func (t *tally) merge(o *tally) {
	t.ops += o.ops
	t.bytes += o.bytes
	t.found += o.found
	t.userBytes += o.userBytes
	t.hist.Merge(o.hist)
}

func (t *tally) summary() latencySummary {
	if t.hist.TotalCount() == 0 {
		return latencySummary{}
	}
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	return latencySummary{
		P50:  us(t.hist.ValueAtQuantile(50)),
		P99:  us(t.hist.ValueAtQuantile(99)),
		P999: us(t.hist.ValueAtQuantile(99.9)),
		Max:  us(t.hist.Max()),
		Mean: t.hist.Mean() / 1e3,
	}
}

// runBenchmark runs the benchmark `name` at `position` of the run and reports it.
func (e *engine) runBenchmark(name string, position int) (*result, error) {
	c := e.cfg
	keys, err := newKeyFormat(c.keySize, c.num)
	if err != nil {
		return nil, err
	}
	t := newTally()
	var comp *compaction
	threads, measured := 1, 1 // threads that ran, and those whose operations t counts
	var writes *uint64
	stallsBefore := e.stalls.micros()
	tableBytesBefore := e.tableBytesWritten()
	cpuBefore := processCPU()
	start := time.Now()
	switch name {
	case "fillseq", "fillrandom", "overwrite":
		err = e.fill(keys, position, name != "fillseq", t)
		// The benchmark is not over until the flushes and compactions it caused are.
		e.waitIdle()
	case "readrandom":
		err = e.readRandom(keys, position, t)
	case "readwhilewriting":
		var w uint64
		w, err = e.readWhileWriting(keys, position, t)
		writes, threads, measured = &w, c.threads+1, c.threads
	case "compact":
		comp, err = e.compact(t)
	}
	if err != nil {
		return nil, err
	}
	seconds := time.Since(start).Seconds()
	cpu := processCPU().since(cpuBefore)
	r := &result{
		Name:             name,
		Engine:           "pebble",
		EngineVersion:    e.version,
		Ops:              t.ops,
		Threads:          threads,
		Seconds:          seconds,
		Bytes:            t.bytes,
		LatencyUs:        t.summary(),
		UserBytes:        t.userBytes,
		WriteStallMicros: e.stalls.micros() - stallsBefore,
		CPU:              cpu,
		Lsm:              e.shape(),
		Options:          e.options(),
		SettingsDiffer:   e.settingsDiffer,
	}
	if comp != nil {
		// Sluice's compact line: seconds and MB/s are the compaction's, bytes its input.
		r.Seconds = comp.Seconds
		r.Bytes = uint64(comp.InputBytes)
		r.Compaction = comp
	}
	if r.Ops > 0 {
		r.MicrosPerOp = r.Seconds * float64(measured) * 1e6 / float64(r.Ops)
	}
	if r.Seconds > 0 {
		r.OpsPerSec = float64(r.Ops) / r.Seconds
		r.MBPerSec = float64(r.Bytes) / r.Seconds / 1e6
	}
	if name == "readrandom" || name == "readwhilewriting" {
		found := t.found
		r.Found = &found
	}
	r.Writes = writes
	if r.UserBytes > 0 {
		// Sluice's definition: bytes of tables flushed and compacted (moves are free) per user
		// byte written; memtables still queued at the end count for nothing in either engine.
		wa := float64(e.tableBytesWritten()-tableBytesBefore) / float64(r.UserBytes)
		r.WriteAmp = &wa
	}
	return r, nil
}

// tableBytesWritten is every table byte Pebble has flushed or compacted since open.
func (e *engine) tableBytesWritten() uint64 {
	var n uint64
	m := e.db.Metrics()
	for i := range m.Levels {
		n += m.Levels[i].TableBytesFlushed + m.Levels[i].TableBytesCompacted
	}
	return n
}

func (e *engine) options() runOptions {
	c := e.cfg
	return runOptions{
		Num: c.num, Reads: c.reads, KeySize: c.keySize, ValueSize: c.valueSize, Seed: c.seed,
		Sync: false, Compression: e.compression, WriteBufferSize: c.writeBufferSize,
		TargetFileSize: c.targetFileSize, BlockSize: c.blockSize, BloomBits: c.bloomBits,
		CacheSize: c.cacheSize, DisableAutoCompaction: c.disableAutoCompact,
		ParallelCompact: c.parallelCompact, CompactionThreads: c.compactionThreads,
	}
}

// fill writes keys 0..num in order (fillseq) or num random keys (fillrandom, overwrite),
// with the WAL unsynced (Sluice's default).
func (e *engine) fill(keys keyFormat, position int, random bool, t *tally) error {
	c := e.cfg
	g := newStream(c.seed, uint64(position), 0)
	values := newValueGenerator(g, c.valueSize)
	key := make([]byte, c.keySize)
	for i := uint64(0); i < c.num; i++ {
		n := i
		if random {
			n = g.below(c.num)
		}
		key = keys.write(n, key)
		value := values.generate(c.valueSize)
		start := time.Now()
		if err := e.db.Set(key, value, pebble.NoSync); err != nil {
			return err
		}
		t.done(start, len(key)+len(value))
	}
	t.userBytes = t.bytes
	return nil
}

// readRandom looks up `reads` uniform keys.
func (e *engine) readRandom(keys keyFormat, position int, t *tally) error {
	return e.lookups(keys, newStream(e.cfg.seed, uint64(position), 0), e.cfg.reads, t)
}

// readWhileWriting is db_bench's readwhilewriting (STREAM.md section 5): --threads reader
// goroutines, reader r on thread r+1's stream looking up its share of `reads` uniform keys as
// readRandom does, while this goroutine, the writer, overwrites uniform keys from thread 0's
// stream as fill does (unsynced, not rate limited) until every reader is done. t gets the
// readers' operations and the writer's bytes as userBytes; the writer's puts are returned.
func (e *engine) readWhileWriting(keys keyFormat, position int, t *tally) (uint64, error) {
	c := e.cfg
	var left atomic.Int64 // readers still reading
	left.Store(int64(c.threads))
	tallies := make([]*tally, c.threads)
	errs := make([]error, c.threads)
	var wg sync.WaitGroup
	for r := range tallies {
		tallies[r] = newTally()
		first, end := share(c.reads, c.threads, r)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer left.Add(-1)
			g := newStream(c.seed, uint64(position), uint64(r+1))
			errs[r] = e.lookups(keys, g, end-first, tallies[r])
		}()
	}
	g := newStream(c.seed, uint64(position), 0)
	values := newValueGenerator(g, c.valueSize)
	key := make([]byte, c.keySize)
	var writes uint64
	var err error
	for err == nil {
		key = keys.write(g.below(c.num), key)
		value := values.generate(c.valueSize)
		if err = e.db.Set(key, value, pebble.NoSync); err == nil {
			writes++
			t.userBytes += uint64(len(key) + len(value))
		}
		if left.Load() == 0 {
			break
		}
	}
	wg.Wait()
	for _, rt := range tallies {
		t.merge(rt)
	}
	return writes, errors.Join(append(errs, err)...)
}

// share is the [first, end) slice of 0..total that thread `index` of `threads` owns, as
// Sluice divides a benchmark's operations.
func share(total uint64, threads, index int) (uint64, uint64) {
	at := func(i int) uint64 {
		hi, lo := bits.Mul64(total, uint64(i))
		q, _ := bits.Div64(hi, lo, uint64(threads))
		return q
	}
	return at(index), at(index + 1)
}

// lookups looks up n uniform keys drawn from g, counting each in t.
func (e *engine) lookups(keys keyFormat, g *splitMix64, n uint64, t *tally) error {
	c := e.cfg
	key := make([]byte, c.keySize)
	for i := uint64(0); i < n; i++ {
		key = keys.write(g.below(c.num), key)
		start := time.Now()
		value, closer, err := e.db.Get(key)
		bytes := 0
		switch {
		case err == nil:
			bytes = len(key) + len(value)
			t.found++
			if err := closer.Close(); err != nil {
				return err
			}
		case !errors.Is(err, pebble.ErrNotFound):
			return err
		}
		t.done(start, bytes)
	}
	return nil
}

// compact flushes the memtable (untimed), then times one manual compaction of the whole
// key space.
func (e *engine) compact(t *tally) (*compaction, error) {
	flushStart := time.Now()
	if err := e.db.Flush(); err != nil {
		return nil, err
	}
	e.waitIdle()
	comp := &compaction{FlushSeconds: time.Since(flushStart).Seconds(), LsmBefore: e.shape()}
	comp.InputBytes = totalBytes(comp.LsmBefore)
	before := e.db.Metrics()
	// Every key is at most keySize bytes of digits: keySize+1 bytes of 0xff end after all.
	end := bytes.Repeat([]byte{0xff}, e.cfg.keySize+1)
	cpuBefore := processCPU()
	start := time.Now()
	if err := e.db.Compact(context.Background(), []byte{}, end, e.cfg.parallelCompact); err != nil {
		return nil, err
	}
	t.done(start, 0)
	comp.Seconds = time.Since(start).Seconds()
	comp.CPUSeconds = processCPU().since(cpuBefore).TotalSeconds
	comp.LsmAfter = e.shape()
	comp.OutputBytes = totalBytes(comp.LsmAfter)
	after := e.db.Metrics()
	comp.Count = after.Compact.Count - before.Compact.Count
	for i := range after.Levels {
		a, b := &after.Levels[i], &before.Levels[i]
		comp.EngineReadBytes += a.TableBytesRead - b.TableBytesRead
		comp.EngineWrittenBytes += a.TableBytesCompacted - b.TableBytesCompacted
		comp.MovedBytes += a.TableBytesMoved - b.TableBytesMoved
	}
	if comp.Seconds > 0 {
		comp.BandwidthMBs = float64(comp.InputBytes) / 1e6 / comp.Seconds
	}
	return comp, nil
}
