package chaos

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
)

// namespace is the fleet's etcd key prefix.
const namespace = "/chaos/"

// Report is the outcome of a run: what was injected, what the checker
// found.
type Report struct {
	Seed    int64        `json:"seed"`
	Config  ReportConfig `json:"config"`
	Dir     string       `json:"dir"`
	Started time.Time    `json:"started"`
	Ended   time.Time    `json:"ended"`
	// FaultCounts is how many faults of each kind were injected.
	FaultCounts map[Kind]int `json:"fault_counts"`
	Faults      []Fault      `json:"faults"`
	Result
}

// ReportConfig is the part of Config a report shows.
type ReportConfig struct {
	Duration      time.Duration `json:"duration_ns"`
	EtcdMembers   int           `json:"etcd_members"`
	Orchestrators int           `json:"orchestrators"`
	Workers       int           `json:"workers"`
	Partitions    int           `json:"partitions"`
	LeaseTTL      time.Duration `json:"lease_ttl_ns"`
	RunLease      time.Duration `json:"run_lease_ns"`
	Grace         time.Duration `json:"misfire_grace_ns"`
	Kinds         []Kind        `json:"kinds"`
	Hosts         bool          `json:"hosts,omitempty"`
}

// Run starts a fleet as processes on loopback (an etcd cluster,
// orchestrators, workers), runs the workload against it while the nemesis
// injects faults for cfg.Duration, heals the fleet, lets every run finish,
// and checks the history. It writes report.json, executions.jsonl and
// ops.jsonl into cfg.Dir, and one log per process into cfg.Dir/logs.
//
// It returns an error if the fleet could not be run at all; the checker's
// findings are in the report (Report.OK). Every process it starts is
// killed before it returns, whatever happens.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	lg := cfg.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	for _, d := range []string{"logs", "data"} {
		if err := os.MkdirAll(filepath.Join(cfg.Dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	rep := &Report{
		Seed: cfg.Seed, Dir: cfg.Dir, Started: time.Now(),
		Config: ReportConfig{Duration: cfg.Duration, EtcdMembers: cfg.EtcdMembers, Orchestrators: cfg.Orchestrators,
			Workers: cfg.Workers, Partitions: cfg.Partitions, LeaseTTL: cfg.LeaseTTL, RunLease: cfg.RunLease,
			Grace: cfg.grace(), Kinds: cfg.kinds(), Hosts: cfg.Hosts},
	}

	var (
		hosts *hostNetwork
		err   error
	)
	if cfg.Hosts {
		hosts, err = newHostNetwork(hostPlan(cfg), cfg.Seed, lg.Named("hosts"))
		if err != nil {
			return nil, fmt.Errorf("hosts: %w", err)
		}
		defer hosts.close() // after every process is gone (defers run last to first)
	}
	var ln net.Listener
	if hosts != nil {
		rh := hosts.host(hostRecorder)
		ln, err = rh.listen("tcp", net.JoinHostPort(rh.ip(), "9000"))
	} else {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		return nil, fmt.Errorf("recorder: %w", err)
	}
	rec, err := startRecorder(cfg.Seed, cfg.SlowFor, ln)
	if err != nil {
		return nil, err
	}
	defer rec.close()
	etcd, err := startEtcd(ctx, cfg.Binary, cfg.Dir, cfg.EtcdMembers, hosts, lg)
	if err != nil {
		return nil, err
	}
	defer etcd.kill()
	client, err := etcd.client()
	if err != nil {
		return nil, err
	}
	defer client.Close()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	probe, err := client.Get(rctx, "revision-probe")
	cancel()
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	hist := watchHistory(client, namespace, cfg.Partitions, probe.Header.Revision, lg.Named("history"))
	defer hist.stop()

	f := newFleet(cfg, namespace, etcd, client, hosts, lg.Named("fleet"))
	defer f.killAll()
	if err := f.makeCredentials(ctx); err != nil {
		return nil, err
	}
	if err := f.startOrchestrators(); err != nil {
		return nil, err
	}
	if at, why := waitFor(ctx, time.Minute, 100*time.Millisecond, func() (bool, string) { return f.settled(ctx) }); at.IsZero() {
		return nil, fmt.Errorf("the fleet did not settle at start: %s", why)
	}
	if err := f.startWorkers(); err != nil {
		return nil, err
	}
	lg.Info("fleet up", zap.Int("orchestrators", cfg.Orchestrators), zap.Int("workers", cfg.Workers), zap.Int("etcd_members", cfg.EtcdMembers))

	w := newWorkload(f, rec, cfg, lg.Named("workload"))
	if err := w.createBase(ctx); err != nil {
		return nil, err
	}
	oneOffCtx, stopOneOffs := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { w.runOneOffs(oneOffCtx) })
	defer wg.Wait()
	defer stopOneOffs()

	sleepCtx(ctx, 2*cfg.Gap) // steady state before the first fault
	var noisy *NoisyStats
	noisyCtx, stopNoisy := context.WithCancel(ctx)
	var noisyDone sync.WaitGroup
	if cfg.NoisyTenant {
		nt := newNoisyTenant(f, rec, lg.Named("noisy"))
		noisyDone.Go(func() {
			st := nt.run(noisyCtx)
			noisy = &st
		})
	}
	nem := newNemesis(f, w, hist, rec, cfg, lg)
	nem.run(ctx, time.Now().Add(cfg.Duration))
	stopNoisy() // the flood lasts as long as the faults
	noisyDone.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := nem.heal(ctx); err != nil {
		return nil, fmt.Errorf("healing the fleet: %w", err)
	}
	if at, why := waitFor(ctx, 2*time.Minute, 100*time.Millisecond, func() (bool, string) { return f.settled(ctx) }); at.IsZero() {
		return nil, fmt.Errorf("the fleet did not settle after the faults: %s", why)
	}
	lg.Info("faults over; settling")

	// One-offs stop; the quiet time lets the last of them come due.
	stopOneOffs()
	wg.Wait()
	sleepCtx(ctx, 7*time.Second) // one-offs run at most 6s after their creation
	end := time.Now()
	w.pauseAll(ctx)
	if at, _ := waitFor(ctx, 2*time.Minute, 200*time.Millisecond, func() (bool, string) {
		open, _ := hist.openRuns()
		return open == 0, ""
	}); at.IsZero() {
		open, _ := hist.openRuns()
		lg.Warn("runs still open after two minutes; checking anyway", zap.Int("open", open))
	}
	var held map[string][]api.LimitHolder
	if limits := w.limitSpec(); limits != nil {
		held, err = heldSlots(ctx, client, namespace, cfg.RunLease+api.DefaultWorkerTTL+10*time.Second)
		if err != nil {
			return nil, err
		}
	}
	mctx, cancel := context.WithTimeout(ctx, time.Minute)
	err = hist.mark(mctx, "end")
	cancel()
	if err != nil {
		return nil, err
	}
	listed, err := w.listJobs(ctx)
	if err != nil {
		lg.Warn("listing the jobs at the end failed", zap.Error(err))
	}
	f.stopAll()
	hist.stop()
	rep.Ended = time.Now()

	jobs, ops := w.results()
	deleteRequested := map[string]time.Time{}
	updates := 0
	for _, op := range ops {
		switch {
		case op.Op == "delete" && op.Err == "" && op.Status < 300:
			deleteRequested[op.Job] = op.Start
		case op.Op == "update" && op.Err == "" && op.Status < 300:
			updates++
		}
	}
	execs := rec.executions()
	rep.Faults = nem.results()
	rep.FaultCounts = map[Kind]int{}
	for _, ft := range rep.Faults {
		rep.FaultCounts[ft.Kind]++
	}
	history := hist.snapshot()
	var logs []string
	for _, o := range f.orchs {
		logs = append(logs, o.logPath)
	}
	in := Input{
		Partitions:      cfg.Partitions,
		Grace:           cfg.grace(),
		End:             end,
		Faults:          rep.Faults,
		LeaseLosses:     leaseLosses(logs, history.OwnerAcquired, end),
		History:         history,
		Executions:      execs,
		Jobs:            jobs,
		Listed:          listed,
		DeleteRequested: deleteRequested,
		Workers:         f.workerLives(),
		Bounds:          cfg.bounds(),
		Credentials:     f.workerCredentials(),
		Noisy:           noisy,
		Limits:          w.limitSpec(),
		LimitsHeld:      held,
	}
	rep.Result = Check(in)
	rep.Global.JobUpdates = updates
	if err := writeInput(filepath.Join(cfg.Dir, inputFile), in); err != nil {
		return rep, err
	}
	if err := writeJSONL(filepath.Join(cfg.Dir, "executions.jsonl"), execs); err != nil {
		return rep, err
	}
	if err := writeJSONL(filepath.Join(cfg.Dir, "ops.jsonl"), ops); err != nil {
		return rep, err
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return rep, err
	}
	return rep, os.WriteFile(filepath.Join(cfg.Dir, "report.json"), b, 0o644)
}

// inputFile is the checker's input, kept so that a run can be checked
// again (Recheck) without running the fleet.
const inputFile = "check-input.json.gz"

func writeInput(path string, in Input) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(f)
	if err := json.NewEncoder(zw).Encode(in); err != nil {
		f.Close()
		return err
	}
	if err := zw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Recheck runs the checker again over the input a run saved in dir.
func Recheck(dir string) (Result, error) {
	f, err := os.Open(filepath.Join(dir, inputFile))
	if err != nil {
		return Result{}, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return Result{}, err
	}
	var in Input
	if err := json.NewDecoder(zr).Decode(&in); err != nil {
		return Result{}, fmt.Errorf("%s: %w", inputFile, err)
	}
	return Check(in), nil
}
