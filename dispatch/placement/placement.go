package placement

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Bounds of labels and selectors. Kubernetes bounds each key (a name of
// at most 63 characters, with an optional DNS subdomain prefix of at most
// 253) and each value (at most 63 characters); these bound the rest.
const (
	// MaxLabels is the most labels a worker registers.
	MaxLabels = 32
	// MaxSelectorBytes is the longest selector, of a job's placement or
	// of a worker credential.
	MaxSelectorBytes = 1024
)

// ErrInvalid is matched (errors.Is) by every error of Parse,
// ValidateLabels and ParseLabels.
var ErrInvalid = errors.New("invalid placement")

// Selector is a parsed label selector. The zero value is the empty
// selector, which allows every label set. Selectors are immutable and
// safe for concurrent use.
type Selector struct {
	sel  labels.Selector // nil: the empty selector
	text string
}

// Parse parses text, a label selector in Kubernetes' syntax
// ("pool=gpu,region in (eu-west,eu-central),!spot"); surrounding blanks
// are ignored, and "" is the empty selector. The error wraps ErrInvalid
// and says what is wrong, without naming a field (callers prefix theirs).
func Parse(text string) (Selector, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return Selector{}, nil
	}
	if len(text) > MaxSelectorBytes {
		return Selector{}, fmt.Errorf("%w: %d bytes long; want at most %d", ErrInvalid, len(text), MaxSelectorBytes)
	}
	sel, err := labels.Parse(text)
	if err != nil {
		return Selector{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if sel.Empty() {
		return Selector{}, nil
	}
	return Selector{sel: sel, text: text}, nil
}

// MustParse is Parse for selectors known to be valid (tests, constants);
// it panics on an invalid one.
func MustParse(text string) Selector {
	s, err := Parse(text)
	if err != nil {
		panic(err)
	}
	return s
}

// Empty reports whether s is the empty selector (it allows everything).
func (s Selector) Empty() bool { return s.sel == nil }

// String returns the selector as it was written (blanks around it
// trimmed), "" for the empty one.
func (s Selector) String() string { return s.text }

// Allows reports whether a worker with labels l may run what s selects.
func (s Selector) Allows(l map[string]string) bool {
	return s.sel == nil || s.sel.Matches(labels.Set(l))
}

// Allows reports whether a worker with labels l may run a job whose
// placement selector is selector (see Parse). A selector that does not
// parse allows nothing: what is stored was validated, so an invalid one
// is corruption, and placement fails closed.
func Allows(selector string, l map[string]string) bool {
	s, err := Parse(selector)
	return err == nil && s.Allows(l)
}

// ValidateLabels checks a worker's labels: at most MaxLabels, each key a
// Kubernetes qualified name ("pool", "example.com/gpu") and each value a
// Kubernetes label value (at most 63 characters of letters, digits, '-',
// '_' and '.', starting and ending with a letter or digit, or empty). The
// error wraps ErrInvalid and names the first bad key, in key order.
func ValidateLabels(l map[string]string) error {
	if len(l) > MaxLabels {
		return fmt.Errorf("%w: %d labels; want at most %d", ErrInvalid, len(l), MaxLabels)
	}
	for _, k := range slices.Sorted(maps.Keys(l)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("%w: key %s: %s", ErrInvalid, quote(k), strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(l[k]); len(errs) > 0 {
			return fmt.Errorf("%w: value of %s: %s", ErrInvalid, quote(k), strings.Join(errs, "; "))
		}
	}
	return nil
}

// ParseLabels parses "key=value,key=value" (the --labels flag) with the
// labels package, refusing a key given twice, then checks the result
// with ValidateLabels. "" is no labels (an empty, non-nil map).
func ParseLabels(text string) (map[string]string, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return map[string]string{}, nil
	}
	set, err := labels.ConvertSelectorToLabelsMap(text)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if parts := strings.Count(text, ",") + 1; parts != len(set) {
		seen := map[string]bool{}
		for p := range strings.SplitSeq(text, ",") {
			k, _, _ := strings.Cut(p, "=")
			k = strings.TrimSpace(k)
			if seen[k] {
				return nil, fmt.Errorf("%w: key %s is given twice", ErrInvalid, quote(k))
			}
			seen[k] = true
		}
	}
	m := map[string]string(set)
	if err := ValidateLabels(m); err != nil {
		return nil, err
	}
	return m, nil
}

// FormatLabels returns l as "key=value,key=value", keys in order: what
// ParseLabels reads back; "" for none.
func FormatLabels(l map[string]string) string {
	return labels.Set(l).String() // sorted by key
}

// quote quotes a key for a message, cut to 64 bytes: keys are bounded,
// but not yet when they are refused.
func quote(s string) string {
	if len(s) > 64 {
		return fmt.Sprintf("%q… (%d bytes)", s[:64], len(s))
	}
	return fmt.Sprintf("%q", s)
}
