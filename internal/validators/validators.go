// Package validators runs, from Go tests, validators of tileapi's answers
// that tileapi did not write: node scripts over npm packages installed in
// this folder from its lock file (npm --prefix internal/validators ci).
// Its subpackages hold one validator each.
package validators

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/tileapi/tileapi/quota/quotatest"
)

// Script returns the path of the node script name in the folder of the
// caller's source file, once node and the npm packages it imports are
// found: a missing one fails tb as a missing server does.
func Script(tb testing.TB, name string, packages ...string) string {
	tb.Helper()
	quotatest.RequireCommand(tb, "node", "apt-get install nodejs")
	_, file, _, ok := runtime.Caller(1)
	if !ok {
		tb.Fatal("validators: no source path")
	}
	dir := filepath.Dir(file)
	for _, pkg := range packages {
		if _, err := os.Stat(filepath.Join(dir, "..", "node_modules", filepath.FromSlash(pkg))); err != nil {
			quotatest.Unavailable(tb, pkg, "npm --prefix internal/validators ci", err)
		}
	}
	return filepath.Join(dir, name)
}

// RunJSON runs node script with args and stdin, and decodes what it
// prints, JSON, into out; it fails tb if the script fails.
func RunJSON(tb testing.TB, script string, stdin []byte, out any, args ...string) {
	tb.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("node", append([]string{script}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		tb.Fatalf("node %s: %v\n%s", script, err, stderr.Bytes())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		tb.Fatalf("node %s: %v in %.200q", script, err, stdout.Bytes())
	}
}
