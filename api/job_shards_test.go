package api

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestValidateShards(t *testing.T) {
	params := func(vals ...string) []json.RawMessage {
		var out []json.RawMessage
		for _, v := range vals {
			out = append(out, json.RawMessage(v))
		}
		return out
	}
	many := make([]string, MaxShards+1)
	for i := range many {
		many[i] = "1"
	}
	tests := []struct {
		name      string
		edit      func(j *Job)
		wantField string // "" means valid
		wantMsg   string
	}{
		{name: "count", edit: func(j *Job) { j.Shards = &Shards{Count: 16, MaxParallel: 4, MinSucceeded: 12} }},
		{name: "params", edit: func(j *Job) { j.Payload = nil; j.Shards = &Shards{Params: params(`"eu"`, `"us"`, `{"region":"ap"}`)} }},
		{name: "params of shell with payload", edit: func(j *Job) {
			j.Executor = Executor{Type: ExecutorShell, Command: []string{"true"}}
			j.Shards = &Shards{Params: params(`1`, `2`)}
		}},
		{name: "max count", edit: func(j *Job) { j.Retry.MaxAttempts = 2; j.Shards = &Shards{Count: MaxShards} }},
		{name: "broadcast", edit: func(j *Job) { j.Placement = &PlacementPolicy{Broadcast: true} }},
		{name: "no count nor params", edit: func(j *Job) { j.Shards = &Shards{} }, wantField: "shards", wantMsg: "want count (1 to 10000)"},
		{name: "count and params", edit: func(j *Job) { j.Shards = &Shards{Count: 2, Params: params("1", "2")} }, wantField: "shards.count", wantMsg: "not together with shards.params"},
		{name: "count too large", edit: func(j *Job) { j.Shards = &Shards{Count: MaxShards + 1} }, wantField: "shards.count", wantMsg: "10001 is out of range; want 1 to 10000"},
		{name: "count negative", edit: func(j *Job) { j.Shards = &Shards{Count: -1} }, wantField: "shards.count", wantMsg: "out of range"},
		{name: "too many params", edit: func(j *Job) { j.Payload = nil; j.Shards = &Shards{Params: params(many...)} }, wantField: "shards.params", wantMsg: "10001 values; want at most 10000"},
		{name: "params too large", edit: func(j *Job) {
			j.Payload = nil
			j.Shards = &Shards{Params: params(`"`+strings.Repeat("x", MaxShardParamsBytes/2)+`"`, `"`+strings.Repeat("y", MaxShardParamsBytes/2)+`"`)}
		}, wantField: "shards.params", wantMsg: "more than 262144 bytes of JSON in all"},
		{name: "param not json", edit: func(j *Job) { j.Payload = nil; j.Shards = &Shards{Params: params(`1`, `{"a":`)} }, wantField: "shards.params[1]", wantMsg: "not valid JSON"},
		{name: "param bad secret ref", edit: func(j *Job) { j.Payload = nil; j.Shards = &Shards{Params: params(`{"secret_env":"1bad"}`)} }, wantField: "shards.params[0]"},
		{name: "params with http payload", edit: func(j *Job) { j.Shards = &Shards{Params: params("1")} }, wantField: "shards.params", wantMsg: "sends each item's parameter as its body"},
		{name: "max_parallel negative", edit: func(j *Job) { j.Shards = &Shards{Count: 2, MaxParallel: -1} }, wantField: "shards.max_parallel", wantMsg: "negative"},
		{name: "min_succeeded over count", edit: func(j *Job) { j.Shards = &Shards{Count: 2, MinSucceeded: 3} }, wantField: "shards.min_succeeded", wantMsg: "3 is out of range; want 1 to the item count 2"},
		{name: "too many attempts", edit: func(j *Job) { j.Retry.MaxAttempts = 3; j.Shards = &Shards{Count: MaxShards} }, wantField: "shards", wantMsg: "10000 items × retry.max_attempts 3 may make 30000 attempts in one run; want at most 20000"},
		{name: "broadcast and shards", edit: func(j *Job) {
			j.Shards = &Shards{Count: 2}
			j.Placement = &PlacementPolicy{Broadcast: true}
		}, wantField: "placement.broadcast", wantMsg: "not together with shards"},
		{name: "broadcast with a selector", edit: func(j *Job) { j.Placement = &PlacementPolicy{Broadcast: true, Selector: "pool=a,!spot"} }},
		{name: "broadcast with a bad selector", edit: func(j *Job) { j.Placement = &PlacementPolicy{Broadcast: true, Selector: "pool in a"} },
			wantField: "placement.selector", wantMsg: "is not a label selector"},
		{name: "broadcast, selector and shards", edit: func(j *Job) {
			j.Shards = &Shards{Count: 2}
			j.Placement = &PlacementPolicy{Broadcast: true, Selector: "pool=a"}
		}, wantField: "placement.broadcast", wantMsg: "not together with shards"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := validJob()
			tt.edit(&j)
			checkFieldError(t, j.Validate(DefaultLimits()), tt.wantField, tt.wantMsg)
		})
	}
}

// TestDecodeShards: the shards and placement objects take only their own
// keys, named in the error.
func TestDecodeShards(t *testing.T) {
	for doc, want := range map[string]string{
		`{"id":"a","executor":{"type":"x"},"shards":{"count":2,"max_paralel":1}}`:  "shards.max_paralel: unknown field",
		`{"id":"a","executor":{"type":"x"},"placement":{"Broadcast":true}}`:        `placement.Broadcast: unknown field; did you mean "broadcast"?`,
		`{"id":"a","executor":{"type":"x"},"shards":{"count":"2"}}`:                "shards.count",
		`{"id":"a","executor":{"type":"x"},"shards":{"count":2,"max_parallel":0}}`: "shards.max_parallel: 0 is not a bound",
		`{"id":"a","executor":{"type":"x"},"shards":{"count":0}}`:                  "shards.count: 0 items",
	} {
		if _, err := DecodeJob(strings.NewReader(doc), 0); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodeJob(%s) = %v, want %q", doc, err, want)
		}
	}
	b, err := DecodeJob(strings.NewReader(`{"id":"a","executor":{"type":"x"},"placement":{"broadcast":true,"selector":" pool=a ","retry_elsewhere":false}}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	b.Normalize()
	if !b.Broadcasts() || b.Selector() != "pool=a" || b.RetriesElsewhere() {
		t.Fatalf("decoded placement %+v, want broadcast with selector pool=a, retries not elsewhere", b.Placement)
	}
	j, err := DecodeJob(strings.NewReader(`{"id":"a","executor":{"type":"x"},"shards":{"params":[ "eu" , {"r" : 1} ],"min_succeeded":1},"placement":{}}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	j.Normalize()
	if got, _ := json.Marshal(j.Shards); string(got) != `{"params":["eu",{"r":1}],"min_succeeded":1}` || j.Shards.Items() != 2 {
		t.Fatalf("decoded shards %s (%d items)", got, j.Shards.Items())
	}
}

// TestStoredItemsForm: the compact form reads back as the run it was
// written from, and a run of one item is stored exactly as the API
// writes it.
func TestStoredItemsForm(t *testing.T) {
	var single Run
	if err := json.Unmarshal([]byte(`{"run_id":"a@x","job_id":"a","status":"pending","attempts":[]}`), &single); err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(single)
	b, _ := single.MarshalStored()
	if string(a) != string(b) || strings.Contains(string(b), "item") {
		t.Fatalf("run of one item stored as %s, API form %s", b, a)
	}
	doc := `{"run_id":"a@x","job_id":"a","partition":0,"scheduled_at":"2026-06-01T00:00:00Z","fired_at":"2026-06-01T00:00:00.5Z","status":"running","attempts":[],"owner":"m","epoch":1,` +
		`"items":[{"index":0,"status":"pending","attempts":[]},` +
		`{"index":1,"status":"dead","worker":"w\"2","registration":42,"attempts":[{"attempt":1,"worker":"w\"2","credential":"c","started_at":"2026-06-01T00:00:01.25Z","finished_at":"2026-06-01T00:00:03Z","error":"boom <&>","output":"out\n","dropped_bytes":7}],"reason":"gone"},` +
		`{"index":2,"status":"running","attempts":[{"attempt":1,"worker":"w1","credential":"c","started_at":"2026-05-31T23:59:59Z"}]}],"broadcast":true}`
	var r Run
	if err := json.Unmarshal([]byte(doc), &r); err != nil {
		t.Fatal(err)
	}
	stored, err := r.MarshalStored()
	if err != nil {
		t.Fatal(err)
	}
	var back Run
	if err := json.Unmarshal(stored, &back); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(back)
	want, _ := json.Marshal(r)
	if string(got) != string(want) {
		t.Fatalf("read back:\n%s\nwant\n%s\nstored\n%s", got, want, stored)
	}
	if strings.Contains(string(stored), `"items":[{`) {
		t.Errorf("stored form holds the API's items: %s", stored)
	}
}
