package dispatch

import (
	"encoding/json"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/store"
)

// This file takes in the requests the API records beside a job's spec,
// other than triggers (specs.go): cancel requests (cancel.go), as a load
// reads them and as the spec watch brings them.

// requestOf parses kv as a cancel request; ok is false for any other key.
func (pt *partition) requestOf(kv *mvccpb.KeyValue) (cancelReq, bool) {
	jk, ok := pt.d.keys.ParseJobKey(pt.p, string(kv.Key))
	if !ok || jk.Kind != store.KeyCancel {
		return cancelReq{}, false
	}
	c := cancelReq{id: jk.JobID, at: jk.At, key: string(kv.Key)}
	var v store.CancelRequest
	if len(kv.Value) > 0 {
		if err := json.Unmarshal(kv.Value, &v); err != nil {
			pt.lg.Warn("cancel request does not decode; applying it without its requester", zap.ByteString("key", kv.Key), zap.Error(err))
		}
	}
	c.by = v.By
	return c, true
}

// takeRequest adds kv, a key of the partition's jobs read by a load, to
// the cancel requests if it is one, and reports whether it was.
func (pt *partition) takeRequest(kv *mvccpb.KeyValue, cancels map[string]cancelReq) bool {
	c, ok := pt.requestOf(kv)
	if ok {
		cancels[c.key] = c
	}
	return ok
}

// applyRequestLocked applies a watch event of a request key: a cancel
// request put is queued for the next tick, one deleted (by this owner
// once applied, or with its job) forgotten. It reports whether ev was of
// such a key.
func (pt *partition) applyRequestLocked(ev *clientv3.Event) bool {
	jk, ok := pt.d.keys.ParseJobKey(pt.p, string(ev.Kv.Key))
	if !ok || jk.Kind != store.KeyCancel {
		return false
	}
	if ev.Type != mvccpb.PUT {
		delete(pt.cancels, string(ev.Kv.Key))
		return true
	}
	if c, ok := pt.requestOf(ev.Kv); ok {
		pt.cancels[c.key] = c
		pt.poke()
	}
	return true
}
