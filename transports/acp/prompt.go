package acp

import (
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strings"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/plexus-agent/plexus/engine"
)

// maxEmbeddedBytes caps the text of one embedded resource added to the
// message (the rest is cut, and the cut is marked).
const maxEmbeddedBytes = 256 << 10

// slashCommands are the commands of availableCommands, as the engine's
// TurnContext.Command names them.
var slashCommands = map[string]string{
	"fix": engine.SlashFix, "test": engine.SlashTest, "explain": engine.SlashExplain, "refactor": engine.SlashRefactor,
}

// turnInput maps a session/prompt's content blocks onto the turn's input:
//
//   - text blocks are the message, joined by blank lines; a message that
//     starts with /fix, /test, /explain or /refactor sets the turn's slash
//     command (engine.TurnContext.Command), and the rest is the message;
//   - a resource_link to a file inside the workspace is an @-mention
//     (engine.Mention): the engine adds the file to the message within its
//     context budget; a file outside it is an attachment (read up to the
//     engine's attachment limit); another URI is named in the message;
//   - an embedded text resource is added to the message, fenced, as the
//     client holds it (unsaved changes included), cut at maxEmbeddedBytes;
//     a binary one is named with its size, not included;
//   - images and audio are refused (promptCapabilities does not offer them).
func turnInput(root string, blocks []sdk.ContentBlock) (engine.TurnInput, error) {
	var in engine.TurnInput
	var text, extra []string
	tc := &engine.TurnContext{}
	for i, b := range blocks {
		switch {
		case b.Text != nil:
			if t := b.Text.Text; strings.TrimSpace(t) != "" {
				text = append(text, t)
			}
		case b.ResourceLink != nil:
			l := b.ResourceLink
			p, ok := fileURIPath(l.Uri)
			switch {
			case !ok:
				extra = append(extra, fmt.Sprintf("[%s](%s)", l.Name, l.Uri))
			case inside(root, p) || realRel(root, p) != "":
				rel := realRel(root, p)
				if rel == "" {
					rel, _ = filepath.Rel(root, p)
				}
				tc.Mentions = append(tc.Mentions, engine.Mention{Type: engine.MentionFile, Path: filepath.ToSlash(rel)})
			default:
				mime := ""
				if l.MimeType != nil {
					mime = *l.MimeType
				}
				in.Attachments = append(in.Attachments, engine.Attachment{Path: p, MIME: mime})
			}
		case b.Resource != nil:
			r := b.Resource.Resource
			switch {
			case r.TextResourceContents != nil:
				t := r.TextResourceContents
				body := t.Text
				note := ""
				if len(body) > maxEmbeddedBytes {
					body, note = truncate(body, maxEmbeddedBytes), fmt.Sprintf(" (cut at %d of %d bytes)", maxEmbeddedBytes, len(t.Text))
				}
				fence := "```"
				for strings.Contains(body, fence) {
					fence += "`"
				}
				extra = append(extra, fmt.Sprintf("Contents of %s as the editor holds it%s:\n%s\n%s\n%s", displayURI(root, t.Uri), note, fence, body, fence))
			case r.BlobResourceContents != nil:
				bl := r.BlobResourceContents
				n := base64.StdEncoding.DecodedLen(len(bl.Blob))
				extra = append(extra, fmt.Sprintf("[%s: about %d bytes of binary data, not included]", displayURI(root, bl.Uri), n))
			default:
				return in, fmt.Errorf("prompt[%d]: an embedded resource needs text or blob", i)
			}
		case b.Image != nil:
			return in, fmt.Errorf("prompt[%d]: images are not supported (promptCapabilities.image is false)", i)
		case b.Audio != nil:
			return in, fmt.Errorf("prompt[%d]: audio is not supported (promptCapabilities.audio is false)", i)
		default:
			return in, fmt.Errorf("prompt[%d]: unknown content block", i)
		}
	}
	msg := strings.Join(text, "\n\n")
	if cmd, rest, ok := slashCommand(msg); ok {
		tc.Command = cmd
		msg = rest
		if msg == "" {
			msg = cmd
		}
	}
	if len(extra) > 0 {
		msg = strings.TrimSpace(msg + "\n\n" + strings.Join(extra, "\n\n"))
	}
	if msg == "" {
		if len(tc.Mentions) == 0 && len(in.Attachments) == 0 {
			return in, fmt.Errorf("prompt: the message is empty (send at least one text block)")
		}
		msg = "Look at the files I mentioned."
	}
	in.Message = msg
	if tc.Command != "" || len(tc.Mentions) > 0 {
		in.Context = tc
	}
	return in, nil
}

// slashCommand splits "/fix the crash" into the engine's command and the
// rest of the message.
func slashCommand(msg string) (cmd, rest string, ok bool) {
	t := strings.TrimSpace(msg)
	if !strings.HasPrefix(t, "/") {
		return "", "", false
	}
	name, rest, _ := strings.Cut(t[1:], " ")
	if i := strings.IndexAny(name, "\n\t"); i >= 0 {
		name, rest = name[:i], name[i:]+" "+rest
	}
	cmd, ok = slashCommands[strings.ToLower(name)]
	return cmd, strings.TrimSpace(rest), ok
}

// displayURI shows a file URI inside the workspace as its relative path.
func displayURI(root, uri string) string {
	if p, ok := fileURIPath(uri); ok && inside(root, p) {
		if rel, err := filepath.Rel(root, p); err == nil {
			return filepath.ToSlash(rel)
		}
	}
	return uri
}
