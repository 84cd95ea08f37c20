package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) {
	if os.Getenv(envHelper) == "crash" {
		crashHelper()
		return
	}
	os.Exit(Main(m))
}

// envHelper makes the test binary play a test binary under test: see
// crashHelper.
const envHelper = "TESTENV_HELPER"

// The servers started from this machine's binaries answer, and are gone,
// directory and all, once Main's cleanup has run.
func TestLocalServersStopAtExit(t *testing.T) {
	ctx := context.Background()
	before := ownDirs()
	pgURL, err := startLocalPostGIS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dirs := slices.DeleteFunc(ownDirs(), func(d string) bool { return slices.Contains(before, d) })
	if len(dirs) != 1 {
		t.Fatalf("this binary's directories: %q, want one for PostgreSQL", dirs)
	}
	if err := postgisAnswers(ctx, pgURL); err != nil {
		t.Fatalf("self-started PostgreSQL: %v", err)
	}

	stopOwned()
	if err := postgisAnswers(ctx, pgURL); err == nil {
		t.Error("PostgreSQL still answers after cleanup")
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is left after cleanup (%v)", d, err)
		}
	}
}

// A test binary killed before Main can clean up takes its servers with it
// (parent-death signal), and the next binary removes its directories.
func TestKilledBinaryLeavesNothing(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHelper+"=crash")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	var pgURL string
	if _, err2 := fmt.Sscan(line, &pgURL); err != nil || err2 != nil {
		t.Fatalf("helper said %q (%v, %v)", line, err, err2)
	}

	ctx := context.Background()
	if !eventually(func() bool { return postgisAnswers(ctx, pgURL) != nil }) {
		t.Error("the killed binary's PostgreSQL still answers")
	}
	prefix := fmt.Sprintf("%s/%s%d-", os.TempDir(), tempPrefix, cmd.Process.Pid)
	left := func() []string { return globDirs(prefix) }
	if len(left()) != 1 {
		t.Fatalf("the killed binary left %q, want its directory until a sweep", left())
	}
	sweepTempDirs()
	if d := left(); len(d) != 0 {
		t.Errorf("after the sweep: %q", d)
	}
}

// crashHelper starts a PostgreSQL, prints its URL and waits to be killed.
func crashHelper() {
	ctx := context.Background()
	pgURL, err := startLocalPostGIS(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(pgURL)
	select {}
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

// ownDirs lists this binary's server directories.
func ownDirs() []string {
	return globDirs(fmt.Sprintf("%s/%s%d-", os.TempDir(), tempPrefix, os.Getpid()))
}

func globDirs(prefix string) []string {
	entries, _ := os.ReadDir(os.TempDir())
	var dirs []string
	for _, e := range entries {
		if p := os.TempDir() + "/" + e.Name(); strings.HasPrefix(p, prefix) {
			dirs = append(dirs, p)
		}
	}
	return dirs
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
