package loadtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// clockTick is Linux's USER_HZ, the unit of the CPU times in /proc.
const clockTick = 10 * time.Millisecond

// ProcessCPU returns the CPU time, user and system, that process pid has
// used so far, from /proc (Linux only).
func ProcessCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("loadtest: cpu of %d: %w", pid, err)
	}
	// The command name, in parentheses, may hold spaces: the fields that
	// follow it are counted from its closing one. utime and stime are the
	// 14th and 15th fields of the line, the 12th and 13th after the name.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("loadtest: cpu of %d: %d fields after the name", pid, len(f))
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("loadtest: cpu of %d: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// Pid is the server's process id.
func (in *Instance) Pid() int { return in.cmd.Process.Pid }

// backendsSQL lists the database's backends but the one asking.
const backendsSQL = `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`

// ProcessesCPU returns the CPU time used so far by each process of pids,
// under its name, and, given pool, by the backends of pool's database as
// CPUPostgres: during a phase only the measured server's connections
// work, and a backend that was not there at its start counts whole.
func ProcessesCPU(ctx context.Context, pool *pgxpool.Pool, pids map[string]int) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for name, pid := range pids {
		t, err := ProcessCPU(pid)
		if err != nil {
			return nil, err
		}
		out[name] = t
	}
	if pool == nil {
		return out, nil
	}
	rows, err := pool.Query(ctx, backendsSQL)
	if err != nil {
		return nil, fmt.Errorf("loadtest: backends: %w", err)
	}
	backends, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("loadtest: backends: %w", err)
	}
	for _, pid := range backends {
		if t, err := ProcessCPU(int(pid)); err == nil { // gone since: its time is lost either way
			out[CPUPostgres] += t
		}
	}
	return out, nil
}

// RedisPid is the process id of the Redis rdb talks to (INFO server), on
// this machine: the load tool takes Redis on loopback only.
func RedisPid(ctx context.Context, rdb RedisInfo) (int, error) {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return 0, fmt.Errorf("loadtest: redis pid: %w", err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("loadtest: redis pid: INFO server names no process_id")
}
