package buildinfo

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Set at link time by release builds (deploy/build.sh); empty otherwise.
var (
	version string
	commit  string
)

// Unknown is the version or commit of a build that recorded none.
const Unknown = "unknown"

// Info describes one build of the jobfleet binary.
type Info struct {
	// Version is the release version (like "v1.4.0"), or the module
	// version the go command recorded ("(devel)" for a work tree).
	Version string `json:"version"`
	// Commit is the VCS revision the binary was built from, or Unknown.
	Commit string `json:"commit"`
	// Modified is true when the go command recorded uncommitted changes
	// in the work tree (never for a release build with link flags).
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
	if info.Version != "" && info.Commit != "" {
		return info
	}
	bi, ok := read()
	if ok {
		if info.Version == "" {
			info.Version = bi.Main.Version
		}
		if info.Commit == "" {
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					info.Commit = s.Value
				case "vcs.modified":
					info.Modified = s.Value == "true"
				}
			}
		}
	}
	if info.Version == "" {
		info.Version = Unknown
	}
	if info.Commit == "" {
		info.Commit, info.Modified = Unknown, false
	}
	return info
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
