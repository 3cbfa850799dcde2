package replay

import (
	"hash/fnv"
	"math"
	"strings"
	"unicode"
)

// EmbedDimension is the length of every vector Embed returns.
const EmbedDimension = 256

// embedText returns the hashed bag-of-words vector of s: s is lower-cased
// and cut into words (runs of letters and digits); each word adds +1 or -1
// (a second hash bit picks the sign) at position FNV-1a(word) mod
// EmbedDimension; the sum is scaled to unit length. Text without words
// gets the zero vector.
func embedText(s string) []float32 {
	v := make([]float32, EmbedDimension)
	words := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	for _, w := range words {
		h := fnv.New64a()
		h.Write([]byte(w))
		sum := h.Sum64()
		sign := float32(1)
		if sum>>63 == 1 {
			sign = -1
		}
		v[sum%EmbedDimension] += sign
	}
	var norm float64
	for _, x := range v {
		norm += float64(x) * float64(x)
	}
	if norm == 0 {
		return v
	}
	scale := float32(1 / math.Sqrt(norm))
	for i := range v {
		v[i] *= scale
	}
	return v
}
