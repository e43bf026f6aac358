package dispatch

import (
	"encoding/json"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/store"
)

// This file takes in the requests the API records beside a job's spec,
// other than triggers (specs.go): cancel requests (cancel.go) and
// backfills (backfill.go), as a load reads them and as the spec watch
// brings them.

// cancelOf parses kv, a cancel request of job key jk.
func (pt *partition) cancelOf(jk store.JobKey, kv *mvccpb.KeyValue) cancelReq {
	c := cancelReq{id: jk.JobID, at: jk.At, key: string(kv.Key)}
	var v store.CancelRequest
	if len(kv.Value) > 0 {
		if err := json.Unmarshal(kv.Value, &v); err != nil {
			pt.lg.Warn("cancel request does not decode; applying it without its requester", zap.ByteString("key", kv.Key), zap.Error(err))
		}
	}
	c.by = v.By
	return c
}

// takeRequest adds kv, a key of the partition's jobs read by a load, to
// the cancel requests or the running backfills if it is one, and reports
// whether it was.
func (pt *partition) takeRequest(kv *mvccpb.KeyValue, cancels map[string]cancelReq, backfills map[string]*backfillJob, retries map[string]retryReq) bool {
	jk, ok := pt.d.keys.ParseJobKey(pt.p, string(kv.Key))
	switch {
	case !ok:
		return false
	case jk.Kind == store.KeyCancel:
		c := pt.cancelOf(jk, kv)
		cancels[c.key] = c
	case jk.Kind == store.KeyRetry:
		c := pt.retryOf(jk, kv)
		retries[c.key] = c
	case jk.Kind == store.KeyBackfill:
		if bj := pt.backfillOf(kv.Value, string(kv.Key), kv.ModRevision); bj != nil {
			backfills[jk.JobID] = bj
		}
	default:
		return false
	}
	return true
}

// applyRequestLocked applies a watch event of a request key. A cancel
// request put is queued for the next tick, one deleted (by this owner
// once applied, or with its job) forgotten. A backfill put by the API
// (not this owner's own progress, whose revision memory has) is taken in
// if it has times to create; one deleted is stopped. It reports whether
// ev was of such a key.
func (pt *partition) applyRequestLocked(ev *clientv3.Event) bool {
	jk, ok := pt.d.keys.ParseJobKey(pt.p, string(ev.Kv.Key))
	if !ok {
		return false
	}
	switch jk.Kind {
	case store.KeyHandover:
		pt.applyHandoverLocked(jk, ev)
	case store.KeyRetry:
		if ev.Type != mvccpb.PUT {
			delete(pt.retries, string(ev.Kv.Key))
			return true
		}
		c := pt.retryOf(jk, ev.Kv)
		if pt.retries == nil {
			pt.retries = map[string]retryReq{}
		}
		pt.retries[c.key] = c
	case store.KeyCancel:
		if ev.Type != mvccpb.PUT {
			delete(pt.cancels, string(ev.Kv.Key))
			return true
		}
		c := pt.cancelOf(jk, ev.Kv)
		pt.cancels[c.key] = c
	case store.KeyBackfill:
		old := pt.backfills[jk.JobID]
		switch {
		case ev.Type != mvccpb.PUT:
			delete(pt.backfills, jk.JobID)
			return true
		case old != nil && ev.Kv.ModRevision <= old.modRev:
			return true // this owner's own write
		}
		if bj := pt.backfillOf(ev.Kv.Value, string(ev.Kv.Key), ev.Kv.ModRevision); bj != nil {
			pt.backfills[jk.JobID] = bj
		} else {
			delete(pt.backfills, jk.JobID)
		}
	default:
		return false
	}
	pt.poke()
	return true
}
