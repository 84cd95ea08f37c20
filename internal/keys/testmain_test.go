package keys_test

import (
	"os"
	"testing"

	"github.com/tileapi/tileapi/internal/spatialtest"
)

// TestMain stops the servers the tests started for the whole binary.
func TestMain(m *testing.M) { os.Exit(spatialtest.Run(m)) }
