package api

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// This file holds the text rules of the job document: which strings make
// a job ID, and how JSON text is checked for what encoding/json accepts
// silently (invalid UTF-8, which it turns into U+FFFD; unpaired surrogate
// escapes; nesting up to its own limit of 10 000 levels).

// validateID checks a job ID; see Job.ID for the rules.
func validateID(id string) error {
	switch {
	case id == "":
		return fieldErr("id", "required")
	case len(id) > MaxIDBytes:
		return fieldErr("id", "%d bytes long; want at most %d", len(id), MaxIDBytes)
	case !utf8.ValidString(id):
		return fieldErr("id", "not valid UTF-8")
	case id == "." || id == "..":
		return fieldErr("id", "%q is reserved: it cannot be addressed in a URL path", id)
	}
	for i, r := range id {
		switch {
		case unicode.IsControl(r):
			return fieldErr("id", "control character %U at byte %d", r, i)
		case unicode.Is(unicode.Cf, r):
			return fieldErr("id", "invisible format character %U at byte %d; IDs must look like what they are", r, i)
		case r != ' ' && (unicode.IsSpace(r) || unicode.In(r, unicode.Z)):
			return fieldErr("id", "white space %U at byte %d; only the plain space U+0020 is allowed", r, i)
		case !assigned(r):
			return fieldErr("id", "%U at byte %d is not an assigned Unicode character", r, i)
		}
	}
	if id[0] == ' ' || id[len(id)-1] == ' ' {
		return fieldErr("id", "%q has leading or trailing white space", id)
	}
	if !norm.NFC.IsNormalString(id) {
		return fieldErr("id", "%q is not in Unicode normalization form C (NFC); send it as %q, which looks the same", id, norm.NFC.String(id))
	}
	return checkScripts(id)
}

// assigned reports whether r is an assigned character (not in general
// category Cn, which also holds the noncharacters such as U+FFFE) in the
// Unicode version of the Go release.
func assigned(r rune) bool {
	return !unicode.Is(unicode.Cn, r)
}

// scriptSets are the combinations of scripts one word of an ID may mix:
// those of Unicode's "highly restrictive" identifier profile (UTS #39),
// which a language needs: Japanese, Chinese and Korean with Latin.
var scriptSets = [][]string{
	{"Latin", "Han", "Hiragana", "Katakana"},
	{"Latin", "Han", "Bopomofo"},
	{"Latin", "Han", "Hangul"},
}

// checkScripts refuses an ID one of whose words (runs of letters, marks
// and digits) mixes scripts, as "pаypal" with a Cyrillic "а" does, other
// than in the combinations of scriptSets. Words in different scripts
// ("отчёт-daily") are fine. Whole-script look-alikes ("рау" in Cyrillic
// against "pay" in Latin) are distinct IDs: see Job.ID.
func checkScripts(id string) error {
	word := 0 // byte offset of the current word's start
	var scripts []string
	for i, r := range id + " " {
		if !unicode.In(r, unicode.L, unicode.M, unicode.N) {
			if !allowedMix(scripts) {
				return fieldErr("id", "the word %q mixes the %s scripts; letters that look alike across scripts would make look-alike IDs",
					id[word:i], strings.Join(scripts, " and "))
			}
			word, scripts = i+utf8.RuneLen(r), scripts[:0]
			continue
		}
		if s := scriptOf(r); s != "" && !slices.Contains(scripts, s) {
			scripts = append(scripts, s)
		}
	}
	return nil
}

func allowedMix(scripts []string) bool {
	if len(scripts) < 2 {
		return true
	}
	for _, set := range scriptSets {
		all := true
		for _, s := range scripts {
			all = all && slices.Contains(set, s)
		}
		if all {
			return true
		}
	}
	return false
}

// scriptOf returns the Unicode script of r, or "" for the Common and
// Inherited scripts (digits, punctuation, combining marks), which go with
// any script.
func scriptOf(r rune) string {
	switch {
	case r < utf8.RuneSelf:
		if unicode.IsLetter(r) {
			return "Latin"
		}
		return ""
	case unicode.In(r, unicode.Common, unicode.Inherited):
		return ""
	case unicode.Is(unicode.Latin, r):
		return "Latin"
	}
	for name, table := range unicode.Scripts {
		if unicode.Is(table, r) {
			return name
		}
	}
	return ""
}

// checkJSONText checks raw JSON text for what encoding/json accepts
// silently: bytes that are not UTF-8 anywhere, "\u" escapes of unpaired
// UTF-16 surrogates, and nesting deeper than maxDepth (0: not checked).
// It returns the byte offset of the first problem and a message, or -1.
// It assumes nothing about the text's validity as JSON otherwise.
func checkJSONText(raw []byte, maxDepth int) (offset int, msg string) {
	depth, inString := 0, false
	for i := 0; i < len(raw); {
		c := raw[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				return i, fmt.Sprintf("byte 0x%02X is not valid UTF-8", c)
			}
			i += size
			continue
		}
		switch {
		case inString && c == '"':
			inString = false
		case inString && c == '\\' && i+1 < len(raw) && raw[i+1] == 'u':
			n, msg := checkEscape(raw[i:])
			if msg != "" {
				return i, msg
			}
			i += n
			continue
		case inString && c == '\\':
			i += 2
			continue
		case inString:
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			if maxDepth > 0 && depth > maxDepth {
				return i, fmt.Sprintf("nested more than %d levels deep", maxDepth)
			}
		case c == '}' || c == ']':
			depth--
		}
		i++
	}
	return -1, ""
}

// checkEscape checks the "\uXXXX" escape at the start of s (and the low
// surrogate escape that must follow a high one); it returns the bytes
// the escape(s) take, or a message.
func checkEscape(s []byte) (int, string) {
	r, ok := hexRune(s)
	switch {
	case !ok:
		return 2, "" // malformed: left to the JSON parser
	case utf16.IsSurrogate(r) && r >= 0xDC00:
		return 0, fmt.Sprintf(`"\u%04x" is an unpaired UTF-16 surrogate, not a character`, r)
	case utf16.IsSurrogate(r):
		low, ok := hexRune(s[6:])
		if !ok || utf16.DecodeRune(r, low) == unicode.ReplacementChar {
			return 0, fmt.Sprintf(`"\u%04x" is an unpaired UTF-16 surrogate, not a character`, r)
		}
		return 12, ""
	}
	return 6, ""
}

// hexRune reads "\uXXXX" at the start of s.
func hexRune(s []byte) (rune, bool) {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return 0, false
	}
	n, err := strconv.ParseUint(string(s[2:6]), 16, 32)
	return rune(n), err == nil
}
