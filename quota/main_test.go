package quota

import (
	"os"
	"testing"

	"github.com/tileapi/tileapi/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
