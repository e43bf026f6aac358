// Package deploy holds no code of the product: it is the module of the
// tests that check jobfleet's build and deployment files (the build and
// release scripts, the container image, Kubernetes manifests, the Helm
// chart, systemd units, the compose file, Prometheus rules, the Grafana
// dashboard and docs/deploy.md) against the jobfleet binary built from this repository.
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
// and probe schemes with TLS; alert rules and the Grafana dashboard's
// queries parse and name only metrics the binary defines; unit files pass systemd-analyze verify where it exists.
// build.sh and release.sh, run on a tagged throwaway copy of the
// repository, make static binaries reporting the tag and commit, with a
// SHA256SUMS that matches them. Where podman is installed (CI installs it
// and sets JOBFLEET_IMAGE_TESTS=1, which makes its absence a failure),
// the Containerfile's image is built with image.sh, without a registry,
// and runs `jobfleet dev` until /healthz and /readyz answer.
//
// Not guaranteed: that the Dockerfile's images build (their base images
// come from registries these tests do not reach), or that a Kubernetes
// cluster admits the objects (no API server validates them here).
package deploy
