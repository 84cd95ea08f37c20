//go:build unix

package main

import (
	"fmt"
	"math"
	"syscall"
)

// fileLimit is the process's soft limit of open files (RLIMIT_NOFILE),
// which Go raises to the hard limit at startup.
func fileLimit() (int, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, fmt.Errorf("the open-file limit: %w", err)
	}
	return int(min(l.Cur, math.MaxInt32)), nil
}
