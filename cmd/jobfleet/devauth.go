package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
	"unicode"

	"github.com/jobfleet/jobfleet/api"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/auth"
)

// The credentials `jobfleet dev` makes, by well-known ID, so that a
// restart reuses (or replaces) them instead of piling up records.
const (
	devAdminID  = "dev-admin"
	devWorkerID = "dev-worker"
	// devContext is the CLI context dev writes and makes current when it
	// runs on the default data directory (devContextName).
	devContext = "dev"
)

// defaultDevDataDir is dev's data directory unless --data-dir says
// otherwise.
func defaultDevDataDir() string { return filepath.Join(os.TempDir(), "jobfleet-dev") }

// devContextName returns the CLI context of a dev on data directory dir:
// "dev" on the default one, else "dev-" and the directory's base name
// (characters a context name may not hold as '-', at most 64 in all), so
// that a second dev on its own directory does not take over the first
// one's context.
func devContextName(dir string) string {
	abs := func(d string) string {
		if a, err := filepath.Abs(d); err == nil {
			return a
		}
		return filepath.Clean(d)
	}
	if abs(dir) == abs(defaultDevDataDir()) {
		return devContext
	}
	base := []rune(filepath.Base(filepath.Clean(dir)))
	for i, r := range base {
		if !(r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '.' || r == '_' || r == '-')) {
			base[i] = '-'
		}
	}
	name := devContext + "-" + string(base)
	if len(name) > 64 {
		name = name[:64]
	}
	return name
}

// devCredential returns the token of dev's credential id (role role),
// kept in file path (0600): the file's token if it is still valid in
// etcd, else a new one issued under the same ID (replacing the stored
// record) and written to the file.
func devCredential(ctx context.Context, lg *zap.Logger, s *auth.Store, path, id string, role api.Role) (string, error) {
	if tok, err := auth.ReadTokenFile(path); err == nil {
		if t, err := s.Verify(ctx, tok); err == nil && t.ID == id && t.Role == role {
			lg.Info("reusing the dev credential", zap.String("credential", id), zap.String("file", path))
			return tok, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		lg.Warn("replacing an unreadable dev token file", zap.String("file", path), zap.Error(err))
	}
	c, _, err := s.Issue(ctx, id, api.CreateRequest{Role: role, Description: "made by jobfleet dev"}, "")
	if err != nil {
		return "", fmt.Errorf("dev credential %s: %w", id, err)
	}
	if err := writeSecretFile(path, c.Secret); err != nil {
		return "", fmt.Errorf("dev credential %s: %w", id, err)
	}
	lg.Info("dev credential issued", zap.String("credential", id), zap.String("role", string(role)), zap.String("file", path))
	return c.Secret, nil
}

// writeSecretFile writes secret to path with mode 0600, replacing the
// file atomically.
func writeSecretFile(path, secret string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".token-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.WriteString(secret + "\n"); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// devAuth makes dev's admin and worker credentials in etcd (their tokens
// in <data dir>/admin.token and worker.token) and writes the "dev" CLI
// context, pointing at server with the admin token file, as the current
// context. It returns the worker token for the in-process workers.
func devAuth(ctx context.Context, lg *zap.Logger, client *clientv3.Client, ns, dataDir, server string) (workerToken string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s := auth.NewStore(client, ns, nil)
	adminFile, err := filepath.Abs(filepath.Join(dataDir, "admin.token"))
	if err != nil {
		return "", err
	}
	if _, err := devCredential(ctx, lg, s, adminFile, devAdminID, api.RoleAdmin); err != nil {
		return "", err
	}
	workerToken, err = devCredential(ctx, lg, s, filepath.Join(dataDir, "worker.token"), devWorkerID, api.RoleWorker)
	if err != nil {
		return "", err
	}
	writeDevContext(lg, devContextName(dataDir), server, adminFile)
	return workerToken, nil
}

// writeDevContext writes CLI context name (server, token file; see
// devContextName). The "dev" context is made current; another dev's only
// when no context is current, so that starting a second dev leaves the
// CLI aimed where it was. Failing to write is not fatal: dev runs, and
// the CLI can be given --server and --token-file instead.
func writeDevContext(lg *zap.Logger, name, server, tokenFile string) {
	cfg, err := loadConfig()
	current := false
	if err == nil {
		c := cfg.Contexts[name]
		c.Server, c.Token, c.TokenFile = server, "", tokenFile
		cfg.Contexts[name] = c
		if name == devContext || cfg.CurrentContext == "" || cfg.CurrentContext == name {
			cfg.CurrentContext, current = name, true
		}
		err = saveConfig(cfg)
	}
	if err != nil {
		lg.Warn("could not write the dev CLI context; pass --server and --token-file to client commands", zap.Error(err),
			zap.String("server", server), zap.String("token_file", tokenFile))
		return
	}
	path, _ := configPath()
	if !current {
		lg.Info("CLI context written; the current context stays: give client commands --context "+name, zap.String("context", name),
			zap.String("current_context", cfg.CurrentContext), zap.String("server", server), zap.String("token_file", tokenFile), zap.String("config", path))
		return
	}
	lg.Info("CLI context written: jobfleet job|cluster|token commands use it", zap.String("context", name),
		zap.String("server", server), zap.String("token_file", tokenFile), zap.String("config", path))
}
