// Command plexus-tool-loc is a complete third-party Plexus tool plugin,
// written with the plugin SDK (package plugins): one tool,
// count_lines_of_code, that counts the code, comment and blank lines of
// the files under a workspace directory, per language.
//
// Install it into your plugin directory (this builds it, launches it once
// to check it, and records its SHA-256 in the lock file), then see it
// listed:
//
//	plexus plugins install ./examples/plexus-tool-loc
//	plexus plugins
//
// How it counts (a simplification of cloc's rules, documented so the
// model can judge the figures): files are those git would not ignore;
// files over 1 MiB or with a NUL byte in their first 8 KiB are skipped as
// generated or binary; the language comes from the extension (or the name,
// for Makefile and Dockerfile). A line is blank when it holds only white
// space, comment when everything on it is inside a line comment or a
// block comment of its language, and code otherwise. Comment markers
// inside string literals are not recognised as such.
package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/plexus-agent/plexus/plugins"
)

func main() { plugins.Serve(plugins.NewTool(countLines{})) }

// input is the tool's arguments; the input schema the model sees is
// inferred from it.
type input struct {
	Path string `json:"path,omitempty" jsonschema:"workspace-relative directory or file to count; default the whole workspace"`
}

// LanguageCount is the figures of one language.
type LanguageCount struct {
	Language string `json:"language"`
	Files    int    `json:"files"`
	Code     int    `json:"code"`
	Comment  int    `json:"comment"`
	Blank    int    `json:"blank"`
}

// result is what the model sees.
type result struct {
	Path string `json:"path"`
	// Languages by code lines, most first.
	Languages []LanguageCount `json:"languages"`
	Total     LanguageCount   `json:"total"`
	// Skipped counts files of no known language, binary and huge files.
	Skipped int `json:"skipped_files"`
}

// Summary is the one line people see for the call.
func (r result) Summary() string {
	if len(r.Languages) == 0 {
		return fmt.Sprintf("no source files of a known language in %s", r.Path)
	}
	var top []string
	for i, l := range r.Languages {
		if i == 3 {
			break
		}
		top = append(top, fmt.Sprintf("%s %d", l.Language, l.Code))
	}
	return fmt.Sprintf("%d lines of code in %d files, %d languages (%s)",
		r.Total.Code, r.Total.Files, len(r.Languages), strings.Join(top, ", "))
}

type countLines struct{}

var _ plugins.Tool[input, result] = countLines{}

func (countLines) Describe() plugins.ToolInfo {
	return plugins.ToolInfo{
		Name: "count_lines_of_code",
		Description: "Count the lines of code, comments and blank lines per programming language " +
			"in a workspace directory (or one file), like cloc. Honours .gitignore.",
		ReadOnly: true,
	}
}

const (
	maxFileBytes = 1 << 20
	sniffBytes   = 8 << 10
)

func (countLines) Invoke(ctx context.Context, call *plugins.Call, in input) (result, error) {
	dir := in.Path
	if dir == "" {
		dir = "."
	}
	root, err := call.Root()
	if err != nil {
		return result{}, err
	}
	real, err := root.Real(dir) // confined to the workspace, symlinks followed
	if err != nil {
		return result{}, root.ToolError(call.Tool, dir, err)
	}
	out := result{Path: dir}
	byLang := map[string]*LanguageCount{}
	// count counts one file; size is its size on disk, checked before
	// reading so that a huge file is never read.
	count := func(name string, size int64) error {
		lang := languageOf(name)
		if lang == nil || size > maxFileBytes {
			out.Skipped++
			return nil
		}
		data, err := call.ReadFile(name)
		if err != nil {
			return err
		}
		if len(data) > maxFileBytes || bytes.IndexByte(data[:min(len(data), sniffBytes)], 0) >= 0 {
			out.Skipped++
			return nil
		}
		c := byLang[lang.name]
		if c == nil {
			c = &LanguageCount{Language: lang.name}
			byLang[lang.name] = c
		}
		c.Files++
		lang.count(data, c)
		out.Total.Files++
		if out.Total.Files%500 == 0 {
			call.Progress(fmt.Sprintf("counted %d files", out.Total.Files), -1)
		}
		return nil
	}

	fi, err := root.FS().Stat(real)
	switch {
	case err != nil:
		return result{}, root.ToolError(call.Tool, dir, err)
	case !fi.IsDir():
		err = count(real, fi.Size())
	default:
		err = root.Walk(ctx, real, workspaceWalk, func(name string, d fs.DirEntry) error {
			if !d.Type().IsRegular() {
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return nil // gone since it was listed
			}
			return count(name, info.Size())
		})
	}
	if err != nil {
		return result{}, err
	}
	for _, c := range byLang {
		out.Languages = append(out.Languages, *c)
		out.Total.Code += c.Code
		out.Total.Comment += c.Comment
		out.Total.Blank += c.Blank
	}
	out.Total.Language = "total"
	sort.Slice(out.Languages, func(i, j int) bool {
		a, b := out.Languages[i], out.Languages[j]
		if a.Code != b.Code {
			return a.Code > b.Code
		}
		return a.Language < b.Language
	})
	if out.Languages == nil {
		out.Languages = []LanguageCount{}
	}
	return out, nil
}
