package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/jobfleet/jobfleet/egress"
)

// TestNotifyRefusalNamesNotifyAllow: a notification refused by the
// orchestrator's destination policy tells the operator to use the
// orchestrator's flag, --notify-allow, not the worker's --http-allow.
func TestNotifyRefusalNamesNotifyAllow(t *testing.T) {
	var n notifyOptions
	tr, err := egress.NewTransport(n.config().Policy)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:9/hook", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
		t.Fatal("a loopback receiver was reached without --notify-allow")
	}
	if msg := err.Error(); !strings.Contains(msg, "allow it with --notify-allow") || strings.Contains(msg, "--http-allow") {
		t.Fatalf("refusal %q, want it to name --notify-allow only", msg)
	}
}
