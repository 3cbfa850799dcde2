// Package plugins is Plexus's plugin SDK and plugin host, on
// github.com/hashicorp/go-plugin over gRPC.
//
// Plugin authors implement engine.Toolset (a tool plugin) or engine.Model
// (a model plugin, optionally with Configurer) on plain Go types and call
// ServeTool or ServeModel from main. The binary is named plexus-tool-NAME or
// plexus-model-NAME and placed in a plugin directory.
//
// The host side (Manager) discovers built-in and third-party plugins,
// launches each as a separate process on first use, turns the gRPC services
// of proto/plexus/v1 back into engine interfaces, supervises the processes
// (a plugin that dies during a call turns that call into an error wrapping
// engine.ErrPluginCrashed, is restarted with exponential backoff, and the
// next call goes to the new process) and stops them all on Close, leaving no
// process behind.
//
// Wire details:
//   - Handshake: magic cookie PLEXUS_PLUGIN, protocol versions negotiated
//     through go-plugin's VersionedPlugins (version 1 today); gRPC only.
//   - Each process serves one kind, "tool" (plexus.v1.ToolService) or
//     "model" (plexus.v1.ModelService).
//   - Host callbacks (plexus.v1.HostService) are served by the host on one
//     go-plugin GRPCBroker stream per plugin process; its id travels in
//     every InvokeRequest and call_id ties a callback to its call.
//   - Plugins log to stderr (Logger returns a slog.Logger that writes the
//     JSON go-plugin parses); the host re-logs each line under the plugin's
//     name. A plugin's stdout is discarded, never mixed into the engine's.
package plugins
