package main

import (
	"strings"
	"testing"

	"go.uber.org/zap"
)

// TestEtcdEndpointsRefuseUserinfo checks that credentials in an etcd URL
// are refused before any connection, and that the refusal does not repeat
// the password.
func TestEtcdEndpointsRefuseUserinfo(t *testing.T) {
	o := &etcdOptions{endpoints: []string{"http://127.0.0.1:2379", "https://root:hunter2@etcd.example:2379"}}
	c, err := o.client(zap.NewNop())
	if err == nil {
		c.Close()
		t.Fatal("an endpoint with a password was accepted")
	}
	if msg := err.Error(); !strings.Contains(msg, `--etcd-endpoints "https://etcd.example:2379"`) || !strings.Contains(msg, "--etcd-password") || strings.Contains(msg, "hunter2") {
		t.Errorf("error %q: want it to name the endpoint without its password and point at --etcd-username/--etcd-password", msg)
	}
}
