package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestFrom(t *testing.T) {
	stamped := &debug.BuildInfo{
		Main: debug.Module{Path: "github.com/jobfleet/jobfleet", Version: "(devel)"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	installed := &debug.BuildInfo{Main: debug.Module{Path: "github.com/jobfleet/jobfleet", Version: "v1.2.3"}}
	// go build in a checkout of tag v1.2.3 with an edited file: the go
	// command's version and its record of the change.
	taggedDirty := &debug.BuildInfo{
		Main: debug.Module{Path: "github.com/jobfleet/jobfleet", Version: "v1.2.3+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	afterTag := &debug.BuildInfo{
		Main: debug.Module{Path: "github.com/jobfleet/jobfleet", Version: "v1.2.4-0.20261201093000-0123456789ab"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef"},
			{Key: "vcs.modified", Value: "false"},
		},
	}
	for _, tt := range []struct {
		name           string
		version        string
		commit         string
		read           *debug.BuildInfo
		want           Info
		wantReadCalled bool
	}{
		{name: "link flags win", version: "v2.0.0", commit: "feedface", read: stamped,
			want: Info{Version: "v2.0.0", Commit: "feedface"}},
		{name: "work tree build", read: stamped,
			want: Info{Version: "(devel)", Commit: "0123456789abcdef", Modified: true}},
		{name: "version from link flags, commit from VCS", version: "v2.0.0", read: stamped,
			want: Info{Version: "v2.0.0", Commit: "0123456789abcdef", Modified: true}},
		{name: "go install of a tag", read: installed,
			want: Info{Version: "v1.2.3", Commit: Unknown}},
		{name: "go build of a tagged checkout with changes", read: taggedDirty,
			want: Info{Version: "v1.2.3+dirty", Commit: "0123456789abcdef", Modified: true}},
		{name: "go build after a tag", read: afterTag,
			want: Info{Version: "v1.2.4-0.20261201093000-0123456789ab", Commit: "0123456789abcdef"}},
		{name: "build.sh of a work tree with changes", version: "v1.2.3-2-g0123abc-dirty", commit: "0123456789abcdef", read: afterTag,
			want: Info{Version: "v1.2.3-2-g0123abc-dirty", Commit: "0123456789abcdef", Modified: true}},
		{name: "dirty version without a commit", version: "v1.2.3-dirty", read: nil,
			want: Info{Version: "v1.2.3-dirty", Commit: Unknown, Modified: true}},
		{name: "no build information", read: nil,
			want: Info{Version: Unknown, Commit: Unknown}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := from(tt.version, tt.commit, func() (*debug.BuildInfo, bool) { return tt.read, tt.read != nil })
			tt.want.GoVersion = runtime.Version()
			tt.want.Platform = runtime.GOOS + "/" + runtime.GOARCH
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestCollector(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(Collector())
	info := Get()
	want := `# HELP jobfleet_build_info Always 1; the labels say which build this process runs.
# TYPE jobfleet_build_info gauge
jobfleet_build_info{commit="` + info.Commit + `",go_version="` + info.GoVersion + `",version="` + info.Version + `"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "jobfleet_build_info"); err != nil {
		t.Error(err)
	}
}
