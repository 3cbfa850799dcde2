/*
 * hashmap.c - an open-addressing hash map from strings to pointers.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"

#define HM_MIN_CAPACITY 16
#define HM_MAX_LOAD(cap) ((cap) * 3 / 4)
#define HM_TOMBSTONE ((void *)-1)

struct hm_entry {
	char *key;
	void *value;
	uint64_t hash;
};

/* The map itself: entries, live count and tombstone count. */
struct hashmap {
	struct hm_entry *entries;
	size_t capacity;
	size_t count;
	size_t tombstones;
	hm_free_fn free_value;
};

typedef enum {
	HM_OK = 0,
	HM_ENOMEM,
	HM_ENOTFOUND,
} hm_status;

static size_t hm_live_maps = 0;

/* FNV-1a, 64 bit. */
static uint64_t hm_hash(const char *key)
{
	uint64_t h = 14695981039346656037ULL;
	for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
		h ^= *p;
		h *= 1099511628211ULL;
	}
	return h;
}

struct hashmap *hashmap_new(hm_free_fn free_value)
{
	struct hashmap *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->entries = calloc(HM_MIN_CAPACITY, sizeof(struct hm_entry));
	if (!m->entries) {
		free(m);
		return NULL;
	}
	m->capacity = HM_MIN_CAPACITY;
	m->free_value = free_value;
	hm_live_maps++;
	return m;
}

static struct hm_entry *hm_find(struct hm_entry *entries, size_t cap, const char *key, uint64_t hash)
{
	size_t i = hash & (cap - 1);
	struct hm_entry *tomb = NULL;
	for (;;) {
		struct hm_entry *e = &entries[i];
		if (e->key == NULL) {
			if (e->value != HM_TOMBSTONE)
				return tomb ? tomb : e;
			if (!tomb)
				tomb = e;
		} else if (e->hash == hash && strcmp(e->key, key) == 0) {
			return e;
		}
		i = (i + 1) & (cap - 1);
	}
}

static hm_status hm_grow(struct hashmap *m)
{
	size_t cap = m->capacity * 2;
	struct hm_entry *entries = calloc(cap, sizeof(struct hm_entry));
	if (!entries)
		return HM_ENOMEM;
	for (size_t i = 0; i < m->capacity; i++) {
		struct hm_entry *e = &m->entries[i];
		if (e->key == NULL)
			continue;
		struct hm_entry *dst = hm_find(entries, cap, e->key, e->hash);
		*dst = *e;
	}
	free(m->entries);
	m->entries = entries;
	m->capacity = cap;
	m->tombstones = 0;
	return HM_OK;
}

int hashmap_put(struct hashmap *m, const char *key, void *value)
{
	if (m->count + m->tombstones + 1 > HM_MAX_LOAD(m->capacity)) {
		if (hm_grow(m) != HM_OK)
			return -1;
	}
	uint64_t hash = hm_hash(key);
	struct hm_entry *e = hm_find(m->entries, m->capacity, key, hash);
	if (e->key != NULL) {
		if (m->free_value)
			m->free_value(e->value);
		e->value = value;
		return 0;
	}
	if (e->value == HM_TOMBSTONE)
		m->tombstones--;
	e->key = strdup(key);
	if (!e->key)
		return -1;
	e->value = value;
	e->hash = hash;
	m->count++;
	return 0;
}

void *hashmap_get(const struct hashmap *m, const char *key)
{
	struct hm_entry *e = hm_find(m->entries, m->capacity, key, hm_hash(key));
	return e->key ? e->value : NULL;
}

int hashmap_remove(struct hashmap *m, const char *key)
{
	struct hm_entry *e = hm_find(m->entries, m->capacity, key, hm_hash(key));
	if (!e->key)
		return HM_ENOTFOUND;
	free(e->key);
	if (m->free_value)
		m->free_value(e->value);
	e->key = NULL;
	e->value = HM_TOMBSTONE;
	m->count--;
	m->tombstones++;
	return HM_OK;
}

void hashmap_free(struct hashmap *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->capacity; i++) {
		struct hm_entry *e = &m->entries[i];
		if (e->key) {
			free(e->key);
			if (m->free_value)
				m->free_value(e->value);
		}
	}
	free(m->entries);
	free(m);
	hm_live_maps--;
}
