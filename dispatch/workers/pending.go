package workers

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jobfleet/jobfleet/dispatch/placement"
)

// WhyPending says why a waiting run of job jobID, whose executor type is
// executor and whose placement selector is selector ("" for none), may
// not be taken by any worker: no live worker serves the executor type,
// none that does may take jobs with that ID (their credentials are scoped
// to other prefixes), or none of those has labels the selector matches.
// It returns "" when some live worker could take it (it then waits for a
// free slot or its backoff), and while the registry has not listed etcd
// yet. The reason names the other prefixes only for a reader with no
// scope (readerPrefix ""): a credential scoped to a prefix is not told of
// other teams' prefixes.
func (r *Registry) WhyPending(jobID, executor, selector, readerPrefix string) string {
	v := r.regView.Load()
	if v.rev == 0 {
		return ""
	}
	return whyPending(v.workers, jobID, executor, selector, readerPrefix == "")
}

// Worker returns worker id's live registration as this member's copy
// shows it, and whether it has one. The document's slices and map are
// shared: read them, do not modify them.
func (r *Registry) Worker(id string) (api.Worker, bool) {
	e, ok := r.regView.Load().workers[id]
	return e.doc, ok
}

// OtherCanTake reports whether a live worker other than except serves
// executor, may take jobs with ID jobID and has labels selector matches,
// as this member's copy shows the registrations.
func (r *Registry) OtherCanTake(jobID, executor, selector, except string) bool {
	sel, err := placement.Parse(selector)
	if err != nil {
		return false
	}
	for id, e := range r.regView.Load().workers {
		if id != except && canTake(e.doc, jobID, executor) && sel.Allows(e.doc.Labels) {
			return true
		}
	}
	return false
}

// canTake reports whether worker w serves executor and may take jobs with
// ID jobID, whatever its labels.
func canTake(w api.Worker, jobID, executor string) bool {
	return slices.Contains(w.Executors, executor) && strings.HasPrefix(jobID, w.Prefix)
}

// whyPending is WhyPending's decision over the registrations ws; names
// says whether the reason may name the workers' prefixes.
func whyPending(ws map[string]entry, jobID, executor, selector string, names bool) string {
	if len(ws) == 0 {
		return "no live worker is registered (start one: jobfleet worker)"
	}
	sel, err := placement.Parse(selector)
	if err != nil {
		return fmt.Sprintf("the job's placement.selector %s does not parse, so no worker may take its runs", strconv.Quote(selector))
	}
	prefixes := map[string]bool{}
	serving, unmatched := 0, 0
	for _, e := range ws {
		w := e.doc
		if !slices.Contains(w.Executors, executor) {
			continue
		}
		serving++
		if !strings.HasPrefix(jobID, w.Prefix) {
			prefixes[w.Prefix] = true
			continue
		}
		if sel.Allows(w.Labels) {
			return ""
		}
		unmatched++
	}
	switch {
	case serving == 0:
		switch executor {
		case api.ExecutorShell:
			return `no live worker serves executor "shell" (start a worker with --allow-shell)`
		case api.ExecutorHTTP:
			return `no live worker serves executor "http"`
		default:
			return fmt.Sprintf("no live worker serves handler %s (run a program that registers it with the worker library's Handle)", strconv.Quote(executor))
		}
	case unmatched > 0:
		return fmt.Sprintf("no live worker matches %s (the job's placement.selector): the live workers that serve executor %s for this job have other labels (start one with --labels that match)",
			sel.String(), strconv.Quote(executor))
	case !names:
		return fmt.Sprintf("no live worker serving executor %s accepts jobs under this ID: their credentials are limited to other prefixes", strconv.Quote(executor))
	}
	var ps []string
	for _, p := range slices.Sorted(maps.Keys(prefixes)) {
		ps = append(ps, strconv.Quote(p))
	}
	return fmt.Sprintf("no live worker serving executor %s accepts jobs under this ID: their credentials are limited to the prefixes %s", strconv.Quote(executor), strings.Join(ps, ", "))
}
