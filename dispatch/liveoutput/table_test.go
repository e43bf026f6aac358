package liveoutput_test

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"go.uber.org/goleak"

	"github.com/jobfleet/jobfleet/dispatch/liveoutput"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var k1 = liveoutput.Key{Run: "r1", Item: liveoutput.NoItem, Attempt: 1}

func small(attempts int) *liveoutput.Table {
	return liveoutput.New(liveoutput.Config{AttemptBytes: 1 << 10, Attempts: attempts})
}

// TestTailKept: output longer than the ring keeps its last bytes, whatever
// the sizes of the writes, and says where they start.
func TestTailKept(t *testing.T) {
	var all bytes.Buffer
	for i := range 500 {
		fmt.Fprintf(&all, "line %d\n", i)
	}
	for _, chunk := range []int{1, 7, 100, 1023, 1024, 1025, 5000} {
		tb := small(4)
		b := all.Bytes()
		for off := 0; off < len(b); off += chunk {
			tb.Write(k1, int64(off), b[off:min(off+chunk, len(b))])
		}
		data, start, ended, ok := tb.Snapshot(k1)
		if !ok || ended {
			t.Fatalf("chunk %d: ok %v ended %v", chunk, ok, ended)
		}
		if want := b[len(b)-1024:]; !bytes.Equal(data, want) || start != int64(len(b)-1024) {
			t.Fatalf("chunk %d: got %d bytes from %d, want the last 1024 from %d", chunk, len(data), start, len(b)-1024)
		}
	}
}

// TestWriteAtOffsets: a chunk sent again is kept once; a gap is skipped.
func TestWriteAtOffsets(t *testing.T) {
	tb := small(4)
	tb.Write(k1, 0, []byte("hello "))
	tb.Write(k1, 0, []byte("hello "))   // sent again
	tb.Write(k1, 3, []byte("lo world")) // overlapping
	if data, _, _, _ := tb.Snapshot(k1); string(data) != "hello world" {
		t.Fatalf("got %q", data)
	}
	f := tb.Follow(k1)
	defer f.Close()
	if data, skipped, _ := f.Read(); string(data) != "hello world" || skipped != 0 {
		t.Fatalf("first read %q skipped %d", data, skipped)
	}
	tb.Write(k1, 20, []byte("later")) // 9 bytes never arrived
	<-f.Wake()
	if data, skipped, _ := f.Read(); string(data) != "later" || skipped != 9 {
		t.Fatalf("after a gap: %q skipped %d", data, skipped)
	}
	tb.End(k1)
	<-f.Wake()
	if data, _, ended := f.Read(); len(data) != 0 || !ended {
		t.Fatalf("after the end: %q ended %v", data, ended)
	}
	if tb.Write(k1, 25, []byte("x")) {
		t.Fatal("a write after the end was taken")
	}
}

// TestEviction: past Attempts, the attempt that ended first goes, then the
// oldest running one; their followers see them ended.
func TestEviction(t *testing.T) {
	tb := small(2)
	a := liveoutput.Key{Run: "a", Item: liveoutput.NoItem, Attempt: 1}
	b := liveoutput.Key{Run: "b", Item: liveoutput.NoItem, Attempt: 1}
	c := liveoutput.Key{Run: "c", Item: liveoutput.NoItem, Attempt: 1}
	tb.Write(a, 0, []byte("a"))
	tb.Write(b, 0, []byte("b"))
	tb.End(b)
	fa := tb.Follow(a)
	defer fa.Close()
	tb.Write(c, 0, []byte("c")) // evicts b: ended
	if _, _, _, ok := tb.Snapshot(b); ok {
		t.Fatal("b, ended, is still held")
	}
	tb.Write(liveoutput.Key{Run: "d", Item: liveoutput.NoItem, Attempt: 1}, 0, []byte("d")) // evicts a: oldest
	if _, _, _, ok := tb.Snapshot(a); ok || tb.Len() != 2 {
		t.Fatalf("a still held (%v) or %d attempts held", ok, tb.Len())
	}
	fa.Read()
	if _, _, ended := fa.Read(); !ended {
		t.Fatal("a's follower does not see it ended")
	}
	if got := tb.Latest("d", liveoutput.NoItem); got != 1 {
		t.Fatalf("latest attempt of d: %d", got)
	}
}

// TestConcurrent: writers, followers and snapshots at once (run with
// -race); every follower reads the stream in order, skipping only what it
// is told it skipped.
func TestConcurrent(t *testing.T) {
	tb := small(8)
	const lines = 2000
	var wg sync.WaitGroup
	results := make([]string, 8)
	for i := range results {
		f := tb.Follow(k1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer f.Close()
			var got strings.Builder
			for {
				<-f.Wake()
				data, skipped, ended := f.Read()
				if skipped > 0 {
					fmt.Fprintf(&got, "[skipped %d]", skipped)
				}
				got.Write(data)
				if ended {
					break
				}
			}
			results[i] = got.String()
		}()
	}
	var writers sync.WaitGroup
	var mu sync.Mutex
	off := int64(0)
	for w := range 4 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := range lines / 4 {
				mu.Lock()
				line := fmt.Sprintf("w%d %d\n", w, i)
				tb.Write(k1, off, []byte(line))
				off += int64(len(line))
				mu.Unlock()
				tb.Snapshot(k1)
			}
		}()
	}
	writers.Wait()
	tb.End(k1)
	wg.Wait()
	for i, r := range results {
		if !strings.HasSuffix(r, "\n") || strings.Count(r, "\n") == 0 {
			t.Fatalf("follower %d read %q", i, r)
		}
		total := int64(0)
		for _, part := range strings.Split(r, "[skipped ") {
			if n, rest, ok := strings.Cut(part, "]"); ok {
				var s int64
				fmt.Sscan(n, &s)
				total += s
				part = rest
			}
			total += int64(len(part))
		}
		if total != off {
			t.Fatalf("follower %d: read and skipped %d bytes, the stream has %d", i, total, off)
		}
	}
}

// TestThousandFollowers: a thousand followers that never read do not
// block the writer, and each holds at most a ring when it reads at last.
func TestThousandFollowers(t *testing.T) {
	tb := small(4)
	var fs []*liveoutput.Follower
	for range 1000 {
		fs = append(fs, tb.Follow(k1))
	}
	line := []byte(strings.Repeat("x", 99) + "\n")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 10000 {
			tb.Write(k1, int64(i*len(line)), line)
		}
	}()
	<-done // a writer blocked by its followers would never get here
	for _, f := range fs {
		select {
		case <-f.Wake():
		default:
			t.Fatal("a follower was not woken")
		}
		data, skipped, _ := f.Read()
		if len(data) != 1024 || skipped != int64(10000*len(line)-1024) {
			t.Fatalf("a follower read %d bytes, skipped %d", len(data), skipped)
		}
		select {
		case <-f.Wake():
			t.Fatal("a follower that has read all is woken again")
		default:
		}
		f.Close()
	}
}

// BenchmarkWrite measures an append of a 100-byte line with 0 and 1 000
// idle followers.
func BenchmarkWrite(b *testing.B) {
	line := []byte(strings.Repeat("x", 99) + "\n")
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprintf("followers=%d", n), func(b *testing.B) {
			tb := liveoutput.New(liveoutput.Config{})
			for range n {
				defer tb.Follow(k1).Close()
			}
			off := int64(0)
			for b.Loop() {
				tb.Write(k1, off, line)
				off += int64(len(line))
			}
		})
	}
}

// TestDropNeverCutsARune: a ring that drops the start of its output in
// the middle of a multi-byte character begins what it hands out at the
// next one: readers never see half a character (U+FFFD).
func TestDropNeverCutsARune(t *testing.T) {
	for _, lead := range []int{0, 1, 2, 3} {
		tb := small(4)
		// The ASCII at the end moves where the ring's last 1 KiB begins.
		b := append(bytes.Repeat([]byte("é€😀"), 200), bytes.Repeat([]byte("a"), lead)...)
		for off := 0; off < len(b); {
			n := min(9, len(b)-off) // whole characters: 2 + 3 + 4 bytes
			tb.Write(k1, int64(off), b[off:off+n])
			off += n
		}
		data, start, _, ok := tb.Snapshot(k1)
		if !ok || !utf8.Valid(data) || !utf8.RuneStart(data[0]) || !bytes.Equal(data, b[start:]) {
			t.Fatalf("lead %d: %d bytes from %d, valid %v: want the tail of the output from a character's start", lead, len(data), start, utf8.Valid(data))
		}
		f := tb.Follow(k1)
		got, _, _ := f.Read()
		if !utf8.Valid(got) {
			t.Fatalf("lead %d: a follower read half a character", lead)
		}
	}
}
