package index

import (
	"container/list"
	"sync"
)

// contentCache keeps recently verified file contents in memory, keyed by
// content id. A content id names immutable bytes (a SHA-256), so an entry
// never goes stale; when a file changes, its path gets a new content id.
// Least recently used entries are dropped beyond the byte budget.
type contentCache struct {
	mu    sync.Mutex
	limit int64
	size  int64
	order *list.List // front: most recent; values are *cacheEntry
	byID  map[int64]*list.Element
}

type cacheEntry struct {
	id   int64
	data []byte
}

func newContentCache(limit int64) *contentCache {
	return &contentCache{limit: limit, order: list.New(), byID: map[int64]*list.Element{}}
}

func (c *contentCache) get(id int64) ([]byte, bool) {
	if c.limit <= 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byID[id]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cacheEntry).data, true
}

func (c *contentCache) put(id int64, data []byte) {
	if int64(len(data)) > c.limit/8 {
		return // one huge file must not flush the cache
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byID[id]; ok {
		return
	}
	c.byID[id] = c.order.PushFront(&cacheEntry{id: id, data: data})
	c.size += int64(len(data))
	for c.size > c.limit {
		back := c.order.Back()
		ent := back.Value.(*cacheEntry)
		c.order.Remove(back)
		delete(c.byID, ent.id)
		c.size -= int64(len(ent.data))
	}
}

// readContent returns a path's bytes as the catalog knows them: from the
// cache, or read from the workspace and cached when the file still has the
// catalog's size (a file that changed since indexing is read but not
// cached under its old content id).
func (ix *Index) readContent(path string, e fileEntry) ([]byte, error) {
	c := ix.svc.cache
	if data, ok := c.get(e.content); ok {
		return data, nil
	}
	data, err := ix.fsroot.FS().ReadFile(path)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) == e.size {
		c.put(e.content, data)
	}
	return data, nil
}
