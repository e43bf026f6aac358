package admin

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"
)

// TestPassThroughNeverAcceptsInvalidJSON checks scanObject, which replaced
// json.Valid in passThrough, on random byte strings made of JSON's
// punctuation, literals, numbers and strings, and on valid documents with
// one byte changed, inserted or removed: every document passThrough
// accepts is a JSON object json.Valid accepts, holding none of the words;
// and every compact JSON object without escapes, white space or words
// that json.Marshal writes is accepted.
func TestPassThroughNeverAcceptsInvalidJSON(t *testing.T) {
	tokens := []string{"{", "}", "[", "]", ",", ":", `"`, `\`, `\"`, `\\`, `\/`, `\n`, `\u0041`, `\x`, "a", "Z", "é", "\xff", " ", "\t",
		"true", "false", "null", "tru", "nul", "0", "-", "1", "01", "-0", "1.5", "1.", ".5", "1e5", "1E+5", "1e", "2e-3", "+1",
		`"\x"`, `"\a"`, `"\u"`, `"\\"`, `"k":"\q"`, `"k":"a\x",`, `"k":1`, `"k":"\n",`, `"a"`, `"state"`, `"STATE"`, `"revision"`, `"headers"`, `"Headers"`, `"st\/ate"`, `""`, `"x":`, `{"a":1}`, `[1,2]`, `[]`, `{}`}
	valid := func(t *rapid.T) []byte {
		v := rapid.Custom(func(t *rapid.T) any { return randomJSON(t, 3) }).Draw(t, "value")
		obj := map[string]any{"id": "job", "v": v}
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	rapid.Check(t, func(t *rapid.T) {
		var doc []byte
		switch rapid.IntRange(0, 2).Draw(t, "kind") {
		case 0:
			var b strings.Builder
			b.WriteString("{")
			for range rapid.IntRange(0, 12).Draw(t, "tokens") {
				b.WriteString(rapid.SampledFrom(tokens).Draw(t, "token"))
			}
			b.WriteString("}")
			doc = []byte(b.String())
		case 1:
			doc = valid(t)
			pos := rapid.IntRange(0, len(doc)-1).Draw(t, "pos")
			c := rapid.SampledFrom([]byte(`{}[],:"\ 0-.eE+tfnu1aSH`+"\x00\x1f\x7f\xc5")).Draw(t, "byte")
			switch rapid.IntRange(0, 2).Draw(t, "edit") {
			case 0:
				doc[pos] = c
			case 1:
				doc = append(doc[:pos], append([]byte{c}, doc[pos:]...)...)
			default:
				doc = append(doc[:pos], doc[pos+1:]...)
			}
		default:
			doc = valid(t)
			if !bytes.Contains(doc, []byte(`\`)) && !bytes.Contains(doc, []byte(" ")) && !hasWord(doc, redactedWords) {
				for _, redact := range []bool{false, true} {
					if !passThrough(doc, redact) {
						t.Fatalf("valid compact document refused: %s", doc)
					}
				}
			}
		}
		for _, redact := range []bool{false, true} {
			if !passThrough(doc, redact) {
				continue
			}
			if !json.Valid(doc) || !utf8.Valid(doc) || doc[0] != '{' {
				t.Fatalf("passThrough accepts %q, which is not a valid JSON object", doc)
			}
			words := serverSetWords
			if redact {
				words = redactedWords
			}
			if hasWord(doc, words) {
				t.Fatalf("passThrough (redact %v) accepts %q, which holds a word", redact, doc)
			}
		}
	})
}

// hasWord reports whether JSON document doc holds a string equal to one of
// words, ignoring case, after unescaping.
func hasWord(doc []byte, words [][]byte) bool {
	dec := json.NewDecoder(bytes.NewReader(doc))
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if s, ok := tok.(string); ok {
			for _, w := range words {
				if strings.EqualFold(s, string(w)) {
					return true
				}
			}
		}
	}
}

// randomJSON draws a JSON value (as encoding/json decodes one) nested at
// most depth deep.
func randomJSON(t *rapid.T, depth int) any {
	str := rapid.SampledFrom([]string{"", "a", "x y", "Headers", "state", "revision", "é", "<&>", `q"`, "\n", "日本"})
	kinds := 4
	if depth > 0 {
		kinds = 6
	}
	switch rapid.IntRange(0, kinds-1).Draw(t, "kind") {
	case 0:
		return nil
	case 1:
		return rapid.Bool().Draw(t, "bool")
	case 2:
		return rapid.Float64Range(-1e30, 1e30).Draw(t, "number")
	case 3:
		return str.Draw(t, "string")
	case 4:
		var a []any
		for range rapid.IntRange(0, 3).Draw(t, "len") {
			a = append(a, randomJSON(t, depth-1))
		}
		return a
	default:
		m := map[string]any{}
		for range rapid.IntRange(0, 3).Draw(t, "len") {
			m[str.Draw(t, "key")] = randomJSON(t, depth-1)
		}
		return m
	}
}
