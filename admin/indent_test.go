package admin

import (
	"bytes"
	"encoding/json"
	"testing"

	"pgregory.net/rapid"
)

// jsonValue draws a random JSON value: nested objects and arrays (empty
// ones too) of strings with quotes, backslashes, escapes and brackets in
// them, numbers, booleans and null.
func jsonValue(depth int) *rapid.Generator[any] {
	return rapid.Custom(func(t *rapid.T) any {
		kind := rapid.IntRange(0, 5).Draw(t, "kind")
		if depth == 0 {
			kind %= 4
		}
		switch kind {
		case 0:
			return rapid.SampledFrom([]string{"", `"`, `\`, `\\"`, `a\"b`, `q",:{[ ]}`, `a",:"b`, `c",{"d`, "{[,:]}", "é\u2028<&>", "\x00\n\t", "x y"}).Draw(t, "string") + rapid.String().Draw(t, "tail")
		case 1:
			return rapid.Float64().Draw(t, "number")
		case 2:
			return rapid.Bool().Draw(t, "bool")
		case 3:
			return nil
		case 4:
			return rapid.SliceOfN(jsonValue(depth-1), 0, 4).Draw(t, "array")
		default:
			return rapid.MapOfN(rapid.String(), jsonValue(depth-1), 0, 4).Draw(t, "object")
		}
	})
}

// TestIndentReplyMatchesJSONIndent checks that replies are indented byte
// for byte as json.Indent indents them, compact or not, and that the
// growth limit is kept.
func TestIndentReplyMatchesJSONIndent(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		body, err := json.Marshal(jsonValue(4).Draw(t, "value"))
		if err != nil {
			t.Skip(err) // NaN and infinities
		}
		if rapid.Bool().Draw(t, "spaced") {
			var spaced bytes.Buffer
			if err := json.Indent(&spaced, body, " ", "\t"); err != nil {
				t.Fatal(err)
			}
			body = spaced.Bytes()
		}
		var want bytes.Buffer
		if err := json.Indent(&want, body, "", "  "); err != nil {
			t.Fatal(err)
		}
		limit := want.Len() + rapid.IntRange(-2, 2).Draw(t, "slack")
		if rapid.Bool().Draw(t, "unlimited") {
			limit = indentMaxBytes
		}
		got := indentReply(body, limit)
		switch {
		case want.Len() > limit && got != nil:
			t.Fatalf("indented %d bytes over the limit of %d", len(got), limit)
		case want.Len() <= limit && !bytes.Equal(got, want.Bytes()):
			t.Fatalf("%s indented as\n%s\nwant\n%s", body, got, want.Bytes())
		}
	})
}
