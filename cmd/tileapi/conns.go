package main

import "fmt"

// Descriptors the process needs besides its client connections and its
// Redis and database pools: standard streams, the runtime's poller, the
// listeners, name lookups, and the admin listener's connections.
const (
	adminConns = 16 // the admin listener's cap: operators only
	fdReserve  = 48 + adminConns
)

// minConns is the fewest client connections worth serving with.
const minConns = 16

// connCap is how many client connections the public listener holds at
// most: maxConns where set, or else the open-file limit less reserve (the
// descriptors the rest of the process may open), so that clients cannot
// take the last of them, and Redis and the database can still be reached.
func connCap(maxConns, reserve int) (int, error) {
	if maxConns > 0 {
		return maxConns, nil
	}
	limit, err := fileLimit()
	if err != nil {
		return 0, fmt.Errorf("%s: %w; set it", setting("max-conns", "TILEAPI_MAX_CONNS"), err)
	}
	if limit-reserve < minConns {
		return 0, fmt.Errorf("the open-file limit is %d and Redis, the database and the process may take %d of them, leaving fewer than %d for clients: raise it (ulimit -n), or set %s", limit, reserve, minConns, setting("max-conns", "TILEAPI_MAX_CONNS"))
	}
	return limit - reserve, nil
}
