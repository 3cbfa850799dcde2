// Command testplugin is the plugin the plugins package tests launch as a
// real process. Named plexus-model-* (or run with the argument "model") it
// serves testtools.Model; otherwise testtools.Tools. With the argument
// "version" it prints a line and exits, which the cold-start benchmark uses
// as its plain-process peer.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/plexus-agent/plexus/plugins"
	"github.com/plexus-agent/plexus/plugins/internal/testtools"
)

func main() {
	arg := ""
	if len(os.Args) > 1 {
		arg = os.Args[1]
	}
	switch {
	case arg == "version":
		fmt.Println("testplugin")
	case arg == "model" || strings.HasPrefix(filepath.Base(os.Args[0]), "plexus-model-"):
		plugins.ServeModel(&testtools.Model{})
	default:
		plugins.ServeTool(&testtools.Tools{Log: plugins.Logger()})
	}
}
