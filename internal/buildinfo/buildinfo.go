package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Set at link time by deploy/build.sh (from git describe and git
// rev-parse, or from its VERSION and COMMIT); empty otherwise.
var (
	version string
	commit  string
)

// Unknown is the version or commit of a build that recorded none.
const Unknown = "unknown"

// Info describes one build of the jobfleet binary.
type Info struct {
	// Version is the version from git tags: "v1.4.0" for a build of the
	// tagged commit, "v1.4.0-3-g0123abc" (deploy/build.sh) or
	// "v1.4.1-0.20261201093000-0123456789ab" (go build) after it, with a
	// "-dirty" or "+dirty" suffix for a work tree with uncommitted
	// changes; "(devel)" when the go command recorded none.
	Version string `json:"version"`
	// Commit is the VCS revision the binary was built from, or Unknown.
	Commit string `json:"commit"`
	// Modified is true when the build had uncommitted changes: the go
	// command recorded them, or the version says "dirty".
	Modified bool `json:"modified,omitempty"`
	// GoVersion is the Go release that built the binary ("go1.26.8").
	GoVersion string `json:"go_version"`
	// Platform is GOOS/GOARCH ("linux/amd64").
	Platform string `json:"platform"`
}

// Get returns the running binary's build information. It is safe for
// concurrent use.
func Get() Info {
	return from(version, commit, debug.ReadBuildInfo)
}

// from builds the Info of a binary linked with version v and commit c
// (empty: not set), reading the go command's record with read.
func from(v, c string, read func() (*debug.BuildInfo, bool)) Info {
	info := Info{Version: v, Commit: c, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if info.Version == "" || info.Commit == "" {
		fromRecord(&info, read)
	}
	if info.Version == "" {
		info.Version = Unknown
	}
	if info.Commit == "" {
		info.Commit, info.Modified = Unknown, false
	}
	if strings.HasSuffix(info.Version, "-dirty") || strings.HasSuffix(info.Version, "+dirty") {
		info.Modified = true
	}
	return info
}

// fromRecord fills the version and the commit that info lacks from the go
// command's record, read with read.
func fromRecord(info *Info, read func() (*debug.BuildInfo, bool)) {
	bi, ok := read()
	if !ok {
		return
	}
	if info.Version == "" {
		info.Version = bi.Main.Version
	}
	if info.Commit != "" {
		return
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
}

// Collector returns the gauge jobfleet_build_info, always 1, labelled with
// version, commit and go_version: a dashboard or alert sees which build
// each member and worker runs (during a rolling upgrade, both).
func Collector() prometheus.Collector {
	info := Get()
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "jobfleet_build_info",
		Help: "Always 1; the labels say which build this process runs.",
		ConstLabels: prometheus.Labels{
			"version":    info.Version,
			"commit":     info.Commit,
			"go_version": info.GoVersion,
		},
	}, func() float64 { return 1 })
}
