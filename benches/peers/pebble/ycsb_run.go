package main

import (
	"errors"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/cockroachdb/pebble/v2"
)

// opReport is one operation type's figures, as Sluice's OpReport.
type opReport struct {
	Op        string  `json:"op"`
	Count     int64   `json:"count"`
	OpsPerSec float64 `json:"ops_per_sec"`
	P50       float64 `json:"p50_us"`
	P95       float64 `json:"p95_us"`
	P99       float64 `json:"p99_us"`
	P999      float64 `json:"p999_us"`
	Max       float64 `json:"max_us"`
	Mean      float64 `json:"mean_us"`
}

// phaseReport is one phase, as Sluice's PhaseReport.
type phaseReport struct {
	Phase      string     `json:"phase"`
	Ops        int64      `json:"ops"`
	Seconds    float64    `json:"seconds"`
	OpsPerSec  float64    `json:"ops_per_sec"`
	NotFound   uint64     `json:"not_found"`
	Stopped    bool       `json:"stopped"`
	PerSecond  []uint64   `json:"per_second"`
	Operations []opReport `json:"operations"`
}

// ycsbReport is the object of `sluice ycsb --json`, plus the peer's engine, options and notes.
type ycsbReport struct {
	Workload       string       `json:"workload"`
	Distribution   string       `json:"distribution"`
	Records        uint64       `json:"records"`
	Operations     uint64       `json:"operations"`
	Threads        int          `json:"threads"`
	KeySize        int          `json:"key_size"`
	ValueSize      int          `json:"value_size"`
	Seed           uint64       `json:"seed"`
	Load           *phaseReport `json:"load"`
	Run            *phaseReport `json:"run"`
	Engine         string       `json:"engine"`
	EngineVersion  string       `json:"engine_version"`
	Lsm            []levelShape `json:"lsm"`
	Options        ycsbOptions  `json:"options"`
	SettingsDiffer []string     `json:"settings_differ"`
}

// ycsbOptions is what the engine ran with (compression as used).
type ycsbOptions struct {
	Records           uint64 `json:"records"`
	Operations        uint64 `json:"operations"`
	KeySize           int    `json:"key_size"`
	ValueSize         int    `json:"value_size"`
	Seed              uint64 `json:"seed"`
	Sync              bool   `json:"sync"`
	Compression       string `json:"compression"`
	WriteBufferSize   int64  `json:"write_buffer_size"`
	TargetFileSize    int64  `json:"target_file_size"`
	BlockSize         int    `json:"block_size"`
	BloomBits         int    `json:"bloom_bits"`
	CacheSize         int64  `json:"cache_size"`
	CompactionThreads int    `json:"compaction_threads"`
}

// phase measures one phase: an HDR histogram per operation type (1 ns to 1 h, 3 significant
// digits, as Sluice's) and completions per second.
type phase struct {
	start     time.Time
	hists     [numOps]*hdrhistogram.Histogram
	perSecond []uint64
	notFound  uint64
}

func newPhase() *phase {
	p := &phase{}
	for i := range p.hists {
		p.hists[i] = hdrhistogram.New(1, 3_600_000_000_000, 3)
	}
	p.start = time.Now()
	return p
}

func (p *phase) record(op int, t0 time.Time) {
	end := time.Now()
	h := p.hists[op]
	_ = h.RecordValue(min(max(int64(end.Sub(t0)), 1), h.HighestTrackableValue()))
	second := int(end.Sub(p.start) / time.Second)
	for len(p.perSecond) <= second {
		p.perSecond = append(p.perSecond, 0)
	}
	p.perSecond[second]++
}

// finish ends the phase (its seconds run from newPhase to now) and reports it.
func (p *phase) finish(name string) *phaseReport {
	seconds := time.Since(p.start).Seconds()
	r := &phaseReport{Phase: name, Seconds: seconds, NotFound: p.notFound, PerSecond: p.perSecond,
		Operations: []opReport{}}
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	for op, h := range p.hists {
		n := h.TotalCount()
		if n == 0 {
			continue
		}
		r.Ops += n
		r.Operations = append(r.Operations, opReport{
			Op: opNames[op], Count: n, OpsPerSec: float64(n) / seconds,
			P50: us(h.ValueAtQuantile(50)), P95: us(h.ValueAtQuantile(95)),
			P99: us(h.ValueAtQuantile(99)), P999: us(h.ValueAtQuantile(99.9)),
			Max: us(h.Max()), Mean: h.Mean() / 1e3,
		})
	}
	if seconds > 0 {
		r.OpsPerSec = float64(r.Ops) / seconds
	}
	return r
}

// runYcsb loads keys 0..records in order (values from stream position 0) and waits for the
// background work, then runs the operations (values from stream position 1), as `sluice ycsb`.
func (e *engine) runYcsb() (*ycsbReport, error) {
	c := e.cfg
	mix, err := mixFor(c.ycsbWorkload)
	if err != nil {
		return nil, err
	}
	keys, err := newKeyFormat(c.keySize, c.records+c.operations)
	if err != nil {
		return nil, err
	}
	key := make([]byte, c.keySize)

	load := newPhase()
	values := newValueGenerator(newStream(c.seed, 0, 0), c.valueSize)
	for n := uint64(0); n < c.records; n++ {
		t0 := time.Now()
		key = keys.write(n, key)
		if err := e.db.Set(key, values.generate(c.valueSize), pebble.NoSync); err != nil {
			return nil, err
		}
		load.record(opInsert, t0)
	}
	e.waitIdle() // The load is not over until the work it caused is, as in Sluice.
	loadReport := load.finish("load")

	ch := newChooser(mix, c.records, c.operations, c.seed)
	run := newPhase()
	values = newValueGenerator(newStream(c.seed, 1, 0), c.valueSize)
	for i := uint64(0); i < c.operations; i++ {
		op, n := ch.next(c.records)
		t0 := time.Now()
		key = keys.write(n, key)
		if op == opUpdate {
			if err := e.db.Set(key, values.generate(c.valueSize), pebble.NoSync); err != nil {
				return nil, err
			}
		} else {
			_, closer, err := e.db.Get(key)
			switch {
			case err == nil:
				if err := closer.Close(); err != nil {
					return nil, err
				}
			case errors.Is(err, pebble.ErrNotFound):
				run.notFound++
			default:
				return nil, err
			}
			if op == opReadModifyWrite {
				if err := e.db.Set(key, values.generate(c.valueSize), pebble.NoSync); err != nil {
					return nil, err
				}
			}
		}
		run.record(op, t0)
	}
	runReport := run.finish("run")

	return &ycsbReport{
		Workload: c.ycsbWorkload, Distribution: "zipfian", Records: c.records,
		Operations: c.operations, Threads: 1, KeySize: c.keySize, ValueSize: c.valueSize,
		Seed: c.seed, Load: loadReport, Run: runReport, Engine: "pebble",
		EngineVersion: e.version, Lsm: e.shape(), SettingsDiffer: e.settingsDiffer,
		Options: ycsbOptions{
			Records: c.records, Operations: c.operations, KeySize: c.keySize,
			ValueSize: c.valueSize, Seed: c.seed, Compression: e.compression,
			WriteBufferSize: c.writeBufferSize, TargetFileSize: c.targetFileSize,
			BlockSize: c.blockSize, BloomBits: c.bloomBits, CacheSize: c.cacheSize,
			CompactionThreads: c.compactionThreads,
		},
	}, nil
}
