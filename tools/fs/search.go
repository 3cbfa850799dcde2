package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/workspace"
)

// Progress of search_text is reported every progressFiles files or
// progressInterval, whichever comes first.
const (
	progressFiles    = 100
	progressInterval = 500 * time.Millisecond
)

// maxMatchText caps the text of one match, in bytes; longer lines are cut
// to a window around the match.
const maxMatchText = 300

// MatchStream is the ToolOutput stream on which search_text sends each
// match as "path:line:column: text".
const MatchStream = "match"

// SearchResult is the content of a search_text result.
type SearchResult struct {
	// Matches are the matching lines in walk order (sorted paths, then
	// line numbers), one per line.
	Matches []Match `json:"matches"`
	// FilesSearched counts the files whose contents were matched.
	FilesSearched int `json:"files_searched"`
	// FilesSkipped counts files left out as binary, larger than the size
	// limit, or unreadable.
	FilesSkipped int `json:"files_skipped"`
	// Truncated is true when there were more matching lines than
	// max_results; the search stopped there.
	Truncated bool `json:"truncated"`
	// Unreadable names directories whose contents could not be listed,
	// with the reason.
	Unreadable []string `json:"unreadable,omitempty"`
}

// Match is one matching line.
type Match struct {
	// Path is the file, workspace-relative with slashes.
	Path string `json:"path"`
	// Line is 1-based.
	Line int `json:"line"`
	// Column is where the first match on the line starts: 1-based, in
	// characters (Unicode code points).
	Column int `json:"column"`
	// Text is the line without its line ending, cut to a window around
	// the match (marked with "…") when longer than 300 bytes.
	Text string `json:"text"`
}

type searchArgs struct {
	Pattern         *string `json:"pattern"`
	Literal         *bool   `json:"literal"`
	Path            *string `json:"path"`
	Include         *string `json:"include"`
	CaseInsensitive *bool   `json:"case_insensitive"`
	MaxResults      *int    `json:"max_results"`
	IncludeIgnored  *bool   `json:"include_ignored"`
}

// matcher is a compiled search_text pattern.
type matcher struct {
	line *regexp.Regexp // matched against each line
	// whole, when not nil, is matched against a whole file first: no
	// match there means no line matches. It is nil when the pattern has
	// \A or \z, which mean something else in a whole file.
	whole *regexp.Regexp
}

func defaultWorkers() int { return runtime.GOMAXPROCS(0) }

func (t *Tools) searchText(ctx context.Context, root *workspace.Root, raw []byte, onUpdate func(engine.ToolUpdate)) (engine.ToolResult, error) {
	const tool = SearchTextTool
	var a searchArgs
	if err := decodeArgs(tool, raw, t.fields[tool], &a); err != nil {
		return engine.ToolResult{}, err
	}
	if a.Pattern == nil || *a.Pattern == "" {
		return engine.ToolResult{}, missing(tool, "pattern", "the regular expression or, with literal true, the text to search for")
	}
	m, err := compileSearch(*a.Pattern, a.Literal != nil && *a.Literal, a.CaseInsensitive != nil && *a.CaseInsensitive)
	if err != nil {
		return engine.ToolResult{}, invalid(tool, "pattern", "is not a valid RE2 regular expression: %v; escape special characters, or set literal to true to search for the text as written", err)
	}
	limit, err := maxResults(tool, a.MaxResults, t.opts.SearchResults, t.opts.MaxSearchResults)
	if err != nil {
		return engine.ToolResult{}, err
	}
	var include *glob
	if a.Include != nil {
		if include, err = newGlob(tool, "include", *a.Include); err != nil {
			return engine.ToolResult{}, err
		}
	}
	dir := "."
	if a.Path != nil && *a.Path != "" {
		dir = *a.Path
	}
	p, err := t.resolve(tool, root, dir)
	if err != nil {
		return engine.ToolResult{}, err
	}
	fi, err := root.FS().Stat(p.real)
	if err != nil {
		return engine.ToolResult{}, pathError(tool, root, p.given, err)
	}
	var res SearchResult
	if fi.IsDir() {
		res, err = t.searchDir(ctx, root, p, a.IncludeIgnored, include, m, limit, onUpdate)
	} else {
		res, err = t.searchOne(ctx, root, p, m, limit, onUpdate)
	}
	if err != nil {
		return engine.ToolResult{}, err
	}
	return engine.JSONResult(res, res.summary())
}

// compileSearch builds the matcher of a pattern.
func compileSearch(pattern string, literal, caseInsensitive bool) (matcher, error) {
	expr := pattern
	if literal {
		expr = regexp.QuoteMeta(pattern)
	}
	if caseInsensitive {
		expr = "(?i)" + expr
	}
	line, err := regexp.Compile(expr)
	if err != nil {
		return matcher{}, err
	}
	m := matcher{line: line}
	if !strings.Contains(expr, `\A`) && !strings.Contains(expr, `\z`) {
		// In multi-line mode ^ and $ match at each line's start and end,
		// so every line match is also a match of the whole file.
		m.whole, err = regexp.Compile("(?m)" + expr)
		if err != nil {
			m.whole = nil
		}
	}
	return m, nil
}

// fileJob is one file of a search, filled in by a worker.
type fileJob struct {
	rel, real string
	done      chan struct{} // closed when the fields below are set

	matches []Match
	skipped string // why the file was not searched; "" when it was
}

// searchDir searches every file below a directory with workers, and
// streams matches in walk order.
func (t *Tools) searchDir(ctx context.Context, root *workspace.Root, p resolved, includeIgnored *bool, include *glob, m matcher, limit int, onUpdate func(engine.ToolUpdate)) (SearchResult, error) {
	const tool = SearchTextTool
	opts, err := t.walkOptions(tool, root, p, includeIgnored)
	if err != nil {
		return SearchResult{}, err
	}
	var unreadable []string // written by the walk goroutine, read after wg.Wait
	opts.OnError = func(rel string, err error) error {
		t.opts.Logger.Debug("search_text: directory skipped", "dir", rel, "err", err)
		if len(unreadable) < maxUnreadable {
			unreadable = append(unreadable, fmt.Sprintf("%s: %v", rel, err))
		}
		return nil
	}

	sctx, stop := context.WithCancel(ctx)
	defer stop()
	order := make(chan *fileJob, 4*t.opts.SearchWorkers+64) // jobs in walk order; bounds the read-ahead
	work := make(chan *fileJob)
	var wg sync.WaitGroup
	var walkErr error
	realDir := filepath.ToSlash(p.real)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(order)
		defer close(work)
		walkErr = root.Walk(sctx, filepath.FromSlash(p.show), opts, func(rel string, d iofs.DirEntry) error {
			if !d.Type().IsRegular() { // directories, and symlinks, which are not followed
				return nil
			}
			below := relTo(p.show, rel)
			if !include.match(rel, below) {
				return nil
			}
			j := &fileJob{rel: rel, real: filepath.FromSlash(joinRel(realDir, below)), done: make(chan struct{})}
			select {
			case order <- j:
			case <-sctx.Done():
				return sctx.Err()
			}
			select {
			case work <- j:
			case <-sctx.Done():
				return sctx.Err()
			}
			return nil
		})
	}()
	for range t.opts.SearchWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				t.searchFile(sctx, root, j, m, limit+1)
				close(j.done)
			}
		}()
	}

	res := SearchResult{Matches: []Match{}}
	lastProgress := time.Now()
collect:
	for j := range order {
		select {
		case <-j.done:
		case <-sctx.Done():
			break collect
		}
		if j.skipped != "" {
			res.FilesSkipped++
			t.opts.Logger.Debug("search_text: file skipped", "path", j.rel, "reason", j.skipped)
		} else {
			res.FilesSearched++
		}
		for _, mt := range j.matches {
			if len(res.Matches) == limit {
				res.Truncated = true
				break collect
			}
			res.Matches = append(res.Matches, mt)
			onUpdate(engine.ToolUpdate{Output: &engine.ToolOutput{Stream: MatchStream, Text: mt.String()}})
		}
		if n := res.FilesSearched + res.FilesSkipped; n%progressFiles == 0 || time.Since(lastProgress) >= progressInterval {
			onUpdate(engine.ToolUpdate{Progress: &engine.ToolProgress{Message: fmt.Sprintf("searched %s, %s so far", plural(n, "file", "files"), plural(len(res.Matches), "match", "matches"))}})
			lastProgress = time.Now()
		}
	}
	stop()
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return SearchResult{}, ctxError(tool, err)
	}
	if walkErr != nil && !errors.Is(walkErr, context.Canceled) {
		return SearchResult{}, walkError(ctx, tool, root, p, walkErr)
	}
	res.Unreadable = unreadable
	return res, nil
}

// searchOne searches the one file a call named. Unlike files met in a
// walk, a file that cannot be searched is an error that says why.
func (t *Tools) searchOne(ctx context.Context, root *workspace.Root, p resolved, m matcher, limit int, onUpdate func(engine.ToolUpdate)) (SearchResult, error) {
	const tool = SearchTextTool
	f, err := openRegular(tool, root, p)
	if err != nil {
		return SearchResult{}, err
	}
	f.Close()
	j := &fileJob{rel: p.show, real: p.real}
	t.searchFile(ctx, root, j, m, limit+1)
	if err := ctx.Err(); err != nil {
		return SearchResult{}, ctxError(tool, err)
	}
	if j.skipped != "" {
		return SearchResult{}, engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: %s %s; use read_file with a line range to look at part of it", tool, p.show, j.skipped)
	}
	res := SearchResult{Matches: []Match{}, FilesSearched: 1}
	for _, mt := range j.matches {
		if len(res.Matches) == limit {
			res.Truncated = true
			break
		}
		res.Matches = append(res.Matches, mt)
		onUpdate(engine.ToolUpdate{Output: &engine.ToolOutput{Stream: MatchStream, Text: mt.String()}})
	}
	return res, nil
}

// searchFile reads one file and records up to max matching lines in j,
// or why it was skipped.
func (t *Tools) searchFile(ctx context.Context, root *workspace.Root, j *fileJob, m matcher, max int) {
	f, err := root.FS().OpenFile(j.real, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		j.skipped = fmt.Sprintf("could not be opened: %v", root.FSError(j.rel, err))
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		j.skipped = fmt.Sprintf("could not be read: %v", err)
		return
	case !fi.Mode().IsRegular():
		j.skipped = "is not a regular file"
		return
	case fi.Size() > t.opts.MaxSearchFileBytes:
		j.skipped = fmt.Sprintf("is %s, larger than the %s search limit", formatBytes(fi.Size()), formatBytes(t.opts.MaxSearchFileBytes))
		return
	}
	data, err := io.ReadAll(io.LimitReader(f, t.opts.MaxSearchFileBytes+1))
	switch {
	case err != nil:
		j.skipped = fmt.Sprintf("could not be read: %v", err)
		return
	case int64(len(data)) > t.opts.MaxSearchFileBytes: // it grew
		j.skipped = fmt.Sprintf("is larger than the %s search limit", formatBytes(t.opts.MaxSearchFileBytes))
		return
	case bytes.IndexByte(data[:min(len(data), binarySniffBytes)], 0) >= 0:
		j.skipped = "is a binary file"
		return
	}
	if m.whole != nil && bytes.IndexByte(data, '\r') < 0 && !m.whole.Match(data) {
		return
	}
	for n := 1; len(data) > 0; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return
		}
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		loc := m.line.FindIndex(line)
		if loc == nil {
			continue
		}
		j.matches = append(j.matches, Match{
			Path: j.rel, Line: n, Column: utf8.RuneCount(line[:loc[0]]) + 1, Text: excerpt(line, loc[0], loc[1]),
		})
		if len(j.matches) >= max {
			return
		}
	}
}

// excerpt returns line as valid UTF-8, cut to a window of maxMatchText
// bytes around the match [start, end) when it is longer.
func excerpt(line []byte, start, end int) string {
	if len(line) <= maxMatchText {
		return strings.ToValidUTF8(string(line), "\uFFFD")
	}
	// Start a quarter window before the match, later if the match would
	// not fit, never after its start, and not so late that the window
	// runs past the end of the line.
	from := min(start, max(start-maxMatchText/4, end-maxMatchText))
	from = max(0, min(from, len(line)-maxMatchText))
	to := min(len(line), from+maxMatchText)
	for from > 0 && !utf8.RuneStart(line[from]) {
		from++
	}
	for to < len(line) && !utf8.RuneStart(line[to]) {
		to--
	}
	var b strings.Builder
	if from > 0 {
		b.WriteString("…")
	}
	b.WriteString(strings.ToValidUTF8(string(line[from:to]), "\uFFFD"))
	if to < len(line) {
		b.WriteString("…")
	}
	return b.String()
}

// String formats m as the match stream does: "path:line:column: text".
func (m Match) String() string {
	return fmt.Sprintf("%s:%d:%d: %s", m.Path, m.Line, m.Column, m.Text)
}

func (r SearchResult) summary() string {
	files := map[string]bool{}
	for _, m := range r.Matches {
		files[m.Path] = true
	}
	var s string
	if len(r.Matches) == 0 {
		s = "no matches in " + plural(r.FilesSearched, "file", "files")
	} else {
		s = fmt.Sprintf("%s in %s", plural(len(r.Matches), "match", "matches"), plural(len(files), "file", "files"))
	}
	if r.Truncated {
		s += " (truncated)"
	}
	if r.FilesSkipped > 0 {
		s += fmt.Sprintf(", %s skipped", plural(r.FilesSkipped, "file", "files"))
	}
	return s
}
