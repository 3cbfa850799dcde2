package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/plexus-agent/plexus/plugins/mcp"
	"github.com/plexus-agent/plexus/transports/acp"
)

// serveACP serves the Agent Client Protocol on stdin/stdout until the
// editor closes stdin or ctx ends (SIGTERM, SIGINT). The MCP servers an
// editor names for a session run through plugins/mcp, as those of
// --mcp-config do, and stop with the session.
func serveACP(ctx context.Context, stdin io.Reader, stdout io.Writer, rt *runtime, g *globalFlags) error {
	srv := acp.New(acp.Options{
		Engine: rt.engine, Patches: rt.store, ApproveAll: g.approveAll, Version: version, Logger: rt.log,
		MCP: func(_ context.Context, servers []acp.MCPServer) (acp.Toolset, error) {
			cfg, err := mcpConfigOf(servers)
			if err != nil {
				return nil, err
			}
			return mcp.New(cfg, mcp.Options{Logger: rt.log, ClientVersion: version, Env: extraPluginEnv()}), nil
		},
	})
	rt.log.Info("serving ACP on stdin/stdout", "model", rt.engine.CurrentModel().String())
	if err := srv.Serve(ctx, stdin, stdout); err != nil && ctx.Err() == nil {
		return fmt.Errorf("serve acp: %w", err)
	}
	return nil
}

// mcpServerName is what plugins/mcp accepts as a server name.
var mcpServerName = regexp.MustCompile(`[^a-z0-9_-]+`)

// mcpConfigOf turns the MCP servers of an ACP session into a plugins/mcp
// configuration. Server names are made what plugins/mcp accepts (lower
// case letters, digits, _ and -, at most mcp.MaxServerNameLen bytes, no
// "__"; "My Files" becomes "my-files"), kept unique with a numeric
// suffix; tool T of server S is then S__T.
func mcpConfigOf(servers []acp.MCPServer) (*mcp.Config, error) {
	cfg := &mcp.Config{Servers: map[string]mcp.ServerConfig{}}
	for i, s := range servers {
		name := strings.Trim(mcpServerName.ReplaceAllString(strings.ToLower(s.Name), "-"), "-_")
		for strings.Contains(name, "__") {
			name = strings.ReplaceAll(name, "__", "_")
		}
		if name == "" {
			name = "server"
		}
		name = strings.TrimRight(name[:min(len(name), mcp.MaxServerNameLen-3)], "-_")
		base := name
		for n := 2; ; n++ {
			if _, taken := cfg.Servers[name]; !taken {
				break
			}
			name = fmt.Sprintf("%s-%d", base, n)
		}
		switch {
		case s.Command != "" && s.URL == "":
			cfg.Servers[name] = mcp.ServerConfig{Command: s.Command, Args: s.Args, Env: s.Env}
		case s.URL != "" && s.Command == "":
			cfg.Servers[name] = mcp.ServerConfig{URL: s.URL, Headers: s.Headers}
		default:
			return nil, fmt.Errorf("server %d (%s) needs a command or a url", i, s.Name)
		}
	}
	return cfg, nil
}
