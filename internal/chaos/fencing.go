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

// leaseFenceMessage is the line of a member fencing itself for a lease it
// did not renew in time; its last_renewal field says when it last did.
const leaseFenceMessage = "lease not renewed within the renew deadline; fencing"

// fenceLineGap bounds how long before the line that names a member's
// partitions its fencing line may come to belong to the same fencing.
const fenceLineGap = 5 * time.Second

// unixTime converts a log's seconds since the epoch (microsecond
// precision) into a time.
func unixTime(ts float64) time.Time {
	if ts == 0 {
		return time.Time{}
	}
	return time.UnixMicro(int64(math.Round(ts * 1e6)))
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
		var lastRenewal time.Time // of the member's last fencing line, if any
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if !strings.Contains(string(line), leaseFenceMessage) && !slices.ContainsFunc(selfFenceMessages, func(m string) bool { return strings.Contains(string(line), m) }) {
				continue
			}
			var ev struct {
				TS          float64 `json:"ts"`
				Msg         string  `json:"msg"`
				Member      string  `json:"member"`
				Partitions  []int   `json:"partitions"`
				LastRenewal float64 `json:"last_renewal"`
			}
			if json.Unmarshal(line, &ev) != nil {
				continue
			}
			if ev.Msg == leaseFenceMessage {
				lastRenewal = unixTime(ev.LastRenewal)
				continue
			}
			if len(ev.Partitions) == 0 || !slices.Contains(selfFenceMessages, ev.Msg) {
				continue
			}
			at := unixTime(ev.TS)
			if at.After(end) {
				continue
			}
			// A member fencing itself for a lease it could not renew may
			// not have been able to write since its last renewal either
			// (etcd renews leases on its leader alone, without the quorum
			// writes need): the window starts there.
			start := at
			if !lastRenewal.IsZero() && lastRenewal.Before(at) && at.Sub(lastRenewal) < fenceLineGap {
				start = lastRenewal
			}
			lastRenewal = time.Time{}
			ft := Fault{Kind: LeaseLoss, Target: ev.Member, Start: start, Detail: ev.Msg}
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
				ft.Failover = recovered.Sub(start)
			}
			ft.Windows = []Window{{Start: start, End: recovered, Partitions: slices.Clone(ev.Partitions)}}
			out = append(out, ft)
		}
		f.Close()
	}
	slices.SortFunc(out, func(a, b Fault) int { return a.Start.Compare(b.Start) })
	return out
}
