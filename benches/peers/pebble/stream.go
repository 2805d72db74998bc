// The key/value stream of STREAM.md: SplitMix64 streams, zero-padded decimal keys and a
// buffer of half-compressible values. Every peer program reproduces it bit for bit.

package main

import (
	"fmt"
	"math/bits"
)

const (
	golden = 0x9E3779B97F4A7C15 // SplitMix64's increment, also the per-position seed step
	mixC1  = 0xBF58476D1CE4E5B9 // first finalizer multiplier, also the per-thread seed step
	mixC2  = 0x94D049BB133111EB // second finalizer multiplier

	valueBufferBytes = 1 << 20 // the value buffer holds at least this many bytes
	pieceBytes       = 100     // bytes per compressible piece
	pieceRawBytes    = 50      // random bytes per piece; the rest repeats them
)

// mix64 is SplitMix64's finalizer.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * mixC1
	z = (z ^ (z >> 27)) * mixC2
	return z ^ (z >> 31)
}

// splitMix64 is a SplitMix64 generator.
type splitMix64 struct{ state uint64 }

// newStream is the generator of the benchmark at `position` of the run, client thread
// `thread` (always 0 here): state = mix(seed + position*golden + thread*mixC1).
func newStream(seed, position, thread uint64) *splitMix64 {
	return &splitMix64{state: mix64(seed + position*golden + thread*mixC1)}
}

// next returns the next 64-bit output.
func (g *splitMix64) next() uint64 {
	g.state += golden
	return mix64(g.state)
}

// below draws a number in [0, n) with Lemire's multiply-shift (no rejection).
func (g *splitMix64) below(n uint64) uint64 {
	hi, _ := bits.Mul64(g.next(), n)
	return hi
}

// decimalDigits is the number of decimal digits of n (1 for 0).
func decimalDigits(n uint64) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}

// keyFormat writes key numbers as keySize zero-padded decimal bytes.
type keyFormat struct{ size int }

// newKeyFormat fails when num-1 needs more than keySize digits (keys would collide).
func newKeyFormat(keySize int, num uint64) (keyFormat, error) {
	need := 1
	if num > 0 {
		need = decimalDigits(num - 1)
	}
	if keySize < need {
		return keyFormat{}, fmt.Errorf("key-size %d is too small for %d keys (needs at least %d digits)", keySize, num, need)
	}
	return keyFormat{size: keySize}, nil
}

// write fills buf (resized to the key size) with the key of n and returns it.
func (f keyFormat) write(n uint64, buf []byte) []byte {
	if cap(buf) < f.size {
		buf = make([]byte, f.size)
	}
	buf = buf[:f.size]
	for i := f.size - 1; i >= 0; i-- {
		buf[i] = byte('0' + n%10)
		n /= 10
	}
	return buf
}

// valueGenerator hands out consecutive slices of a buffer of half-compressible pieces.
type valueGenerator struct {
	data []byte
	pos  int
}

// newValueGenerator builds the buffer from g: pieces of 50 printable bytes, each repeated
// once, until it holds max(1 MiB, valueSize) bytes.
func newValueGenerator(g *splitMix64, valueSize int) *valueGenerator {
	target := max(valueBufferBytes, valueSize)
	data := make([]byte, 0, target+pieceBytes)
	var raw [pieceRawBytes]byte
	for len(data) < target {
		for i := range raw {
			raw[i] = byte(' ' + g.next()%95)
		}
		data = append(data, raw[:]...)
		data = append(data, raw[:]...)
	}
	return &valueGenerator{data: data}
}

// generate returns the next value of n bytes (at most the buffer's length), wrapping to
// the buffer's start when the rest is too short.
func (v *valueGenerator) generate(n int) []byte {
	n = min(n, len(v.data))
	if v.pos+n > len(v.data) {
		v.pos = 0
	}
	start := v.pos
	v.pos += n
	return v.data[start:v.pos]
}

// fnv1a64 is the 64-bit FNV-1a hash of b (used to check value buffers across languages).
func fnv1a64(b []byte) uint64 {
	h := uint64(0xcbf29ce484222325)
	for _, c := range b {
		h ^= uint64(c)
		h *= 0x100000001b3
	}
	return h
}
