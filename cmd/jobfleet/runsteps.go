package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// printSteps writes the steps of run r, made of steps: each with its
// status, its attempts, how long it ran (from its first attempt's start
// to its last's end, or to now while running), its result (what it hands
// the steps that need it: a sharded step's is an array, by shard; cut to
// 60 characters unless wide) and its reason.
func printSteps(w io.Writer, r api.Run, wide bool, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "STEP\tNEEDS\tSTATUS\tATTEMPTS\tDURATION\tRESULT\tREASON\n")
	if r.Round > 0 {
		defer fmt.Fprintf(w, "round %d (started again from a step %d times)\n", r.Round, len(r.Rounds)+r.RoundsDropped)
	}
	for k, s := range r.Steps {
		attempts, result := 0, 0
		var first, last time.Time
		running := false
		for i := s.First; i < s.First+s.Items && i < len(r.Items); i++ {
			it := r.Items[i]
			attempts += len(it.Attempts)
			result += len(it.Result)
			for _, a := range it.Attempts {
				if first.IsZero() || a.StartedAt.Before(first) {
					first = a.StartedAt
				}
				if a.FinishedAt.IsZero() {
					running = true
				} else if a.FinishedAt.After(last) {
					last = a.FinishedAt
				}
			}
		}
		dur := "-"
		if !first.IsZero() {
			if running {
				last = now
			}
			dur = last.Sub(first).Round(time.Millisecond).String()
		}
		needs := strings.Join(s.Needs, ",")
		if s.When != "" && s.When != api.StepOnSuccess {
			needs += " (" + string(s.When) + ")"
		}
		res := "-"
		if result > 0 {
			var b bytes.Buffer
			if json.Compact(&b, r.StepResult(k)) != nil {
				b.Reset()
				b.Write(r.StepResult(k))
			}
			res = cell(b.String())
			if !wide {
				res = clip(res, 60)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", cell(s.ID), cell(needs), s.Status, attempts, dur, res, cell(s.Reason))
	}
	return tw.Flush()
}
