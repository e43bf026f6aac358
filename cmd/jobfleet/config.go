package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/jobfleet/jobfleet/internal/settings"
)

// settingsOf is the configuration of a long-running command (dev,
// orchestrator, worker): one struct whose fields every flag of the
// command binds into, with their defaults.
type settingsOf interface {
	// addFlags defines the command's flags in fs, bound to the fields.
	addFlags(fs *pflag.FlagSet)
	// validate checks every setting, starting nothing and reading no
	// file: the one check a command makes before it starts anything.
	validate() error
	// withDefaults returns a copy whose zero settings are replaced by the
	// values they stand for (what --print-config shows).
	withDefaults() settingsOf
}

// The flags every long-running command has besides its settings.
const (
	configFlag      = "config"
	printConfigFlag = "print-config"
)

// addSettings defines cfg's flags on cmd, and --config and
// --print-config.
func addSettings(cmd *cobra.Command, cfg settingsOf) {
	fs := cmd.Flags()
	cfg.addFlags(fs)
	fs.String(configFlag, "", "read settings from this YAML file, keyed by flag name (docs/configuration.md); JOBFLEET_* variables and flags override it")
	fs.Bool(printConfigFlag, false, "print the effective settings as YAML (loadable with --config; secrets masked) and exit without starting anything")
}

// settle completes cfg before cmd starts anything: it reads --config (the
// environment was applied already, see bindEnv), validates every setting,
// and with --print-config prints the effective settings. printed says
// that the command is done.
func settle(cmd *cobra.Command, cfg settingsOf) (printed bool, err error) {
	fs := cmd.Flags()
	if path, _ := fs.GetString(configFlag); path != "" {
		if err := loadConfigFile(fs, path); err != nil {
			return false, err
		}
	}
	if err := cfg.validate(); err != nil {
		return false, explain(fs, err)
	}
	if p, _ := fs.GetBool(printConfigFlag); !p {
		return false, nil
	}
	return true, printConfig(cmd.OutOrStdout(), cmd, fs, cfg.withDefaults())
}

// fileAnnotation marks a flag that loadConfigFile set; its value is the
// file's path.
const fileAnnotation = "jobfleet-from-file"

// fromFile returns the config file flag f was set from, "" if it was not.
func fromFile(f *pflag.Flag) string {
	if v := f.Annotations[fileAnnotation]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// fileKey reports whether flag f may be a config file key: a setting,
// not --config, --print-config, --help or a hidden (test) flag.
func fileKey(f *pflag.Flag) bool {
	return !f.Hidden && f.Name != configFlag && f.Name != printConfigFlag && f.Name != "help"
}

// loadConfigFile sets the flags of fs that neither the command line nor
// the environment set from the YAML file at path: a mapping of flag names
// to values (a list for a list flag). It refuses, naming the file, the
// key and the rule, a file that is not such a mapping, a key that is no
// flag of the command (or a duplicate), and a value the flag does not
// take.
func loadConfigFile(fs *pflag.FlagSet, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("config file %s: "+format, append([]any{path}, args...)...)
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return bad("not YAML: %v", err)
	}
	var doc map[string]json.RawMessage
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return nil // empty, or comments only
	}
	if err := json.Unmarshal(js, &doc); err != nil {
		return bad("want a mapping of settings (flag names) to values, like lease-ttl: 5s")
	}
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		f := fs.Lookup(key)
		if f == nil || !fileKey(f) {
			return bad("key %s: unknown setting: the keys are the names of this command's flags (see --help)", key)
		}
		values, list, err := fileValues(doc[key], f)
		if err != nil {
			return bad("key %s: %v", key, err)
		}
		if f.Changed {
			continue // the environment or the command line gave it: they win
		}
		if err := setFlag(f, values, list); err != nil {
			return bad("key %s: %q is not a %s: %v", key, strings.Join(values, ","), f.Value.Type(), err)
		}
		f.Changed = true
		if f.Annotations == nil {
			f.Annotations = map[string][]string{}
		}
		f.Annotations[fileAnnotation] = []string{path}
	}
	return nil
}

// fileValues reads a config file's value for flag f: a scalar, or (list)
// a YAML list for a list flag.
func fileValues(raw json.RawMessage, f *pflag.Flag) (values []string, list bool, err error) {
	_, isList := f.Value.(pflag.SliceValue)
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, false, err
	}
	scalar := func(v any) (string, error) {
		switch v := v.(type) {
		case string:
			return v, nil
		case json.Number:
			return v.String(), nil
		case bool:
			return strconv.FormatBool(v), nil
		case nil:
			return "", errors.New("no value (remove the key to keep the default)")
		default:
			return "", fmt.Errorf("want a single value, not %s", kindOf(v))
		}
	}
	if entries, ok := v.([]any); ok {
		if !isList {
			return nil, false, fmt.Errorf("want a single %s, not a list", f.Value.Type())
		}
		out := make([]string, 0, len(entries))
		for _, e := range entries {
			s, err := scalar(e)
			if err != nil {
				return nil, false, err
			}
			out = append(out, s)
		}
		return out, true, nil
	}
	s, err := scalar(v)
	if err != nil {
		return nil, false, err
	}
	return []string{s}, false, nil
}

func kindOf(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("%T", v)
}

// setFlag gives flag f the values of a config file's key: a list flag
// takes a YAML list as its list, and reads a single value as the flag
// does (comma separated); any other flag takes the one value.
func setFlag(f *pflag.Flag, values []string, list bool) error {
	if sv, ok := f.Value.(pflag.SliceValue); ok && list {
		for _, v := range values {
			if strings.TrimSpace(v) != v || v == "" {
				return fmt.Errorf("list entry %q: empty, or with surrounding spaces", v)
			}
		}
		return sv.Replace(values)
	}
	return f.Value.Set(values[0])
}

// explain rewrites a validation error that names a setting
// (*settings.Error) to say where its value came from: a flag, an
// environment variable, a config file's key, or the default. Other
// errors are returned as they are.
func explain(fs *pflag.FlagSet, err error) error {
	var se *settings.Error
	if !errors.As(err, &se) {
		return err
	}
	f := fs.Lookup(se.Key)
	value := settings.FormatValue(se.Value)
	switch {
	case f == nil:
		return fmt.Errorf("%s %s: %s", se.Key, value, se.Rule)
	case fromFile(f) != "":
		return fmt.Errorf("config file %s: key %s: %s: %s", fromFile(f), se.Key, value, se.Rule)
	case fromEnv(f):
		return fmt.Errorf("%s=%s: %s", envName(f.Name), value, se.Rule)
	case f.Changed:
		return fmt.Errorf("--%s %s: %s", f.Name, value, se.Rule)
	default:
		return fmt.Errorf("--%s %s (its default): %s", f.Name, value, se.Rule)
	}
}

// printConfig writes cfg's settings as YAML keyed by flag name, in the
// order of the names: what --config reads back. The flags of cmd say
// where each value came from (in a comment) and which are secrets: a
// secret that is set is written as a comment, without its value.
func printConfig(w io.Writer, cmd *cobra.Command, fs *pflag.FlagSet, cfg settingsOf) error {
	effective := pflag.NewFlagSet(cmd.Name(), pflag.ContinueOnError)
	cfg.addFlags(effective)
	var b strings.Builder
	fmt.Fprintf(&b, "# The effective settings of `%s`: the defaults, then --config FILE,\n", cmd.CommandPath())
	b.WriteString("# then JOBFLEET_* variables, then flags. Load it with --config FILE.\n")
	var names []string
	effective.VisitAll(func(f *pflag.Flag) {
		if orig := fs.Lookup(f.Name); orig != nil && fileKey(orig) {
			names = append(names, f.Name)
		}
	})
	slices.Sort(names)
	for _, name := range names {
		f, orig := effective.Lookup(name), fs.Lookup(name)
		source := ""
		switch {
		case fromFile(orig) != "":
			source = "  # from " + fromFile(orig)
		case fromEnv(orig):
			source = "  # from " + envName(name)
		case orig.Changed:
			source = "  # from --" + name
		}
		if settings.IsSecret(orig) && f.Value.String() != "" {
			fmt.Fprintf(&b, "# %s: not shown: a secret (give it with %s, not in a file others may read)%s\n", name, envName(name), source)
			continue
		}
		v, err := yamlValue(f)
		if err != nil {
			return fmt.Errorf("--print-config: --%s: %w", name, err)
		}
		fmt.Fprintf(&b, "%s: %s%s\n", name, v, source)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// yamlValue writes f's value as YAML: numbers and booleans as they are,
// lists as flow sequences, everything else as a quoted string.
func yamlValue(f *pflag.Flag) (string, error) {
	var v any
	switch f.Value.Type() {
	case "bool", "int", "int64", "uint", "uint64", "float64":
		return f.Value.String(), nil
	default:
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			list := sv.GetSlice()
			if list == nil {
				list = []string{}
			}
			v = list
		} else {
			v = f.Value.String()
		}
	}
	out, err := json.Marshal(v) // JSON is YAML, quoted where it must be
	return string(out), err
}
