// Package ratelimit implements token-bucket rate limiting keyed by client.
package ratelimit

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrLimited is returned by Wait when the context ends before a token is
// available.
var ErrLimited = errors.New("ratelimit: limited")

// DefaultBurst is the bucket size used when Config.Burst is zero.
const DefaultBurst = 10

// Clock abstracts time for tests.
type Clock interface {
	Now() time.Time
	// After waits for the duration to elapse.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Config tunes a Limiter.
type Config struct {
	// Rate is the number of tokens added per second.
	Rate float64
	// Burst is the bucket size.
	Burst int
	// IdleTTL drops buckets unused for this long.
	IdleTTL time.Duration
	Clock   Clock
}

type bucket struct {
	tokens float64
	last   time.Time
}

// Limiter hands out tokens per key.
type Limiter[K comparable] struct {
	cfg     Config
	mu      sync.Mutex
	buckets map[K]*bucket
}

// New returns a Limiter for cfg.
func New[K comparable](cfg Config) *Limiter[K] {
	if cfg.Burst <= 0 {
		cfg.Burst = DefaultBurst
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	return &Limiter[K]{cfg: cfg, buckets: make(map[K]*bucket)}
}

// refill adds the tokens earned since the bucket was last used.
func (l *Limiter[K]) refill(b *bucket, now time.Time) {
	elapsed := now.Sub(b.last).Seconds()
	if elapsed > 0 {
		b.tokens = min(float64(l.cfg.Burst), b.tokens+elapsed*l.cfg.Rate)
		b.last = now
	}
}

func (l *Limiter[K]) get(key K, now time.Time) *bucket {
	b, ok := l.buckets[key]
	if !ok {
		b = &bucket{tokens: float64(l.cfg.Burst), last: now}
		l.buckets[key] = b
	}
	return b
}

// Allow takes a token for key if one is available.
func (l *Limiter[K]) Allow(key K) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.cfg.Clock.Now()
	b := l.get(key, now)
	l.refill(b, now)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// Wait blocks until a token for key is available or ctx ends.
func (l *Limiter[K]) Wait(ctx context.Context, key K) error {
	for {
		l.mu.Lock()
		now := l.cfg.Clock.Now()
		b := l.get(key, now)
		l.refill(b, now)
		if b.tokens >= 1 {
			b.tokens--
			l.mu.Unlock()
			return nil
		}
		missing := 1 - b.tokens
		l.mu.Unlock()

		wait := time.Duration(missing / l.cfg.Rate * float64(time.Second))
		select {
		case <-ctx.Done():
			return errors.Join(ErrLimited, ctx.Err())
		case <-l.cfg.Clock.After(wait):
		}
	}
}

// Sweep drops buckets idle for longer than Config.IdleTTL and returns how
// many it dropped.
func (l *Limiter[K]) Sweep() int {
	if l.cfg.IdleTTL <= 0 {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.cfg.Clock.Now()
	n := 0
	for k, b := range l.buckets {
		if now.Sub(b.last) > l.cfg.IdleTTL {
			delete(l.buckets, k)
			n++
		}
	}
	return n
}

// Len reports the number of buckets.
func (l *Limiter[K]) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
