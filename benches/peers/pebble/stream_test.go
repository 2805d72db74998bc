package main

import (
	"encoding/hex"
	"testing"
)

// The test vectors of STREAM.md section 6.

func TestSplitMix64Reference(t *testing.T) {
	g := splitMix64{state: 0}
	want := []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f}
	for i, w := range want {
		if got := g.next(); got != w {
			t.Fatalf("output %d: got %#x, want %#x", i, got, w)
		}
	}
}

func TestStreamSeeds(t *testing.T) {
	if got := mix64(301); got != 0x2ea7d2fa987b76eb {
		t.Fatalf("mix(301) = %#x", got)
	}
	if got := newStream(301, 1, 0).state; got != 0xe525d2a3b2002e14 {
		t.Fatalf("position 1 state = %#x", got)
	}
	g := newStream(301, 0, 0)
	want := []uint64{0xccfab28b74453852, 0x6f89713b8aeb9f8d, 0x8141311f6ad3d253, 0x86a93c15cfafa663, 0xc34a84a95ecb7732}
	for i, w := range want {
		if got := g.next(); got != w {
			t.Fatalf("output %d: got %#x, want %#x", i, got, w)
		}
	}
}

func firstKeys(g *splitMix64, num uint64, k int) []uint64 {
	out := make([]uint64, k)
	for i := range out {
		out[i] = g.below(num)
	}
	return out
}

func equal(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestKeyNumbersAndValues(t *testing.T) {
	const seed, num = 301, 1_000_000
	// fillrandom at position 0: value buffer first, then keys.
	g := newStream(seed, 0, 0)
	v := newValueGenerator(g, 100)
	if len(v.data) != 1_048_600 {
		t.Fatalf("buffer length %d", len(v.data))
	}
	if h := fnv1a64(v.data); h != 0xeaa93389abcf248d {
		t.Fatalf("buffer fnv %#x", h)
	}
	first := v.generate(100)
	half := "247d383a6237622a3b3554376553534e26473f207e3470334b2d284340714e586e403d266251742146667c7635656d5f676a"
	if got := hex.EncodeToString(first); got != half+half {
		t.Fatalf("first value %s", got)
	}
	if string(first[:50]) != "$}8:b7b*;5T7eSSN&G? ~4p3K-(C@qNXn@=&bQt!Ff|v5em_gj" {
		t.Fatalf("first value text %q", first[:50])
	}
	if got := hex.EncodeToString(v.generate(100)[:16]); got != "7560342074345949372c322f61754f29" {
		t.Fatalf("second value %s", got)
	}
	if got := firstKeys(g, num, 5); !equal(got, []uint64{568985, 555461, 548675, 856306, 142518}) {
		t.Fatalf("fillrandom keys %v", got)
	}
	// readrandom at position 1: keys only.
	if got := firstKeys(newStream(seed, 1, 0), num, 5); !equal(got, []uint64{200265, 681718, 426965, 265444, 238721}) {
		t.Fatalf("readrandom keys %v", got)
	}
	// overwrite at position 2.
	g = newStream(seed, 2, 0)
	v = newValueGenerator(g, 100)
	if h := fnv1a64(v.data); h != 0x5efd3fff3cbd09b1 {
		t.Fatalf("overwrite buffer fnv %#x", h)
	}
	if got := string(v.generate(100)[:8]); got != "S94!^-65" {
		t.Fatalf("overwrite first value %q", got)
	}
	if got := firstKeys(g, num, 5); !equal(got, []uint64{587334, 706572, 126095, 749313, 128125}) {
		t.Fatalf("overwrite keys %v", got)
	}
	// A value larger than 1 MiB grows the buffer.
	v = newValueGenerator(newStream(seed, 0, 0), 3<<20)
	if len(v.data) != 3_145_800 || fnv1a64(v.data) != 0xce218f4e3e3ed34d {
		t.Fatalf("large buffer: %d bytes, fnv %#x", len(v.data), fnv1a64(v.data))
	}
	if got := len(v.generate(3 << 20)); got != 3<<20 {
		t.Fatalf("large value length %d", got)
	}
}

// readwhilewriting's reader threads (position 0, threads 1 and 2), and the share of the
// reads each one does.
func TestReaderStreams(t *testing.T) {
	if got := newStream(301, 0, 1).state; got != 0xe3b0b46bb6dda086 {
		t.Fatalf("thread 1 state = %#x", got)
	}
	want := [][]uint64{{262325, 89055, 863800, 829571, 336372}, {655449, 522333, 949794, 372108, 980815}}
	for r, w := range want {
		if got := firstKeys(newStream(301, 0, uint64(r+1)), 1_000_000, 5); !equal(got, w) {
			t.Fatalf("reader %d keys %v", r, got)
		}
	}
	var sum uint64
	for r := 0; r < 3; r++ {
		first, end := share(10, 3, r)
		if first != sum {
			t.Fatalf("share %d starts at %d, want %d", r, first, sum)
		}
		sum = end
	}
	if sum != 10 {
		t.Fatalf("shares add up to %d", sum)
	}
}

func TestValuesWrap(t *testing.T) {
	v := newValueGenerator(newStream(1, 0, 0), 100)
	n := len(v.data) / 333
	for i := 0; i < n; i++ {
		v.generate(333)
	}
	// The rest is shorter than 333 bytes: the next value starts over.
	if got := v.generate(333); &got[0] != &v.data[0] {
		t.Fatal("value did not wrap to the buffer start")
	}
	for _, c := range v.data {
		if c < ' ' || c > '~' {
			t.Fatalf("unprintable byte %#x", c)
		}
	}
}

func TestKeys(t *testing.T) {
	f, err := newKeyFormat(16, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(f.write(568985, nil)); got != "0000000000568985" {
		t.Fatalf("key %q", got)
	}
	if got := string(f.write(0, make([]byte, 3))); got != "0000000000000000" {
		t.Fatalf("key %q", got)
	}
	if _, err := newKeyFormat(3, 1001); err == nil {
		t.Fatal("key-size 3 accepted for 1001 keys")
	}
	if _, err := newKeyFormat(3, 1000); err != nil {
		t.Fatal(err)
	}
}
