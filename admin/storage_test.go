package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/internal/storage"
	"github.com/jobfleet/jobfleet/internal/testkit/admintest"
	"github.com/jobfleet/jobfleet/store"
)

func TestStorageEndpoint(t *testing.T) {
	report := storage.Report{
		DBSize: 4 << 20, DBSizeInUse: 1 << 20, Quota: 8 << 20, QuotaSource: storage.QuotaFromEtcd,
		HighWater: 0.8, HighWaterBytes: 6710886, Revision: 900, CompactedRevision: 700,
		Compaction:         &storage.Compaction{Member: "a", Revision: 700, At: started, Interval: api.Duration(5 * time.Minute)},
		CompactionInterval: api.Duration(5 * time.Minute),
		Keys:               storage.Counts{Jobs: 3, Runs: 10, ActiveRuns: 1, FailingRuns: 2, Total: 20},
		History:            &storage.History{Member: "a", Partitions: 4, Runs: 10, Bytes: 123, BudgetBytes: 4096},
		Alarms:             []storage.Alarm{{Member: "8e9e05c52164694d", Alarm: "NOSPACE"}},
		Endpoints:          []storage.Endpoint{{Endpoint: "http://127.0.0.1:2379", DBSize: 4 << 20, DBSizeInUse: 1 << 20}},
		CheckedAt:          started,
	}
	tests := []struct {
		name     string
		get      func(context.Context) (storage.Report, error)
		wantCode int
		wantJSON string
	}{
		{
			name:     "report",
			get:      func(context.Context) (storage.Report, error) { return report, nil },
			wantCode: http.StatusOK,
			wantJSON: `{"db_size_bytes":4194304,"db_size_in_use_bytes":1048576,"quota_bytes":8388608,"quota_source":"etcd",
				"high_water":0.8,"high_water_bytes":6710886,"above_high_water":false,"revision":900,"compacted_revision":700,
				"compaction":{"member":"a","revision":700,"at":"2026-01-02T03:04:05Z","interval":"5m"},"compaction_interval":"5m",
				"keys":{"jobs":3,"runs":10,"active_runs":1,"failing_runs":2,"total":20},"history":{"member":"a","partitions":4,"runs":10,"bytes":123,"budget_bytes":4096},
				"alarms":[{"member":"8e9e05c52164694d","alarm":"NOSPACE"}],
				"endpoints":[{"endpoint":"http://127.0.0.1:2379","db_size_bytes":4194304,"db_size_in_use_bytes":1048576}],
				"checked_at":"2026-01-02T03:04:05Z"}`,
		},
		{
			name: "etcd unreachable",
			get: func(context.Context) (storage.Report, error) {
				return storage.Report{}, store.Classify(fmt.Errorf("status: %w", rpctypes.ErrGRPCNoLeader))
			},
			wantCode: http.StatusServiceUnavailable,
		},
		{
			name:     "other failure",
			get:      func(context.Context) (storage.Report, error) { return storage.Report{}, errors.New("corrupt") },
			wantCode: http.StatusInternalServerError,
			wantJSON: `{"error":"corrupt"}`,
		},
		{name: "not configured", wantCode: http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(admin.Handler(&fakeMember{Member: admintest.Member{StorageReport: tt.get, Auth: testAuth}}, admin.Config{}))
			defer srv.Close()
			resp, err := srv.Client().Do(asAdmin(httptest.NewRequest("GET", srv.URL+"/v1/cluster/storage", nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatalf("body is not JSON: %v", err)
			}
			if resp.StatusCode != tt.wantCode {
				t.Fatalf("got %d %v, want %d", resp.StatusCode, got, tt.wantCode)
			}
			if tt.wantJSON == "" {
				if msg, _ := got["error"].(string); msg == "" {
					t.Errorf("got %v, want an error message", got)
				}
				return
			}
			var want map[string]any
			if err := json.Unmarshal([]byte(tt.wantJSON), &want); err != nil {
				t.Fatal(err)
			}
			if g, w := fmt.Sprint(got), fmt.Sprint(want); g != w {
				t.Errorf("got  %s\nwant %s", g, w)
			}
		})
	}
}
