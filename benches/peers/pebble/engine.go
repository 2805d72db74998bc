package main

import (
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
)

const pebbleModule = "github.com/cockroachdb/pebble/v2"

// noStall stands for "never": L0 thresholds this high cannot be reached.
const noStall = 1 << 30

// engine is an open Pebble database and what the reports need to know about it.
type engine struct {
	cfg            config
	db             *pebble.DB
	cache          interface{ Unref() }
	compression    string // the compression actually used
	version        string
	settingsDiffer []string
	stalls         *stallClock
}

// stallClock sums the time writers spent in Pebble's write stalls.
type stallClock struct {
	mu    sync.Mutex
	since time.Time
	total time.Duration
}

func (s *stallClock) begin(pebble.WriteStallBeginInfo) {
	s.mu.Lock()
	s.since = time.Now()
	s.mu.Unlock()
}

func (s *stallClock) end() {
	s.mu.Lock()
	if !s.since.IsZero() {
		s.total += time.Since(s.since)
		s.since = time.Time{}
	}
	s.mu.Unlock()
}

func (s *stallClock) micros() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return uint64(s.total.Microseconds())
}

// quietLogger drops Pebble's informational messages; errors still reach stderr.
type quietLogger struct{}

func (quietLogger) Infof(string, ...interface{}) {}
func (quietLogger) Errorf(format string, args ...interface{}) {
	pebble.DefaultLogger.Errorf(format, args...)
}
func (quietLogger) Fatalf(format string, args ...interface{}) {
	pebble.DefaultLogger.Fatalf(format, args...)
}

// moduleVersion is the Pebble module version this binary was built with.
func moduleVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == pebbleModule {
				return dep.Version
			}
		}
	}
	return "unknown"
}

// openEngine creates the database with options mirroring Sluice's and lists what differs.
func openEngine(c config) (*engine, error) {
	e := &engine{cfg: c, version: moduleVersion(), stalls: &stallClock{}}
	profile := sstable.SnappyCompression
	switch c.compression {
	case "none":
		profile = sstable.NoCompression
	case "zstd":
		profile = sstable.ZstdCompression
	case "lz4":
		e.note("compression: Pebble has no lz4 (Sluice's default); using snappy instead")
	}
	e.compression = c.compression
	if c.compression == "lz4" {
		e.compression = "snappy"
	}

	cache := pebble.NewCache(c.cacheSize)
	e.cache = cache
	opts := &pebble.Options{
		Cache:                       cache,
		ErrorIfExists:               !c.useExistingDb,
		FormatMajorVersion:          pebble.FormatNewest,
		MemTableSize:                uint64(c.writeBufferSize),
		MemTableStopWritesThreshold: 2, // Sluice's max_write_buffer_number
		LBaseMaxBytes:               256 << 20,
		L0CompactionThreshold:       4,  // Sluice's l0_compaction_trigger
		L0StopWritesThreshold:       36, // Sluice's l0_stop_writes_trigger
		MaxOpenFiles:                1000,
		DisableAutomaticCompactions: c.disableAutoCompact,
		Logger:                      quietLogger{},
		EventListener: &pebble.EventListener{
			WriteStallBegin: e.stalls.begin,
			WriteStallEnd:   e.stalls.end,
		},
	}
	threads := c.compactionThreads
	opts.CompactionConcurrencyRange = func() (int, int) { return 1, threads }
	if c.disableAutoCompact {
		opts.L0CompactionThreshold = noStall
		opts.L0CompactionFileThreshold = noStall
		opts.L0StopWritesThreshold = noStall
	}
	for i := range opts.Levels {
		l := &opts.Levels[i]
		l.BlockSize = c.blockSize
		l.BlockRestartInterval = 16
		l.Compression = func() *sstable.CompressionProfile { return profile }
		if c.bloomBits > 0 {
			l.FilterPolicy = bloom.FilterPolicy(c.bloomBits)
			l.FilterType = pebble.TableFilter
		}
		opts.TargetFileSizes[i] = c.targetFileSize
	}
	e.describeDifferences()
	db, err := pebble.Open(c.db, opts)
	if err != nil {
		cache.Unref()
		return nil, err
	}
	e.db = db
	return e, nil
}

func (e *engine) note(s string) { e.settingsDiffer = append(e.settingsDiffer, s) }

// describeDifferences lists, in plain words, the settings that differ from Sluice's.
func (e *engine) describeDifferences() {
	c := e.cfg
	e.note(fmt.Sprintf("memtable: Pebble's first memtable is 256 KiB and each next one doubles up to --write-buffer-size (%s); queued memtables are flushed together, once they add up to half of it; Sluice's memtables are all write_buffer_size and each flush writes one", formatBytes(c.writeBufferSize)))
	e.note("levels: Pebble always sizes levels dynamically (base level starts at L6 and moves up as data grows), so compactions out of L0 go to the base level, as in Sluice")
	e.note("L0: Pebble counts L0 in sublevels (read amplification) for its stop trigger and has no slowdown trigger (Sluice slows writes at 20 L0 files and stops at 36)")
	if c.disableAutoCompact {
		e.note("disable-auto-compactions: L0CompactionThreshold, L0CompactionFileThreshold and L0StopWritesThreshold raised to 2^30 so L0 can never stall the load (Sluice also turns its L0 stalls off with auto compactions)")
	}
	e.note(fmt.Sprintf("compaction concurrency: Pebble may run up to %d compactions at once (CompactionConcurrencyRange 1..%d, --compaction-threads); Sluice's default sequential mode runs one", c.compactionThreads, c.compactionThreads))
	if c.ycsbWorkload != "" {
		e.note("the YCSB load waits until no flush or compaction runs (Pebble's metrics), as Sluice waits for its background work")
	} else if c.parallelCompact {
		e.note("compact: Compact(parallelize=true) splits the L0 compaction into concurrent range compactions where the in-use key ranges of L0 and the base level have gaps; Sluice's compact_range runs level by level in its compaction mode")
	}
	if c.ycsbWorkload == "" {
		e.note("compact timing: the memtable is flushed before the timer starts (reported as compaction.flush_seconds); Sluice's compact seconds include flushing its memtable")
	}
	e.note("table format: Pebble's newest format (columnar data and index blocks, restart interval 16 for row blocks); Sluice writes row-oriented blocks with restart interval 16")
	e.note("filters: Pebble table-level bloom filter, " + fmt.Sprint(c.bloomBits) + " bits per key")
	e.note(fmt.Sprintf("block cache: Pebble keeps index and filter blocks in its block cache (%s here), Sluice and RocksDB (cache_index_and_filter_blocks=false) keep them in table memory outside it. With %s tables a table's filter block is about 1 MB, and such blocks churn through the cache: a perf profile of readrandom shows Pebble re-reading and checksumming filter blocks on most lookups. Measured on 2M keys after fillseq, fillrandom and overwrite: 28,551 lookups/s with a 64 MiB cache, 151,796 with 512 MiB, 95,297 with 4 MiB tables. So Pebble's readrandom and YCSB rows measure this setting, not Pebble at its best", formatBytes(c.cacheSize), formatBytes(c.targetFileSize)))
}

// levelShape is the files and bytes of one level.
type levelShape struct {
	Level int   `json:"level"`
	Files int64 `json:"files"`
	Bytes int64 `json:"bytes"`
}

// shape is the current LSM: every level, files and bytes.
func (e *engine) shape() []levelShape {
	m := e.db.Metrics()
	out := make([]levelShape, len(m.Levels))
	for i, l := range m.Levels {
		out[i] = levelShape{Level: i, Files: l.TablesCount, Bytes: l.TablesSize}
	}
	return out
}

// totalBytes sums the table bytes of a shape.
func totalBytes(s []levelShape) int64 {
	var n int64
	for _, l := range s {
		n += l.Bytes
	}
	return n
}

// waitIdle returns once no flush or compaction runs (two checks 1 ms apart): a fill is not
// over until the background work it caused is, as in Sluice. Pebble schedules the compactions
// a flush makes necessary as the flush completes, so an idle check is reliable. Queued
// immutable memtables are not work: Pebble flushes them only once together they reach
// MemTableSize (or on Flush).
func (e *engine) waitIdle() {
	for quiet := 0; quiet < 2; {
		m := e.db.Metrics()
		if m.Flush.NumInProgress > 0 || m.Compact.NumInProgress > 0 {
			quiet = 0
			time.Sleep(5 * time.Millisecond)
			continue
		}
		quiet++
		if quiet < 2 {
			time.Sleep(time.Millisecond)
		}
	}
}

func (e *engine) close() error {
	err := e.db.Close()
	e.cache.Unref()
	return err
}
