package admin

import (
	"bytes"
	"encoding/json"
)

// indentReply returns body, the JSON of a reply, indented as
// json.Indent(dst, body, "", "  ") does, or nil if that would be longer
// than limit bytes. body must be valid JSON: the fast path does not check.
//
// Bodies this package encodes (json.Marshal's output, or the listing's
// documents checked by passThrough) hold no white space outside strings,
// and for them the indentation is done by copying strings whole instead of
// running json's scanner on every byte, which costs several times less on
// a page of a thousand jobs. Anything else goes to json.Indent.
func indentReply(body []byte, limit int) []byte {
	if out, ok := indentCompact(make([]byte, 0, max(0, min(limit, 2*len(body)))), body, limit); ok {
		return out
	}
	var indented bytes.Buffer
	if json.Indent(&indented, body, "", "  ") != nil || indented.Len() > limit {
		return nil
	}
	return indented.Bytes()
}

// indentCompact appends src, indented with two spaces, to dst, as
// appendIndent in encoding/json does, but without validating src. It
// reports false (leaving the work to json.Indent) on white space outside
// a string, an unterminated string, unbalanced brackets or output longer
// than limit. Given valid compact JSON, its output is json.Indent's.
func indentCompact(dst, src []byte, limit int) ([]byte, bool) {
	depth, open := 0, false // open: after '{' or '[', before their first value
	newline := func() {
		dst = append(dst, '\n')
		for range depth {
			dst = append(dst, ' ', ' ')
		}
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		if open && c != '}' && c != ']' {
			open = false
			depth++
			newline()
		}
		switch c {
		case '"':
			end := i + 1
			for {
				k := bytes.IndexByte(src[end:], '"')
				if k < 0 {
					return nil, false
				}
				end += k
				backslashes := 0
				for b := end - 1; b > i && src[b] == '\\'; b-- {
					backslashes++
				}
				if backslashes%2 == 0 {
					break
				}
				end++
			}
			dst = append(dst, src[i:end+1]...)
			i = end
		case '{', '[':
			open = true
			dst = append(dst, c)
		case ',':
			dst = append(dst, c)
			newline()
		case ':':
			dst = append(dst, ':', ' ')
		case '}', ']':
			if open {
				open = false
			} else {
				depth--
				if depth < 0 {
					return nil, false
				}
				newline()
			}
			dst = append(dst, c)
		case ' ', '\t', '\n', '\r':
			return nil, false
		default:
			dst = append(dst, c)
		}
		if len(dst) > limit {
			return nil, false
		}
	}
	return dst, depth == 0 && !open
}
