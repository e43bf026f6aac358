package store

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/api"
)

// putNamed stores val at key, a document of a kind of named documents
// stored under prefix (calendars, limit keys), refusing a new one with
// the error full returns where the fleet has most of the kind already
// (have). It returns the write's revision and whether the document is
// new.
func (s *Etcd) putNamed(ctx context.Context, key, prefix string, val []byte, most int, full func(have int64) error) (rev int64, created bool, err error) {
	cur, err := s.client.Get(ctx, key, clientv3.WithCountOnly())
	if err != nil {
		return 0, false, Classify(err)
	}
	if cur.Count == 0 {
		all, err := s.client.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return 0, false, Classify(err)
		}
		if all.Count >= int64(most) {
			return 0, false, full(all.Count)
		}
	}
	resp, err := s.client.Put(ctx, key, string(val))
	if err != nil {
		return 0, false, Classify(err)
	}
	return resp.Header.Revision, cur.Count == 0, nil
}

// getNamed reads the named document at key with decode, or ErrNotFound.
func getNamed[T any](ctx context.Context, client *clientv3.Client, key string, decode func(val []byte, rev int64) (T, error)) (T, error) {
	resp, err := client.Get(ctx, key)
	if err != nil {
		var zero T
		return zero, Classify(err)
	}
	if len(resp.Kvs) == 0 {
		var zero T
		return zero, ErrNotFound
	}
	return decode(resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
}

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
