package main

import (
	"encoding/json"
	"math"
	"testing"
)

// STREAM.md section 8.4: `--dump-ycsb-ops 5 --ycsb a|f --records 1000000 --operations
// 1000000` (seed 301, 100-byte values), the same bytes as every peer and Sluice's own Chooser.
var ycsbVectors = map[string]string{
	"a": `{"workload":"a","distribution":"zipfian","records":1000000,"operations":1000000,"seed":301,"value_size":100,"load_value_buffer_fnv1a64":"eaa93389abcf248d","run_value_buffer_fnv1a64":"96f9f4a4a4348e8d","op_counts":{"read":499683,"update":500317,"insert":0,"scan":0,"read-modify-write":0},"ops_fnv1a64":"404df34d30a68eca","first_ops":["update 49015","update 291577","update 842051","read 342734","read 213555"]}`,
	"f": `{"workload":"f","distribution":"zipfian","records":1000000,"operations":1000000,"seed":301,"value_size":100,"load_value_buffer_fnv1a64":"eaa93389abcf248d","run_value_buffer_fnv1a64":"96f9f4a4a4348e8d","op_counts":{"read":499683,"update":0,"insert":0,"scan":0,"read-modify-write":500317},"ops_fnv1a64":"1fa7a5825029d1cf","first_ops":["read-modify-write 49015","read-modify-write 291577","read-modify-write 842051","read 342734","read 213555"]}`,
}

func TestYcsbDumpMatchesStreamMd(t *testing.T) {
	for w, want := range ycsbVectors {
		c := config{ycsbWorkload: w, records: 1_000_000, operations: 1_000_000, seed: 301, valueSize: 100}
		d, err := ycsbDump(c, 5)
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("workload %s:\n got %s\nwant %s", w, got, want)
		}
	}
}

func TestZipfianConstants(t *testing.T) {
	if got := ycsbFnv64(0); got != 0x573807cdd7e5c63b {
		t.Errorf("fnvhash64(0) = %#x", got)
	}
	if got := ycsbFnv64(1 << 63); got>>63 != 0 && got != 1<<63 {
		t.Errorf("fnvhash64 must be non-negative as a signed integer: %#x", got)
	}
	z := newScrambledZipfian(1_000_000)
	if z.eta != 0x1.b295ee6b5a1dep-3 {
		t.Errorf("eta = %x", z.eta)
	}
	if math.Abs(z.alpha-100) > 1e-9 {
		t.Errorf("alpha = %v", z.alpha)
	}
}

func TestOperationMixWithinOnePercent(t *testing.T) {
	for _, w := range []string{"a", "b", "c", "f"} {
		mix, _ := mixFor(w)
		ch := newChooser(mix, 10_000, 100_000, 7)
		var counts [numOps]float64
		for i := 0; i < 100_000; i++ {
			op, k := ch.next(10_000)
			if k >= 10_000 {
				t.Fatalf("key %d out of range", k)
			}
			counts[op]++
		}
		for op := range counts {
			if got := counts[op] / 100_000; math.Abs(got-mix[op]) > 0.01 {
				t.Errorf("workload %s %s: %v vs %v", w, opNames[op], got, mix[op])
			}
		}
	}
}

func TestUnsupportedWorkloads(t *testing.T) {
	for _, w := range []string{"d", "e", "x"} {
		if _, err := mixFor(w); err == nil {
			t.Errorf("workload %s accepted", w)
		}
	}
}
