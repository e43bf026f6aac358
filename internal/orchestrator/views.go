package orchestrator

import (
	"context"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/internal/storage"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// Jobs returns the job store, or ErrNotStarted before the cluster's
// partition count is known.
func (o *Orchestrator) Jobs() (*store.Etcd, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.jobs == nil {
		return nil, ErrNotStarted
	}
	return o.jobs, nil
}

// Dispatcher returns the worker protocol's server, or ErrNotStarted.
func (o *Orchestrator) Dispatcher() (*dispatch.Dispatcher, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.dispatcher == nil {
		return nil, ErrNotStarted
	}
	return o.dispatcher, nil
}

// owner returns partition p's owner as etcd records it, and its address.
func (o *Orchestrator) owner(p int) (string, string) {
	o.mu.Lock()
	n := o.partitions
	o.mu.Unlock()
	if p < 0 || p >= n {
		return "", ""
	}
	// One key of each mirror, not the whole owner table and member view:
	// this answers every redirect (421) of the worker protocol.
	id := o.owners.Owner(p).Member
	if id == "" {
		return "", ""
	}
	m, _ := o.members.Member(id)
	return id, m.Addr
}

// memberAddrs returns the current members' addresses.
func (o *Orchestrator) memberAddrs() []string {
	var addrs []string
	for _, m := range o.Members().Members {
		addrs = append(addrs, m.Addr)
	}
	return addrs
}

// Members returns the current member view.
func (o *Orchestrator) Members() api.View {
	v, _ := o.members.View()
	return v
}

// Partitions returns who owns each partition (read from etcd now) and who
// should: the ring this member's controller works towards (computed from
// its current member view only before the controller has one).
func (o *Orchestrator) Partitions() (api.PartitionTable, error) {
	o.mu.Lock()
	p, ctrl := o.partitions, o.controller
	o.mu.Unlock()
	if p == 0 || ctrl == nil {
		return api.PartitionTable{}, ErrNotStarted
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	table, rev, err := shard.ReadOwners(ctx, o.client, o.cfg.Namespace, p)
	if err != nil {
		return api.PartitionTable{}, err
	}
	st, _ := ctrl.Status()
	ring := st.Ring
	if ring == nil {
		if ring, err = shard.NewRing(o.Members().IDs(), shard.DefaultRingConfig(p)); err != nil {
			return api.PartitionTable{}, err
		}
	}
	t := api.PartitionTable{Partitions: p, Revision: rev, Rows: make([]api.PartitionRow, p)}
	for i := range p {
		t.Rows[i] = api.PartitionRow{Partition: i, Owner: table[i].Member, Epoch: table[i].Epoch, Target: ring.Target(i)}
	}
	return t, nil
}

// NoteWritten tells the member's storage monitor that n bytes were written
// to etcd through its API (admin.Member.NoteWritten): etcd history that
// compacting by history size counts (storage.Monitor.NoteWritten).
func (o *Orchestrator) NoteWritten(n int64) { o.space.NoteWritten(n) }

// StorageRoom returns the bytes between etcd's high-water mark and its
// quota as the member's storage monitor knows them
// (storage.Monitor.Room); the API sizes its write budgets from it
// (admin.Member.StorageRoom).
func (o *Orchestrator) StorageRoom() int64 { return o.space.Room() }

// Storage reads etcd's storage now: sizes, quota, high-water mark,
// revisions, the fleet's last compaction, key counts and alarms, with the
// run history of the partitions this member owns. Errors are classified
// by store.Classify.
func (o *Orchestrator) Storage(ctx context.Context) (storage.Report, error) {
	rep, err := o.space.Report(ctx)
	if err != nil {
		return storage.Report{}, err
	}
	if d, err := o.Dispatcher(); err == nil {
		st := d.Stats()
		rep.History = &storage.History{Member: o.cfg.ID, Partitions: len(d.Owned()), Runs: st.HistoryRuns, Bytes: st.HistoryBytes, BudgetBytes: st.HistoryBudget}
	}
	return rep, nil
}
