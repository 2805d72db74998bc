// The YCSB operation stream of ../STREAM.md section 8: YCSB's scrambled zipfian key choice
// (constant 0.99, FNV-64 scrambling) and the operation mixes of workloads A, B, C and F, as
// `sluice ycsb` draws them, bit for bit.

package main

// #cgo LDFLAGS: -lm
// #include <math.h>
import "C"

import (
	"encoding/json"
	"fmt"
	"os"
)

const (
	zipfianConstant = 0.99              // YCSB's ZipfianGenerator.ZIPFIAN_CONSTANT
	scrambledItems  = 10_000_000_000    // YCSB's ScrambledZipfianGenerator.ITEM_COUNT
	scrambledZetan  = 26.46902820178302 // zeta(scrambledItems, 0.99), YCSB's ZETAN
	maxRedraws      = 64                // redraws of a key not yet inserted (Sluice's MAX_REDRAWS)
)

// Operation codes: Sluice's Operation discriminants, also the byte hashed into ops_fnv1a64.
const (
	opRead = iota
	opUpdate
	opInsert
	opScan
	opReadModifyWrite
	numOps
)

var opNames = [numOps]string{"read", "update", "insert", "scan", "read-modify-write"}

// libmPow is C's pow: STREAM.md section 8 computes the zipfian draw with it, and Go's
// math.Pow can differ from it by a few ulps, which moves a draw now and then.
func libmPow(x, y float64) float64 { return float64(C.pow(C.double(x), C.double(y))) }

// nextF64 is a double in [0, 1) from the top 53 bits of one draw.
func (g *splitMix64) nextF64() float64 {
	return float64(g.next()>>11) * (1.0 / (1 << 53))
}

// ycsbFnv64 is YCSB's fnvhash64: FNV-1a of v's 8 little-endian bytes, then the absolute
// value of the result read as a signed integer (2^63 stays 2^63).
func ycsbFnv64(v uint64) uint64 {
	h := uint64(0xcbf29ce484222325)
	for i := 0; i < 8; i++ {
		h = (h ^ (v >> (8 * i) & 0xff)) * 0x100000001b3
	}
	if h>>63 != 0 {
		return -h
	}
	return h
}

// scrambledZipfian is YCSB's ScrambledZipfianGenerator over [0, items).
type scrambledZipfian struct {
	items              uint64
	alpha, eta, second float64
}

func newScrambledZipfian(items uint64) *scrambledZipfian {
	// A variable, not a constant: Go evaluates constant expressions exactly, which would make
	// 1 - theta exactly 0.01 where STREAM.md's double arithmetic gives 0.010000000000000009.
	theta := float64(zipfianConstant)
	zeta2theta := float64(float64(0.0+1.0/libmPow(1.0, theta)) + 1.0/libmPow(2.0, theta))
	z := &scrambledZipfian{items: max(items, 1)}
	z.alpha = 1.0 / (1.0 - theta)
	z.eta = (1.0 - libmPow(2.0/float64(scrambledItems), 1.0-theta)) / (1.0 - zeta2theta/scrambledZetan)
	z.second = 1.0 + libmPow(0.5, theta)
	return z
}

// zipfian is the item before scrambling (0 is the most popular). The explicit float64
// conversions forbid fused multiply-adds, which STREAM.md excludes.
func (z *scrambledZipfian) zipfian(g *splitMix64) uint64 {
	u := g.nextF64()
	uz := float64(u * scrambledZetan)
	if uz < 1.0 {
		return 0
	}
	if uz < z.second {
		return 1
	}
	base := float64(float64(float64(z.eta*u)-z.eta) + 1.0)
	spread := float64(float64(scrambledItems) * libmPow(base, z.alpha))
	return min(uint64(spread), scrambledItems-1)
}

func (z *scrambledZipfian) next(g *splitMix64) uint64 { return ycsbFnv64(z.zipfian(g)) % z.items }

// opMix is a workload's share of each operation.
type opMix [numOps]float64

// pick is the first operation (in code order, skipping zero shares) whose cumulative share
// exceeds u; the last one when rounding leaves the sum just below 1.
func (m *opMix) pick(u float64) int {
	acc, last := 0.0, opRead
	for op, share := range m {
		if share <= 0 {
			continue
		}
		acc += share
		last = op
		if u < acc {
			return op
		}
	}
	return last
}

// mixFor is the mix of the workloads the peers run (those without inserts or scans).
func mixFor(workload string) (opMix, error) {
	var m opMix
	switch workload {
	case "a":
		m[opRead], m[opUpdate] = 0.5, 0.5
	case "b":
		m[opRead], m[opUpdate] = 0.95, 0.05
	case "c":
		m[opRead] = 1.0
	case "f":
		m[opRead], m[opReadModifyWrite] = 0.5, 0.5
	default:
		return m, fmt.Errorf("unknown or unsupported YCSB workload %q (the peers run a, b, c and f: the workloads without inserts or scans)", workload)
	}
	return m, nil
}

// chooser is the run phase's source of operations.
type chooser struct {
	mix  opMix
	zipf *scrambledZipfian
	g    *splitMix64
}

func newChooser(mix opMix, records, operations, seed uint64) *chooser {
	expectedNew := uint64(float64(float64(operations)*mix[opInsert]) * 2.0)
	return &chooser{mix: mix, zipf: newScrambledZipfian(records + expectedNew), g: newStream(seed, 0, 0)}
}

// next is the next operation and key number, given that keys 0..inserted exist.
func (c *chooser) next(inserted uint64) (int, uint64) {
	op := c.mix.pick(c.g.nextF64())
	inserted = max(inserted, 1)
	for i := 0; i < maxRedraws; i++ {
		if k := c.zipf.next(c.g); k < inserted {
			return op, k
		}
	}
	return op, inserted - 1
}

// opsDump is the --dump-ycsb-ops line; every peer prints the same bytes.
type opsDump struct {
	Workload      string        `json:"workload"`
	Distribution  string        `json:"distribution"`
	Records       uint64        `json:"records"`
	Operations    uint64        `json:"operations"`
	Seed          uint64        `json:"seed"`
	ValueSize     int           `json:"value_size"`
	LoadBufferFnv string        `json:"load_value_buffer_fnv1a64"`
	RunBufferFnv  string        `json:"run_value_buffer_fnv1a64"`
	OpCounts      orderedCounts `json:"op_counts"`
	OpsFnv        string        `json:"ops_fnv1a64"`
	FirstOps      []string      `json:"first_ops"`
}

// orderedCounts marshals as an object with the operations in code order.
type orderedCounts [numOps]uint64

func (o orderedCounts) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for op, n := range o {
		if op > 0 {
			b = append(b, ',')
		}
		b = append(b, fmt.Sprintf("%q:%d", opNames[op], n)...)
	}
	return append(b, '}'), nil
}

// ycsbDump computes the --dump-ycsb-ops line: the whole run phase's operation counts and
// FNV-1a 64 digest (per operation its code byte, then the key number's 8 little-endian
// bytes), the value buffers' digests and the first n operations.
func ycsbDump(c config, n uint64) (*opsDump, error) {
	mix, err := mixFor(c.ycsbWorkload)
	if err != nil {
		return nil, err
	}
	ch := newChooser(mix, c.records, c.operations, c.seed)
	d := &opsDump{Workload: c.ycsbWorkload, Distribution: "zipfian", Records: c.records,
		Operations: c.operations, Seed: c.seed, ValueSize: c.valueSize, FirstOps: []string{}}
	h := uint64(0xcbf29ce484222325)
	for i := uint64(0); i < c.operations; i++ {
		op, k := ch.next(c.records)
		d.OpCounts[op]++
		h = (h ^ uint64(op)) * 0x100000001b3
		for b := 0; b < 8; b++ {
			h = (h ^ (k >> (8 * b) & 0xff)) * 0x100000001b3
		}
		if i < n {
			d.FirstOps = append(d.FirstOps, fmt.Sprintf("%s %d", opNames[op], k))
		}
	}
	d.OpsFnv = fmt.Sprintf("%016x", h)
	d.LoadBufferFnv = fmt.Sprintf("%016x", fnv1a64(newValueGenerator(newStream(c.seed, 0, 0), c.valueSize).data))
	d.RunBufferFnv = fmt.Sprintf("%016x", fnv1a64(newValueGenerator(newStream(c.seed, 1, 0), c.valueSize).data))
	return d, nil
}

func dumpYcsbOps(c config, n uint64) error {
	d, err := ycsbDump(c, n)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(d)
}
