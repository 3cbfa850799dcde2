package search

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
	"github.com/plexus-agent/plexus/tools/internal/toolkit"
)

// This file is search_text's fallback: a pattern search that walks the
// workspace and reads the files itself, for when there is no index.

// Progress of the fallback is reported every progressFiles files or
// progressInterval, whichever comes first.
const (
	progressFiles    = 100
	progressInterval = 500 * time.Millisecond
)

// maxMatchText caps the text of one match or context line, in bytes;
// longer lines are cut to a window around the match.
const maxMatchText = 300

// binarySniffBytes is how much of a file is checked for a NUL byte to
// tell binary from text, as git does.
const binarySniffBytes = 8000

// maxUnreadable caps the directories a result names as unreadable.
const maxUnreadable = 20

func defaultWorkers() int { return runtime.GOMAXPROCS(0) }

// matcher is a compiled search_text pattern.
type matcher struct {
	line *regexp.Regexp // matched against each line
	// whole, when not nil, is matched against a whole file first: no
	// match there means no line matches. It is nil when the pattern has
	// \A or \z, which mean something else in a whole file.
	whole *regexp.Regexp
}

// compileSearch builds the matcher of a pattern: exact text unless regex.
func compileSearch(pattern string, regex, caseInsensitive bool) (matcher, error) {
	expr := pattern
	if !regex {
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

// walkSearch searches the directory or file tq names without the index.
func (t *Tools) walkSearch(ctx context.Context, root *workspace.Root, tq textQuery, onUpdate func(engine.ToolUpdate)) (TextResult, error) {
	dir, err := tq.p.isDir(SearchTextTool, root)
	if err != nil {
		return TextResult{}, err
	}
	if dir {
		return t.searchDir(ctx, root, tq, onUpdate)
	}
	return t.searchOne(ctx, root, tq, onUpdate)
}

// fileJob is one file of a search, filled in by a worker.
type fileJob struct {
	rel, real string
	done      chan struct{} // closed when the fields below are set

	matches []engine.TextMatch
	skipped string // why the file was not searched; "" when it was
}

// searchDir searches every file below a directory with workers, and
// streams matches in walk order. Ignored files are left out unless the
// directory itself is ignored (it was named explicitly).
func (t *Tools) searchDir(ctx context.Context, root *workspace.Root, tq textQuery, onUpdate func(engine.ToolUpdate)) (TextResult, error) {
	const tool = SearchTextTool
	p := tq.p
	if inGitDir(p.show) || inGitDir(filepath.ToSlash(p.real)) {
		return TextResult{}, engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: %s is inside .git, which is never searched; use git commands through run_command instead", tool, p.show)
	}
	ignored, err := root.Ignored(p.real)
	if err != nil {
		return TextResult{}, pathError(tool, root, p.given, err)
	}
	opts := workspace.WalkOptions{IncludeIgnored: ignored}
	var unreadable []string // written by the walk goroutine, read after wg.Wait
	opts.OnError = func(rel string, err error) error {
		t.opts.Logger.Debug("search_text: directory skipped", "dir", rel, "err", err)
		if len(unreadable) < maxUnreadable {
			unreadable = append(unreadable, fmt.Sprintf("%s: %v", rel, err))
		}
		return nil
	}
	limit := tq.q.Limit

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
			if !tq.include.MatchUnder(rel, below) {
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
				t.searchFile(sctx, root, j, tq.m, limit+1, tq.q.ContextLines)
				close(j.done)
			}
		}()
	}

	res := TextResult{Matches: []engine.TextMatch{}}
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
			onUpdate(matchUpdate(mt))
		}
		if n := res.FilesSearched + res.FilesSkipped; n%progressFiles == 0 || time.Since(lastProgress) >= progressInterval {
			onUpdate(engine.ToolUpdate{Progress: &engine.ToolProgress{Message: fmt.Sprintf("searched %s, %s so far", plural(n, "file", "files"), plural(len(res.Matches), "match", "matches"))}})
			lastProgress = time.Now()
		}
	}
	stop()
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return TextResult{}, toolkit.CtxError(tool, err)
	}
	if walkErr != nil && !errors.Is(walkErr, context.Canceled) {
		return TextResult{}, pathError(tool, root, p.given, walkErr)
	}
	res.Unreadable = unreadable
	return res, nil
}

// searchOne searches the one file a call named. Unlike files met in a
// walk, a file that cannot be searched is an error that says why.
func (t *Tools) searchOne(ctx context.Context, root *workspace.Root, tq textQuery, onUpdate func(engine.ToolUpdate)) (TextResult, error) {
	const tool = SearchTextTool
	p := tq.p
	j := &fileJob{rel: p.show, real: p.real}
	t.searchFile(ctx, root, j, tq.m, tq.q.Limit+1, tq.q.ContextLines)
	if err := ctx.Err(); err != nil {
		return TextResult{}, toolkit.CtxError(tool, err)
	}
	if j.skipped != "" {
		return TextResult{}, engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: %s %s; use read_file with a line range to look at part of it", tool, p.show, j.skipped)
	}
	res := TextResult{Matches: []engine.TextMatch{}, FilesSearched: 1}
	for _, mt := range j.matches {
		if len(res.Matches) == tq.q.Limit {
			res.Truncated = true
			break
		}
		res.Matches = append(res.Matches, mt)
		onUpdate(matchUpdate(mt))
	}
	return res, nil
}

// searchFile reads one file and records up to maxMatches matching lines in j,
// each with up to contextLines lines before and after it, or why the file
// was skipped.
func (t *Tools) searchFile(ctx context.Context, root *workspace.Root, j *fileJob, m matcher, maxMatches, contextLines int) {
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
	var (
		before  [][]byte // up to contextLines lines before the current one
		waiting []int    // indexes in j.matches of matches still short of after lines
	)
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
		for k := 0; k < len(waiting); {
			mt := &j.matches[waiting[k]]
			mt.After = append(mt.After, excerpt(line, 0, 0))
			if len(mt.After) == contextLines {
				waiting = append(waiting[:k], waiting[k+1:]...)
			} else {
				k++
			}
		}
		if len(j.matches) >= maxMatches {
			if len(waiting) == 0 {
				return
			}
			continue // only after lines are still wanted
		}
		if loc := m.line.FindIndex(line); loc != nil {
			mt := engine.TextMatch{Path: j.rel, Line: n, Column: utf8.RuneCount(line[:loc[0]]) + 1, Text: excerpt(line, loc[0], loc[1])}
			for _, b := range before {
				mt.Before = append(mt.Before, excerpt(b, 0, 0))
			}
			j.matches = append(j.matches, mt)
			if contextLines > 0 {
				waiting = append(waiting, len(j.matches)-1)
			}
		}
		if contextLines > 0 {
			if len(before) == contextLines {
				before = before[1:]
			}
			before = append(before, line)
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

// inGitDir reports whether a slash path has a .git component.
func inGitDir(p string) bool {
	for part := range strings.SplitSeq(p, "/") {
		if part == ".git" {
			return true
		}
	}
	return false
}

// joinRel joins a workspace-relative directory and a path below it.
func joinRel(dir, rel string) string {
	if dir == "." {
		return rel
	}
	return dir + "/" + rel
}

// relTo returns rel relative to the directory dir (both workspace-relative).
func relTo(dir, rel string) string {
	if dir == "." {
		return rel
	}
	return strings.TrimPrefix(rel, dir+"/")
}
