// Package deploy holds no code of the product: it is the module of the
// tests that check jobfleet's deployment files (the container build,
// Kubernetes manifests, the Helm chart, systemd units, the compose file,
// Prometheus rules and docs/deploy.md) against the jobfleet binary built
// from this repository.
//
// It is a module of its own so that the Kubernetes, Helm and Prometheus
// libraries the tests decode and render with stay out of jobfleet's
// module. Run its tests from this directory: `go test ./...`.
//
// Guarantees (what the tests check): every manifest and every rendering
// of the chart decodes strictly into the Kubernetes API types (an unknown
// or misspelt field fails); every flag, JOBFLEET_* variable and config
// file key given to the binary in any of these files is one the binary
// has, for the command it is given to, with a value of the flag's type,
// and the binary accepts the settings together (`jobfleet orchestrator
// --config=FILE ... --print-config` and the worker's exit 0, with the
// placeholders a runner expands replaced); probes, container ports
// and Service ports agree with the --listen and --metrics-listen flags,
// and probe schemes with TLS; alert rules parse and name only metrics the
// binary defines; unit files pass systemd-analyze verify where it exists.
//
// Not guaranteed: that the container image builds (no container engine
// runs these tests), or that a Kubernetes cluster admits the objects
// (no API server validates them here).
package deploy
