package httpws

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// TokenFile is the name of the file, in the data directory, that holds the
// generated bearer token.
const TokenFile = "http-token"

// LoadOrCreateToken returns the bearer token stored at path, creating it
// first when it does not exist: 32 random bytes, base64url-encoded (43
// characters), written with mode 0600 (in a directory created 0700). An
// existing file readable by group or others is refused, so a token that
// leaked through permissions is not used silently. Errors: the file
// system's; a file that is empty or too permissive.
func LoadOrCreateToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		fi, err := os.Stat(path)
		if err != nil {
			return "", err
		}
		if fi.Mode().Perm()&0o077 != 0 {
			return "", fmt.Errorf("token file %s has mode %v; it must be readable by its owner only (chmod 600 %s)", path, fi.Mode().Perm(), path)
		}
		tok := strings.TrimSpace(string(data))
		if tok == "" {
			return "", fmt.Errorf("token file %s is empty; delete it to have a new token generated", path)
		}
		return tok, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read token: %w", err)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	tok := base64.RawURLEncoding.EncodeToString(b[:])
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("create token: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) { // another process made it meanwhile
			return LoadOrCreateToken(path)
		}
		return "", fmt.Errorf("create token: %w", err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		return "", fmt.Errorf("write token: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write token: %w", err)
	}
	return tok, nil
}

// authorized reports whether r carries the bearer token, comparing in
// constant time (of the token's length).
func (s *Server) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return false
	}
	got := []byte(strings.TrimSpace(h[len(prefix):]))
	return subtle.ConstantTimeCompare(got, []byte(s.token)) == 1
}

// requireToken answers 401 to requests without the bearer token.
func (s *Server) requireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="plexus"`)
			writeError(w, http.StatusUnauthorized, "UNAUTHORIZED",
				"missing or wrong bearer token: send Authorization: Bearer <token> (plexus serve prints where the token is stored)", nil)
			return
		}
		next.ServeHTTP(w, r)
	})
}
