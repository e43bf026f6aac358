package main

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// cell returns s made safe to print in one cell of a table on a terminal:
// control characters (including newlines and tabs, which would break the
// table), the bidirectional-text controls that can reorder what a
// terminal shows, and invalid UTF-8 bytes are written as escapes (\x1b,
// \u202e, \xff). Data read from the API (IDs, errors, worker IDs) goes
// through it, so that it cannot move the cursor, recolour or retitle the
// reader's terminal. JSON output (-o json) is escaped by its encoder
// instead.
func cell(s string) string { return escapeText(s, false) }

// text is cell for free text printed on lines of its own (error
// messages): newlines and tabs are kept.
func text(s string) string { return escapeText(s, true) }

func escapeText(s string, keepLines bool) string {
	if !needsEscape(s, keepLines) {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&sb, `\x%02x`, s[i])
		case keepLines && (r == '\n' || r == '\t'):
			sb.WriteRune(r)
		case r < 0x80 && unsafeRune(r):
			fmt.Fprintf(&sb, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&sb, `\u%04x`, r)
		default:
			sb.WriteString(s[i : i+n])
		}
		i += n
	}
	return sb.String()
}

func needsEscape(s string, keepLines bool) bool {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return true
			}
		}
		if unsafeRune(r) && !(keepLines && (r == '\n' || r == '\t')) {
			return true
		}
	}
	return false
}

// unsafeRune reports whether r is a C0 or C1 control character, DEL, or a
// bidirectional-text control (embedding, override or isolate).
func unsafeRune(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r <= 0x9f) ||
		(r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}
