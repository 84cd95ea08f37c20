package testenv

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) {
	switch os.Getenv(envHelper) {
	case "crash":
		startPrintAndWait()
		return
	case "exit":
		var pgURL string
		code := Main(runner(func() int { pgURL = startPrintAndWait(); return 0 }))
		// Main has returned, and this process still lives: what Main
		// stopped is gone, and not by the process's death.
		if postgisAnswers(context.Background(), pgURL) == nil {
			fmt.Println("alive")
		} else {
			fmt.Println("gone")
		}
		os.Exit(code)
	}
	os.Exit(Main(m))
}

// envHelper makes the test binary play a test binary under test: one that
// starts a PostgreSQL, says where, and is killed ("crash") or returns
// from its tests through Main ("exit").
const envHelper = "TESTENV_HELPER"

type runner func() int

func (r runner) Run() int { return r() }

// startPrintAndWait starts a PostgreSQL as DatabaseURL would, prints its
// URL, and waits for a line on stdin (none: until killed).
func startPrintAndWait() string {
	pgURL, err := startLocalPostGIS(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(pgURL)
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	return pgURL
}

// helper runs this test binary as a helper of mode, and returns its
// PostgreSQL's URL and how to end it: a kill, or a line on its stdin,
// after which it says whether its PostgreSQL outlived Main.
func helper(t *testing.T, mode string) (pgURL string, end func(kill bool) string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHelper+"="+mode)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewReader(out)
	line, err := lines.ReadString('\n')
	if _, err2 := fmt.Sscan(line, &pgURL); err != nil || err2 != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("helper said %q (%v, %v)", line, err, err2)
	}
	return pgURL, func(kill bool) string {
		said := ""
		if kill {
			_ = cmd.Process.Kill()
		} else {
			fmt.Fprintln(in)
			said, _ = lines.ReadString('\n')
		}
		_ = cmd.Wait()
		return strings.TrimSpace(said)
	}
}

// A PostgreSQL started from this machine's binaries answers, and is gone
// once the binary's Main returns.
func TestLocalServersStopAtExit(t *testing.T) {
	ctx := context.Background()
	pgURL, end := helper(t, "exit")
	if err := postgisAnswers(ctx, pgURL); err != nil {
		end(true)
		t.Fatalf("self-started PostgreSQL: %v", err)
	}
	if said := end(false); said != "gone" {
		t.Errorf("after Main returned, the helper's PostgreSQL was %q, want gone", said)
	}
}

// A test binary killed before Main can clean up takes its PostgreSQL
// with it (parent-death signal; quotatest sweeps its directory).
func TestKilledBinaryLeavesNothing(t *testing.T) {
	ctx := context.Background()
	pgURL, end := helper(t, "crash")
	end(true)
	if !eventually(func() bool { return postgisAnswers(ctx, pgURL) != nil }) {
		t.Error("the killed binary's PostgreSQL still answers")
	}
}

func postgisAnswers(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var v string
	return conn.QueryRow(ctx, "SELECT postgis_version()").Scan(&v)
}

// eventually reports whether cond holds within ten seconds: a killed
// process's children get their signal at once, but take a moment to end.
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
