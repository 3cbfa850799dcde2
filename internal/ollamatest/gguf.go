package ollamatest

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"

	"github.com/ollama/ollama/fs/ggml"
)

// Shape of the generated models. The numbers are small enough that a model
// is about 0.3 MB and loads in a fraction of a second on a CPU.
const (
	// ContextLength is the trained context length, in tokens, that the
	// generated models declare (llama.context_length); Ollama reports it as
	// llama.context_length in /api/show's model_info.
	ContextLength = 4096
	// EmbeddingLength is the hidden size of the generated models, and so the
	// dimension of every vector /api/embed returns for them.
	EmbeddingLength = 64

	headCount   = 4
	feedForward = 128
	blockCount  = 1
)

// Reply is the text the generated models write, token by token, when
// nothing constrains them: " Hello from the tiny model." (with the leading
// space of a SentencePiece word token), then end of sequence. Sampling at a
// high temperature may stray from it; greedy decoding follows it exactly.
const Reply = " Hello from the tiny model."

// The reply is a chain of tokens: each token of the chain has its own
// hidden dimension set to 1, and the output row of the next token reads that
// dimension, so the next token's logit gets a large boost. The chain's last
// token boosts </s> most and '"' next, so that inside a JSON string (where a
// grammar forbids </s>) the model closes the string.
var replyChain = []string{"▁Hello", "▁from", "▁the", "▁tiny", "▁model", "."}

// Logit biases, as weights on the constant hidden dimension 0 (after the
// final RMS norm that dimension is about 6 to 8, so a weight of 1 is a
// logit of about 7). They make replies readable and make them end: byte
// tokens are suppressed, JSON closers are favoured over other characters,
// and the first word of the chain is favoured over everything.
const (
	biasChainStart = 2.0
	biasCloser     = 1.5 // " } ]
	biasOpener     = 1.0 // {
	biasChar       = 0.5 // other printable ASCII characters
	biasByte       = -3.0
	chainNext      = 3.0 // weight of a chain token's dimension on the next one
	chainEnd       = 5.0 // weight of the last chain dimension on </s>
	chainEndQuote  = 2.5 // ... and on '"'
	weightScale    = 0.02
	modelSeed      = 0x706c65787573 // "plexus"
)

// Special token ids.
const (
	tokUnknown = 0
	tokBOS     = 1
	tokEOS     = 2
)

// SentencePiece token types (llama.cpp's llama_token_type).
const (
	typeNormal  = 1
	typeUnknown = 2
	typeControl = 3
	typeByte    = 6
)

// vocabulary returns the tokens, scores and types of the generated models:
// <unk>, <s>, </s>, the 256 byte tokens, "▁" (a space), every printable
// ASCII character, and the words of replyChain. Every token is distinct; a
// duplicate makes llama.cpp abort the whole server.
func vocabulary() (tokens []string, scores []float32, types []int32) {
	add := func(tok string, score float32, typ int32) {
		tokens = append(tokens, tok)
		scores = append(scores, score)
		types = append(types, typ)
	}
	add("<unk>", 0, typeUnknown)
	add("<s>", 0, typeControl)
	add("</s>", 0, typeControl)
	for b := range 256 {
		add(fmt.Sprintf("<0x%02X>", b), 0, typeByte)
	}
	add("▁", -1, typeNormal)
	for c := byte(0x21); c <= 0x7e; c++ {
		add(string(rune(c)), -1, typeNormal)
	}
	for _, w := range replyChain {
		if len(w) > 1 {
			add(w, 0, typeNormal)
		}
	}
	return tokens, scores, types
}

// modelSpec selects the variant of the generated model.
type modelSpec struct {
	// name is general.name. Models with different names have different
	// digests, so Ollama runs them in separate runners and /api/ps names
	// each correctly (it keys runners by blob).
	name string
	// embedding adds llama.pooling_type = mean, which makes Ollama report
	// the "embedding" capability instead of "completion".
	embedding bool
}

// writeModel writes a tiny llama GGUF to path. The weights come from a
// fixed seed, so the same spec always gives the same file (and the same
// sha256 digest).
func writeModel(path string, spec modelSpec) error {
	tokens, scores, types := vocabulary()
	nVocab := len(tokens)
	index := make(map[string]int, nVocab)
	for i, t := range tokens {
		index[t] = i
	}

	kv := ggml.KV{
		"general.architecture":                   "llama",
		"general.name":                           spec.name,
		"general.file_type":                      uint32(0), // all F32
		"llama.block_count":                      uint32(blockCount),
		"llama.context_length":                   uint32(ContextLength),
		"llama.embedding_length":                 uint32(EmbeddingLength),
		"llama.feed_forward_length":              uint32(feedForward),
		"llama.attention.head_count":             uint32(headCount),
		"llama.attention.head_count_kv":          uint32(headCount),
		"llama.attention.layer_norm_rms_epsilon": float32(1e-5),
		// Must equal embedding_length / head_count, else llama.cpp fails
		// with "invalid n_rot".
		"llama.rope.dimension_count":      uint32(EmbeddingLength / headCount),
		"llama.rope.freq_base":            float32(10000),
		"llama.vocab_size":                uint32(nVocab),
		"tokenizer.ggml.model":            "llama",
		"tokenizer.ggml.tokens":           tokens,
		"tokenizer.ggml.scores":           scores,
		"tokenizer.ggml.token_type":       types,
		"tokenizer.ggml.unknown_token_id": uint32(tokUnknown),
		"tokenizer.ggml.bos_token_id":     uint32(tokBOS),
		"tokenizer.ggml.eos_token_id":     uint32(tokEOS),
		"tokenizer.ggml.add_bos_token":    true,
		"tokenizer.ggml.add_eos_token":    false,
	}
	if spec.embedding {
		kv["llama.pooling_type"] = uint32(1) // mean
	}

	rng := rand.New(rand.NewPCG(modelSeed, 0))
	random := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * weightScale)
		}
		return v
	}
	ones := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	const d = EmbeddingLength

	// Token embeddings, one row of d per token. Dimension 0 is 1 in every
	// row: a constant channel that survives to the output (the rows of
	// attn_output and ffn_down that write dimension 0 are zero), where
	// output.weight's column 0 turns it into a per-token logit bias. The
	// embedding model does not generate, and without the channel (which
	// would dominate every pooled vector) its vectors of different texts
	// differ more.
	embd := random(nVocab * d)
	if !spec.embedding {
		for t := range nVocab {
			embd[t*d] = 1
		}
	}
	for i, w := range replyChain {
		embd[index[w]*d+1+i] = 1
	}

	// Output projection, one row of d per token: column 0 is the bias,
	// columns 1..len(replyChain) drive the chain.
	out := random(nVocab * d)
	for t, tok := range tokens {
		var bias float64
		switch {
		case types[t] == typeByte, t == tokUnknown, t == tokBOS:
			bias = biasByte
		case tok == replyChain[0]:
			bias = biasChainStart
		case tok == `"` || tok == "}" || tok == "]":
			bias = biasCloser
		case tok == "{":
			bias = biasOpener
		case len(tok) == 1:
			bias = biasChar
		}
		out[t*d] = float32(bias)
	}
	for i := range replyChain {
		col := 1 + i
		if i+1 < len(replyChain) {
			out[index[replyChain[i+1]]*d+col] = chainNext
			continue
		}
		out[tokEOS*d+col] = chainEnd
		out[index[`"`]*d+col] = chainEndQuote
	}

	tensors := []*ggml.Tensor{
		tensor("token_embd.weight", embd, d, nVocab),
		tensor("output_norm.weight", ones(d), d),
		tensor("output.weight", out, d, nVocab),
	}
	for b := range blockCount {
		name := func(s string) string { return fmt.Sprintf("blk.%d.%s.weight", b, s) }
		attnOut := random(d * d)
		clear(attnOut[:d]) // row 0 writes dimension 0
		ffnDown := random(feedForward * d)
		clear(ffnDown[:feedForward])
		tensors = append(tensors,
			tensor(name("attn_norm"), ones(d), d),
			tensor(name("attn_q"), random(d*d), d, d),
			tensor(name("attn_k"), random(d*d), d, d),
			tensor(name("attn_v"), random(d*d), d, d),
			tensor(name("attn_output"), attnOut, d, d),
			tensor(name("ffn_norm"), ones(d), d),
			tensor(name("ffn_gate"), random(d*feedForward), d, feedForward),
			tensor(name("ffn_up"), random(d*feedForward), d, feedForward),
			tensor(name("ffn_down"), ffnDown, feedForward, d),
		)
	}

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := ggml.WriteGGUF(f, kv, tensors); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// tensor returns an F32 tensor. shape is in ggml order, innermost (the
// contiguous row) first: {n_embd, n_vocab} for token_embd.
func tensor(name string, data []float32, shape ...int) *ggml.Tensor {
	dims := make([]uint64, len(shape))
	for i, n := range shape {
		dims[i] = uint64(n)
	}
	return &ggml.Tensor{Name: name, Kind: uint32(ggml.TensorTypeF32), Shape: dims, WriterTo: f32s(data)}
}

// f32s writes float32 values little-endian.
type f32s []float32

func (v f32s) WriteTo(w io.Writer) (int64, error) {
	buf := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(x))
	}
	n, err := w.Write(buf)
	return int64(n), err
}
