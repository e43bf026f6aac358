package orchestrator

import (
	"context"
	"crypto/rand"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/internal/cursor"
)

// cursorKeyBytes is the length of the fleet's cursor key.
const cursorKeyBytes = 32

// CursorKeyKey is the etcd key of the fleet's cursor key in namespace
// ns: random bytes, written once by the first member (create if absent)
// and read by every member, which sign the API's listing cursors with it
// (package internal/cursor). Only members, which read etcd, know it.
func CursorKeyKey(ns string) string { return ns + "cursor-key" }

// ensureCursorKey reads the fleet's cursor key, making it first if the
// fleet has none.
func ensureCursorKey(ctx context.Context, kv clientv3.KV, ns string) (*cursor.Codec, error) {
	fresh := make([]byte, cursorKeyBytes)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	key := CursorKeyKey(ns)
	resp, err := kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(fresh))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return nil, fmt.Errorf("read the fleet's cursor key: %w", err)
	}
	if resp.Succeeded {
		return cursor.New(fresh)
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return nil, fmt.Errorf("the fleet's cursor key %s vanished; retry", key)
	}
	c, err := cursor.New(kvs[0].Value)
	if err != nil {
		return nil, fmt.Errorf("the fleet's cursor key %s: %w", key, err)
	}
	return c, nil
}

// Cursors returns the codec of the fleet's listing cursors, or
// ErrNotStarted until the member has read the fleet's cursor key.
func (o *Orchestrator) Cursors() (*cursor.Codec, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cursors == nil {
		return nil, ErrNotStarted
	}
	return o.cursors, nil
}
