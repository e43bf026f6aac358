package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/jobfleet/jobfleet/api"
)

// printStepTree writes job describe's STEPS section for a job made of
// steps: each step on a line of its own, under the step it needs (a step
// that needs several is drawn once, under the one of them that ends
// last in the graph, the deepest, and says "needs: a, b"), with its
// executor, when, shards, retry, timeout and placement in a compact
// form. Steps needing none are at the top, in the job's order; so are
// the children of a step. Nothing for a job without steps.
func printStepTree(w io.Writer, j api.Job) {
	if !j.HasSteps() {
		return
	}
	fmt.Fprintf(w, "\nSTEPS (%d)\n", len(j.Steps))
	parent := stepParents(j.Steps)
	children := make(map[int][]int, len(j.Steps))
	for i := range j.Steps {
		children[parent[i]] = append(children[parent[i]], i)
	}
	var draw func(i int, lead string, last, top bool)
	draw = func(i int, lead string, last, top bool) {
		branch, next := "├─ ", "│  "
		if last {
			branch, next = "└─ ", "   "
		}
		if top {
			branch, next = "", ""
		}
		fmt.Fprintf(w, "  %s%s%s\n", lead, branch, stepLine(j, &j.Steps[i]))
		kids := children[i]
		for k, c := range kids {
			draw(c, lead+next, k == len(kids)-1, false)
		}
	}
	for _, r := range children[-1] {
		draw(r, "", false, true)
	}
}

// stepParents returns, for each step, the index of the step it is drawn
// under: its need of the greatest depth (the longest chain of needs
// before it; of equal ones the last listed), -1 for a step needing none.
// A need naming no step, or on a cycle (a job the server refused), is
// passed over, so every step is drawn.
func stepParents(steps []api.Step) []int {
	index := make(map[string]int, len(steps))
	for i, s := range steps {
		index[s.ID] = i
	}
	depth := make([]int, len(steps)) // 0: not computed; else depth+1
	onPath := make([]bool, len(steps))
	var depthOf func(i int) int
	depthOf = func(i int) int {
		if depth[i] > 0 {
			return depth[i] - 1
		}
		onPath[i] = true
		d := 0
		for _, n := range steps[i].Needs {
			if k, ok := index[n]; ok && !onPath[k] {
				d = max(d, depthOf(k)+1)
			}
		}
		onPath[i] = false
		depth[i] = d + 1
		return d
	}
	parent := make([]int, len(steps))
	for i, s := range steps {
		parent[i] = -1
		best := -1
		for _, n := range s.Needs {
			if k, ok := index[n]; ok && k != i && depthOf(k) < depthOf(i) && depthOf(k) >= best {
				parent[i], best = k, depthOf(k)
			}
		}
	}
	return parent
}

// stepLine describes step s of job j on one line: "load  handler
// load-warehouse · retry 5 (1s to 1m)".
func stepLine(j api.Job, s *api.Step) string {
	parts := []string{executorText(s.Executor, 60)}
	if len(s.Needs) > 1 {
		parts = append([]string{"needs: " + strings.Join(s.Needs, ", ")}, parts...)
	}
	if s.When != "" && s.When != api.StepOnSuccess {
		parts = append(parts, "when "+string(s.When))
	}
	if sh := s.Shards; sh != nil {
		text := fmt.Sprintf("shards %d", sh.Items())
		if sh.MinSucceeded > 0 {
			text += fmt.Sprintf(", min %d", sh.MinSucceeded)
		}
		if sh.MaxParallel > 0 {
			text += fmt.Sprintf(", %d at once", sh.MaxParallel)
		}
		parts = append(parts, text)
	}
	if r := s.Retry; r != (api.RetryPolicy{}) {
		parts = append(parts, fmt.Sprintf("retry %d (%v to %v)", r.MaxAttempts, r.InitialBackoff, r.MaxBackoff))
	}
	if s.Timeout != 0 {
		parts = append(parts, "timeout "+s.Timeout.String())
	}
	if sj := j.StepJob(s); sj.Selector() != "" {
		parts = append(parts, "on "+sj.Selector())
	}
	return cell(s.ID) + "  " + cell(strings.Join(parts, " · "))
}
