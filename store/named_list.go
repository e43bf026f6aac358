package store

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/api"
)

// listNamed reads a page of a kind of named documents (calendars, limit
// keys) stored under base by their escaped names: up to limit (1 to
// 1000) of those whose name starts with prefix, in name order, after the
// name cursor ("" for the first page), each decoded by decode and named
// by name, and the cursor of the next page ("" at the end): the last name
// returned. A cursor that is not a name under prefix (of at most maxName
// bytes) is refused with a *FieldError naming "cursor".
func listNamed[T any](ctx context.Context, client *clientv3.Client, base, prefix, cursor string, limit, maxName int,
	decode func(val []byte, rev int64) (T, error), name func(T) string) ([]T, string, error) {
	if limit < 1 || limit > 1000 {
		return nil, "", fmt.Errorf("%w: limit %d outside 1..1000", ErrInvalidJob, limit)
	}
	if cursor != "" {
		if err := api.ValidateName("cursor", cursor, maxName); err != nil || !strings.HasPrefix(cursor, prefix) {
			return nil, "", fieldErr("cursor", "%s is not a cursor of this listing: send the next_cursor of its previous page", api.QuoteClipped(cursor))
		}
	}
	from, end := base+api.EscapeID(prefix), clientv3.GetPrefixRangeEnd(base+api.EscapeID(prefix))
	if cursor != "" {
		from = base + api.EscapeID(cursor) + "\x00"
	}
	resp, err := client.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(int64(limit)+1))
	if err != nil {
		return nil, "", Classify(err)
	}
	out := make([]T, 0, min(len(resp.Kvs), limit))
	for i, kv := range resp.Kvs {
		if i == limit {
			break
		}
		v, err := decode(kv.Value, kv.ModRevision)
		if err != nil {
			return nil, "", err
		}
		if !strings.HasPrefix(name(v), prefix) {
			continue // an escaped prefix also matches names that escape to more
		}
		out = append(out, v)
	}
	next := ""
	if len(resp.Kvs) > limit && len(out) > 0 {
		next = name(out[len(out)-1])
	}
	return out, next, nil
}
