package index

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Identifier splitting and the BM25 tokenizer.
//
// Code is tokenised into identifier-like runs ([A-Za-z0-9_] and other
// letters); each run is split into words at case changes, underscores,
// hyphens and digit boundaries ("HTTPServerError" → http server error,
// "parse_time2" → parse time 2), lower-cased and stemmed. A run that splits
// into several words also yields its whole lower-cased form ("readfile"),
// so a query naming the identifier exactly scores higher.

// splitWords calls fn with each word of an identifier, lower-cased, in
// order. Acronyms stay together ("HTTPServer" → http, server).
func splitWords(ident string, fn func(word string)) {
	start := -1
	var prev rune
	var prevClass int
	emit := func(end int) {
		if start >= 0 && end > start {
			fn(strings.ToLower(ident[start:end]))
		}
		start = -1
	}
	for i, r := range ident {
		class := runeClass(r)
		if class == classOther {
			emit(i)
			prevClass = class
			continue
		}
		if start < 0 {
			start = i
		} else if class != prevClass {
			switch {
			case prevClass == classLower && class == classUpper, // readFile
				prevClass == classDigit || class == classDigit: // file2, 2nd
				emit(i)
				start = i
			case prevClass == classUpper && class == classLower:
				// "HTTPServer": the S starts the next word.
				if j := i - utf8.RuneLen(prev); j > start {
					emit(j)
					start = j
				}
			}
		}
		prev, prevClass = r, class
	}
	emit(len(ident))
}

const (
	classOther = iota
	classLower
	classUpper
	classDigit
)

func runeClass(r rune) int {
	switch {
	case 'a' <= r && r <= 'z':
		return classLower
	case 'A' <= r && r <= 'Z':
		return classUpper
	case '0' <= r && r <= '9':
		return classDigit
	case r < utf8.RuneSelf:
		return classOther
	case unicode.IsUpper(r):
		return classUpper
	case unicode.IsLetter(r):
		return classLower
	case unicode.IsDigit(r):
		return classDigit
	}
	return classOther
}

// isIdentByte reports whether b can be part of an identifier run (bytes of
// multi-byte UTF-8 runes count, and splitWords sorts them out).
func isIdentByte(b byte) bool {
	return b == '_' || b >= utf8.RuneSelf || ('a' <= b && b <= 'z') || ('A' <= b && b <= 'Z') || ('0' <= b && b <= '9')
}

// forEachIdent calls fn with each identifier-like run of text.
func forEachIdent(text []byte, fn func(ident string)) {
	forEachIdentBytes(text, func(b []byte) { fn(string(b)) })
}

// forEachIdentBytes is forEachIdent without a string per run: fn's
// argument is a window of text.
func forEachIdentBytes(text []byte, fn func(ident []byte)) {
	i := 0
	for i < len(text) {
		if !isIdentByte(text[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(text) && isIdentByte(text[j]) {
			j++
		}
		if j-i <= maxIdentLen {
			fn(text[i:j])
		}
		i = j
	}
}

// maxIdentLen skips longer runs (base64, hashes): they are not words.
const maxIdentLen = 64

// forEachTerm calls fn with each BM25 term of text, in order.
func forEachTerm(text []byte, fn func(term string)) {
	forEachIdent(text, func(ident string) {
		termsOfIdent(ident, fn)
	})
}

// termCache remembers the terms of each identifier met, so that a file
// (whose identifiers repeat) splits and stems each once. Not safe for
// concurrent use; one per goroutine.
type termCache map[string][]string

// forEachTerm is the package's forEachTerm, through the cache.
func (c termCache) forEachTerm(text []byte, fn func(term string)) {
	forEachIdentBytes(text, func(b []byte) {
		terms, ok := c[string(b)] // no allocation for the lookup
		if !ok {
			ident := string(b)
			termsOfIdent(ident, func(t string) { terms = append(terms, t) })
			c[ident] = terms
		}
		for _, t := range terms {
			fn(t)
		}
	})
}

// termsOfIdent calls fn with the terms of one identifier: its stemmed
// words and, when it has more than one, the whole identifier.
func termsOfIdent(ident string, fn func(term string)) {
	n := 0
	splitWords(ident, func(w string) {
		n++
		if len(w) < 2 || stopwords[w] {
			return
		}
		fn(stem(w))
	})
	if n > 1 {
		fn(strings.ToLower(strings.ReplaceAll(ident, "_", "")))
	}
}

// queryTerms returns the distinct terms of a natural-language query.
func queryTerms(q string) []string {
	var out []string
	seen := map[string]bool{}
	forEachTerm([]byte(q), func(t string) {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	})
	return out
}

// stem removes common English inflections, conservatively: "-ies" → "-y",
// "-es" after s/x/z/ch/sh, "-s" (not "-ss", "-us", "-is"), "-ing" and
// "-ed" when at least three letters remain. It is a light stemmer in the
// spirit of Harman's S-stemmer (1991), extended to -ing/-ed; it only has to
// map a word and its inflections to one term.
func stem(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 4 && strings.HasSuffix(w, "es") &&
		(strings.HasSuffix(w[:len(w)-2], "s") || strings.HasSuffix(w[:len(w)-2], "x") || strings.HasSuffix(w[:len(w)-2], "z") ||
			strings.HasSuffix(w[:len(w)-2], "ch") || strings.HasSuffix(w[:len(w)-2], "sh")):
		return w[:len(w)-2]
	case len(w) > 3 && w[len(w)-1] == 's' && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		return w[:len(w)-1]
	case len(w) > 5 && strings.HasSuffix(w, "ing"):
		return w[:len(w)-3]
	case len(w) > 4 && strings.HasSuffix(w, "ed"):
		return w[:len(w)-2]
	}
	return w
}

// stopwords are English function words that carry no meaning in a query.
var stopwords = map[string]bool{
	"a": true, "an": true, "the": true, "and": true, "or": true, "of": true, "to": true, "in": true,
	"is": true, "it": true, "its": true, "for": true, "on": true, "with": true, "as": true, "by": true,
	"be": true, "this": true, "that": true, "are": true, "at": true, "from": true, "was": true,
	"were": true, "which": true, "will": true, "can": true, "has": true, "have": true, "into": true,
	"than": true, "then": true, "there": true, "these": true, "those": true, "such": true, "any": true,
}
