package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/jobfleet/jobfleet/api"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/internal/testkit/admintest"
	"github.com/jobfleet/jobfleet/store"
)

// scriptedProtocol answers every poll with resp and err.
type scriptedProtocol struct {
	resp api.PollResponse
	err  error
}

func (p scriptedProtocol) Poll(context.Context, api.PollRequest) (api.PollResponse, error) {
	return p.resp, p.err
}
func (p scriptedProtocol) Heartbeat(context.Context, api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	return api.HeartbeatResponse{}, p.err
}
func (p scriptedProtocol) Complete(context.Context, api.CompleteRequest) (api.CompleteResponse, error) {
	return api.CompleteResponse{}, p.err
}
func (p scriptedProtocol) EndPolls(context.Context, api.EndPollsRequest) error { return p.err }

// TestWorkerProtocolReplies checks that a poll reply is either complete
// JSON with 200 or an error, and that store failures reach workers without
// etcd's or gRPC's text.
func TestWorkerProtocolReplies(t *testing.T) {
	tests := []struct {
		name     string
		p        scriptedProtocol
		wantCode int
		wantMsg  string
	}{
		{name: "attempt handed out", p: scriptedProtocol{resp: api.PollResponse{Attempts: []api.AttemptGrant{{RunID: "a@1", Payload: json.RawMessage(`{"k":[1,2]}`)}}}},
			wantCode: http.StatusOK},
		{name: "payload that cannot be encoded", p: scriptedProtocol{resp: api.PollResponse{Attempts: []api.AttemptGrant{{RunID: "a@1", Payload: json.RawMessage(`{"k":`)}}}},
			wantCode: http.StatusInternalServerError, wantMsg: "internal error: the reply could not be encoded as JSON"},
		{name: "etcd without leader", p: scriptedProtocol{err: store.Classify(rpctypes.ErrGRPCNoLeader)},
			wantCode: http.StatusServiceUnavailable, wantMsg: "store unavailable: etcd did not answer in time or has no leader; retry later"},
		{name: "grpc error", p: scriptedProtocol{err: status.Error(codes.ResourceExhausted, "grpc: received message larger than max")},
			wantCode: http.StatusServiceUnavailable, wantMsg: "internal error: the store failed"},
		{name: "own error", p: scriptedProtocol{err: errors.New("partition 3 is not loaded yet")},
			wantCode: http.StatusServiceUnavailable, wantMsg: "partition 3 is not loaded yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := admin.Handler(admintest.Member{Protocol: tt.p, Auth: testAuth}, admin.Config{
				Gatherer: prometheus.NewRegistry(),
			})
			resp := pollOnce(t, h)
			var body json.RawMessage
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatalf("got status %d with a body that is not JSON: %v", resp.StatusCode, err)
			}
			if resp.StatusCode != tt.wantCode {
				t.Fatalf("got status %d %s, want %d", resp.StatusCode, body, tt.wantCode)
			}
			if tt.wantCode == http.StatusOK {
				var pr api.PollResponse
				if err := json.Unmarshal(body, &pr); err != nil || len(pr.Attempts) != 1 || string(pr.Attempts[0].Payload) != `{"k":[1,2]}` {
					t.Errorf("got %s (%v), want the attempt with its payload byte for byte", body, err)
				}
				return
			}
			if msg := errorMessage(t, body); msg != tt.wantMsg {
				t.Errorf("got message %q, want %q", msg, tt.wantMsg)
			}
		})
	}
}

// pollOnce serves h and polls it once, as an admin, for worker w1's
// one attempt. The response's body is closed when the test ends.
func pollOnce(t *testing.T, h http.Handler) *http.Response {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	req := asAdmin(httptest.NewRequest("POST", srv.URL+api.PathPoll, strings.NewReader(`{"worker":"w1","max":1}`)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestPollReplyNamesEtcdWithoutUserinfo checks that poll replies carry the
// member's etcd endpoints, for workers to deny to http jobs, and never the
// user name or password an endpoint URL may hold.
func TestPollReplyNamesEtcdWithoutUserinfo(t *testing.T) {
	h := admin.Handler(admintest.Member{Protocol: scriptedProtocol{}, Auth: testAuth}, admin.Config{
		Gatherer:      prometheus.NewRegistry(),
		EtcdEndpoints: func() []string { return []string{"http://10.0.0.1:2379", "https://root:hunter2@etcd.example:2379"} },
	})
	resp := pollOnce(t, h)
	var pr api.PollResponse
	if err := json.NewDecoder(resp.Body).Decode(&pr); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("poll: %d, %v", resp.StatusCode, err)
	}
	if want := []string{"http://10.0.0.1:2379", "https://etcd.example:2379"}; !slices.Equal(pr.EtcdEndpoints, want) {
		t.Errorf("etcd_endpoints = %q, want %q", pr.EtcdEndpoints, want)
	}
}

// calledProtocol records whether any of its methods was called.
type calledProtocol struct{ called *bool }

func (p calledProtocol) Poll(context.Context, api.PollRequest) (api.PollResponse, error) {
	*p.called = true
	return api.PollResponse{}, nil
}
func (p calledProtocol) Heartbeat(context.Context, api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	*p.called = true
	return api.HeartbeatResponse{}, nil
}
func (p calledProtocol) Complete(context.Context, api.CompleteRequest) (api.CompleteResponse, error) {
	*p.called = true
	return api.CompleteResponse{}, nil
}
func (p calledProtocol) EndPolls(context.Context, api.EndPollsRequest) error {
	*p.called = true
	return nil
}

// TestWorkerProtocolStrictBodies checks that every worker-protocol body
// is one strict JSON document: trailing data, a key given twice and an
// unknown field are refused with 400 naming them, before the protocol
// sees the request.
func TestWorkerProtocolStrictBodies(t *testing.T) {
	var called bool
	h := admin.Handler(admintest.Member{Protocol: calledProtocol{called: &called}, Auth: testAuth}, admin.Config{
		Gatherer: prometheus.NewRegistry(),
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	tests := []struct {
		path, body, wantMsg string
	}{
		{api.PathPoll, `{"worker":"w1","max":1} {"worker":"w2","max":1}`, "malformed request: unexpected data after the document"},
		{api.PathPoll, `{"worker":"w1","worker":"w2","max":1}`, `malformed request: duplicate key "worker"`},
		{api.PathPoll, `{"worker":"w1","max":1,"Wait":"1s"}`, `malformed request: Wait: unknown field; did you mean "wait"?`},
		{api.PathPoll, `{"worker":"w1","executors":["http",1]}`, "malformed request: executors[1]: cannot use JSON number as a string"},
		{api.PathHeartbeat, `{"worker":"w1","run_id":"a@1","attempt":1}x`, "malformed request: unexpected data after the document"},
		{api.PathHeartbeat, `{"worker":"w1","run_id":"a@1","attempt":1.5}`, "malformed request: attempt: cannot use JSON number 1.5 as an integer"},
		{api.PathComplete, `{"worker":"w1","run_id":"a@1","attempt":1,"success":true,"success":false}`, `malformed request: duplicate key "success"`},
		{api.PathComplete, ``, "malformed request: empty document"},
	}
	for _, tt := range tests {
		req := asAdmin(httptest.NewRequest("POST", srv.URL+tt.path, strings.NewReader(tt.body)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body json.RawMessage
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(errorMessage(t, body), tt.wantMsg) {
			t.Errorf("POST %s %s: got %d %s, want 400 starting %q", tt.path, tt.body, resp.StatusCode, body, tt.wantMsg)
		}
	}
	if called {
		t.Error("the protocol was called for a refused body")
	}
}
