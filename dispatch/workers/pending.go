package workers

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/jobfleet/jobfleet/store"
)

// WhyPending says why a waiting run of job jobID, whose executor type is
// executor, may not be taken by any worker: no live worker serves the
// executor type, or none that does may take jobs with that ID (their
// credentials are scoped to other prefixes). It returns "" when some live
// worker could take it (it then waits for a free slot or its backoff),
// and while the registry has not listed etcd yet. The reason names the
// other prefixes only for a reader with no scope (readerPrefix ""): a
// credential scoped to a prefix is not told of other teams' prefixes.
func (r *Registry) WhyPending(jobID, executor, readerPrefix string) string {
	v := r.regView.Load()
	if v.rev == 0 {
		return ""
	}
	return whyPending(v.workers, jobID, executor, readerPrefix == "")
}

// whyPending is WhyPending's decision over the registrations ws; names
// says whether the reason may name the workers' prefixes.
func whyPending(ws map[string]entry, jobID, executor string, names bool) string {
	if len(ws) == 0 {
		return "no live worker is registered (start one: jobfleet worker)"
	}
	prefixes := map[string]bool{}
	serving := 0
	for _, e := range ws {
		w := e.doc
		if !slices.Contains(w.Executors, executor) {
			continue
		}
		serving++
		if strings.HasPrefix(jobID, w.Prefix) {
			return ""
		}
		prefixes[w.Prefix] = true
	}
	if serving == 0 {
		switch executor {
		case store.ExecutorShell:
			return `no live worker serves executor "shell" (start a worker with --allow-shell)`
		case store.ExecutorHTTP:
			return `no live worker serves executor "http"`
		default:
			return fmt.Sprintf("no live worker serves handler %s (run a program that registers it with the worker library's Handle)", strconv.Quote(executor))
		}
	}
	if !names {
		return fmt.Sprintf("no live worker serving executor %s accepts jobs under this ID: their credentials are limited to other prefixes", strconv.Quote(executor))
	}
	var ps []string
	for _, p := range slices.Sorted(maps.Keys(prefixes)) {
		ps = append(ps, strconv.Quote(p))
	}
	return fmt.Sprintf("no live worker serving executor %s accepts jobs under this ID: their credentials are limited to the prefixes %s", strconv.Quote(executor), strings.Join(ps, ", "))
}
