package chaos

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"slices"
	"strings"
	"time"
)

// Log messages of an orchestrator that stops acting as owner of some
// partitions on its own, without a handoff.
var selfFenceMessages = []string{
	"session ended; stopped acting as owner", // its lease was not renewed in time, or was lost
	"partition ownership lost",               // its owner keys vanished under it
}

// leaseLosses reads the orchestrators' logs for the moments a member
// stopped acting as owner on its own and returns each as a fault of kind
// LeaseLoss: its window runs from that moment until every partition it
// held had a new owner key (as the history saw them created), which is
// also its recovery. Only moments before end count. Most are effects of
// injected faults (the checker sorts them out); the others are lease
// losses nobody injected.
func leaseLosses(logs []string, acquired map[int][]time.Time, end time.Time) []Fault {
	var out []Fault
	for _, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if !slices.ContainsFunc(selfFenceMessages, func(m string) bool { return strings.Contains(string(line), m) }) {
				continue
			}
			var ev struct {
				TS         float64 `json:"ts"`
				Msg        string  `json:"msg"`
				Member     string  `json:"member"`
				Partitions []int   `json:"partitions"`
			}
			if json.Unmarshal(line, &ev) != nil || len(ev.Partitions) == 0 || !slices.Contains(selfFenceMessages, ev.Msg) {
				continue
			}
			sec, frac := math.Modf(ev.TS)
			at := time.Unix(int64(sec), int64(frac*1e9))
			if at.After(end) {
				continue
			}
			ft := Fault{Kind: LeaseLoss, Target: ev.Member, Start: at, Detail: ev.Msg}
			var recovered time.Time
			for _, p := range ev.Partitions {
				i, _ := slices.BinarySearchFunc(acquired[p], at, time.Time.Compare)
				if i == len(acquired[p]) {
					recovered = time.Time{}
					break
				}
				if a := acquired[p][i]; a.After(recovered) {
					recovered = a
				}
			}
			ft.Recovered = recovered
			if !recovered.IsZero() {
				ft.Failover = recovered.Sub(at)
			}
			ft.Windows = []Window{{Start: at, End: recovered, Partitions: slices.Clone(ev.Partitions)}}
			out = append(out, ft)
		}
		f.Close()
	}
	slices.SortFunc(out, func(a, b Fault) int { return a.Start.Compare(b.Start) })
	return out
}
