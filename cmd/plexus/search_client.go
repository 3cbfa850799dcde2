package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/index"
)

// quickSearch is a text or symbol search of plexus search: answered by
// the search server when one runs (or can be started), else in this
// process from the index on disk.
type quickSearch struct {
	g                 *globalFlags
	kind, query       string
	path, include     string
	regex, ignoreCase bool
	limit             int
	server            string // "", "auto", "off" or a socket path
	printed           int
	truncated         bool
	out               *bufio.Writer
	errw              io.Writer
	root              string
	symbols           []engine.SymbolHit
}

func (q *quickSearch) run(ctx context.Context, stdout, stderr io.Writer) error {
	q.out, q.errw = bufio.NewWriterSize(stdout, 64<<10), stderr
	defer q.out.Flush()
	abs, err := filepath.Abs(q.g.workspace)
	if err != nil {
		return usageErr("--workspace: %v", err)
	}
	if q.root, err = filepath.EvalSymlinks(abs); err != nil {
		return usageErr("--workspace: %v", err)
	}
	if q.server != "off" {
		auto := q.server == "" || q.server == "auto"
		socket := q.server
		if auto {
			socket = searchSocket(q.g.dataDir)
		}
		c, err := dialSearch(ctx, socket)
		if err == nil {
			err = q.remote(c)
			c.Close()
			var re *rpcError
			if err == nil || errors.As(err, &re) || q.printed > 0 || !auto {
				return q.finish(err)
			}
			// The server went away before answering: answer here.
		} else if !auto {
			return fmt.Errorf("%w (run plexus serve --transport unix --socket %s, or search with --server auto or off)", err, socket)
		} else if startErr := startSearchServer(q.g, socket); startErr != nil {
			fmt.Fprintf(stderr, "plexus: could not start the search server (%v); searching in this process\n", startErr)
		}
	}
	return q.finish(q.local(ctx))
}

// finish prints the symbols (or the truncation note) and maps errors and
// empty results onto exit codes.
func (q *quickSearch) finish(err error) error {
	var re *rpcError
	if errors.As(err, &re) {
		msg := re.Message
		if _, rest, ok := strings.Cut(msg, ": "); ok && (re.Code == -32602 || re.Code == -32000) {
			msg = rest
		}
		return &exitError{code: 1, err: errors.New(msg)}
	}
	if err != nil {
		return searchErr(err)
	}
	if q.kind == "symbol" {
		tw := tabwriter.NewWriter(q.out, 0, 4, 2, ' ', 0)
		for _, h := range q.symbols {
			name := h.Name
			if h.Container != "" {
				name = h.Container + "." + h.Name
			}
			fmt.Fprintf(tw, "%s:%d\t%s\t%s\t%s\n", h.Path, h.StartLine, h.Kind, name, h.Match)
		}
		tw.Flush()
		return noHits(len(q.symbols), q.query)
	}
	if q.truncated {
		q.out.Flush()
		fmt.Fprintf(q.errw, "(first %d matches; raise --limit for more, or --limit 0 for all)\n", q.printed)
	}
	return noHits(q.printed, q.query)
}

func (q *quickSearch) textQuery() engine.TextQuery {
	tq := engine.TextQuery{Pattern: q.query, Regex: q.regex, CaseInsensitive: q.ignoreCase, Path: q.path, Include: q.include, Limit: q.limit}
	if q.limit == 0 {
		tq.Limit = engine.NoLimit
	}
	return tq
}

func (q *quickSearch) print(m engine.TextMatch) {
	q.printed++
	q.out.WriteString(m.Path)
	fmt.Fprintf(q.out, ":%d:%d: ", m.Line, m.Column)
	q.out.WriteString(m.Text)
	q.out.WriteByte('\n')
}

// remote asks the search server.
func (q *quickSearch) remote(c *rpcClient) error {
	if q.kind == "symbol" {
		res, err := c.call("search.symbols", map[string]any{"query": q.query, "path": q.path, "limit": q.limit, "workspace_root": q.root}, nil)
		if err != nil {
			return err
		}
		var out struct{ Symbols []engine.SymbolHit }
		if err := json.Unmarshal(res, &out); err != nil {
			return err
		}
		q.symbols = out.Symbols
		return nil
	}
	params := map[string]any{"pattern": q.query, "regex": q.regex, "case_insensitive": q.ignoreCase, "path": q.path,
		"include": q.include, "limit": q.limit, "stream": true, "workspace_root": q.root}
	res, err := c.call("search.text", params, func(method string, raw json.RawMessage) error {
		if method != "search.matches" {
			return nil
		}
		var p struct{ Matches []engine.TextMatch }
		if err := json.Unmarshal(raw, &p); err != nil {
			return err
		}
		for _, m := range p.Matches {
			q.print(m)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var out struct {
		Truncated bool `json:"truncated"`
	}
	if err := json.Unmarshal(res, &out); err != nil {
		return err
	}
	q.truncated = out.Truncated
	return nil
}

// local answers from the index on disk: it opens the index, refreshes it
// from the files that changed (a stat walk; the first run builds it) and
// searches.
func (q *quickSearch) local(ctx context.Context) error {
	g := q.g
	log, err := g.logger(q.errw)
	if err != nil {
		return err
	}
	svc, err := index.Open(ctx, index.Options{Path: filepath.Join(g.dataDir, "index.db"), Logger: log})
	if err != nil {
		return err
	}
	defer svc.Close()
	ix, err := svc.Workspace(ctx, q.root)
	if err != nil {
		return err
	}
	var bar *bar
	if !ix.Built() {
		bar = newBar(q.errw, "indexing")
	}
	var progress func(index.Progress)
	if bar != nil {
		progress = bar.progress
	}
	_, err = ix.Build(ctx, index.BuildOptions{Progress: progress})
	if bar != nil {
		bar.finish()
	}
	if err != nil {
		if !ix.Built() {
			return err
		}
		fmt.Fprintf(q.errw, "plexus: the index could not be refreshed, results may be stale: %v\n", err)
	}
	if q.kind == "symbol" {
		q.symbols, err = ix.SearchSymbols(ctx, engine.SymbolQuery{Query: q.query, Path: q.path, Limit: q.limit})
		return err
	}
	res, err := ix.SearchText(ctx, q.textQuery(), q.print)
	q.truncated = res.Truncated
	return err
}
