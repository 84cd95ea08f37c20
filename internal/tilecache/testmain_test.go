package tilecache

import (
	"os"
	"testing"

	"github.com/tileapi/tileapi/internal/testenv"
)

// TestMain stops the servers the tests started for the whole binary.
func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
