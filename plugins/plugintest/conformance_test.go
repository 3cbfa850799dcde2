package plugintest_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/plugins/plugintest"
)

func TestCheckCatchesBrokenPlugins(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a plugin")
	}
	bin := filepath.Join(t.TempDir(), "plexus-tool-bad")
	if out, err := exec.Command("go", "build", "-o", bin, "./internal/badplugin").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cases := []struct {
		mode string
		// failed maps each failing check to a phrase its error must hold.
		failed map[string]string
	}{
		{"good", nil},
		{"stdout", map[string]string{"stdout": "wrote"}},
		{"badspec", map[string]string{"describe": "1 to 64"}},
		{"crash", map[string]string{"bad_arguments": "failure of the call itself"}},
		{"linger", map[string]string{"stop": "did not exit within 2s"}},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			r := plugintest.Check(t.Context(), bin, plugintest.Options{Args: []string{c.mode}})
			got := map[string]string{}
			for _, res := range r.Results {
				if res.Err != nil {
					got[res.Name] = res.Err.Error()
				}
			}
			for name, phrase := range c.failed {
				if !strings.Contains(got[name], phrase) {
					t.Errorf("check %s: got %q, want an error containing %q", name, got[name], phrase)
				}
			}
			for name, msg := range got {
				if _, ok := c.failed[name]; !ok && c.mode != "crash" {
					t.Errorf("check %s failed unexpectedly: %s", name, msg)
				}
			}
			if r.Failed() != (len(c.failed) > 0) {
				t.Errorf("Failed() = %v with results %+v", r.Failed(), r.Results)
			}
		})
	}
}

func TestCheckRefusesANonPlugin(t *testing.T) {
	r := plugintest.Check(t.Context(), "/bin/true", plugintest.Options{})
	if !r.Failed() || len(r.Results) != 1 || r.Results[0].Name != "handshake" || !strings.Contains(r.Results[0].Err.Error(), "handshake") {
		t.Errorf("report %+v", r.Results)
	}
}
