package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/api"
)

// Limits live under one prefix of the namespace, not partitioned: every
// member follows them all with one watch (dispatch/limits.Table).
//
//	limits/def/<key>                 limit document (API)
//	limits/state/<key>               the key's grant state, rewritten by every grant under it (owners, fenced)
//	limits/held/<key>/<run>/<item>/<attempt>   a slot held by an attempt (owners, fenced)
//	limits/queue/<key>/<partition>   the best run waiting for the key in the partition (its owner)
//
// <key> is api.EscapeID(key), <run> api.EscapeID(run ID), <item> the item's
// index or -1 for a run's own chain.

// ErrLimitCount means the fleet stores api.MaxLimits limits already:
// delete one to create another.
var ErrLimitCount = errors.New("too many limits")

// LimitsPrefix is the prefix of every limit key's documents.
func (k Keys) LimitsPrefix() string { return k.NS + "limits/" }

// LimitDefPrefix is the prefix of every limit document.
func (k Keys) LimitDefPrefix() string { return k.LimitsPrefix() + "def/" }

// LimitDef is the key of limit key's document.
func (k Keys) LimitDef(key string) string { return k.LimitDefPrefix() + api.EscapeID(key) }

// LimitStatePrefix is the prefix of every limit key's grant state.
func (k Keys) LimitStatePrefix() string { return k.LimitsPrefix() + "state/" }

// LimitState is the key of limit key's grant state (api.LimitState).
func (k Keys) LimitState(key string) string { return k.LimitStatePrefix() + api.EscapeID(key) }

// LimitHeldPrefix is the prefix of every slot held.
func (k Keys) LimitHeldPrefix() string { return k.LimitsPrefix() + "held/" }

// LimitQueuePrefix is the prefix of every limit key's waiting entries.
func (k Keys) LimitQueuePrefix() string { return k.LimitsPrefix() + "queue/" }

// LimitQueue is the key of the entry of the best run of partition p
// waiting for limit key.
func (k Keys) LimitQueue(key string, p int) string {
	return k.LimitQueuePrefix() + api.EscapeID(key) + "/" + strconv.Itoa(p)
}

// LimitHeld is the key of the slot of key held by attempt attempt of run
// runID's chain item (-1: the run's own).
func (k Keys) LimitHeld(key, runID string, item, attempt int) string {
	return k.LimitHeldPrefix() + api.EscapeID(key) + "/" + api.EscapeID(runID) + "/" + strconv.Itoa(item) + "/" + strconv.Itoa(attempt)
}

// ParseLimitHeld returns the limit key of a key under LimitHeldPrefix
// (without the namespace's prefix: what follows "held/").
func ParseLimitHeld(rest string) (key string, ok bool) {
	esc, _, ok := strings.Cut(rest, "/")
	if !ok {
		return "", false
	}
	key, err := api.UnescapeID(esc)
	return key, err == nil
}

// PutLimit creates or replaces limit l, validated here (errors match
// api.ErrInvalidLimit), and returns it as stored with created telling
// which happened. Creating one beyond api.MaxLimits returns ErrLimitCount
// (checked before the write: concurrent creations may pass it by a few);
// a store WithGuard asks its guard first.
func (s *Etcd) PutLimit(ctx context.Context, l api.Limit) (stored api.Limit, created bool, err error) {
	l.Revision, l.Status = 0, nil
	if err := l.Validate(); err != nil {
		return api.Limit{}, false, err
	}
	if err := s.guard(); err != nil {
		return api.Limit{}, false, err
	}
	key := s.keys.LimitDef(l.Key)
	l.UpdatedAt = s.nowMillis()
	val, err := json.Marshal(l)
	if err != nil {
		return api.Limit{}, false, err
	}
	rev, created, err := s.putNamed(ctx, key, s.keys.LimitDefPrefix(), val, api.MaxLimits, func(have int64) error {
		return fmt.Errorf("limit %q: %w: the fleet has %d, at most %d", l.Key, ErrLimitCount, have, api.MaxLimits)
	})
	if err != nil {
		return api.Limit{}, false, err
	}
	l.Revision = rev
	return l, created, nil
}

// GetLimit returns limit key, or ErrNotFound.
func (s *Etcd) GetLimit(ctx context.Context, key string) (api.Limit, error) {
	return getNamed(ctx, s.client, s.keys.LimitDef(key), DecodeLimit)
}

// DeleteLimit deletes limit key and its grant state; ErrNotFound if there
// is none. Runs waiting for the key may start at once: a key without a
// limit bounds nothing. The slots attempts hold stay until those attempts
// end, and count again if the limit is stored anew meanwhile.
func (s *Etcd) DeleteLimit(ctx context.Context, key string) error {
	resp, err := s.client.Txn(ctx).Then(clientv3.OpDelete(s.keys.LimitDef(key)), clientv3.OpDelete(s.keys.LimitState(key))).Commit()
	if err != nil {
		return Classify(err)
	}
	if resp.Responses[0].GetResponseDeleteRange().Deleted == 0 {
		return ErrNotFound
	}
	return nil
}

// ListLimits returns up to limit (1 to 1000) limits whose keys start with
// prefix, in key order, after the key cursor ("" for the first page), and
// the cursor of the next page ("" at the end). A cursor that is not a key
// under prefix is refused with a *FieldError naming "cursor".
func (s *Etcd) ListLimits(ctx context.Context, prefix, cursor string, limit int) ([]api.Limit, string, error) {
	return listNamed(ctx, s.client, s.keys.LimitDefPrefix(), prefix, cursor, limit, api.MaxLimitKeyBytes,
		DecodeLimit, func(l api.Limit) string { return l.Key })
}

// DecodeLimit decodes a stored limit document of mod revision rev.
func DecodeLimit(val []byte, rev int64) (api.Limit, error) {
	var l api.Limit
	if err := json.Unmarshal(val, &l); err != nil {
		return api.Limit{}, fmt.Errorf("stored limit is corrupt: %w", err)
	}
	l.Revision = rev
	return l, nil
}
