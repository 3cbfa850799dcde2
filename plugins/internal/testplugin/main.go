// Command testplugin is the plugin the plugins package tests launch as a
// real process. Named plexus-model-* (or run with the argument "model") it
// serves testtools.Model; otherwise testtools.Tools. With the argument
// "version" it prints a line and exits, which the cold-start benchmark uses
// as its plain-process peer. Named plexus-tool-wrongcookie it serves with
// another program's handshake (magic cookie); named plexus-tool-hang it
// never completes a handshake; named plexus-tool-oldsdk it serves as a
// plugin built before ToolService.Calls (oldsdk.go).
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/plexus-agent/plexus/plugins"
	"github.com/plexus-agent/plexus/plugins/internal/testtools"
)

func main() {
	arg := ""
	if len(os.Args) > 1 {
		arg = os.Args[1]
	}
	name := filepath.Base(os.Args[0])
	switch {
	case name == "plexus-tool-wrongcookie":
		plugin.Serve(&plugin.ServeConfig{
			HandshakeConfig:  plugin.HandshakeConfig{MagicCookieKey: "OTHER_APP_PLUGIN", MagicCookieValue: "other"},
			VersionedPlugins: map[int]plugin.PluginSet{plugins.ProtocolVersion: {plugins.KindTool: &plugins.ToolPlugin{Impl: &testtools.Tools{}}}},
			GRPCServer:       plugin.DefaultGRPCServer,
		})
	case name == "plexus-tool-oldsdk":
		serveOldSDK()
	case name == "plexus-tool-hang":
		fmt.Fprintln(os.Stderr, "hanging before the handshake")
		for {
			time.Sleep(time.Hour)
		}
	case arg == "version":
		fmt.Println("testplugin")
	case arg == "model" || strings.HasPrefix(name, "plexus-model-"):
		plugins.ServeModel(&testtools.Model{})
	default:
		plugins.ServeTool(&testtools.Tools{Log: plugins.Logger()})
	}
}
