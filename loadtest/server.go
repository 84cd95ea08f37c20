package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tileapi/tileapi/internal/plans"
)

// Build compiles tileapi into dir as the Dockerfile does (CGO_ENABLED=0)
// and returns the binary's path. It must run inside the module.
func Build(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "tileapi")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/tileapi/tileapi/cmd/tileapi")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("loadtest: go build: %w\n%s", err, out)
	}
	return bin, nil
}

// Plan is a plan written to the plans file of the servers this package
// starts. Its requests cost what the compiled-in cost model says.
type Plan struct {
	Name        string
	MaxRadius   float64
	Limits      []Limit
	MaxInFlight int // 0: no limit
}

// WritePlans writes ps as a tileapi plans file in dir and returns its path.
func WritePlans(dir string, ps ...Plan) (string, error) {
	var f plans.File
	for _, p := range ps {
		fp := plans.FilePlan{Name: p.Name, MaxRadius: p.MaxRadius, MaxInFlight: p.MaxInFlight}
		for _, l := range p.Limits {
			fl := plans.FileLimit{Name: l.Name, Max: l.Max, Period: l.Period}
			if l.Period == "" {
				fl.Window = l.Window.String()
			}
			fp.Limits = append(fp.Limits, fl)
		}
		f.Plans = append(f.Plans, fp)
	}
	b, err := json.Marshal(f)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "plans.json")
	return path, os.WriteFile(path, b, 0o600)
}

// Instance is a tileapi serve process this package started.
type Instance struct {
	URL      string
	AdminURL string // its admin listener: the admin API, /readyz in full
	cmd      *exec.Cmd
	exited   chan struct{} // closed when the process has exited
	waitErr  error         // how it exited, once exited is closed
}

// Start runs `bin serve` on a free loopback port, and its admin listener
// on another, with env added to this process's environment (REDIS_URL,
// TILEAPI_PLANS_FILE, ...), and waits until its public listener answers. Its
// output goes to logs. Stop it with Stop.
func Start(ctx context.Context, bin string, env []string, logs io.Writer) (*Instance, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	admin, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(append(os.Environ(), "TILEAPI_ADDR="+addr, "TILEAPI_ADMIN_ADDR="+admin, "TILEAPI_LOG_LEVEL=warn"), env...)
	// Ready when /openapi.json answers, which only a public listener
	// serves: should another server's admin listener hold the port this
	// one failed to bind, its /healthz would answer for it.
	in, err := startProcess(ctx, cmd, "http://"+addr, "/openapi.json", logs)
	if err != nil {
		return nil, err
	}
	in.AdminURL = "http://" + admin
	return in, nil
}

// CreateKey creates an API key on plan with `bin keys create`, env naming
// the database (DATABASE_URL) and the plans file (TILEAPI_PLANS_FILE), and
// returns it: a key in a database, where demo keys may only be on a
// free-like plan.
func CreateKey(ctx context.Context, bin string, env []string, plan, name string) (Key, error) {
	cmd := exec.CommandContext(ctx, bin, "keys", "create", "-plan", plan, "-name", name)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Key{}, fmt.Errorf("loadtest: keys create: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	// "created KIND key ID (prefix) on plan PLAN", then the secret, last.
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var (
		k    Key
		kind string
	)
	if _, err := fmt.Sscanf(lines[0], "created %s key %d", &kind, &k.ID); err != nil || len(lines) < 2 {
		return Key{}, fmt.Errorf("loadtest: keys create printed %q", out)
	}
	k.Secret = strings.TrimSpace(lines[len(lines)-1])
	return k, nil
}

// startProcess starts cmd, a server that listens at url, and waits until
// url+health answers 200.
func startProcess(ctx context.Context, cmd *exec.Cmd, url, health string, logs io.Writer) (*Instance, error) {
	bin := cmd.Path
	cmd.Stdout, cmd.Stderr = logs, logs
	// Should this process die first, take the server with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("loadtest: start %s: %w", bin, err)
	}
	in := &Instance{URL: url, cmd: cmd, exited: make(chan struct{})}
	go func() { in.waitErr = cmd.Wait(); close(in.exited) }()
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-in.exited:
			return nil, fmt.Errorf("loadtest: %s exited before it was healthy: %v", bin, in.waitErr)
		case <-ctx.Done():
			in.Kill()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if resp, err := hc.Get(in.URL + health); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return in, nil
			}
		}
		if time.Now().After(deadline) {
			in.Kill()
			return nil, fmt.Errorf("loadtest: %s not healthy after 60 s", in.URL)
		}
	}
}

// Stop sends SIGTERM and waits up to 15 s for a graceful exit, then kills.
func (in *Instance) Stop() error {
	_ = in.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-in.exited:
		var ee *exec.ExitError
		if errors.As(in.waitErr, &ee) {
			return fmt.Errorf("loadtest: %s: %w", in.URL, in.waitErr)
		}
		return nil
	case <-time.After(15 * time.Second):
		in.Kill()
		return fmt.Errorf("loadtest: %s did not stop within 15 s; killed", in.URL)
	}
}

// Kill ends the process with SIGKILL, as a crash would: it answers
// nothing more and releases nothing it holds. It returns once the process
// has exited.
func (in *Instance) Kill() {
	_ = in.cmd.Process.Kill()
	<-in.exited
}

// freeAddr returns a loopback address with a port free at the moment.
func freeAddr() (string, error) {
	given.Lock()
	defer given.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("loadtest: free port: %w", err)
		}
		addr := l.Addr().String()
		l.Close()
		// The kernel may hand a port it just freed out again: two servers
		// started at once must not be given the same one.
		if !given.addrs[addr] {
			given.addrs[addr] = true
			return addr, nil
		}
	}
}

// given holds the addresses freeAddr has handed out in this process.
var given = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}
