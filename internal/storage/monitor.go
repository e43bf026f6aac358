package storage

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/store"
)

// Where State.Quota comes from.
const (
	QuotaFromFlag    = api.QuotaFromFlag    // Config.QuotaBytes, smaller than what etcd reports or etcd reports none
	QuotaFromEtcd    = api.QuotaFromEtcd    // etcd's status (v3.6+)
	QuotaFromDefault = api.QuotaFromDefault // neither: etcd's default, DefaultQuotaBytes
)

type (
	// Alarm is one alarm raised in the etcd cluster (the API's document).
	Alarm = api.Alarm
	// Endpoint is one etcd endpoint's status at the last check (the API's
	// document).
	Endpoint = api.EtcdEndpoint
)

// State is what the Monitor knows of etcd's storage.
type State struct {
	// CheckedAt is when the last successful check finished; zero before.
	CheckedAt time.Time
	// DBSize is the database file size, as etcd's quota counts it, and
	// DBSizeInUse the part of it in use, the largest over the endpoints.
	DBSize, DBSizeInUse int64
	// Quota is the space quota in bytes, from QuotaSource.
	Quota       int64
	QuotaSource string
	// HighWater is the fraction of the quota above which new work is
	// refused, and HighWaterBytes that mark in bytes.
	HighWater      float64
	HighWaterBytes int64
	// AboveHighWater is DBSize > HighWaterBytes.
	AboveHighWater bool
	// NoSpace is true while etcd's NOSPACE alarm is raised, or a write was
	// refused for lack of space since the last check.
	NoSpace bool
	// Alarms are the alarms raised in the cluster.
	Alarms []Alarm
	// Revision is etcd's revision at the check.
	Revision int64
	// Endpoints are the endpoints' statuses.
	Endpoints []Endpoint
	// Err is why the latest check failed (nil if it did not); the other
	// fields keep the last values read.
	Err error
}

// Monitor keeps a State current by reading etcd every CheckInterval, and
// answers the fleet's questions about space from memory. Create it with
// NewMonitor and run it with Run; its methods are safe for concurrent use.
type Monitor struct {
	client *clientv3.Client
	// endpoints are the client's endpoints as it was made: every one is
	// checked, also one the client has left meanwhile (etcdhealth).
	endpoints []string
	cfg       Config
	lg        *zap.Logger
	recheck   chan struct{} // buffer 1: check now
	due       chan struct{} // buffer 1: the history is above CompactionBytes (Compactor.CompactOnHistory)

	mu          sync.Mutex // guards st, warnedQuota, warnedRoom and the history below
	st          State
	warnedQuota bool // a quota mismatch was logged
	warnedRoom  bool // a room smaller than MinRoomBytes was logged
	// The history since the last compaction round: the bytes noted
	// (NoteWritten), and the database's size in use at the round, or
	// less since (0: not read yet), which its growth is counted from.
	written int64
	base    int64
	// sinceCheck is the bytes noted since the last check: under a flood
	// of writes the monitor checks again every half compaction size, so
	// that the high-water mark is seen within a compaction's worth.
	sinceCheck int64
}

// NewMonitor validates cfg and returns a monitor. It starts nothing; until
// its first check it knows nothing and refuses nothing.
func NewMonitor(client *clientv3.Client, cfg Config) (*Monitor, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	return &Monitor{
		client:    client,
		endpoints: client.Endpoints(),
		cfg:       cfg,
		lg:        cfg.Logger.Named("storage").With(zap.String("member", cfg.Member)),
		recheck:   make(chan struct{}, 1),
		due:       make(chan struct{}, 1),
		st:        State{HighWater: cfg.HighWater},
	}, nil
}

// NoteWritten tells the monitor that n bytes were written to etcd through
// this member (the API charges every request's writes to its credential's
// budgets, and tells them here). Once the bytes noted, or the growth of
// the database in use, since the last compaction round pass
// CompactionBytes, a compaction is due (Compactor.CompactOnHistory). It
// answers from memory.
func (m *Monitor) NoteWritten(n int64) {
	m.mu.Lock()
	m.written += n
	m.sinceCheck += n
	recheck := m.sinceCheck >= m.compactionBytes(m.st.Quota)/2
	if recheck {
		m.sinceCheck = 0
	}
	m.mu.Unlock()
	if recheck {
		select {
		case m.recheck <- struct{}{}:
		default:
		}
	}
	m.checkHistory()
}

// Room returns the bytes between the high-water mark and the quota, as
// of the last check; before the first, those of Config.QuotaBytes, else
// of DefaultQuotaBytes. The API sizes its write budgets from it. It
// answers from memory.
func (m *Monitor) Room() int64 {
	st := m.State()
	if st.Quota > 0 {
		return st.Quota - st.HighWaterBytes
	}
	quota := m.cfg.QuotaBytes
	if quota <= 0 {
		quota = DefaultQuotaBytes
	}
	return quota - int64(m.cfg.HighWater*float64(quota))
}

// checked returns the revision etcd had at the last successful check, and
// when that was (zero before the first): a compaction by history size may
// compact to it once it is MinCompactionGap old.
func (m *Monitor) checked() (int64, time.Time) {
	st := m.State()
	return st.Revision, st.CheckedAt
}

// rounded is told by the compactor that it made a round: the history
// counts from here, the database in use from its size at the last check
// (which the round's compaction may shrink: the next check follows it
// down).
func (m *Monitor) rounded() {
	m.mu.Lock()
	m.written, m.base = 0, m.st.DBSizeInUse
	m.mu.Unlock()
	m.cfg.Metrics.setHistory(0)
}

// compactionBytes returns the history size that makes a compaction due
// with quota quota (0: not known yet); 0 for none.
func (m *Monitor) compactionBytes(quota int64) int64 {
	switch {
	case m.cfg.CompactionBytes < 0:
		return 0
	case m.cfg.CompactionBytes > 0:
		return m.cfg.CompactionBytes
	}
	if quota <= 0 {
		quota = DefaultQuotaBytes
	}
	return max(minCompactionBytes, int64((1-m.cfg.HighWater)*float64(quota)/4))
}

// checkHistory makes a compaction due if the history since the last round
// is above the compaction size.
func (m *Monitor) checkHistory() {
	m.mu.Lock()
	history := m.written
	if m.base > 0 {
		history = max(history, m.st.DBSizeInUse-m.base)
	}
	limit := m.compactionBytes(m.st.Quota)
	m.mu.Unlock()
	m.cfg.Metrics.setHistory(history)
	if limit > 0 && history >= limit {
		select {
		case m.due <- struct{}{}:
		default:
		}
	}
}

// Run checks every CheckInterval, and at once after NoteWriteError saw a
// write refused for lack of space or NoteWritten half the compaction size
// written since the last check, until ctx is cancelled; it returns nil
// then.
func (m *Monitor) Run(ctx context.Context) error {
	for {
		m.Check(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-m.cfg.Clock.After(m.cfg.CheckInterval):
		case <-m.recheck:
		}
	}
}

// State returns the latest state.
func (m *Monitor) State() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st
}

// alarms lists etcd's alarms within ctx, asking twice: the first
// request within a quarter of the request timeout, the second within
// what ctx has left. The client spreads its requests over the endpoints
// it uses, so a first request sent to one that hangs gives the second to
// another.
func (m *Monitor) alarms(ctx context.Context) (*clientv3.AlarmResponse, error) {
	first, cancel := context.WithTimeout(ctx, m.cfg.RequestTimeout/4)
	defer cancel()
	resp, err := m.client.AlarmList(first)
	if err == nil || ctx.Err() != nil {
		return resp, err
	}
	return m.client.AlarmList(ctx)
}

// Check reads the endpoints' statuses and the alarms now, publishes the
// new state (logging transitions once) and returns it. It returns the
// check's error in State.Err, the previous values kept, if no endpoint
// answered or the alarms could not be read. It takes at most the request
// timeout: at most half for the endpoints' statuses, asked at once, the
// rest for the alarms, so an endpoint that hangs shows its error beside
// the others' figures.
func (m *Monitor) Check(ctx context.Context) State {
	// The endpoints' statuses have half the timeout at most, the alarms
	// what is left: an endpoint that hangs costs the statuses their half,
	// and the alarms are still asked in time.
	ctx, cancel := context.WithTimeout(ctx, m.cfg.RequestTimeout)
	defer cancel()
	sctx, scancel := context.WithTimeout(ctx, m.cfg.RequestTimeout/2)
	defer scancel()
	next := State{HighWater: m.cfg.HighWater}
	// The endpoints are asked at once: one that hangs costs the check
	// its timeout, not the others their answers.
	eps := m.endpoints
	next.Endpoints = make([]Endpoint, len(eps))
	resps := make([]*clientv3.StatusResponse, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Go(func() {
			shown := withoutUserinfo(ep)
			next.Endpoints[i].Endpoint = shown
			resp, err := m.client.Status(sctx, ep)
			if err != nil {
				next.Endpoints[i].Error = strings.ReplaceAll(err.Error(), ep, shown)
				return
			}
			resps[i] = resp
		})
	}
	wg.Wait()
	var reported int64
	answered := 0
	for i, resp := range resps {
		if resp == nil {
			continue
		}
		answered++
		e := &next.Endpoints[i]
		e.DBSize, e.DBSizeInUse, e.Quota = resp.DbSize, resp.DbSizeInUse, resp.DbSizeQuota
		next.DBSize = max(next.DBSize, resp.DbSize)
		next.DBSizeInUse = max(next.DBSizeInUse, resp.DbSizeInUse)
		if resp.DbSizeQuota > 0 && (reported == 0 || resp.DbSizeQuota < reported) {
			reported = resp.DbSizeQuota
		}
		next.Revision = max(next.Revision, resp.Header.GetRevision())
	}
	var err error
	if answered == 0 {
		err = errors.New("no etcd endpoint answered a status request")
		if len(next.Endpoints) > 0 {
			err = fmt.Errorf("%w (%s: %s)", err, next.Endpoints[0].Endpoint, next.Endpoints[0].Error)
		}
	} else {
		var alarms *clientv3.AlarmResponse
		if alarms, err = m.alarms(ctx); err == nil {
			for _, a := range alarms.Alarms {
				next.Alarms = append(next.Alarms, Alarm{Member: fmt.Sprintf("%x", a.MemberID), Alarm: a.Alarm.String()})
				if a.Alarm == pb.AlarmType_NOSPACE {
					next.NoSpace = true
				}
			}
		}
	}
	if err != nil {
		err = store.Classify(fmt.Errorf("storage: check: %w", err))
		return m.publish(func(prev State) State {
			prev.Err = err
			return prev
		})
	}
	next.Quota, next.QuotaSource = m.quota(reported)
	next.HighWaterBytes = int64(next.HighWater * float64(next.Quota))
	next.AboveHighWater = next.DBSize > next.HighWaterBytes
	m.warnSmallRoom(next)
	next.CheckedAt = m.cfg.Clock.Now()
	st := m.publish(func(State) State { return next })
	m.mu.Lock()
	m.sinceCheck = 0
	if m.base == 0 || next.DBSizeInUse < m.base {
		// The first check, or the database shrank (a compaction, or
		// keys deleted): count from here.
		m.base = next.DBSizeInUse
	}
	m.mu.Unlock()
	m.checkHistory()
	return st
}

// MinRoomBytes is the least room between the high-water mark and the
// quota that the defaults are made for: etcd's database grows in steps,
// not byte by byte (pages a compaction frees are reused only once no read
// holds them, so a busy store allocates new ones meanwhile), and steps of
// 13 to 17 MiB were measured at compaction on a 64 MiB quota. A member
// whose room is smaller logs a warning once: the writes it admits below
// the mark may then reach the quota. 32 MiB is a quota of 160 MiB at the
// default mark of 80%.
const MinRoomBytes = 32 << 20

// warnSmallRoom logs, once, that st's room above the high-water mark is
// smaller than MinRoomBytes.
func (m *Monitor) warnSmallRoom(st State) {
	room := st.Quota - st.HighWaterBytes
	if room >= MinRoomBytes {
		return
	}
	if m.firstTime(&m.warnedRoom) {
		m.lg.Warn("the room between the high-water mark and etcd's quota is smaller than one step of etcd's database growth: work admitted below the mark may reach the quota; raise etcd's --quota-backend-bytes or lower --storage-high-water (docs/operations.md)",
			zap.String("quota", humanize.IBytes(uint64(st.Quota))), zap.String("high_water", humanize.IBytes(uint64(st.HighWaterBytes))),
			zap.String("room", humanize.IBytes(uint64(max(0, room)))), zap.String("want_room", humanize.IBytes(MinRoomBytes)))
	}
}

// firstTime sets flag, one of the monitor's warned-once flags, and
// reports whether it was unset: a warning is logged the first time only.
func (m *Monitor) firstTime(flag *bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	first := !*flag
	*flag = true
	return first
}

// quota picks the quota from the flag and what etcd reports.
func (m *Monitor) quota(reported int64) (int64, string) {
	flag := m.cfg.QuotaBytes
	switch {
	case flag == 0 && reported == 0:
		return DefaultQuotaBytes, QuotaFromDefault
	case flag == 0:
		return reported, QuotaFromEtcd
	case reported == 0 || flag <= reported:
		return flag, QuotaFromFlag
	}
	if m.firstTime(&m.warnedQuota) {
		m.lg.Warn("etcd reports a smaller space quota than --etcd-quota-bytes; counting etcd's",
			zap.Int64("flag_bytes", flag), zap.Int64("etcd_bytes", reported))
	}
	return reported, QuotaFromEtcd
}

// publish replaces the state with update(the current state), sets the
// metrics and logs transitions. Updates are applied in order, under the
// lock, so none is lost.
func (m *Monitor) publish(update func(prev State) State) State {
	m.mu.Lock()
	prev := m.st
	next := update(prev)
	m.st = next
	m.mu.Unlock()
	m.cfg.Metrics.setState(next)

	switch {
	case next.Err != nil && prev.Err == nil:
		m.lg.Warn("reading etcd's database size and alarms failed; keeping the last values", zap.Error(next.Err))
	case next.Err == nil && prev.Err != nil:
		m.lg.Info("reading etcd's database size and alarms works again")
	}
	fields := []zap.Field{zap.String("db_size", humanize.IBytes(uint64(next.DBSize))), zap.String("quota", humanize.IBytes(uint64(next.Quota))),
		zap.String("high_water", humanize.IBytes(uint64(next.HighWaterBytes)))}
	switch {
	case next.AboveHighWater && !prev.AboveHighWater:
		m.lg.Warn("etcd's database is above the high-water mark: refusing new jobs, growing replacements and triggers (507) until it is compacted and defragmented; firing continues", fields...)
	case !next.AboveHighWater && prev.AboveHighWater:
		m.lg.Info("etcd's database is below the high-water mark again: accepting new work", fields...)
	}
	switch {
	case next.NoSpace && !prev.NoSpace:
		m.lg.Error("etcd's NOSPACE alarm is raised: etcd refuses writes; firing is stopped until an operator compacts, defragments and disarms it (docs/operations.md)", fields...)
	case !next.NoSpace && prev.NoSpace:
		m.lg.Info("etcd's NOSPACE alarm is cleared: firing resumes", fields...)
	}
	return next
}

// NoteWriteError tells the monitor that a write failed with err (as
// classified by store.Classify). A write refused for lack of space marks
// the state NoSpace at once and triggers a check, which keeps or clears it.
func (m *Monitor) NoteWriteError(err error) {
	if !errors.Is(err, store.ErrNoSpace) {
		return
	}
	m.publish(func(prev State) State {
		prev.NoSpace = true
		return prev
	})
	select {
	case m.recheck <- struct{}{}:
	default:
	}
}

// WritesRefused returns an error wrapping store.ErrNoSpace while etcd
// refuses writes for lack of space (its NOSPACE alarm is raised), nil
// otherwise. It answers from memory.
func (m *Monitor) WritesRefused() error {
	st := m.State()
	if !st.NoSpace {
		return nil
	}
	return fmt.Errorf("%w: etcd's NOSPACE alarm is raised (database %s, quota %s); an operator must compact, defragment and disarm it",
		store.ErrNoSpace, humanize.IBytes(uint64(st.DBSize)), humanize.IBytes(uint64(st.Quota)))
}

// Admit says whether a write that grows the database (a new job, a larger
// replacement, a trigger) may be made: nil, or an error wrapping
// store.ErrNoSpace (NOSPACE alarm) or store.ErrHighWater (above the
// high-water mark) that names the size, the quota and the mark. It answers
// from memory.
func (m *Monitor) Admit() error {
	if err := m.WritesRefused(); err != nil {
		return err
	}
	st := m.State()
	if !st.AboveHighWater {
		return nil
	}
	return fmt.Errorf("%w: etcd's database is %s, above the high-water mark of %s (%s of the %s quota); new jobs, larger replacements and triggers are refused until it is compacted and defragmented",
		store.ErrHighWater, humanize.IBytes(uint64(st.DBSize)), humanize.IBytes(uint64(st.HighWaterBytes)),
		percent(st.HighWater), humanize.IBytes(uint64(st.Quota)))
}

func percent(f float64) string {
	return fmt.Sprintf("%g%%", float64(int(f*1000+0.5))/10)
}

// withoutUserinfo returns the endpoint URL ep without any user name and
// password: reports are read by every viewer.
func withoutUserinfo(ep string) string {
	u, err := url.Parse(ep)
	if err != nil || u.User == nil {
		return ep
	}
	u.User = nil
	return u.String()
}

// Quota returns etcd's space quota in bytes as of the last check; before
// the first, Config.QuotaBytes, else DefaultQuotaBytes. It answers from
// memory.
func (m *Monitor) Quota() int64 {
	if st := m.State(); st.Quota > 0 {
		return st.Quota
	}
	if m.cfg.QuotaBytes > 0 {
		return m.cfg.QuotaBytes
	}
	return DefaultQuotaBytes
}
