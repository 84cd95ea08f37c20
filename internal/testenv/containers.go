package testenv

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// image returns the image named by the environment variable env, or def.
// The defaults are the upstream images; the variables let a machine that
// cannot pull them use images of its own.
func image(env, def string) string {
	if v := os.Getenv(env); v != "" {
		return v
	}
	return def
}

// The containers are removed by the testcontainers reaper (Ryuk) when the
// test binary exits. Where the reaper is disabled
// (TESTCONTAINERS_RYUK_DISABLED=true), whoever disabled it removes the
// containers, labelled org.testcontainers.

func startRedisContainer(ctx context.Context) (string, error) {
	redisImage := image(EnvRedisImage, "redis:7-alpine")
	ctr, err := testcontainers.Run(ctx, redisImage,
		testcontainers.WithExposedPorts("6379/tcp"),
		testcontainers.WithCmd("redis-server", "--save", "", "--appendonly", "no"),
		testcontainers.WithWaitStrategy(wait.ForListeningPort("6379/tcp")),
	)
	if err != nil {
		return "", fmt.Errorf("testenv: start %s: %w", redisImage, err)
	}
	ep, err := ctr.PortEndpoint(ctx, "6379/tcp", "")
	if err != nil {
		return "", fmt.Errorf("testenv: redis endpoint: %w", err)
	}
	return "redis://" + ep + "/0", nil
}

func startPostGISContainer(ctx context.Context) (string, error) {
	postgisImage := image(EnvPostGISImage, "postgis/postgis:15-3.4-alpine")
	ctr, err := testcontainers.Run(ctx, postgisImage,
		testcontainers.WithExposedPorts("5432/tcp"),
		testcontainers.WithEnv(map[string]string{
			"POSTGRES_PASSWORD": "postgres",
			"POSTGRES_DB":       "tileapi_test",
		}),
		// The image restarts the server once after its init scripts (which
		// create the postgis extension), so wait for the second "ready".
		testcontainers.WithWaitStrategy(wait.ForLog("database system is ready to accept connections").
			WithOccurrence(2).WithStartupTimeout(2*time.Minute)),
	)
	if err != nil {
		return "", fmt.Errorf("testenv: start %s: %w", postgisImage, err)
	}
	ep, err := ctr.PortEndpoint(ctx, "5432/tcp", "")
	if err != nil {
		return "", fmt.Errorf("testenv: postgis endpoint: %w", err)
	}
	return "postgres://postgres:postgres@" + ep + "/tileapi_test?sslmode=disable", nil
}
