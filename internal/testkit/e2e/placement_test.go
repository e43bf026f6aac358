package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"

	jfapi "github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
	"github.com/jobfleet/jobfleet/shard"
)

// TestPlacementAgreesWithTheFleet: every member answers the placement of
// a job as the fleet places it: xxhash64 mod P, the owner etcd records,
// the ring's target; a scoped viewer may ask only within its prefix.
func TestPlacementAgreesWithTheFleet(t *testing.T) {
	const p = 16
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: p, Scheduler: true, Quiet: true})
	for _, id := range []string{"m1", "m2", "m3"} {
		f.Join(id)
	}
	f.WaitSettled(20 * time.Second)
	base := f.URLs()[0]
	if code := api(t, f.AdminToken, "POST", base, "/v1/jobs", jfapi.Job{ID: "team/billing", Schedule: "@hourly", Executor: jfapi.Executor{Type: "http", URL: "http://127.0.0.1:9/"}}, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	owners, _, err := f.Owners(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ring, err := shard.NewRing(f.Live(), shard.DefaultRingConfig(p))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"team/billing", "team/absent", "ünïcode/ジョブ"} {
		part := int(xxhash.Sum64String(id) % p)
		for _, u := range f.URLs() {
			var pl jfapi.Placement
			path := "/v1/cluster/placement?job=" + url.QueryEscape(id)
			waitFor(t, 5*time.Second, func() bool {
				return api(t, f.AdminToken, "GET", u, path, nil, &pl) == http.StatusOK && pl.Owner == owners[part].Member
			})
			want := jfapi.Placement{
				Job: id, Exists: id == "team/billing", Hash: fmt.Sprintf("%016x", xxhash.Sum64String(id)),
				Partitions: p, Partition: part, Target: ring.Target(part), Owner: owners[part].Member, Epoch: owners[part].Epoch,
				Reason: "owner is the ring's target",
			}
			pl.OwnerSince = nil // known only to members that saw the owner take it
			if pl != want {
				t.Errorf("%s at %s:\ngot  %+v\nwant %+v", id, u, pl, want)
			}
		}
	}

	viewer := f.Token(jfapi.RoleViewer, "team/")
	for _, tt := range []struct {
		id   string
		code int
	}{{"team/x", 200}, {"other/x", 403}, {"", 403}, {" lead", 403}, {"team/x ", 400}} {
		if code := api(t, viewer, "GET", base, "/v1/cluster/placement?job="+url.QueryEscape(tt.id), nil, nil); code != tt.code {
			t.Errorf("scoped viewer, job %q: got %d, want %d", tt.id, code, tt.code)
		}
	}
	admin := f.AdminToken
	if code := api(t, admin, "GET", base, "/v1/cluster/placement?job="+url.QueryEscape(" lead"), nil, nil); code != http.StatusBadRequest {
		t.Errorf("an invalid ID: got %d, want 400", code)
	}
}

// TestPartitionStreamFollowsADrain: a member's stream sends the snapshot,
// then the changes of a drain (the drained member's partitions to the
// others), and "members" without it.
func TestPartitionStreamFollowsADrain(t *testing.T) {
	const p = 12
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: p, Scheduler: true, Quiet: true})
	for _, id := range []string{"m1", "m2", "m3"} {
		f.Join(id)
	}
	f.WaitSettled(20 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.Member("m1").URL+"/v1/cluster/partitions/watch", nil)
	req.Header.Set("Authorization", "Bearer "+f.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	events := make(chan [2]string)
	go func() { // ends when the body is closed
		defer close(events)
		r := bufio.NewReader(resp.Body)
		var name string
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimSpace(line)
			switch {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				select {
				case events <- [2]string{name, strings.TrimPrefix(line, "data: ")}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	defer func() {
		cancel()
		for range events { // drain until the reader ends
		}
	}()

	owner := make([]string, p)
	first := <-events
	var snap jfapi.PartitionStreamSnapshot
	if err := json.Unmarshal([]byte(first[1]), &snap); first[0] != "snapshot" || err != nil || len(snap.Rows) != p {
		t.Fatalf("first event %s (%v), want a snapshot of %d partitions", first[0], err, p)
	}
	for i, r := range snap.Rows {
		owner[i] = r.Owner
	}
	// m1's watch may trail etcd a little: follow the changes until it
	// shows m3 owning its share.
	for !slices.Contains(owner, "m3") {
		ev, ok := <-events
		if !ok {
			t.Fatal("the stream ended before m1 saw m3 own a partition")
		}
		if ev[0] == "change" {
			var ch jfapi.PartitionStreamChange
			if err := json.Unmarshal([]byte(ev[1]), &ch); err != nil {
				t.Fatal(err)
			}
			owner[ch.Partition] = ch.Owner
		}
	}

	f.Leave("m3")
	sawMembers := false
	for {
		holds := 0
		for _, o := range owner {
			if o == "m3" || o == "" {
				holds++
			}
		}
		if holds == 0 && sawMembers {
			break
		}
		ev, ok := <-events
		if !ok {
			t.Fatalf("the stream ended before the drain was seen: %d partitions still on m3 or unowned, members event seen: %v", holds, sawMembers)
		}
		switch ev[0] {
		case "change":
			var ch jfapi.PartitionStreamChange
			if err := json.Unmarshal([]byte(ev[1]), &ch); err != nil {
				t.Fatal(err)
			}
			owner[ch.Partition] = ch.Owner
			if ch.Owner != "" && ch.Since == nil {
				t.Errorf("partition %d changed owner to %s without a since", ch.Partition, ch.Owner)
			}
		case "members":
			sawMembers = !strings.Contains(ev[1], `"m3"`)
		}
	}
}
