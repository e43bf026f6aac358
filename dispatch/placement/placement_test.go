package placement

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"pgregory.net/rapid"
)

func TestAllows(t *testing.T) {
	gpuEU := map[string]string{"pool": "gpu", "region": "eu-west"}
	tests := []struct {
		selector string
		labels   map[string]string
		want     bool
	}{
		{"", nil, true},
		{"", gpuEU, true},
		{"   ", nil, true},
		{"pool=gpu", gpuEU, true},
		{"pool==gpu", gpuEU, true},
		{"pool=cpu", gpuEU, false},
		{"pool=gpu", nil, false},
		{"pool!=cpu", gpuEU, true},
		{"pool!=cpu", nil, true}, // a missing key is not equal to cpu
		{"pool", gpuEU, true},
		{"!pool", gpuEU, false},
		{"!spot", gpuEU, true},
		{"!spot", nil, true},
		{"pool=gpu,region in (eu-west,eu-central),!spot", gpuEU, true},
		{"pool=gpu,region in (eu-west,eu-central),!spot", map[string]string{"pool": "gpu", "region": "eu-central", "spot": "true"}, false},
		{"pool=gpu,region in (eu-west,eu-central)", map[string]string{"pool": "gpu", "region": "us-east"}, false},
		{"region notin (us-east)", gpuEU, true},
		{"region notin (us-east)", nil, true},
		{"region notin (eu-west)", gpuEU, false},
		{"example.com/gpu=a100", map[string]string{"example.com/gpu": "a100"}, true},
		{"pool=", map[string]string{"pool": ""}, true},
		{"pool=", gpuEU, false},
		// Not a selector: allows nothing, whatever the labels.
		{"pool=gpu,", gpuEU, false},
		{"pool in gpu", gpuEU, false},
		{"po ol=gpu", gpuEU, false},
		{"pool=" + strings.Repeat("x", 64), gpuEU, false},
		{strings.Repeat("a", MaxSelectorBytes+1), nil, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q/%s", tt.selector, FormatLabels(tt.labels)), func(t *testing.T) {
			if got := Allows(tt.selector, tt.labels); got != tt.want {
				t.Errorf("Allows(%q, %v) = %v, want %v", tt.selector, tt.labels, got, tt.want)
			}
		})
	}
}

func TestParse(t *testing.T) {
	for _, bad := range []string{"pool=gpu,", "pool in gpu", "=gpu", "pool=gpu)", "pool in (a b)", strings.Repeat("k", MaxSelectorBytes+1)} {
		if _, err := Parse(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	s, err := Parse("  pool=gpu , !spot ")
	if err != nil {
		t.Fatal(err)
	}
	if s.Empty() || s.String() != "pool=gpu , !spot" {
		t.Errorf("Parse: Empty %v, String %q; want false, the text trimmed", s.Empty(), s.String())
	}
	if e, _ := Parse(""); !e.Empty() || e.String() != "" || !e.Allows(nil) {
		t.Errorf("Parse(\"\") = %+v, want the empty selector", e)
	}
	var zero Selector
	if !zero.Allows(map[string]string{"a": "b"}) {
		t.Error("the zero Selector refuses a label set; want it to allow everything")
	}
}

func TestParseLabels(t *testing.T) {
	tests := []struct {
		in   string
		want map[string]string
		err  string // in the error; "" for none
	}{
		{"", map[string]string{}, ""},
		{"pool=gpu,region=eu-west", map[string]string{"pool": "gpu", "region": "eu-west"}, ""},
		{" pool = gpu , zone=a ", map[string]string{"pool": "gpu", "zone": "a"}, ""},
		{"example.com/tier=", map[string]string{"example.com/tier": ""}, ""},
		{"pool=gpu,pool=cpu", nil, `key "pool" is given twice`},
		{"pool", nil, "invalid"},
		{"pool=a=b", nil, "invalid"},
		{"-pool=gpu", nil, "-pool"},
		{"pool=" + strings.Repeat("v", 64), nil, "63"},
		{"pool=gp u", nil, "gp u"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseLabels(tt.in)
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("ParseLabels(%q): %v", tt.in, err)
			case tt.err != "" && (err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("ParseLabels(%q) = %v, %v; want an ErrInvalid error with %q", tt.in, got, err, tt.err)
			case tt.err == "" && !maps.Equal(got, tt.want):
				t.Fatalf("ParseLabels(%q) = %v, want %v", tt.in, got, tt.want)
			}
			if tt.err == "" {
				back, err := ParseLabels(FormatLabels(got))
				if err != nil || !maps.Equal(back, got) {
					t.Errorf("ParseLabels(FormatLabels(%v)) = %v, %v; want the same labels", got, back, err)
				}
			}
		})
	}
	many := map[string]string{}
	for i := range MaxLabels + 1 {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	if err := ValidateLabels(many); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "at most 32") {
		t.Errorf("ValidateLabels of %d labels = %v, want a refusal naming the bound", len(many), err)
	}
	delete(many, "k0")
	if err := ValidateLabels(many); err != nil {
		t.Errorf("ValidateLabels of %d labels: %v", len(many), err)
	}
}

// requirement is one generated requirement of a selector, with its own
// meaning (holds), independent of the labels package.
type requirement struct {
	key, op string
	values  []string
}

func (r requirement) String() string {
	switch r.op {
	case "exists":
		return r.key
	case "!exists":
		return "!" + r.key
	case "in", "notin":
		return r.key + " " + r.op + " (" + strings.Join(r.values, ",") + ")"
	}
	return r.key + r.op + r.values[0]
}

func (r requirement) holds(l map[string]string) bool {
	v, ok := l[r.key]
	switch r.op {
	case "exists":
		return ok
	case "!exists":
		return !ok
	case "=", "==":
		return ok && v == r.values[0]
	case "!=":
		return !ok || v != r.values[0]
	case "in":
		return ok && slices.Contains(r.values, v)
	case "notin":
		return !ok || !slices.Contains(r.values, v)
	}
	panic(r.op)
}

// TestAllowsProperty: for random selectors over a few keys and values,
// and random label sets over the same, Allows agrees with the labels
// package's own Matches, and with the meaning of each requirement
// written out by hand (all of them hold).
func TestAllowsProperty(t *testing.T) {
	keys := []string{"pool", "region", "spot", "example.com/tier"}
	values := []string{"gpu", "cpu", "eu-west", "eu-central", "", "a"}
	rapid.Check(t, func(t *rapid.T) {
		l := rapid.MapOfN(rapid.SampledFrom(keys), rapid.SampledFrom(values), 0, len(keys)).Draw(t, "labels")
		reqs := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) requirement {
			r := requirement{key: rapid.SampledFrom(keys).Draw(t, "key"), op: rapid.SampledFrom([]string{"=", "==", "!=", "in", "notin", "exists", "!exists"}).Draw(t, "op")}
			switch r.op {
			case "in", "notin":
				r.values = rapid.SliceOfNDistinct(rapid.SampledFrom(values[:4]), 1, 3, rapid.ID[string]).Draw(t, "values")
			case "=", "==", "!=":
				r.values = []string{rapid.SampledFrom(values).Draw(t, "value")}
			}
			return r
		}), 0, 4).Draw(t, "requirements")
		texts := make([]string, len(reqs))
		want := true
		for i, r := range reqs {
			texts[i] = r.String()
			want = want && r.holds(l)
		}
		text := strings.Join(texts, ",")
		sel, err := labels.Parse(text)
		if err != nil {
			t.Fatalf("labels.Parse(%q): %v", text, err)
		}
		if got, theirs := Allows(text, l), sel.Matches(labels.Set(l)); got != theirs || got != want {
			t.Fatalf("selector %q, labels %v: Allows %v, labels' Matches %v, the requirements' meaning %v", text, l, got, theirs, want)
		}
		if s, err := Parse(text); err != nil || s.Allows(l) != want {
			t.Fatalf("Parse(%q).Allows(%v) = %v (%v), want %v", text, l, s.Allows(l), err, want)
		}
	})
}
