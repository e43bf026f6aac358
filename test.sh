#!/usr/bin/env bash
# jobfleet's test command: everything CI runs, in the order CI runs it
# (.ci/run installs the tools some tests need, then runs this script).
# Needs Go; most tests start embedded etcd servers themselves on loopback
# ports. What else a test needs, and where it skips without it:
#
#   etcd, etcdctl  the deployment walkthrough (internal/testkit/walkthrough)
#   openssl        the deploy module's compose test
#   python3        the Python worker (internal/testkit/pyworker); JOBFLEET_PYTHON_TESTS=1 fails without
#   ip (root)      the fault suite's hosts in network namespaces (internal/chaos)
#   chromium       the console's browser tests; JOBFLEET_BROWSER_TESTS=1 fails without
#   podman         the container image test (deploy); JOBFLEET_IMAGE_TESTS=1 fails without
set -euo pipefail
cd "$(dirname "$0")"
# Each step says when it starts, in seconds since this script did, so a
# slow CI run shows where its time went.
step() { echo "== ${SECONDS}s: $*"; }
go version
step gofmt
# Formatting, over the files git tracks or would track (all of them
# outside git).
if git rev-parse --git-dir >/dev/null 2>&1; then
  unformatted=$(git ls-files -z --cached --others --exclude-standard '*.go' | xargs -0 -r gofmt -l)
else
  unformatted=$(gofmt -l .)
fi
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
# The main module, and its portability: everything for macOS, the worker
# library for Windows.
step go vet
go vet ./...
step go vet, GOOS=darwin
GOOS=darwin go vet ./...
GOOS=windows go vet ./dispatch/worker/...
# Every package but the fault suite, then the fault suite alone: its
# fleets of real processes measure failover against deadlines, and on a
# 2-core machine they should not share it with the other packages' fleets.
# It runs without the race detector, whose instrumentation (of the
# processes too: they are built as the test binary is) slows them several
# times and would put the recovery it measures down to the detector; the
# same processes run under it in cmd/jobfleet's process tests and the
# end-to-end tests.
step "go test -race (every package but the fault suite)"
go test -race -count=1 -timeout 60m $(go list ./... | grep -v '/internal/chaos$')
step "go test (the fault suite)"
go test -count=1 -timeout 30m ./internal/chaos/
# The memory budget of a resident job and the worst run of steps: sizes,
# measured without the race detector (which changes what the heap holds,
# and makes the second outlast the package's timeout); and the ring's
# exhaustive tests, one goroutine of arithmetic that the detector has
# nothing to find in and slows some twenty times (they skip under it).
step "go test (sizes and the ring's exhaustive tests)"
go test -count=1 -run '^(TestResidentJobMemory|TestResidentJobKeepsNoKey|TestWorstRunOfStepsFitsItsDocument)$' ./dispatch/
go test -count=1 -run '^(TestRingBoundsLoad|TestRingMovementOnJoin|TestRingIsIndependentOfMemberOrder)$' ./shard/
# The deploy module: the build and release scripts, the container image
# and the deployment files, checked against the binary.
step "the deploy module"
(cd deploy && go vet ./... && go test -count=1 -timeout 20m ./...)
step done
