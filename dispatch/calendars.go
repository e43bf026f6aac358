package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/mirror"
	"github.com/jobfleet/jobfleet/store"
)

// CalendarSource is what the scheduler reads of the fleet's calendars
// (CalendarCache provides it): the calendars as last read, and whether
// they have been read at all.
type CalendarSource interface {
	Calendars() (api.Calendars, bool)
}

// CalendarCache holds the fleet's calendars (store.Keys.CalendarPrefix),
// compiled, kept current by a watch of their prefix (internal/mirror:
// list, then watch, listing again after compaction or a lost connection),
// so that every partition's owner reads them from memory at each fire.
// There are at most api.MaxCalendars of at most api.MaxCalendarBytes each.
// Safe for concurrent use.
type CalendarCache struct {
	m  *mirror.Mirror
	lg *zap.Logger

	mu   sync.Mutex    // guards rev and cals
	rev  int64         // the mirror revision cals was compiled from
	cals api.Calendars // by name
}

// NewCalendarCache returns a cache of the calendars of namespace ns. It
// starts nothing: Run keeps it current. A nil logger logs nothing.
func NewCalendarCache(client *clientv3.Client, ns string, lg *zap.Logger) (*CalendarCache, error) {
	if lg == nil {
		lg = zap.NewNop()
	}
	m, err := mirror.New(client, mirror.Config{Prefix: store.Keys{NS: ns}.CalendarPrefix(), Logger: lg})
	if err != nil {
		return nil, fmt.Errorf("dispatch: calendars: %w", err)
	}
	return &CalendarCache{m: m, lg: lg}, nil
}

// Run keeps the cache current until ctx is cancelled, then returns nil.
func (c *CalendarCache) Run(ctx context.Context) error { return c.m.Run(ctx) }

// Calendars returns the calendars of the latest snapshot, compiled (a
// calendar stored corrupt is logged and left out), and false until the
// first list of the prefix completed.
func (c *CalendarCache) Calendars() (api.Calendars, bool) {
	snap := c.m.Snapshot()
	if snap.Revision == 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if snap.Revision != c.rev {
		cals := make(api.Calendars, len(snap.KVs))
		for key, kv := range snap.KVs {
			var cal api.Calendar
			if err := json.Unmarshal(kv.Value, &cal); err != nil {
				c.lg.Warn("ignoring a corrupt calendar", zap.String("calendar", key), zap.Error(err))
				continue
			}
			cc, err := cal.Compile()
			if err != nil {
				c.lg.Warn("ignoring a calendar that does not compile", zap.String("calendar", cal.Name), zap.Error(err))
				continue
			}
			cals[cal.Name] = cc
		}
		c.rev, c.cals = snap.Revision, cals
	}
	return c.cals, true
}

// WaitRevision blocks until the cache reflects etcd revision rev, or
// returns ctx's error.
func (c *CalendarCache) WaitRevision(ctx context.Context, rev int64) error {
	_, err := c.m.WaitFor(ctx, func(s mirror.Snapshot) bool { return s.Revision >= rev })
	return err
}

// calendars returns the fleet's calendars for the partition's planning:
// none, and true, without a source.
func (pt *partition) calendars() (api.Calendars, bool) {
	if pt.d.cfg.Calendars == nil {
		return nil, true
	}
	return pt.d.cfg.Calendars.Calendars()
}
