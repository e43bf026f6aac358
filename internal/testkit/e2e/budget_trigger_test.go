package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	jfapi "github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/store"
)

// TestNoisyOperatorTriggersCannotFillEtcd: an operator scoped to its
// team's prefix triggers its 16 jobs, from four goroutines, each trigger
// with the largest payload a trigger may carry, on an etcd filled to just
// below its high-water mark. Each accepted trigger becomes a run, with
// attempts executed by a worker and history the fleet must trim. The
// triggers are charged to the credential's write budget and refused above
// the mark, run history is held to at most half the quota, and the fleet
// compacts by history size: etcd never raises NOSPACE, and another team's
// every-second job fires on time.
func TestNoisyOperatorTriggersCannotFillEtcd(t *testing.T) {
	nf := newNoisyFleet(t)
	tok := nf.f.Token(jfapi.RoleOperator, "noisy/")
	const jobs = 16
	for i := range jobs {
		j := jfapi.Job{ID: fmt.Sprintf("noisy/t%02d", i), Schedule: "@yearly", Executor: jfapi.Executor{Type: "http", URL: nf.rcv.srv.URL}}
		if code := api(t, tok, "POST", nf.base, "/v1/jobs", j, nil); code != http.StatusCreated {
			t.Fatalf("create %s: %d", j.ID, code)
		}
	}
	nf.fillBelowHighWater(t)
	pad := strings.Repeat("p", store.MaxTriggerPayloadBytes-64)
	bodies := make([][]byte, 2)
	for i := range bodies {
		bodies[i], _ = json.Marshal(map[string]any{"payload": map[string]any{"n": i, "pad": pad}})
	}
	nf.floodChecked(t, "trigger", http.StatusAccepted, func(ctx context.Context, n int) (int, error) {
		id := fmt.Sprintf("noisy/t%02d", n%jobs)
		return send(ctx, tok, "POST", nf.base+"/v1/jobs/"+url.PathEscape(id)+"/trigger", bodies[n%2])
	})
}
