package syntax

// The tree-sitter Go binding installs an allocator that sends every
// malloc, calloc, realloc and free the C library makes back into Go,
// which then calls the C allocator: two cgo crossings per allocation, and
// tree-sitter allocates per node. Restoring tree-sitter's default (the C
// library's allocator, the same one the binding ends up calling) halves
// parse time. Memory allocated before the switch is freed by the same C
// free either way.

/*
#include <stddef.h>

// From tree_sitter/api.h, compiled into github.com/tree-sitter/go-tree-sitter.
void ts_set_allocator(
	void *(*new_malloc)(size_t),
	void *(*new_calloc)(size_t, size_t),
	void *(*new_realloc)(void *, size_t),
	void (*new_free)(void *));

static void plexus_ts_default_allocator(void) {
	ts_set_allocator(NULL, NULL, NULL, NULL);
}
*/
import "C"

// useDefaultAllocator makes tree-sitter allocate with the C library
// directly. loadLang calls it once. It would break a program that gave
// tree-sitter.SetAllocator functions of its own; nothing in this module
// does.
func useDefaultAllocator() { C.plexus_ts_default_allocator() }
