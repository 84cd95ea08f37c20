package quota

import (
	"os"
	"testing"
	_ "time/tzdata" // the time zones of the period tests, on any machine

	"github.com/tileapi/tileapi/quota/quotatest"
)

func TestMain(m *testing.M) { os.Exit(quotatest.Main(m)) }
