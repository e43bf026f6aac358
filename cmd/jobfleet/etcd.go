package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/internal/etcdserver"
)

// newEtcdCmd is the hidden `jobfleet etcd`: one embedded etcd member as a
// process of its own, so that the fault-injection harness (internal/chaos,
// `jobfleet bench chaos`) can run a multi-member cluster and kill, pause
// and restart its members. It is a test tool, not a way to run etcd in
// production.
func newEtcdCmd() *cobra.Command {
	var (
		logs           = defaultLogOptions("json")
		name           string
		dataDir        string
		clientListen   string
		peerListen     string
		initialCluster string
		noFsync        bool
	)
	cmd := &cobra.Command{
		Use:    "etcd",
		Short:  "Run one embedded etcd member (a test tool for fault injection)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dataDir == "" {
				return fmt.Errorf("--data-dir is required")
			}
			lg, err := logs.build()
			if err != nil {
				return err
			}
			defer lg.Sync()
			if err := os.MkdirAll(filepath.Clean(dataDir), 0o700); err != nil {
				return fmt.Errorf("--data-dir: %w", err)
			}
			srv, err := etcdserver.Start(etcdserver.Config{
				Dir:            dataDir,
				ClientAddr:     clientListen,
				PeerAddr:       peerListen,
				Name:           name,
				InitialCluster: initialCluster,
				NoFsync:        noFsync,
				StartTimeout:   5 * time.Minute, // a member of a new cluster waits for a quorum
				Logger:         lg,
			})
			if err != nil {
				return err
			}
			defer srv.Close()
			lg.Info("etcd member ready", zap.String("name", name), zap.Strings("endpoints", srv.Endpoints()), zap.String("peer", srv.PeerAddr()))
			select {
			case <-cmd.Context().Done():
				lg.Info("etcd member stopping")
				return nil
			case err := <-srv.Err():
				return fmt.Errorf("etcd member: %w", err)
			}
		},
	}
	logs.register(cmd.Flags())
	fs := cmd.Flags()
	fs.StringVar(&name, "name", "jobfleet-dev", "member name")
	fs.StringVar(&dataDir, "data-dir", "", "data directory (kept across restarts)")
	fs.StringVar(&clientListen, "listen-client", "127.0.0.1:2379", "HOST:PORT for clients")
	fs.StringVar(&peerListen, "listen-peer", "127.0.0.1:2380", "HOST:PORT for the other members")
	fs.StringVar(&initialCluster, "initial-cluster", "", "name=https://HOST:PORT peer URLs of a new cluster's members, comma separated (https: the members speak TLS with self-made certificates, so no web page reaches their peer ports; default: a single-member cluster, which has no peer listener)")
	fs.BoolVar(&noFsync, "unsafe-no-fsync", false, "skip fsync (tests only: a process crash keeps the data, a power loss may not)")
	return cmd
}
