package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
)

// This file holds the faults of the network (which need hosts) and of
// clocks.

// setOffset sets o's clock offset through its offset file (written
// whole: a temporary file renamed over it). The member reads the file
// every 100ms.
func (n *nemesis) setOffset(o *orchProc, d time.Duration) error {
	cur, err := os.ReadFile(o.offsetFile)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	want := d.String()
	if strings.TrimSpace(string(cur)) == want || (len(cur) == 0 && d == 0) {
		return nil
	}
	tmp := o.offsetFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(want+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, o.offsetFile)
}

// clockOffset steps a random orchestrator's clock by 2 to 8 seconds,
// forward or backward, holds it 2 to 4 seconds, and steps it back.
// Ahead, the member fires its partitions' times up to the offset early;
// behind, late, and when it steps back the times it had not fired yet may
// be older than the misfire grace. Its window covers its partitions until
// the offset is undone plus, behind, the offset (those old times).
func (n *nemesis) clockOffset(ctx context.Context) Fault {
	o := n.victim()
	if o == nil {
		return Fault{Err: "no live orchestrator"}
	}
	off := n.between(2*time.Second, 8*time.Second).Round(100 * time.Millisecond)
	if n.intn(2) == 0 {
		off = -off
	}
	parts := n.ownedBy(ctx, o.id)
	n.f.setAvoid(o.id, true) // jobs written through it would get its idea of now
	defer n.f.setAvoid(o.id, false)
	ft := Fault{Target: o.id, Start: time.Now(), ClockOffset: off}
	if err := n.setOffset(o, off); err != nil {
		return Fault{Target: o.id, Err: err.Error()}
	}
	hold := n.between(2*time.Second, 4*time.Second)
	sleepCtx(ctx, hold)
	if err := n.setOffset(o, 0); err != nil {
		ft.Err = err.Error()
	}
	ft.Healed = time.Now()
	ft.Recovered = <-n.awaitHealthy(ctx)
	end := ft.Healed.Add(200 * time.Millisecond) // the member reads the file every 100ms
	if off < 0 {
		end = end.Add(-off)
	}
	ft.Failover = healedFailover(ft)
	ft.Windows = partsWindow(ft.Start, maxTime(end, ft.Recovered), keys(parts))
	for i := range ft.Windows {
		ft.Windows[i].Skew = off
	}
	ft.Detail = fmt.Sprintf("clock %+v for %v; %d partitions", off, hold.Round(time.Millisecond), len(parts))
	return ft
}

// healedFailover is the recovery of a fault that degrades the fleet
// rather than breaking it: from its healing to the fleet's health (at
// least 1ns, so that it counts as measured), or 0 if it did not recover.
func healedFailover(ft Fault) time.Duration {
	if ft.Recovered.IsZero() {
		return 0
	}
	return max(ft.Recovered.Sub(ft.Healed), time.Nanosecond)
}

// partsWindow returns a window of the partitions parts, or none if parts
// is empty (a window without partitions means all of them).
func partsWindow(start, end time.Time, parts []int) []Window {
	if len(parts) == 0 {
		return nil
	}
	return []Window{{Start: start, End: end, Partitions: parts}}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// The hosts of the fleet's processes.

func (n *nemesis) etcdHosts() []*netHost {
	var out []*netHost
	for _, m := range n.f.etcd.members {
		out = append(out, m.host)
	}
	return out
}

func (n *nemesis) orchHosts() []*netHost {
	var out []*netHost
	for _, o := range n.f.orchs {
		out = append(out, o.host)
	}
	return out
}

func (n *nemesis) workerHosts() []*netHost {
	var out []*netHost
	for _, w := range n.f.workers {
		out = append(out, w.host)
	}
	return out
}

// fleetHosts returns every host of an etcd member, orchestrator or worker.
func (n *nemesis) fleetHosts() []*netHost {
	return slices.Concat(n.etcdHosts(), n.orchHosts(), n.workerHosts())
}

// setLinks gives every link from a host of as to a host of bs rule r, and
// the links back too if both.
func (n *nemesis) setLinks(as, bs []*netHost, r LinkRule, both bool) {
	for _, a := range as {
		for _, b := range bs {
			if a == b {
				continue
			}
			n.f.hosts.fab.setRule(a.num, b.num, r)
			if both {
				n.f.hosts.fab.setRule(b.num, a.num, r)
			}
		}
	}
}

// healNetwork removes every link rule.
func (n *nemesis) healNetwork() {
	if n.f.hosts != nil {
		n.f.hosts.fab.heal()
	}
}

func names(hs []*netHost) string {
	var out []string
	for _, h := range hs {
		out = append(out, h.name)
	}
	return strings.Join(out, ",")
}

// awaitAfter waits for ch, then holds the fault for a random 0.3 to 1
// second more; it returns what ch sent.
func (n *nemesis) awaitAfter(ctx context.Context, ch <-chan time.Time) time.Time {
	at := <-ch
	sleepCtx(ctx, n.between(300*time.Millisecond, time.Second))
	return at
}

// hostIsolate cuts one host off from every other host of the fleet: an
// orchestrator (half the time), a worker holding a slow attempt, or an
// etcd member.
func (n *nemesis) hostIsolate(ctx context.Context) Fault {
	switch n.intn(4) {
	case 2:
		if w, held := n.slowHolder(ctx); w != nil {
			ft := Fault{Target: w.name, Start: time.Now(), CutWorkers: []string{w.incarnationID(w.Incarnation())}}
			n.setLinks([]*netHost{w.host}, n.fleetHosts(), LinkRule{Down: true}, true)
			ft.Recovered = n.awaitAfter(ctx, n.awaitRetried(ctx, held))
			n.healNetwork()
			ft.Healed = time.Now()
			ft.Detail = fmt.Sprintf("worker %s held run %s attempt %d", ft.CutWorkers[0], held.Run, held.Attempt)
			return ft
		}
	case 3:
		m := n.f.etcd.members[n.intn(len(n.f.etcd.members))]
		ft := Fault{Target: m.name, Start: time.Now(), etcdRejoin: true}
		leader, _ := n.f.etcd.leader(ctx, n.f.client)
		n.setLinks([]*netHost{m.host}, n.fleetHosts(), LinkRule{Down: true}, true)
		healthy := n.awaitHealthy(ctx)
		sleepCtx(ctx, n.between(1500*time.Millisecond, 3*time.Second))
		n.healNetwork()
		ft.Healed = time.Now()
		ft.Recovered = <-healthy
		ft.Windows = []Window{{Start: ft.Start, End: maxTime(ft.Recovered, ft.Healed)}}
		ft.Detail = fmt.Sprintf("etcd member (leader: %v)", leader == m)
		return ft
	}
	o := n.victim()
	if o == nil {
		return Fault{Err: "no live orchestrator"}
	}
	parts := n.ownedBy(ctx, o.id)
	n.f.setAvoid(o.id, true)
	defer n.f.setAvoid(o.id, false)
	ft := Fault{Target: o.id, Start: time.Now()}
	n.setLinks([]*netHost{o.host}, n.fleetHosts(), LinkRule{Down: true}, true)
	ft.Recovered = n.awaitAfter(ctx, n.awaitMoved(ctx, parts))
	n.healNetwork()
	ft.Healed = time.Now()
	ft.Windows = partsWindow(ft.Start, ft.Recovered, keys(parts))
	ft.Detail = fmt.Sprintf("orchestrator with %d partitions", len(parts))
	return ft
}

// partitionHalves splits the fleet's hosts in two: a majority of the etcd
// members with some orchestrators and workers, the rest on the other
// side. Recovered: the majority side owns every partition and its
// orchestrators are ready.
func (n *nemesis) partitionHalves(ctx context.Context) Fault {
	n.mu.Lock()
	rng := rand.New(rand.NewPCG(n.rng.Uint64(), n.rng.Uint64()))
	n.mu.Unlock()
	etcd := slices.Clone(n.f.etcd.members)
	rng.Shuffle(len(etcd), func(i, j int) { etcd[i], etcd[j] = etcd[j], etcd[i] })
	orchs := slices.Clone(n.f.orchs)
	rng.Shuffle(len(orchs), func(i, j int) { orchs[i], orchs[j] = orchs[j], orchs[i] })
	workers := slices.Clone(n.f.workers)
	rng.Shuffle(len(workers), func(i, j int) { workers[i], workers[j] = workers[j], workers[i] })

	var major, minor []*netHost
	majorEtcd := len(etcd)/2 + 1
	for i, m := range etcd {
		if i < majorEtcd {
			major = append(major, m.host)
		} else {
			minor = append(minor, m.host)
		}
	}
	k := 1 + rng.IntN(len(orchs)-1) // orchestrators on the minority side
	cut := map[string]bool{}
	var parts []int
	for i, o := range orchs {
		if i < k {
			minor = append(minor, o.host)
			cut[o.id] = true
			n.f.setAvoid(o.id, true)
			parts = append(parts, keys(n.ownedBy(ctx, o.id))...)
		} else {
			major = append(major, o.host)
		}
	}
	defer func() {
		for id := range cut {
			n.f.setAvoid(id, false)
		}
	}()
	var cutWorkers []string
	for i, w := range workers {
		if i == 0 || rng.IntN(2) == 0 {
			major = append(major, w.host)
		} else {
			minor = append(minor, w.host)
		}
		cutWorkers = append(cutWorkers, w.incarnationID(w.Incarnation())) // every worker loses the other side's orchestrators
	}
	leader, _ := n.f.etcd.leader(ctx, n.f.client)
	ft := Fault{Target: names(minor), Start: time.Now(), CutWorkers: cutWorkers, etcdRejoin: true}
	n.setLinks(major, minor, LinkRule{Down: true}, true)
	ft.Recovered = n.awaitAfter(ctx, n.awaitHealthyWithout(ctx, cut))
	n.healNetwork()
	ft.Healed = time.Now()
	leaderCut := leader == nil || slices.Contains(minor, leader.host)
	if leaderCut || majorEtcd < len(etcd) {
		// An etcd member on the minority side is, to the majority's
		// orchestrators, a member isolated from them (hostIsolate): a
		// connection of theirs to it goes silent, and their requests and
		// lease renewals on it hang until the client's keepalive closes
		// it, so any partition may stall, not only the minority's.
		ft.Windows = []Window{{Start: ft.Start, End: ft.Recovered}}
	} else {
		slices.Sort(parts)
		ft.Windows = partsWindow(ft.Start, ft.Recovered, parts)
	}
	ft.Detail = fmt.Sprintf("minority %s | majority %s; etcd leader on the minority side: %v", names(minor), names(major), leaderCut)
	return ft
}

// orchestratorEtcdCut cuts one orchestrator from every etcd member — both
// ways, only its requests, or only etcd's answers — while it still
// reaches the workers and the other orchestrators.
func (n *nemesis) orchestratorEtcdCut(ctx context.Context) Fault {
	o := n.victim()
	if o == nil {
		return Fault{Err: "no live orchestrator"}
	}
	parts := n.ownedBy(ctx, o.id)
	n.f.setAvoid(o.id, true)
	defer n.f.setAvoid(o.id, false)
	ft := Fault{Target: o.id, Start: time.Now()}
	dir := ""
	switch n.intn(3) {
	case 0:
		n.setLinks([]*netHost{o.host}, n.etcdHosts(), LinkRule{Down: true}, true)
		dir = "both ways"
	case 1:
		n.setLinks([]*netHost{o.host}, n.etcdHosts(), LinkRule{Down: true}, false)
		dir = "its packets to etcd dropped"
	default:
		n.setLinks(n.etcdHosts(), []*netHost{o.host}, LinkRule{Down: true}, false)
		dir = "etcd's packets to it dropped"
	}
	ft.Recovered = n.awaitAfter(ctx, n.awaitMoved(ctx, parts))
	n.healNetwork()
	ft.Healed = time.Now()
	ft.Windows = partsWindow(ft.Start, ft.Recovered, keys(parts))
	ft.Detail = fmt.Sprintf("%d partitions; %s", len(parts), dir)
	return ft
}

// workerOrchestratorCut finds a worker holding a slow attempt and cuts it
// from the orchestrator that owns the attempt's partition, which it can
// then neither heartbeat nor report to; it still reaches etcd and the
// other orchestrators. The cut lasts until the attempt was reassigned
// (its lease expired) and a little more: the worker's report of the
// attempt, sent once the cut heals, must be refused.
func (n *nemesis) workerOrchestratorCut(ctx context.Context) Fault {
	w, held := n.slowHolder(ctx)
	if w == nil {
		return Fault{Err: "no worker found holding a slow attempt"}
	}
	run, _ := n.hist.run(held.Run)
	owners, _, err := n.f.ownerTable(ctx)
	var o *orchProc
	if err == nil {
		for _, op := range n.f.orchs {
			if op.id == owners[run.Partition].Member {
				o = op
			}
		}
	}
	if o == nil {
		return Fault{Target: w.name, Err: fmt.Sprintf("no owner found for partition %d: %v", run.Partition, err)}
	}
	id := w.incarnationID(w.Incarnation())
	ft := Fault{Target: id + "-" + o.id, Start: time.Now(), CutWorkers: []string{id}}
	n.setLinks([]*netHost{w.host}, []*netHost{o.host}, LinkRule{Down: true}, true)
	ft.Recovered = n.awaitAfter(ctx, n.awaitRetried(ctx, held))
	n.healNetwork()
	ft.Healed = time.Now()
	ft.Detail = fmt.Sprintf("held run %s attempt %d", held.Run, held.Attempt)
	return ft
}

// etcdLeaderCut cuts the etcd leader from its followers (all, or one)
// while every member still reaches, and is reached by, the clients.
func (n *nemesis) etcdLeaderCut(ctx context.Context) Fault {
	leader := n.f.etcd.awaitLeader(ctx, n.f.client)
	if leader == nil {
		return Fault{Err: "no etcd leader found"}
	}
	var followers []*netHost
	for _, m := range n.f.etcd.members {
		if m != leader {
			followers = append(followers, m.host)
		}
	}
	if n.intn(2) == 0 {
		i := n.intn(len(followers))
		followers = followers[i : i+1]
	}
	ft := Fault{Target: leader.name, Start: time.Now(), etcdRejoin: true}
	n.setLinks([]*netHost{leader.host}, followers, LinkRule{Down: true}, true)
	healthy := n.awaitHealthy(ctx)
	sleepCtx(ctx, n.between(1500*time.Millisecond, 3*time.Second))
	n.healNetwork()
	ft.Healed = time.Now()
	ft.Recovered = <-healthy
	ft.Windows = []Window{{Start: ft.Start, End: maxTime(ft.Recovered, ft.Healed)}}
	ft.Detail = "cut from " + names(followers)
	return ft
}

// linkFault makes some links slow (LinkSlow: 50–400 ms each way, jitter up
// to half that) or lossy (LinkLossy: 5–30% of packets dropped each way)
// for 2 to 4 seconds: an orchestrator's links to etcd, the etcd leader's
// link to one follower, or a worker's links to the orchestrators.
func (n *nemesis) linkFault(ctx context.Context, k Kind) Fault {
	var r LinkRule
	if k == LinkSlow {
		r.Delay = n.between(50*time.Millisecond, 400*time.Millisecond).Round(time.Millisecond)
		r.Jitter = n.between(0, r.Delay/2).Round(time.Millisecond)
	} else {
		r.Loss = float64(5+n.intn(26)) / 100
	}
	var (
		as, bs []*netHost
		parts  []int
		all    bool
		target string
	)
	switch n.intn(3) {
	case 0:
		o := n.victim()
		if o == nil {
			return Fault{Err: "no live orchestrator"}
		}
		as, bs, target = []*netHost{o.host}, n.etcdHosts(), o.id+"-etcd"
		parts = keys(n.ownedBy(ctx, o.id))
	case 1:
		leader, err := n.f.etcd.leader(ctx, n.f.client)
		if err != nil {
			return Fault{Err: err.Error()}
		}
		var fs []*netHost
		for _, m := range n.f.etcd.members {
			if m != leader {
				fs = append(fs, m.host)
			}
		}
		f := fs[n.intn(len(fs))]
		as, bs, target, all = []*netHost{leader.host}, []*netHost{f}, leader.name+"-"+f.name, true
	default:
		w := n.f.workers[n.intn(len(n.f.workers))]
		as, bs, target = []*netHost{w.host}, n.orchHosts(), w.name+"-orchestrators"
	}
	ft := Fault{Target: target, Start: time.Now(), etcdRejoin: all}
	n.setLinks(as, bs, r, true)
	hold := n.between(2*time.Second, 4*time.Second)
	sleepCtx(ctx, hold)
	n.healNetwork()
	ft.Healed = time.Now()
	ft.Recovered = <-n.awaitHealthy(ctx)
	ft.Failover = healedFailover(ft)
	switch {
	case all:
		ft.Windows = []Window{{Start: ft.Start, End: maxTime(ft.Recovered, ft.Healed)}}
	default:
		ft.Windows = partsWindow(ft.Start, maxTime(ft.Recovered, ft.Healed), parts)
	}
	ft.Detail = fmt.Sprintf("%s each way for %v", r, hold.Round(time.Millisecond))
	n.lg.Debug("link fault", zap.String("links", names(as)+" <-> "+names(bs)))
	return ft
}
