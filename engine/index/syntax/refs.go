package syntax

import (
	"slices"
	"strings"
	"sync"
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

// collectorPool recycles collectors, whose map and slices would otherwise
// be regrown for every file. Collectors that grew past maxPooledNames are
// dropped: clearing a large map costs as much as building a small one.
var collectorPool = sync.Pool{New: func() any {
	return &refCollector{ids: make(map[string]int32, 256), occ: make([]refOcc, 0, 1024)}
}}

const maxPooledNames = 1 << 12

func getRefCollector() *refCollector {
	return collectorPool.Get().(*refCollector)
}

// release returns rc to the pool; rc must not be used afterwards.
func (rc *refCollector) release() {
	if len(rc.names) > maxPooledNames || cap(rc.occ) > 64*maxPooledNames {
		return
	}
	clear(rc.ids)
	clear(rc.names) // drop the strings for the garbage collector
	rc.names = rc.names[:0]
	rc.occ = rc.occ[:0]
	collectorPool.Put(rc)
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
// lines. The result shares no memory with rc.
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
