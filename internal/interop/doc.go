// Package interop tests the quota engine with code its team did not write,
// from outside the engine's module so that the engine requires none of it:
// the gate as middleware of a go-chi/chi router, and the RateLimit headers
// it writes read by dunglas/httpsfv, an independent parser of Structured
// Field Values (RFC 9651). It has no code of its own, only tests.
//
//	go test ./internal/interop
package interop
