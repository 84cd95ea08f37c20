package quotatest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// What follows serves any helper that starts servers for a whole test
// binary, as this package does for Redis (tileapi's testenv starts
// PostgreSQL with it): stopped when Main returns, gone with the binary
// if it is killed, their directories swept by the next binary.

// owned holds how to stop what this test binary started for all of its
// tests (servers, their directories); Main runs it, last first.
var owned struct {
	mu    sync.Mutex
	stops []func()
}

// OnExit has Main run stop once the binary's tests are done, after what
// was registered later.
func OnExit(stop func()) {
	owned.mu.Lock()
	defer owned.mu.Unlock()
	owned.stops = append(owned.stops, stop)
}

func stopOwned() {
	owned.mu.Lock()
	stops := owned.stops
	owned.stops = nil
	owned.mu.Unlock()
	for _, stop := range slices.Backward(stops) {
		stop()
	}
}

// Spawn starts cmd from one OS thread that lives as long as the test
// binary, so that a parent-death signal (Pdeathsig) set in cmd fires
// only when the binary dies: it fires when the thread that forked the
// child exits, not the process, and from an ordinary goroutine's thread
// it could kill a server in the middle of the tests.
func Spawn(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.cmds = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread stays
			for r := range spawner.cmds {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawner.cmds <- spawnRequest{cmd, done}
	return <-done
}

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

var spawner struct {
	once sync.Once
	cmds chan spawnRequest
}

// tempPrefix starts the name of every directory this package makes for
// servers, followed by the test binary's pid.
const tempPrefix = "quotatest-"

var sweepOnce sync.Once

// TempDir makes a directory for a server of this test binary, named for
// kind, removed by whoever stops the server (OnExit). The first
// call removes those of test binaries that are gone: a binary killed or
// timed out never reaches Main, though its servers die with it.
func TempDir(kind string) (string, error) {
	sweepOnce.Do(sweepTempDirs)
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-%s-", tempPrefix, os.Getpid(), kind))
	if err != nil {
		return "", fmt.Errorf("quotatest: %w", err)
	}
	return dir, nil
}

func sweepTempDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix+"*"))
	for _, dir := range dirs {
		pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(dir), tempPrefix), "-")
		n, err := strconv.Atoi(pid)
		if err != nil || n == os.Getpid() {
			continue
		}
		if err := syscall.Kill(n, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(dir)
		}
	}
}

// FreePort returns a loopback TCP port free at the moment of asking.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("quotatest: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
