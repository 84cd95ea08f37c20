package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/tileapi/tileapi/quota/quotatest"
)

// A short run counts every implementation, and the counts make sense: each
// a few tens of thousands of instructions, two limits dearer than one; the
// breakdown counts each step, and leaves the scripts' own Lua some of the
// total.
func TestScriptCost(t *testing.T) {
	quotatest.RequireCommand(t, "valgrind", "apt-get install valgrind")
	quotatest.RequireCommand(t, "redis-server", "apt-get install redis-server")
	var out, log bytes.Buffer
	if err := run(context.Background(), []string{"-n", "200", "-breakdown"}, &out, &log); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	counts := map[string]float64{}
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			counts[f[0]] = v
		}
	}
	for _, impl := range []string{"redis_rate", "tileapi", "tileapi-2limits", "tileapi-inflight"} {
		if c := counts[impl]; c < 10_000 || c > 10_000_000 {
			t.Errorf("%s: %v instructions a decision, want between 10,000 and 10,000,000\n%s", impl, c, out.String())
		}
	}
	if lua := strings.Count(out.String(), "the script's own Lua"); lua != 2 {
		t.Errorf("%d breakdowns end with the script's own Lua, want 2\n%s", lua, out.String())
	}
	if counts["tileapi-2limits"] <= counts["tileapi"] {
		t.Errorf("two limits cost %v, one %v: want two dearer\n%s", counts["tileapi-2limits"], counts["tileapi"], out.String())
	}
	if counts["tileapi-inflight"] <= counts["tileapi"] {
		t.Errorf("an in-flight slot with the charge costs %v, the charge alone %v: want the slot dearer\n%s", counts["tileapi-inflight"], counts["tileapi"], out.String())
	}
}
