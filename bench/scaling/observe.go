package scaling

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// observer watches a trial's run keys and records when each was created,
// as one client outside the fleet sees it: the time a run is durable.
type observer struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	created map[string]time.Time // run key → when its creation was seen
	last    time.Time
	err     error
}

func observe(ctx context.Context, c *clientv3.Client, ns string) (*observer, error) {
	wctx, cancel := context.WithCancel(ctx)
	o := &observer{cancel: cancel, done: make(chan struct{}), created: map[string]time.Time{}}
	wch := c.Watch(wctx, ns+"runs/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	if wr, ok := <-wch; !ok || wr.Err() != nil {
		cancel()
		return nil, fmt.Errorf("watch runs: %v", wr.Err())
	}
	go func() {
		defer close(o.done)
		for wr := range wch {
			now := time.Now()
			o.mu.Lock()
			if err := wr.Err(); err != nil && o.err == nil {
				o.err = err
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.PUT && ev.Kv.Version == 1 {
					o.created[string(ev.Kv.Key)] = now
					o.last = now
				}
			}
			o.mu.Unlock()
		}
	}()
	return o, nil
}

func (o *observer) close() {
	o.cancel()
	<-o.done
}

// count returns how many runs were created and when the latest was seen.
func (o *observer) count() (int, time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.created), o.last
}

// before returns how many runs were seen created before t.
func (o *observer) before(t time.Time) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, at := range o.created {
		if at.Before(t) {
			n++
		}
	}
	return n
}

// countScheduled returns how many created runs have a scheduled time
// (the key's last element) for which in holds.
func (o *observer) countScheduled(in func(time.Time) bool) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for k := range o.created {
		if at, ok := keyTime(k); ok && in(at) {
			n++
		}
	}
	return n
}

func (o *observer) seen(key string) (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	t, ok := o.created[key]
	return t, ok
}

func keyTime(key string) (time.Time, bool) {
	i := strings.LastIndexByte(key, '/')
	t, err := time.Parse(api.TimeFormat, key[i+1:])
	return t, err == nil
}

type runDoc struct {
	api.Run
	key string
}

// readRuns reads every run document of namespace ns, a page at a time.
func readRuns(ctx context.Context, c *clientv3.Client, ns string) ([]runDoc, error) {
	prefix := ns + "runs/"
	end := clientv3.GetPrefixRangeEnd(prefix)
	from := prefix
	var docs []runDoc
	for {
		resp, err := c.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(2000))
		if err != nil {
			return nil, fmt.Errorf("read runs: %w", err)
		}
		for _, kv := range resp.Kvs {
			var d runDoc
			if err := json.Unmarshal(kv.Value, &d.Run); err != nil {
				return nil, fmt.Errorf("run %s: %w", kv.Key, err)
			}
			d.key = string(kv.Key)
			docs = append(docs, d)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return docs, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
