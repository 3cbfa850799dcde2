//go:build !race

package goroot

// Race reports whether the race detector is on. Under it the index runs
// several times slower (the evaluation's vector stages alone take over ten
// minutes on two cores), so the evaluation leaves those stages out.
const Race = false
