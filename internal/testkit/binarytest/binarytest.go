// Package binarytest builds the jobfleet binary for tests that run it as
// real processes (cmd/jobfleet's process tests, the chaos suite).
package binarytest

import (
	"fmt"
	"os/exec"
	"runtime/debug"
)

// Package is the import path of the jobfleet command.
const Package = "github.com/jobfleet/jobfleet/cmd/jobfleet"

// Build builds the jobfleet binary into out with `go build`, with the race
// detector if the calling test binary has it, so that the processes are
// checked too and the build cache is shared. It returns the build's
// output with the error.
func Build(out string) error {
	goTool, err := exec.LookPath("go") // go test puts its own go first in PATH
	if err != nil {
		return fmt.Errorf("binarytest: no go command to build with: %w", err)
	}
	args := []string{"build", "-o", out}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" && s.Value == "true" {
				args = append(args, "-race")
			}
		}
	}
	cmd := exec.Command(goTool, append(args, Package)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %v: %v\n%s", args, err, b)
	}
	return nil
}
