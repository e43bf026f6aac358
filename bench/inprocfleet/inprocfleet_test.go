package inprocfleet_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/bench/inprocfleet"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
)

var etcd *etcdtest.Server

func TestMain(m *testing.M) { os.Exit(etcdtest.Main(m, &etcd)) }

func config(t *testing.T) inprocfleet.Config {
	return inprocfleet.Config{
		EtcdAddrs:     []string{etcd.ClientAddr()},
		Namespace:     etcdtest.Namespace(t),
		Partitions:    8,
		LeaseTTL:      2 * time.Second,
		SettleTimeout: 30 * time.Second,
	}
}

// TestJoinCrashLeave settles a fleet on start, after a join, after a crash
// (the crashed member's lease must expire first) and after a graceful
// leave, and checks who is live.
func TestJoinCrashLeave(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := config(t)
	cfg.Members = 2
	f, err := inprocfleet.New(etcd.Client(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.StopAll()
	if _, err := f.Settle(ctx, time.Now()); err != nil {
		t.Fatalf("start: %v", err)
	}
	if err := f.Join("joiner"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Settle(ctx, time.Now()); err != nil {
		t.Fatalf("join: %v", err)
	}
	f.Crash("orchestrator-1")
	took, err := f.Settle(ctx, time.Now())
	if err != nil {
		t.Fatalf("crash: %v", err)
	}
	// The survivors may take the partitions only once the lease expired:
	// at least the TTL less one renew interval after the crash.
	if took < time.Second {
		t.Errorf("settled %v after the crash, before the 2s lease could expire", took)
	}
	f.Leave("joiner")
	if _, err := f.Settle(ctx, time.Now()); err != nil {
		t.Fatalf("leave: %v", err)
	}
	if live := f.Live(); len(live) != 1 || live[0] != "orchestrator-2" {
		t.Errorf("live members %v, want [orchestrator-2]", live)
	}
}

// TestSettleTimesOut checks that Settle gives up after SettleTimeout,
// counted from the start it is given, and says how far the fleet got: a
// fleet with no member never owns anything.
func TestSettleTimesOut(t *testing.T) {
	cfg := config(t)
	cfg.SettleTimeout = 50 * time.Millisecond
	f, err := inprocfleet.New(etcd.Client(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.StopAll()
	_, err = f.Settle(context.Background(), time.Now())
	if err == nil || !strings.Contains(err.Error(), "0 of 8 partitions owned by their target") {
		t.Fatalf("Settle of an empty fleet = %v, want a timeout saying 0 of 8 partitions are owned", err)
	}
}

// TestSettleReadErrors checks both ways Settle treats a failed read: with
// ReadTimeout 0 the first failure ends it; with a ReadTimeout it tries
// again until SettleTimeout, and says etcd never answered.
func TestSettleReadErrors(t *testing.T) {
	obs := etcdtest.NewClient(t, etcd.Endpoints())
	obs.Close() // every read fails

	cfg := config(t)
	cfg.SettleTimeout = 300 * time.Millisecond
	f, err := inprocfleet.New(obs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Settle(context.Background(), time.Now()); err == nil || strings.Contains(err.Error(), "not settled") {
		t.Errorf("ReadTimeout 0: Settle = %v, want the read's error", err)
	}

	cfg.ReadTimeout = 100 * time.Millisecond
	if f, err = inprocfleet.New(obs, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Settle(context.Background(), time.Now()); err == nil || !strings.Contains(err.Error(), "no answer from etcd") {
		t.Errorf("ReadTimeout set: Settle = %v, want a timeout saying etcd never answered", err)
	}
}

// TestNewChecksConfig checks that New refuses what cannot run.
func TestNewChecksConfig(t *testing.T) {
	for name, edit := range map[string]func(*inprocfleet.Config){
		"no etcd":            func(c *inprocfleet.Config) { c.EtcdAddrs = nil },
		"no namespace":       func(c *inprocfleet.Config) { c.Namespace = "" },
		"no partitions":      func(c *inprocfleet.Config) { c.Partitions = 0 },
		"no lease TTL":       func(c *inprocfleet.Config) { c.LeaseTTL = 0 },
		"no settle timeout":  func(c *inprocfleet.Config) { c.SettleTimeout = 0 },
		"a negative members": func(c *inprocfleet.Config) { c.Members = -1 },
	} {
		cfg := config(t)
		edit(&cfg)
		if _, err := inprocfleet.New(nil, cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}
