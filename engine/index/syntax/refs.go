package syntax

import (
	"slices"
	"strings"
)

// refCollector aggregates identifier occurrences into Refs with few
// allocations: one map entry per distinct name, one slice of occurrences,
// and one backing array shared by all Refs' Lines.
type refCollector struct {
	ids   map[string]int32
	names []string
	occ   []refOcc
}

type refOcc struct{ id, line int32 }

func newRefCollector(sizeHint int) *refCollector {
	return &refCollector{
		ids: make(map[string]int32, sizeHint/64+8),
		occ: make([]refOcc, 0, sizeHint/16+16),
	}
}

// add records name on 1-based line.
func (rc *refCollector) add(name string, line int) {
	id, ok := rc.ids[name]
	if !ok {
		id = int32(len(rc.names))
		rc.ids[name] = id
		rc.names = append(rc.names, name)
	}
	rc.occ = append(rc.occ, refOcc{id, int32(line)})
}

// addBytes records name on 1-based line, copying name only the first
// time it is seen.
func (rc *refCollector) addBytes(name []byte, line int) {
	id, ok := rc.ids[string(name)]
	if !ok {
		s := string(name)
		id = int32(len(rc.names))
		rc.ids[s] = id
		rc.names = append(rc.names, s)
	}
	rc.occ = append(rc.occ, refOcc{id, int32(line)})
}

// refs returns the Refs sorted by name, with ascending, deduplicated
// lines.
func (rc *refCollector) refs() []Ref {
	if len(rc.names) == 0 {
		return nil
	}
	order := make([]int32, len(rc.names))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return strings.Compare(rc.names[a], rc.names[b]) })
	// rank[id] is the position of id in order; start[rank] is where its
	// lines begin in the backing array.
	rank := make([]int32, len(rc.names))
	for r, id := range order {
		rank[id] = int32(r)
	}
	start := make([]int32, len(rc.names)+1)
	for _, o := range rc.occ {
		start[rank[o.id]+1]++
	}
	for r := 1; r < len(start); r++ {
		start[r] += start[r-1]
	}
	backing := make([]int32, len(rc.occ))
	fill := slices.Clone(start[:len(rc.names)])
	for _, o := range rc.occ {
		r := rank[o.id]
		backing[fill[r]] = o.line
		fill[r]++
	}
	out := make([]Ref, len(rc.names))
	for r, id := range order {
		lines := backing[start[r]:start[r+1]]
		if !slices.IsSorted(lines) {
			slices.Sort(lines)
		}
		lines = slices.Compact(lines)
		out[r] = Ref{Name: rc.names[id], Lines: lines[:len(lines):len(lines)]}
	}
	return out
}
