// Package enginebench measures the quota engine against the best-known Go
// limiters, from outside the engine's module so that the engine requires
// neither: quota's Redis store against go-redis/redis_rate's AllowN
// (BenchmarkDecision), and quotahttp's gate against go-chi/httprate's
// middleware (BenchmarkMiddleware). It has no code of its own, only
// benchmarks and the tests that keep their baselines honest.
//
//	go test ./internal/enginebench -run '^$' -bench . -benchmem
package enginebench
