package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/jobfleet/jobfleet/internal/settings"
)

// writtenValues returns the values of the YAML mapping data by key, as
// they are written (the nodes of a YAML parser that keeps the text), for
// literal. A document that is not a mapping gives no values.
func writtenValues(data []byte) (map[string]*yamlv3.Node, error) {
	var root yamlv3.Node
	if err := yamlv3.Unmarshal(data, &root); err != nil {
		return nil, err
	}
	out := map[string]*yamlv3.Node{}
	if root.Kind != yamlv3.DocumentNode || len(root.Content) != 1 || root.Content[0].Kind != yamlv3.MappingNode {
		return out, nil
	}
	m := root.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		out[m.Content[i].Value] = m.Content[i+1]
	}
	return out, nil
}

// literal refuses a plain (unquoted) scalar of a config file that YAML
// 1.1, which reads the file, takes for a boolean or a number although
// it is not written as docs/configuration.md says they are: a boolean is
// true or false (not yes, on, y or True: `namespace: no` would be the
// string "false"), a number is decimal (not 0x10, 010, 1e3 or 1_000,
// which YAML 1.1 reads as 16, 8, 1000 and 1000). v is the value YAML 1.1
// read, n the value as written (nil if unknown), f the flag it is for. A
// quoted value is a string, as written.
func literal(v any, n *yamlv3.Node, f *pflag.Flag) error {
	if n == nil || n.Kind != yamlv3.ScalarNode || n.Style != 0 {
		return nil
	}
	quote := fmt.Sprintf("quote it (%s) for the text", strconv.Quote(n.Value))
	switch v := v.(type) {
	case bool:
		if n.Value == "true" || n.Value == "false" {
			return nil
		}
		if f.Value.Type() == "bool" {
			quote = "write true or false"
		}
		return fmt.Errorf("%s is read by YAML as the boolean %v: %s", n.Value, v, quote)
	case json.Number:
		if settings.IsDecimal(n.Value) {
			return nil
		}
		if k := settings.Kind(f); k == "an integer" || k == "a number" {
			quote = fmt.Sprintf("write numbers in decimal (%s)", v)
		}
		return fmt.Errorf("%s is read by YAML as the number %s: %s", n.Value, v, quote)
	}
	return nil
}

// reason is what a flag's refusal of a config file's value adds to "is
// not <kind>": nothing for the parse errors of the standard library
// (strconv.ParseInt: parsing "lots": invalid syntax), which say no more,
// else ": " and the flag's own rule.
func reason(err error) string {
	var ne *strconv.NumError
	if errors.As(err, &ne) || strings.HasPrefix(err.Error(), "time: ") {
		return ""
	}
	return ": " + err.Error()
}
