package settings

import (
	"bytes"
	"encoding/csv"
	"strings"

	"github.com/spf13/pflag"
)

// StringsVar defines flag name of fs, a list of strings of type T bound
// to p with default value, read and printed as pflag's string slices are
// (comma separated, CSV quoting; a repeated flag adds to the list, the
// first one replacing the default).
func StringsVar[T ~string](fs *pflag.FlagSet, p *[]T, name string, value []T, usage string) {
	*p = value
	fs.Var(&stringsValue[T]{p: p}, name, usage)
}

// stringsValue is a pflag.Value and pflag.SliceValue of a list of T.
type stringsValue[T ~string] struct {
	p       *[]T
	changed bool
}

func (s *stringsValue[T]) Set(v string) error {
	list, err := readCSV(v)
	if err != nil {
		return err
	}
	if !s.changed {
		*s.p = nil
	}
	for _, e := range list {
		*s.p = append(*s.p, T(e))
	}
	s.changed = true
	return nil
}

func (s *stringsValue[T]) Type() string { return "stringSlice" }

func (s *stringsValue[T]) String() string {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write(s.GetSlice())
	w.Flush()
	return "[" + strings.TrimSuffix(b.String(), "\n") + "]"
}

// Append adds v to the list (pflag.SliceValue).
func (s *stringsValue[T]) Append(v string) error {
	*s.p = append(*s.p, T(v))
	return nil
}

// Replace replaces the list with vs (pflag.SliceValue).
func (s *stringsValue[T]) Replace(vs []string) error {
	*s.p = make([]T, len(vs))
	for i, v := range vs {
		(*s.p)[i] = T(v)
	}
	return nil
}

// GetSlice returns the list (pflag.SliceValue).
func (s *stringsValue[T]) GetSlice() []string {
	out := make([]string, len(*s.p))
	for i, v := range *s.p {
		out[i] = string(v)
	}
	return out
}

func readCSV(v string) ([]string, error) {
	if v == "" {
		return nil, nil
	}
	return csv.NewReader(strings.NewReader(v)).Read()
}
