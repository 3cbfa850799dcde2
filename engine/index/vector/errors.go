package vector

import "errors"

// Sentinel errors; the functions of this package wrap them with context, so
// match them with errors.Is.
var (
	// ErrInvalidVector: a vector given to Store.Put, Matrix.Add or
	// Matrix.Search is empty or holds a NaN or an infinity.
	ErrInvalidVector = errors.New("invalid vector")
	// ErrDimMismatch: a vector's length differs from the dimension of the
	// Matrix, of the other vectors of the same Store.Put call, or of the
	// vectors the Store already holds for that model (the model changed;
	// Store.DeleteModel clears it for re-embedding).
	ErrDimMismatch = errors.New("vector dimension mismatch")
	// ErrBadEmbedding: a model provider's Embed answer broke its contract
	// (not one vector per input, vectors of differing lengths within a
	// run, an empty vector, or a NaN or infinity).
	ErrBadEmbedding = errors.New("malformed embedding from the model provider")
)
