package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"pgregory.net/rapid"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/store"
)

func TestFindCycle(t *testing.T) {
	tests := []struct {
		name string
		id   string
		ups  []string
		down map[string][]string // up -> jobs after it
		want string              // "" for none
	}{
		{name: "no edges", id: "a", ups: []string{"b"}},
		{name: "itself", id: "a", ups: []string{"a"}, want: "a -> a"},
		{name: "two", id: "a", ups: []string{"b"}, down: map[string][]string{"a": {"b"}}, want: "a -> b -> a"},
		{name: "three", id: "a", ups: []string{"c"}, down: map[string][]string{"a": {"b"}, "b": {"c"}}, want: "a -> c -> b -> a"},
		{name: "a chain the other way", id: "c", ups: []string{"b"}, down: map[string][]string{"a": {"b"}}},
		{name: "diamond", id: "d", ups: []string{"b", "c"}, down: map[string][]string{"a": {"b", "c"}}},
		{name: "the shortest", id: "a", ups: []string{"x", "y"}, down: map[string][]string{"a": {"b", "y"}, "b": {"x"}}, want: "a -> y -> a"},
		{name: "a cycle elsewhere", id: "a", ups: []string{"b"}, down: map[string][]string{"x": {"y"}, "y": {"x"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(store.FindCycle(tc.id, tc.ups, tc.down), " -> ")
			if got != tc.want {
				t.Fatalf("FindCycle = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestFindCycleProperty saves random jobs one after the other, each after
// random others, keeping those FindCycle accepts: the graph kept is
// always acyclic, and every refusal names a real cycle (each job in it
// runs after the next, through the edges kept and the new ones).
func TestFindCycleProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(2, 8).Draw(t, "jobs")
		down := map[string][]string{}
		after := map[string][]string{} // the graph kept: job -> its upstream jobs
		for step := range rapid.IntRange(1, 30).Draw(t, "saves") {
			id := fmt.Sprintf("j%d", rapid.IntRange(0, n-1).Draw(t, fmt.Sprintf("id%d", step)))
			var ups []string
			for k := range n {
				u := fmt.Sprintf("j%d", k)
				if u != id && rapid.Bool().Draw(t, fmt.Sprintf("edge%d-%d", step, k)) {
					ups = append(ups, u)
				}
			}
			others := map[string][]string{}
			for u, ds := range down {
				for _, d := range ds {
					if d != id {
						others[u] = append(others[u], d)
					}
				}
			}
			cycle := store.FindCycle(id, ups, others)
			if cycle == nil {
				after[id] = ups
				down = others
				for _, u := range ups {
					down[u] = append(down[u], id)
				}
				if c := anyCycle(after); c != nil {
					t.Fatalf("accepted %s after %v; the graph has the cycle %v", id, ups, c)
				}
				continue
			}
			if cycle[0] != id || cycle[len(cycle)-1] != id {
				t.Fatalf("cycle %v does not start and end at %s", cycle, id)
			}
			for i := 0; i+1 < len(cycle); i++ {
				a, b := cycle[i], cycle[i+1]
				ok := slices.Contains(after[a], b)
				if a == id {
					ok = slices.Contains(ups, b)
				}
				if !ok {
					t.Fatalf("cycle %v: %s does not run after %s", cycle, a, b)
				}
			}
		}
	})
}

// anyCycle returns a cycle of the graph job -> upstream jobs, nil if none.
func anyCycle(after map[string][]string) []string {
	state := map[string]int{} // 1 on the path, 2 done
	var path []string
	var visit func(n string) []string
	visit = func(n string) []string {
		state[n] = 1
		path = append(path, n)
		for _, u := range after[n] {
			switch state[u] {
			case 1:
				return append(slices.Clone(path), u)
			case 0:
				if c := visit(u); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[n] = 2
		return nil
	}
	for n := range after {
		if state[n] == 0 {
			if c := visit(n); c != nil {
				return c
			}
		}
	}
	return nil
}

// TestAfterEdgesFollowTheJobs saves jobs with after through Create, Put
// and Delete: the dependency index holds exactly their edges; a job that
// would close a cycle is refused naming it and writes nothing; a batch
// refuses after.
func TestAfterEdgesFollowTheJobs(t *testing.T) {
	client := etcdtest.New(t).Client(t)
	ctx := context.Background()
	s := store.NewEtcd(client, etcdtest.Namespace(t), 4, api.DefaultLimits(), nil)
	job := func(id string, ups ...string) api.Job {
		j := api.Job{ID: id, Executor: api.Executor{Type: "x"}}
		for _, u := range ups {
			j.After = append(j.After, api.Dependency{Job: u})
		}
		return j
	}
	edges := func() []string {
		t.Helper()
		resp, err := client.Get(ctx, s.Keys().DepsPrefix(), clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, kv := range resp.Kvs {
			u, d, ok := s.Keys().ParseDep(string(kv.Key))
			if !ok {
				t.Fatalf("bad edge key %s", kv.Key)
			}
			out = append(out, d+"<-"+u)
		}
		slices.Sort(out)
		return out
	}
	want := func(w ...string) {
		t.Helper()
		if got := edges(); !slices.Equal(got, w) {
			t.Fatalf("edges = %v, want %v", got, w)
		}
	}
	if _, err := s.Create(ctx, job("b", "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, job("c", "b", "a")); err != nil {
		t.Fatal(err)
	}
	want("b<-a", "c<-a", "c<-b")
	_, err := s.Create(ctx, job("a", "c"))
	var fe *api.FieldError
	if !errors.As(err, &fe) || fe.Field != "after" || !strings.Contains(fe.Msg, "cycle a -> c -> ") {
		t.Fatalf("create a after c: %v, want the cycle refused", err)
	}
	if _, err := s.Get(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused job was stored: %v", err)
	}
	want("b<-a", "c<-a", "c<-b")
	if _, _, err := s.Put(ctx, job("b", "c")); err == nil || !strings.Contains(err.Error(), "cycle b -> c -> b") {
		t.Fatalf("put b after c: %v, want the cycle refused", err)
	}
	if _, _, err := s.Put(ctx, job("c", "a")); err != nil {
		t.Fatal(err)
	}
	want("b<-a", "c<-a")
	if _, _, err := s.Put(ctx, job("b", "c")); err != nil { // no longer a cycle
		t.Fatal(err)
	}
	want("b<-c", "c<-a")
	deps, err := s.Dependents(ctx, "c")
	if err != nil || len(deps) != 1 || deps[0].Job != "b" || !slices.Equal(deps[0].On, []api.RunStatus{api.RunSucceeded}) {
		t.Fatalf("Dependents(c) = %+v, %v; want b on succeeded", deps, err)
	}
	if err := s.Delete(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	want("c<-a")
	res, err := s.WriteBatch(ctx, []store.BatchItem{{Job: job("x")}, {Job: job("y", "x")}}, store.BatchCreate)
	if err != nil || res[1].Err == nil || !strings.Contains(res[1].Err.Error(), "after") {
		t.Fatalf("batch with after: %+v, %v; want its item refused", res, err)
	}
	if res, err := s.WriteBatch(ctx, []store.BatchItem{{Job: job("c")}}, store.BatchApply); err != nil || res[0].Err == nil {
		t.Fatalf("batch replacing a job with after: %+v, %v; want it refused", res, err)
	}
	want("c<-a")
}

// TestAfterBoundsDependents: a job may be the upstream of at most
// api.MaxDependents jobs.
func TestAfterBoundsDependents(t *testing.T) {
	client := etcdtest.New(t).Client(t)
	ctx := context.Background()
	s := store.NewEtcd(client, etcdtest.Namespace(t), 4, api.DefaultLimits(), nil)
	for i := range api.MaxDependents + 1 {
		_, err := s.Create(ctx, api.Job{ID: fmt.Sprintf("d%d", i), Executor: api.Executor{Type: "x"}, After: []api.Dependency{{Job: "up"}}})
		if i < api.MaxDependents && err != nil {
			t.Fatal(err)
		}
		if i == api.MaxDependents && (err == nil || !strings.Contains(err.Error(), "after[0].job")) {
			t.Fatalf("job %d after up: %v, want refused", i, err)
		}
	}
}
