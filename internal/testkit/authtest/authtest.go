// Package authtest gives tests credentials: it stores them directly in the
// test's etcd and builds HTTP clients that send them. It is for tests
// only and must not be imported by the jobfleet binary.
package authtest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/auth"
)

// Create stores a credential made from req in the cluster of namespace ns
// and returns it with its bearer token and the etcd revision of the write
// (for Cache.WaitRevision). It fails the test on error.
func Create(t testing.TB, client *clientv3.Client, ns string, req api.CreateRequest) (api.Created, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, rev, err := auth.NewStore(client, ns, nil).Create(ctx, req, "")
	if err != nil {
		t.Fatalf("authtest: create a %s credential: %v", req.Role, err)
	}
	return c, rev
}

// Token stores a credential of role, limited to job IDs starting with
// prefix ("" for all), and returns its bearer token.
func Token(t testing.TB, client *clientv3.Client, ns string, role api.Role, prefix string) string {
	t.Helper()
	c, _ := Create(t, client, ns, api.CreateRequest{Role: role, Prefix: prefix, Description: "test " + t.Name()})
	return c.Secret
}

// Client returns an HTTP client with its own transport that sends token
// on every request; its idle connections are closed when the test ends.
func Client(t testing.TB, token string) *http.Client {
	tr := &auth.BearerTransport{Token: token, Base: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: time.Minute}
}

// RunCache makes the credentials cache of cfg over client and runs it
// until the test ends. It fails the test if the cache cannot be made.
func RunCache(t testing.TB, client *clientv3.Client, cfg auth.CacheConfig) *auth.Cache {
	t.Helper()
	c, err := auth.NewCache(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return c
}
