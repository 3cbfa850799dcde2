package acp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/plexus-agent/plexus/engine"
)

func TestTurnInput(t *testing.T) {
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "a.go"), []byte("package a\n"), 0o644)
	root, _ = filepath.EvalSymlinks(root)
	outside := filepath.Join(t.TempDir(), "notes.txt")
	text := func(s string) sdk.ContentBlock { return sdk.TextBlock(s) }
	link := func(uri string) sdk.ContentBlock { return sdk.ResourceLinkBlock("x", uri) }

	in, err := turnInput(root, []sdk.ContentBlock{
		text("/fix the crash in"), link("file://" + filepath.Join(root, "a.go")), link("file://" + outside),
		link("https://example.com/issue/1"),
		sdk.ResourceBlock(sdk.EmbeddedResourceResource{TextResourceContents: &sdk.TextResourceContents{Uri: "file://" + filepath.Join(root, "b.go"), Text: "package b // ```unsaved```"}}),
		sdk.ResourceBlock(sdk.EmbeddedResourceResource{BlobResourceContents: &sdk.BlobResourceContents{Uri: "file:///img.png", Blob: "AAAAAAAA"}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if in.Context == nil || in.Context.Command != engine.SlashFix {
		t.Fatalf("context %+v", in.Context)
	}
	if len(in.Context.Mentions) != 1 || in.Context.Mentions[0] != (engine.Mention{Type: engine.MentionFile, Path: "a.go"}) {
		t.Errorf("mentions %+v", in.Context.Mentions)
	}
	if len(in.Attachments) != 1 || in.Attachments[0].Path != outside {
		t.Errorf("attachments %+v", in.Attachments)
	}
	for _, want := range []string{"the crash in", "[x](https://example.com/issue/1)", "Contents of b.go as the editor holds it:\n````\npackage b // ```unsaved```\n````", "[file:///img.png: about 6 bytes of binary data, not included]"} {
		if !strings.Contains(in.Message, want) {
			t.Errorf("message lacks %q:\n%s", want, in.Message)
		}
	}
	if strings.HasPrefix(in.Message, "/fix") {
		t.Errorf("the command stayed in the message: %q", in.Message)
	}

	for _, c := range []struct {
		name   string
		blocks []sdk.ContentBlock
		want   string
	}{
		{"empty", nil, "the message is empty"},
		{"blank", []sdk.ContentBlock{text("  ")}, "the message is empty"},
		{"image", []sdk.ContentBlock{sdk.ImageBlock("AAAA", "image/png")}, "images are not supported"},
		{"audio", []sdk.ContentBlock{sdk.AudioBlock("AAAA", "audio/wav")}, "audio is not supported"},
	} {
		if _, err := turnInput(root, c.blocks); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	// A command alone is the message; an unknown one is text.
	if in, _ := turnInput(root, []sdk.ContentBlock{text("/test")}); in.Message != "/test" || in.Context.Command != engine.SlashTest {
		t.Errorf("/test alone: %+v", in)
	}
	if in, _ := turnInput(root, []sdk.ContentBlock{text("/deploy now")}); in.Message != "/deploy now" || in.Context != nil {
		t.Errorf("/deploy: %+v", in)
	}
}
