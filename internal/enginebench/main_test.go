package enginebench

import (
	"os"
	"testing"

	"github.com/tileapi/tileapi/quota/quotatest"
)

// TestMain gives the tests a Redis: TEST_REDIS_URL's, or a redis-server of
// their own.
func TestMain(m *testing.M) { os.Exit(quotatest.Main(m)) }
