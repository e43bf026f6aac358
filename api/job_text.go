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

// This file holds the text rules of the API: which strings make a name
// (job IDs, worker IDs, credential prefixes), and how JSON text is checked for what encoding/json accepts
// silently (invalid UTF-8, which it turns into U+FFFD; unpaired surrogate
// escapes; nesting up to its own limit of 10 000 levels).

// validateID checks a job ID; see Job.ID for the rules.
func validateID(id string) error {
	if id == "." || id == ".." {
		return fieldErr("id", "%q is reserved: it cannot be addressed in a URL path", id)
	}
	return ValidateName("id", id, MaxIDBytes)
}

// ValidateName checks s against the rules every name of the API shares
// (job IDs, worker IDs): 1 to maxBytes bytes of UTF-8 that looks like what
// it is, so that two names that look alike are the same name. It applies
// ValidateNameText, and refuses a leading or trailing space and a word
// mixing scripts (see Job.ID). Errors are *FieldError naming field.
func ValidateName(field, s string, maxBytes int) error {
	switch {
	case s == "":
		return fieldErr(field, "required")
	case len(s) > maxBytes:
		return fieldErr(field, "%d bytes long; want at most %d", len(s), maxBytes)
	}
	if err := ValidateNameText(field, s); err != nil {
		return err
	}
	if s[0] == ' ' || s[len(s)-1] == ' ' {
		return fieldErr(field, "%s has leading or trailing white space", quoteClipped(s))
	}
	return checkScripts(field, s)
}

// ValidateNameText checks the characters of s, a name or part of one (a
// credential's job-ID prefix): valid UTF-8, each character visible and
// meaning one thing, and the whole in Unicode normalization form NFKC.
// It refuses, naming the first offending character and its byte offset:
//
//   - control characters (Cc), format characters (Cf: zero-width
//     spaces and joiners, bidirectional controls such as U+202E, the byte
//     order mark, tags), private-use (Co) and unassigned (Cn) code
//     points, noncharacters included;
//   - variation selectors (U+FE00–U+FE0F, U+E0100–U+E01EF, the Mongolian
//     ones), which change only how the character before them is drawn;
//   - the other default-ignorable characters, which render as nothing
//     (U+3164 HANGUL FILLER, U+115F, U+1160, U+FFA0, U+034F COMBINING
//     GRAPHEME JOINER, ...), and characters drawn blank though they are
//     neither white space nor ignorable (U+2800 BRAILLE PATTERN BLANK,
//     U+1D159 MUSICAL SYMBOL NULL NOTEHEAD);
//   - white space other than the plain space U+0020;
//   - a combining mark (M) that follows no letter, digit or other mark:
//     at the start, or after a space, punctuation or a symbol;
//   - text not in NFKC: compatibility characters that look like others
//     (fullwidth "ｂ", mathematical "𝐛", ligatures "ﬁ", "ſ", superscripts,
//     circled letters) and decomposed accents; the message gives the
//     NFKC form, which looks the same or nearly.
//
// Errors are *FieldError naming field.
func ValidateNameText(field, s string) error {
	if !utf8.ValidString(s) {
		return fieldErr(field, "not valid UTF-8")
	}
	prev := rune(-1) // the character before, -1 at the start
	for i, r := range s {
		if msg := charProblem(r, i, prev); msg != "" {
			return fieldErr(field, "%s", msg)
		}
		prev = r
	}
	if !norm.NFC.IsNormalString(s) {
		return fieldErr(field, "%s is not in Unicode normalization form C (NFC); send it as %s, which looks the same", quoteClipped(s), quoteClipped(norm.NFC.String(s)))
	}
	if !norm.NFKC.IsNormalString(s) {
		return fieldErr(field, "%s holds compatibility characters (fullwidth or mathematical letters, ligatures, superscripts, ...) that look like other characters; send it as %s",
			quoteClipped(s), quoteClipped(norm.NFKC.String(s)))
	}
	return nil
}

// blankChars are characters drawn as blank space that are neither white
// space (Z) nor default-ignorable, so no property of package unicode
// names them.
var blankChars = []rune{
	0x2800,  // BRAILLE PATTERN BLANK
	0x1D159, // MUSICAL SYMBOL NULL NOTEHEAD
}

// charProblem says what is wrong with character r at byte i after prev
// (-1 at the start) in a name, or "".
func charProblem(r rune, i int, prev rune) string {
	switch {
	case unicode.IsControl(r):
		return fmt.Sprintf("control character %U at byte %d", r, i)
	case unicode.Is(unicode.Cf, r):
		return fmt.Sprintf("invisible format character %U at byte %d; names must look like what they are", r, i)
	case unicode.Is(unicode.Co, r):
		return fmt.Sprintf("private-use character %U at byte %d: it has no agreed meaning or look", r, i)
	case !assigned(r):
		return fmt.Sprintf("%U at byte %d is not an assigned Unicode character", r, i)
	case unicode.Is(unicode.Variation_Selector, r):
		return fmt.Sprintf("variation selector %U at byte %d: it changes only how the character before it is drawn", r, i)
	case unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r), slices.Contains(blankChars, r):
		return fmt.Sprintf("invisible character %U at byte %d: it is drawn as nothing, or as blank space", r, i)
	case r != ' ' && (unicode.IsSpace(r) || unicode.In(r, unicode.Z)):
		return fmt.Sprintf("white space %U at byte %d; only the plain space U+0020 is allowed", r, i)
	case unicode.Is(unicode.M, r) && prev < 0:
		return fmt.Sprintf("combining mark %U at the start: it has no letter to combine with", r)
	case unicode.Is(unicode.M, r) && !unicode.In(prev, unicode.L, unicode.N, unicode.M):
		return fmt.Sprintf("combining mark %U at byte %d follows %U, which is not a letter or digit", r, i, prev)
	}
	return ""
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
func checkScripts(field, id string) error {
	word := 0 // byte offset of the current word's start
	var scripts []string
	for i, r := range id + " " {
		if !unicode.In(r, unicode.L, unicode.M, unicode.N) {
			if !allowedMix(scripts) {
				return fieldErr(field, "the word %q mixes the %s scripts; letters that look alike across scripts would make look-alike IDs",
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
