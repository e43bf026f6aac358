package buildinfo_test

import (
	"fmt"
	"strings"

	"github.com/jobfleet/jobfleet/internal/buildinfo"
)

func ExampleGet() {
	info := buildinfo.Get()
	// A test binary carries no link flags: its version comes from the go
	// command's record, or is "unknown".
	fmt.Println(info.Version != "", strings.HasPrefix(info.GoVersion, "go"))
	// Output: true true
}
