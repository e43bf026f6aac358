package etcdserver

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestEtcdLoggerKeepsAFewLinesOfAMessageASecond: etcd's warning of every
// slow request, a thousand times in one second, leaves etcdLogBurst
// lines; another message and the next second are logged again; lines
// below the level are not.
func TestEtcdLoggerKeepsAFewLinesOfAMessageASecond(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	lg := etcdLogger(zap.New(core), zap.NewAtomicLevelAt(zap.WarnLevel))
	write := func(at time.Time, level zapcore.Level, msg string) {
		if ce := lg.Core().Check(zapcore.Entry{Time: at, Level: level, LoggerName: "etcd", Message: msg}, nil); ce != nil {
			ce.Write()
		}
	}
	second := time.Date(2026, 11, 30, 20, 0, 0, 0, time.UTC)
	for i := range 1000 {
		write(second.Add(time.Duration(i)*time.Millisecond/2), zapcore.WarnLevel, "apply request took too long")
	}
	write(second.Add(600*time.Millisecond), zapcore.WarnLevel, "lost leader")
	write(second.Add(700*time.Millisecond), zapcore.InfoLevel, "applied snapshot")
	write(second.Add(1500*time.Millisecond), zapcore.WarnLevel, "apply request took too long")

	counts := map[string]int{}
	for _, e := range logs.All() {
		counts[e.Message]++
	}
	if got, want := counts["apply request took too long"], etcdLogBurst+1; got != want {
		t.Errorf("slow request warnings: %d lines, want %d (%d in the first second, 1 in the next)", got, want, etcdLogBurst)
	}
	if counts["lost leader"] != 1 || counts["applied snapshot"] != 0 {
		t.Errorf("other messages: %v, want lost leader once and no info line", counts)
	}
}
