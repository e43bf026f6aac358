package layering

import (
	"slices"
	"strings"
	"testing"
)

// leaves are the packages programs outside the fleet import: the API's
// documents, the Go client, the worker library and its HTTP destination
// policy. They must not link the server's dependencies.
var leaves = []string{"api", "client", "dispatch/worker", "egress"}

// serverDeps are import path prefixes of what only the server links:
// etcd (client and server) and gRPC, which etcd's client brings.
var serverDeps = []string{"go.etcd.io/", "google.golang.org/grpc"}

// linksServer returns the dependencies of deps that only the server
// should link.
func linksServer(deps []string) []string {
	var bad []string
	for _, d := range deps {
		if slices.ContainsFunc(serverDeps, func(p string) bool { return strings.HasPrefix(d, p) }) {
			bad = append(bad, d)
		}
	}
	return bad
}

// TestLeavesLinkNoServer fails when `go list -deps` of a leaf package
// (its production code, not its tests) lists etcd or gRPC: a program that
// embeds a worker or calls the API must not pull in the server.
func TestLeavesLinkNoServer(t *testing.T) {
	for _, leaf := range leaves {
		t.Run(leaf, func(t *testing.T) {
			deps := list(t, `{{.ImportPath}}`, "-deps", module+"/"+leaf)
			if !slices.Contains(deps, module+"/"+leaf) || !slices.Contains(deps, "errors") {
				t.Fatalf("go list -deps %s does not list the package itself and errors; got %d packages", leaf, len(deps))
			}
			if bad := linksServer(deps); len(bad) > 0 {
				t.Errorf("%s links %d server packages, among them %s: it must import nothing that imports etcd or gRPC (move the code that needs them to a package a program opts into, as dispatch/worker/etcddiscovery)",
					leaf, len(bad), strings.Join(bad[:min(len(bad), 5)], ", "))
			}
		})
	}
}

// TestLeavesCheckCatchesServerDeps checks the checker: the etcd
// discovery package links etcd and gRPC, and a made-up list is read as
// expected.
func TestLeavesCheckCatchesServerDeps(t *testing.T) {
	deps := list(t, `{{.ImportPath}}`, "-deps", module+"/dispatch/worker/etcddiscovery")
	bad := linksServer(deps)
	if !slices.Contains(bad, "go.etcd.io/etcd/client/v3") || !slices.ContainsFunc(bad, func(d string) bool { return strings.HasPrefix(d, "google.golang.org/grpc") }) {
		t.Errorf("linksServer of etcddiscovery's deps = %q, want etcd's client and gRPC among them", bad)
	}
	got := linksServer([]string{"encoding/json", "go.etcd.io/etcd/api/v3/mvccpb", "google.golang.org/grpc/codes", "google.golang.org/protobuf/proto", "github.com/jobfleet/jobfleet/api"})
	want := []string{"go.etcd.io/etcd/api/v3/mvccpb", "google.golang.org/grpc/codes"}
	if !slices.Equal(got, want) {
		t.Errorf("linksServer = %q, want %q", got, want)
	}
}
