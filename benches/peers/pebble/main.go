// pebble-bench runs Sluice's db_bench-style workloads (fillseq, fillrandom, overwrite,
// readrandom, readwhilewriting, compact) on Pebble and prints one JSON object per benchmark, with the field
// names of `sluice bench --json`, so the two can be compared side by side; with --ycsb it runs
// YCSB A, B, C or F instead and prints the object of `sluice ycsb --json`. Keys, values and
// YCSB operations follow ../STREAM.md.
package main

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// config holds the flags.
type config struct {
	db                 string
	benchmarks         []string
	num                uint64
	reads              uint64
	keySize            int
	valueSize          int
	seed               uint64
	compression        string
	blockSize          int
	bloomBits          int
	writeBufferSize    int64
	targetFileSize     int64
	cacheSize          int64
	disableAutoCompact bool
	useExistingDb      bool
	parallelCompact    bool
	compactionThreads  int
	threads            int // readwhilewriting's reader threads
	dumpKeys           int
	ycsbWorkload       string // --ycsb: "" for the db_bench-style benchmarks
	records            uint64
	operations         uint64
	dumpYcsbOps        uint64
}

var knownBenchmarks = []string{"fillseq", "fillrandom", "overwrite", "readrandom", "readwhilewriting", "compact"}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("pebble-bench", flag.ContinueOnError)
	fs.StringVar(&c.db, "db", "", "database directory (required; must be empty or absent unless --use-existing-db)")
	benchmarks := fs.String("benchmarks", "fillseq,fillrandom,overwrite,readrandom,compact",
		"comma-separated benchmarks, run in order on one database: "+strings.Join(knownBenchmarks, ", "))
	fs.Uint64Var(&c.num, "num", 1_000_000, "number of keys: fills write N entries with keys from [0, N)")
	reads := fs.Int64("reads", -1, "operations of readrandom, and of readwhilewriting's readers together (-1: the same as --num)")
	fs.IntVar(&c.threads, "threads", 1, "readwhilewriting: reader threads, besides its one writer (the other benchmarks run on one thread)")
	fs.IntVar(&c.keySize, "key-size", 16, "bytes per key (zero-padded decimal key numbers)")
	fs.IntVar(&c.valueSize, "value-size", 100, "bytes per value (generated to compress to about half)")
	fs.Uint64Var(&c.seed, "seed", 301, "seed of the key and value streams (../STREAM.md)")
	fs.StringVar(&c.compression, "compression", "lz4", "data block compression: none, snappy, zstd, lz4 (no lz4 in Pebble: snappy)")
	fs.IntVar(&c.blockSize, "block-size", 4096, "uncompressed data block size in bytes")
	fs.IntVar(&c.bloomBits, "bloom-bits", 10, "bloom filter bits per key (0: no filters)")
	fs.Int64Var(&c.writeBufferSize, "write-buffer-size", 64<<20, "memtable size in bytes")
	fs.Int64Var(&c.targetFileSize, "target-file-size", 64<<20, "size at which compaction outputs are cut, every level")
	fs.Int64Var(&c.cacheSize, "cache-size", 64<<20, "block cache capacity in bytes")
	fs.BoolVar(&c.disableAutoCompact, "disable-auto-compactions", false,
		"turn off automatic compactions and L0 write stalls (flushes still happen)")
	fs.BoolVar(&c.useExistingDb, "use-existing-db", false,
		"open the database --db already holds instead of requiring an empty directory (db_bench's flag)")
	fs.BoolVar(&c.parallelCompact, "parallel-compact", true, "compact: let Pebble split the manual compaction into concurrent range compactions")
	fs.IntVar(&c.compactionThreads, "compaction-threads", 2, "maximum concurrent compactions (Pebble's CompactionConcurrencyRange upper bound)")
	fs.StringVar(&c.ycsbWorkload, "ycsb", "", "run YCSB workload a, b, c or f (load, then run) instead of --benchmarks")
	fs.Uint64Var(&c.records, "records", 100_000, "YCSB: keys the load phase inserts")
	fs.Uint64Var(&c.operations, "operations", 100_000, "YCSB: operations of the run phase")
	fs.Uint64Var(&c.dumpYcsbOps, "dump-ycsb-ops", 0, "print the YCSB run phase's operation digest and first N operations as JSON, and exit")
	fs.IntVar(&c.dumpKeys, "dump-keys", 0, "print the first K keys and the first value of each benchmark's stream as JSON, and exit")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	for _, b := range strings.Split(*benchmarks, ",") {
		b = strings.TrimSpace(b)
		if b == "" {
			continue
		}
		known := false
		for _, k := range knownBenchmarks {
			known = known || b == k
		}
		if !known {
			return c, fmt.Errorf("unknown benchmark %q (expected one of %s)", b, strings.Join(knownBenchmarks, ", "))
		}
		c.benchmarks = append(c.benchmarks, b)
	}
	c.reads = c.num
	if *reads >= 0 {
		c.reads = uint64(*reads)
	}
	switch {
	case c.num == 0:
		return c, errors.New("num must be at least 1")
	case c.valueSize < 0 || c.valueSize > 64<<20:
		return c, fmt.Errorf("value-size must be between 0 and 64 MiB, got %d", c.valueSize)
	case c.compactionThreads < 1:
		return c, errors.New("compaction-threads must be at least 1")
	case c.threads < 1:
		return c, errors.New("threads must be at least 1")
	case c.blockSize < 1 || c.writeBufferSize < 1 || c.targetFileSize < 1 || c.cacheSize < 0 || c.bloomBits < 0:
		return c, errors.New("sizes must be positive (cache-size and bloom-bits may be 0)")
	}
	switch c.compression {
	case "none", "snappy", "zstd", "lz4":
	default:
		return c, fmt.Errorf("unknown compression %q (expected none, snappy, zstd or lz4)", c.compression)
	}
	if c.dumpYcsbOps > 0 && c.ycsbWorkload == "" {
		c.ycsbWorkload = "a"
	}
	if c.ycsbWorkload != "" {
		if _, err := mixFor(c.ycsbWorkload); err != nil {
			return c, err
		}
		if c.records == 0 {
			return c, errors.New("records must be at least 1")
		}
		_, err := newKeyFormat(c.keySize, c.records+c.operations)
		return c, err
	}
	if _, err := newKeyFormat(c.keySize, c.num); err != nil {
		return c, err
	}
	return c, nil
}

// checkEmptyDir fails unless dir is absent or an empty directory.
func checkEmptyDir(dir string) error {
	if dir == "" {
		return errors.New("--db is required")
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("--db %s is not empty", dir)
	}
	return nil
}

// streamDump is one line of --dump-keys output; the other peers print the same bytes.
type streamDump struct {
	Benchmark   string     `json:"benchmark"`
	Position    int        `json:"position"`
	Keys        []string   `json:"keys"`
	FirstValue  string     `json:"first_value"`
	BufferFnv1a string     `json:"value_buffer_fnv1a64"`
	ReaderKeys  [][]string `json:"reader_keys,omitempty"` // readwhilewriting's readers
}

// dumpStreams prints the first k keys and the first value of every benchmark's stream (for
// readwhilewriting, its writer's, and the first k keys of each reader thread).
func dumpStreams(c config, k int) error {
	keys, err := newKeyFormat(c.keySize, c.num)
	if err != nil {
		return err
	}
	drawn := func(g *splitMix64) []string {
		out := []string{}
		for i := 0; i < k; i++ {
			out = append(out, string(keys.write(g.below(c.num), nil)))
		}
		return out
	}
	enc := json.NewEncoder(os.Stdout)
	for pos, name := range c.benchmarks {
		d := streamDump{Benchmark: name, Position: pos, Keys: []string{}}
		g := newStream(c.seed, uint64(pos), 0)
		if writesValues(name) {
			v := newValueGenerator(g, c.valueSize)
			d.BufferFnv1a = fmt.Sprintf("%016x", fnv1a64(v.data))
			d.FirstValue = hex.EncodeToString(v.generate(c.valueSize))
		}
		switch name {
		case "compact":
		case "fillseq":
			for i := uint64(0); i < uint64(k); i++ {
				d.Keys = append(d.Keys, string(keys.write(i, nil)))
			}
		default:
			d.Keys = drawn(g)
		}
		if name == "readwhilewriting" {
			for r := 0; r < c.threads; r++ {
				d.ReaderKeys = append(d.ReaderKeys, drawn(newStream(c.seed, uint64(pos), uint64(r+1))))
			}
		}
		if err := enc.Encode(d); err != nil {
			return err
		}
	}
	return nil
}

// writesValues is true for the benchmarks that build a value buffer (STREAM.md section 3).
func writesValues(name string) bool {
	return name == "fillseq" || name == "fillrandom" || name == "overwrite" || name == "readwhilewriting"
}

func main() {
	c, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err == nil && c.dumpYcsbOps > 0 {
		err = dumpYcsbOps(c, c.dumpYcsbOps)
	} else if err == nil && c.dumpKeys > 0 {
		err = dumpStreams(c, c.dumpKeys)
	} else if err == nil {
		err = run(c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pebble-bench:", err)
		os.Exit(1)
	}
}

// run opens the database and runs every benchmark in order, printing each result as it ends.
func run(c config) error {
	if !c.useExistingDb {
		if err := checkEmptyDir(c.db); err != nil {
			return err
		}
	}
	e, err := openEngine(c)
	if err != nil {
		return err
	}
	for _, note := range e.settingsDiffer {
		if strings.HasPrefix(note, "compression") {
			fmt.Fprintln(os.Stderr, "pebble-bench: note:", note)
		}
	}
	enc := json.NewEncoder(os.Stdout)
	if c.ycsbWorkload != "" {
		r, err := e.runYcsb()
		if err != nil {
			_ = e.close()
			return fmt.Errorf("ycsb %s: %w", c.ycsbWorkload, err)
		}
		// Closed before the line is printed, as Sluice closes its database.
		if err := e.close(); err != nil {
			return err
		}
		return enc.Encode(r)
	}
	for pos, name := range c.benchmarks {
		r, err := e.runBenchmark(name, pos)
		if err != nil {
			_ = e.close()
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return e.close()
}

// formatBytes renders a byte count for settings_differ notes.
func formatBytes(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return strconv.FormatInt(n>>20, 10) + " MiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
