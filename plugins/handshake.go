package plugins

import (
	"github.com/hashicorp/go-plugin"
)

// ProtocolVersion is the plugin protocol version this build speaks. A
// breaking change to proto/plexus/v1 adds a version to VersionedPlugins
// rather than changing this one.
const ProtocolVersion = 1

// Plugin kinds: each plugin process dispenses exactly one.
const (
	KindTool  = "tool"
	KindModel = "model"
)

// Handshake is the go-plugin handshake every Plexus plugin and host share.
// The magic cookie is not a security measure; it makes a plugin binary run
// by hand say it is meant to be started by Plexus.
var Handshake = plugin.HandshakeConfig{
	MagicCookieKey:   "PLEXUS_PLUGIN",
	MagicCookieValue: "8e1c7f3a5b2d4e6f-plexus-plugin",
}

// pluginSets returns a VersionedPlugins map of both kinds; the host uses
// it with empty impls (a plugin serves only its own kind, see serve).
func pluginSets(tool *ToolPlugin, model *ModelPlugin) map[int]plugin.PluginSet {
	if tool == nil {
		tool = &ToolPlugin{}
	}
	if model == nil {
		model = &ModelPlugin{}
	}
	return map[int]plugin.PluginSet{
		ProtocolVersion: {KindTool: tool, KindModel: model},
	}
}
