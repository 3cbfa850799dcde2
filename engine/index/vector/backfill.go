package vector

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/plexus-agent/plexus/engine"
)

// Backfill defaults.
const (
	// DefaultBatchSize is the number of inputs per Embed call.
	DefaultBatchSize = 32
	// DefaultMaxInputChars caps each input at 6,000 characters (Unicode
	// code points). Source code runs about 3 to 4 characters a token, so
	// that is some 1,500 to 2,000 tokens: inside the 2,048-token window
	// Ollama gives embedding models by default and far inside the 8,191
	// tokens OpenAI's embedding models accept, so a provider neither
	// rejects the batch nor silently embeds only a different prefix. The
	// head of a very long chunk (its signature, doc comment and first
	// lines) is what best says what it is about.
	DefaultMaxInputChars = 6000
)

// Item is one chunk to embed: Hash identifies its text (the Store key, for
// example SHA-256 of Text) and Text is what the model embeds.
type Item struct {
	Hash [32]byte
	Text string
}

// BackfillOptions tunes Backfill; the zero value means the defaults.
type BackfillOptions struct {
	// BatchSize is the number of inputs per Embed call (default
	// DefaultBatchSize).
	BatchSize int
	// MaxInputChars cuts longer texts to their first MaxInputChars
	// characters before embedding (default DefaultMaxInputChars; negative
	// means no limit). The vector is stored under the item's hash all the
	// same.
	MaxInputChars int
	// StoreKey is the model key the vectors are stored under (default the
	// modelName passed to Backfill). Setting it to the full PROVIDER:MODEL
	// reference keeps two providers serving one model name apart.
	StoreKey string
	// Progress, when set, is called on Backfill's goroutine with the
	// number of items embedded and stored so far and the number this run
	// has to embed: once with done 0 before the first Embed call, then
	// after each batch is stored. It is not called when nothing is
	// missing.
	Progress func(done, total int)
}

// BackfillStats counts what Backfill did.
type BackfillStats struct {
	// Items is the number of distinct hashes among the items.
	Items int
	// Present counts items whose vector was already stored.
	Present int
	// Skipped counts items whose text is empty or only white space: they
	// are never sent (some providers reject empty inputs) or stored.
	Skipped int
	// Embedded counts items embedded and stored by this run.
	Embedded int
	// Truncated counts embedded inputs cut to MaxInputChars.
	Truncated int
	// Batches counts successful Embed calls.
	Batches int
	// PromptTokens sums the providers' token counts (0 when they do not
	// say).
	PromptTokens int64
	// Dim is the length of the vectors embedded by this run, 0 when none.
	Dim int
}

// Backfill embeds the items that store does not yet hold for the model
// and stores their vectors. It sends their texts (cut to MaxInputChars) in
// batches of BatchSize, in item order, to m.Embed with
// EmbedRequest.Model = modelName, and stores each batch in one transaction
// as soon as it returns, so work done before a failure or a cancellation
// is kept and the next run embeds only the rest. Items repeating a hash
// are embedded once, with the first one's text.
//
// The answer of every call is checked: one vector per input, all vectors
// of one run the same non-zero length, every component finite; otherwise
// Backfill stops with ErrBadEmbedding. Vectors of another length than the
// store already holds for the model fail with ErrDimMismatch.
//
// When the model cannot embed, that is when the error of m.Embed matches
// engine.ErrUnsupported or engine.ErrModelNotFound, Backfill returns that
// error itself, unwrapped, so the caller can show the provider's own words
// and skip the vector stage. Other Embed errors are returned wrapped with
// the batch's position. When ctx ends, Backfill returns ctx.Err() at the
// latest when the current Embed call returns (m.Embed receives ctx). The
// stats count what was done until then.
func Backfill(ctx context.Context, m engine.Model, modelName string, store *Store, items []Item, opts BackfillOptions) (BackfillStats, error) {
	var stats BackfillStats
	batchSize := opts.BatchSize
	if batchSize <= 0 {
		batchSize = DefaultBatchSize
	}
	maxChars := opts.MaxInputChars
	if maxChars == 0 {
		maxChars = DefaultMaxInputChars
	}
	key := opts.StoreKey
	if key == "" {
		key = modelName
	}
	if err := ctx.Err(); err != nil {
		return stats, err
	}

	// Distinct hashes in item order, then those the store lacks.
	text := make(map[[32]byte]string, len(items))
	hashes := make([][32]byte, 0, len(items))
	for _, it := range items {
		if _, ok := text[it.Hash]; ok {
			continue
		}
		text[it.Hash] = it.Text
		hashes = append(hashes, it.Hash)
	}
	stats.Items = len(hashes)
	missing, err := store.Missing(ctx, key, hashes)
	if err != nil {
		return stats, fmt.Errorf("backfill %s: %w", key, err)
	}
	stats.Present = len(hashes) - len(missing)
	todo := missing[:0]
	for _, h := range missing {
		if strings.TrimSpace(text[h]) == "" {
			stats.Skipped++
			continue
		}
		todo = append(todo, h)
	}
	if len(todo) == 0 {
		return stats, nil
	}
	if opts.Progress != nil {
		opts.Progress(0, len(todo))
	}

	for start := 0; start < len(todo); start += batchSize {
		if err := ctx.Err(); err != nil {
			return stats, err
		}
		batch := todo[start:min(start+batchSize, len(todo))]
		inputs := make([]string, 0, len(batch)) // fresh: a provider may keep it
		truncated := 0
		for _, h := range batch {
			in, cut := truncate(text[h], maxChars)
			if cut {
				truncated++
			}
			inputs = append(inputs, in)
		}
		resp, err := m.Embed(ctx, engine.EmbedRequest{Model: modelName, Inputs: inputs})
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return stats, ctxErr
			}
			if errors.Is(err, engine.ErrUnsupported) || errors.Is(err, engine.ErrModelNotFound) {
				return stats, err
			}
			return stats, fmt.Errorf("embed items %d-%d of %d with %s: %w", start+1, start+len(batch), len(todo), modelName, err)
		}
		if err := checkEmbedding(resp, len(inputs), stats.Dim); err != nil {
			return stats, fmt.Errorf("embed items %d-%d of %d with %s: %w", start+1, start+len(batch), len(todo), modelName, err)
		}
		vecs := make(map[[32]byte][]float32, len(batch))
		for i, h := range batch {
			vecs[h] = resp.Vectors[i]
		}
		if err := store.Put(ctx, key, vecs); err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return stats, ctxErr
			}
			return stats, fmt.Errorf("store items %d-%d of %d: %w", start+1, start+len(batch), len(todo), err)
		}
		stats.Dim = len(resp.Vectors[0])
		stats.Embedded += len(batch)
		stats.Truncated += truncated
		stats.Batches++
		stats.PromptTokens += resp.PromptTokens
		if opts.Progress != nil {
			opts.Progress(stats.Embedded, len(todo))
		}
	}
	return stats, nil
}

// checkEmbedding returns ErrBadEmbedding unless resp holds n non-empty,
// finite vectors of one length, equal to dim when dim > 0.
func checkEmbedding(resp engine.EmbedResponse, n, dim int) error {
	if len(resp.Vectors) != n {
		return fmt.Errorf("%w: %d vectors for %d inputs", ErrBadEmbedding, len(resp.Vectors), n)
	}
	if dim == 0 {
		dim = len(resp.Vectors[0])
	}
	for i, v := range resp.Vectors {
		switch {
		case len(v) == 0:
			return fmt.Errorf("%w: vector %d is empty", ErrBadEmbedding, i)
		case len(v) != dim:
			return fmt.Errorf("%w: vector %d has %d dimensions, earlier ones %d", ErrBadEmbedding, i, len(v), dim)
		}
		if err := checkFinite(v); err != nil {
			return fmt.Errorf("%w: vector %d: %w", ErrBadEmbedding, i, err)
		}
	}
	return nil
}

// truncate returns the first limit characters (code points) of s and
// whether it cut anything; limit < 0 means no limit.
func truncate(s string, limit int) (string, bool) {
	if limit < 0 || len(s) <= limit { // a string has at least as many bytes as characters
		return s, false
	}
	n := 0
	for i := range s {
		if n == limit {
			return s[:i], true
		}
		n++
	}
	return s, false
}
