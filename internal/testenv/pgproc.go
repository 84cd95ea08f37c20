package testenv

import (
	"github.com/tileapi/tileapi/quota/quotatest"

	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// postgresServer is a PostgreSQL cluster of one test binary's own, in a
// temporary directory, on a free loopback port with trust authentication.
type postgresServer struct {
	dir    string
	port   int
	cmd    *exec.Cmd
	exited chan struct{} // closed when the postgres process is gone
}

// startLocalPostGIS starts a PostgreSQL from the binaries on this machine,
// creates the database tileapi_test with the postgis extension and returns
// its URL. The server is stopped and its directory removed by Main.
func startLocalPostGIS(ctx context.Context) (string, error) {
	bin, err := postgresBinDir()
	if err != nil {
		return "", err
	}
	dir, err := quotatest.TempDir("postgres")
	if err != nil {
		return "", err
	}
	s := &postgresServer{dir: dir}
	if err := s.start(ctx, bin); err != nil {
		s.stop()
		return "", err
	}
	quotatest.OnExit(s.stop)
	return s.url("tileapi_test"), nil
}

func (s *postgresServer) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

func (s *postgresServer) start(ctx context.Context, bin string) error {
	cred, err := postgresCredential()
	if err != nil {
		return err
	}
	if cred != nil {
		if err := os.Chown(s.dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("testenv: %w", err)
		}
	}
	data := filepath.Join(s.dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	initdb.Dir = s.dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("testenv: initdb: %w: %s", err, lastLine(out))
	}

	if s.port, err = quotatest.FreePort(); err != nil {
		return err
	}
	logPath := filepath.Join(s.dir, "postgres.log")
	log, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	defer log.Close() // the child has its own copy
	// Durability is of no use to a database that is removed at exit.
	s.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(s.port), "-k", s.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "dynamic_shared_memory_type=mmap", "-c", "max_connections=200")
	s.cmd.Dir = s.dir
	s.cmd.Stdout, s.cmd.Stderr = log, log
	// SIGQUIT is an immediate shutdown: the postmaster ends its backends
	// and removes its shared memory.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
	if err := quotatest.Spawn(s.cmd); err != nil {
		s.cmd = nil
		return fmt.Errorf("testenv: start postgres: %w", err)
	}
	s.exited = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.exited) }()

	if err := s.waitReady(ctx); err != nil {
		out, _ := os.ReadFile(logPath)
		return fmt.Errorf("%w: %s", err, lastLine(out))
	}
	return s.createPostGIS(ctx)
}

// waitReady waits until the server accepts a connection.
func (s *postgresServer) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, s.url("postgres"))
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-s.exited:
			return fmt.Errorf("testenv: postgres exited: %s", s.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("testenv: postgres did not answer: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *postgresServer) createPostGIS(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, s.url("postgres"))
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE tileapi_test")
	conn.Close(ctx)
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	if conn, err = pgx.Connect(ctx, s.url("tileapi_test")); err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE EXTENSION postgis"); err != nil {
		return fmt.Errorf("testenv: this PostgreSQL has no PostGIS: %w", err)
	}
	return nil
}

// stop ends the server, waits for it (killing it if it takes more than
// ten seconds) and removes its directory.
func (s *postgresServer) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	}
	os.RemoveAll(s.dir)
}

// postgresBinDir finds the directory of initdb and postgres: that of an
// initdb on PATH, else the newest of Debian's /usr/lib/postgresql/N/bin,
// which Debian does not put on PATH.
func postgresBinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if p, err = filepath.EvalSymlinks(p); err == nil {
			return filepath.Dir(p), nil
		}
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	version := func(p string) int {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(p))))
		return n
	}
	if len(found) == 0 {
		return "", errors.New("testenv: no initdb on PATH or in /usr/lib/postgresql/*/bin")
	}
	newest := slices.MaxFunc(found, func(a, b string) int { return version(a) - version(b) })
	return filepath.Dir(newest), nil
}

// postgresCredential says whom to run initdb and postgres as: they refuse
// to run as root, so a root test binary runs them as the user postgres
// (Debian's package makes it) or else nobody. Nil means as ourselves.
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 == nil && err2 == nil {
			return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
		}
	}
	return nil, errors.New("testenv: running as root, and no user postgres or nobody to run PostgreSQL as")
}

// lastLine returns the last non-empty line of a command's output, which
// is where initdb and postgres say what went wrong.
func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}
