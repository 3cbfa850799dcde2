package lspstdio

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

// config is what initialConfig and updatedConfig set.
type config struct {
	// model overrides the engine's current model; zero means the engine's.
	model           engine.ModelRef
	hostTools       []engine.ToolSpec
	hostToolTimeout time.Duration
	approvalTimeout time.Duration
}

// Configuration keys.
const (
	keyModel           = "model"
	keyHostTools       = "hostTools"
	keyHostToolTimeout = "hostToolTimeoutMs"
	keyApprovalTimeout = "approvalTimeoutMs"
)

// maxTimeout bounds hostToolTimeoutMs and approvalTimeoutMs: one hour.
const maxTimeout = time.Hour

// ReadBufferTool is the host tool offered when initialConfig declares no
// hostTools: it reads a file as the editor holds it, unsaved changes
// included. The host answers {content: string, ...}.
var ReadBufferTool = engine.ToolSpec{
	Name: "read_buffer",
	Description: "Read a file's text as the editor holds it, unsaved changes included (read_file reads the saved file on disk, " +
		"which may differ). Use it for files open in the editor. Returns {content}.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"The file, workspace-relative or absolute."}},"required":["path"],"additionalProperties":false}`),
	Risk:        engine.RiskLow,
	ReadOnly:    true,
}

func (c *conn) defaultConfig() config {
	return config{
		hostTools:       []engine.ToolSpec{ReadBufferTool},
		hostToolTimeout: c.s.opts.HostToolTimeout,
		approvalTimeout: c.s.opts.ApprovalTimeout,
	}
}

// applyConfig returns base with the known members of raw applied; a
// member that is null returns to its value in def. Unknown members are
// ignored (the host's settings object may carry its own). raw null or
// absent changes nothing. The error names the member.
func applyConfig(base, def config, raw json.RawMessage, eng *engine.Engine) (config, error) {
	switch jsonKind(raw) {
	case 0, 'n':
		return base, nil
	case '{':
	default:
		return base, fmt.Errorf("must be an object")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return base, fmt.Errorf("%s", jsonErrText(err))
	}
	cfg := base
	cfg.hostTools = slices.Clone(base.hostTools)
	for key, v := range m {
		null := jsonKind(v) == 'n'
		var err error
		switch key {
		case keyModel:
			cfg.model = engine.ModelRef{}
			if !null {
				cfg.model, err = parseModel(v, eng)
			}
		case keyHostTools:
			cfg.hostTools = slices.Clone(def.hostTools)
			if !null {
				cfg.hostTools, err = parseHostTools(v)
			}
		case keyHostToolTimeout:
			cfg.hostToolTimeout = def.hostToolTimeout
			if !null {
				cfg.hostToolTimeout, err = parseMillis(v)
			}
		case keyApprovalTimeout:
			cfg.approvalTimeout = def.approvalTimeout
			if !null {
				cfg.approvalTimeout, err = parseMillis(v)
			}
		default:
			continue
		}
		if err != nil {
			return base, fmt.Errorf("%s: %v", key, err)
		}
	}
	return cfg, nil
}

func parseModel(v json.RawMessage, eng *engine.Engine) (engine.ModelRef, error) {
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return engine.ModelRef{}, fmt.Errorf("must be a string PROVIDER:MODEL")
	}
	ref, err := engine.ParseModelRef(s)
	if err != nil {
		return engine.ModelRef{}, fmt.Errorf("%q is not PROVIDER:MODEL", snippet(s, 100))
	}
	if !slices.Contains(eng.Providers(), ref.Provider) {
		return engine.ModelRef{}, fmt.Errorf("provider %q is not loaded (loaded: %s)", ref.Provider, strings.Join(eng.Providers(), ", "))
	}
	return ref, nil
}

// modelCheckTimeout bounds asking the provider about a configured model.
const modelCheckTimeout = 10 * time.Second

func parseMillis(v json.RawMessage) (time.Duration, error) {
	var ms float64
	if err := json.Unmarshal(v, &ms); err != nil {
		return 0, fmt.Errorf("must be a number of milliseconds")
	}
	// The range is checked on the milliseconds, before the conversion: a
	// huge value would overflow time.Duration (to a negative one), and NaN
	// fails every comparison.
	if !(ms >= 1 && ms <= float64(maxTimeout.Milliseconds())) {
		return 0, fmt.Errorf("must be between 1 and %d milliseconds", maxTimeout.Milliseconds())
	}
	return time.Duration(ms * float64(time.Millisecond)), nil
}

// hostToolDecl is one element of hostTools.
type hostToolDecl struct {
	Name          string          `json:"name"`
	Description   string          `json:"description"`
	InputSchema   json.RawMessage `json:"inputSchema"`
	ReadOnly      *bool           `json:"readOnly"`
	NeedsApproval *bool           `json:"needsApproval"`
	Risk          string          `json:"risk"`
}

var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

const maxHostTools = 64

func parseHostTools(v json.RawMessage) ([]engine.ToolSpec, error) {
	var decls []hostToolDecl
	if err := json.Unmarshal(v, &decls); err != nil {
		return nil, fmt.Errorf("must be an array of {name, description, inputSchema, readOnly, needsApproval, risk}: %s", jsonErrText(err))
	}
	if len(decls) > maxHostTools {
		return nil, fmt.Errorf("%d tools declared; at most %d", len(decls), maxHostTools)
	}
	specs := make([]engine.ToolSpec, 0, len(decls))
	seen := map[string]bool{}
	for i, d := range decls {
		switch {
		case !toolNameRE.MatchString(d.Name):
			return nil, fmt.Errorf("[%d].name %q must be 1 to 64 letters, digits, _ or -", i, snippet(d.Name, 80))
		case d.Name == ApproveToolName:
			return nil, fmt.Errorf("[%d].name %q is reserved for approval requests", i, d.Name)
		case seen[d.Name]:
			return nil, fmt.Errorf("[%d].name %q is declared twice", i, d.Name)
		}
		seen[d.Name] = true
		schema := d.InputSchema
		switch jsonKind(schema) {
		case 0, 'n':
			schema = json.RawMessage(`{"type":"object"}`)
		case '{':
		default:
			return nil, fmt.Errorf("[%d].inputSchema must be a JSON Schema object", i)
		}
		readOnly := d.ReadOnly != nil && *d.ReadOnly
		needsApproval := !readOnly
		if d.NeedsApproval != nil {
			needsApproval = *d.NeedsApproval
		}
		risk := engine.RiskMedium
		if readOnly {
			risk = engine.RiskLow
		}
		if d.Risk != "" {
			risk = engine.RiskLevel(d.Risk)
			switch risk {
			case engine.RiskLow, engine.RiskMedium, engine.RiskHigh, engine.RiskCritical:
			default:
				return nil, fmt.Errorf("[%d].risk %q must be low, medium, high or critical", i, snippet(d.Risk, 40))
			}
		}
		desc := d.Description
		if desc == "" {
			desc = "A tool the editor runs."
		}
		specs = append(specs, engine.ToolSpec{
			Name: d.Name, Description: desc, InputSchema: schema,
			Risk: risk, ReadOnly: readOnly, NeedsApproval: needsApproval,
		})
	}
	return specs, nil
}

func toolNames(specs []engine.ToolSpec) []string {
	names := make([]string, 0, len(specs))
	for _, s := range specs {
		names = append(names, s.Name)
	}
	return names
}
