package com.example.cache;

import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Function;

/**
 * A thread-safe least-recently-used cache with a fixed capacity and
 * optional per-entry expiry.
 *
 * @param <K> the key type
 * @param <V> the value type
 */
public class LruCache<K, V> implements Cache<K, V> {
    public static final int DEFAULT_CAPACITY = 256;

    /** Statistics about cache use. */
    public record Stats(long hits, long misses, long evictions) {
        public double hitRate() {
            long total = hits + misses;
            return total == 0 ? 0.0 : (double) hits / total;
        }
    }

    public enum EvictionReason {
        CAPACITY,
        EXPIRED,
        EXPLICIT;

        public boolean wasAutomatic() {
            return this != EXPLICIT;
        }
    }

    @FunctionalInterface
    public interface Listener<K, V> {
        void onEvict(K key, V value, EvictionReason reason);
    }

    private static final class Node<K, V> {
        final K key;
        V value;
        long expiresAt;
        Node<K, V> prev, next;

        Node(K key, V value, long expiresAt) {
            this.key = key;
            this.value = value;
            this.expiresAt = expiresAt;
        }
    }

    private final int capacity;
    private final Map<K, Node<K, V>> index = new HashMap<>();
    private final ReentrantLock lock = new ReentrantLock();
    private final Clock clock;
    private Node<K, V> head, tail;
    private Listener<K, V> listener = (k, v, r) -> {};
    private long hits, misses, evictions;

    public LruCache() {
        this(DEFAULT_CAPACITY, System::nanoTime);
    }

    public LruCache(int capacity, Clock clock) {
        if (capacity <= 0) {
            throw new IllegalArgumentException("capacity must be positive: " + capacity);
        }
        this.capacity = capacity;
        this.clock = Objects.requireNonNull(clock);
    }

    public void setListener(Listener<K, V> listener) {
        this.listener = Objects.requireNonNull(listener);
    }

    @Override
    public Optional<V> get(K key) {
        lock.lock();
        try {
            Node<K, V> node = index.get(key);
            if (node == null) {
                misses++;
                return Optional.empty();
            }
            if (node.expiresAt != 0 && node.expiresAt <= clock.now()) {
                unlink(node);
                index.remove(key);
                evictions++;
                listener.onEvict(node.key, node.value, EvictionReason.EXPIRED);
                misses++;
                return Optional.empty();
            }
            moveToFront(node);
            hits++;
            return Optional.of(node.value);
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void put(K key, V value, long ttlNanos) {
        lock.lock();
        try {
            long expiresAt = ttlNanos > 0 ? clock.now() + ttlNanos : 0;
            Node<K, V> node = index.get(key);
            if (node != null) {
                node.value = value;
                node.expiresAt = expiresAt;
                moveToFront(node);
                return;
            }
            node = new Node<>(key, value, expiresAt);
            index.put(key, node);
            pushFront(node);
            if (index.size() > capacity) {
                Node<K, V> victim = tail;
                unlink(victim);
                index.remove(victim.key);
                evictions++;
                listener.onEvict(victim.key, victim.value, EvictionReason.CAPACITY);
            }
        } finally {
            lock.unlock();
        }
    }

    public V computeIfAbsent(K key, Function<? super K, ? extends V> loader) {
        return get(key).orElseGet(() -> {
            V value = loader.apply(key);
            put(key, value, 0);
            return value;
        });
    }

    public Stats stats() {
        lock.lock();
        try {
            return new Stats(hits, misses, evictions);
        } finally {
            lock.unlock();
        }
    }

    private void moveToFront(Node<K, V> node) {
        if (node == head) {
            return;
        }
        unlink(node);
        pushFront(node);
    }

    private void pushFront(Node<K, V> node) {
        node.prev = null;
        node.next = head;
        if (head != null) {
            head.prev = node;
        }
        head = node;
        if (tail == null) {
            tail = node;
        }
    }

    private void unlink(Node<K, V> node) {
        if (node.prev != null) {
            node.prev.next = node.next;
        } else {
            head = node.next;
        }
        if (node.next != null) {
            node.next.prev = node.prev;
        } else {
            tail = node.prev;
        }
        node.prev = node.next = null;
    }

    /** A source of monotonic time in nanoseconds. */
    public interface Clock {
        long now();
    }
}
