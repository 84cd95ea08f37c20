package loadtest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
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
